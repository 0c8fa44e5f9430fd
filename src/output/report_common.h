// Internal to the output library: what the report writers (report.cpp) and the JSON summary
// (summary_json.cpp) share.
#pragma once

#include <fmt/format.h>

#include <string>

#include "kprof/analysis.h"
#include "kprof/hints.h"

namespace kprof::report_common {

inline constexpr const char* kCopyNames[6] = {"Unknown", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"};

/// What a hint's fix could save: "12.5 ms (3.1% of the steady state)" (`md`: "12.5 ms, 3.1% of
/// the steady state"); for the memory rules "1.2 GiB of device memory (25.0% of the peak)".
inline std::string Saving(const Hint& h, bool md) {
  const bool bytes = h.est_saving_bytes > 0;
  return fmt::format("{}{}{:.1f}% of the {}{}",
                     bytes ? FormatBytes(h.est_saving_bytes) + " of device memory"
                           : FormatDuration(h.est_saving_ns),
                     md ? ", " : " (", bytes ? h.est_saving_bytes_pct : h.est_saving_pct,
                     bytes ? "peak" : "steady state", md ? "" : ")");
}

/// Counters were asked for or recorded: only then do the reports show them, so that the report
/// of every other run stays as it was.
inline bool HasCounters(const Analysis& a) { return !a.counters.mode.empty() || a.counters.Any(); }

/// The views whose rows carry a class from the counters (Analysis: GroupRow::bound).
inline bool BoundView(GroupBy by) {
  return by == GroupBy::Kernel || by == GroupBy::Op || by == GroupBy::RangePath;
}

}  // namespace kprof::report_common
