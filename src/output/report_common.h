// Internal to the output library: what the report writers (report.cpp) and the JSON summary
// (summary_json.cpp) share.
#pragma once

#include "kprof/analysis.h"

namespace kprof::report_common {

inline constexpr const char* kCopyNames[6] = {"Unknown", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"};

/// Counters were asked for or recorded: only then do the reports show them, so that the report
/// of every other run stays as it was.
inline bool HasCounters(const Analysis& a) { return !a.counters.mode.empty() || a.counters.Any(); }

/// The views whose rows carry a class from the counters (Analysis: GroupRow::bound).
inline bool BoundView(GroupBy by) {
  return by == GroupBy::Kernel || by == GroupBy::Op || by == GroupBy::RangePath;
}

}  // namespace kprof::report_common
