// Internal to the analysis library: what the parts of the run comparison share (compare.cpp,
// compare_budget.cpp, compare_digest.cpp, compare_format.cpp, compare_stats.cpp): per-run
// series read from digests, hint tallies, and the rounding and count formatting of values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kprof/compare.h"

namespace kprof::compare_detail {

inline double AsDouble(uint64_t v) { return static_cast<double>(v); }

/// Rounds up to an unsigned value: 0 unless positive (NaN included), saturating near 2^64.
uint64_t CeilToU64(double v);

/// A count for display: no decimals when whole (medians of an even count may be halves).
std::string FormatCount(double v);

/// One value per run: `field` of the item `key` in `map`, 0 in runs without the item.
template <class Map, class Fn>
std::vector<double> Values(const std::vector<RunDigest>& runs, Map RunDigest::*map,
                           const std::string& key, Fn field) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const auto& r : runs) {
    const auto& m = r.*map;
    auto it = m.find(key);
    out.push_back(it == m.end() ? 0.0 : AsDouble(field(it->second)));
  }
  return out;
}

/// True when at least one run has the item `key` in `map`.
template <class Map>
bool AnyHas(const std::vector<RunDigest>& runs, Map RunDigest::*map, const std::string& key) {
  return std::any_of(runs.begin(), runs.end(),
                     [&](const RunDigest& r) { return (r.*map).count(key) != 0; });
}

/// The values of one run total, one per run.
std::vector<double> TotalValues(const std::vector<RunDigest>& runs, uint64_t RunTotals::*field);

/// A hint over several runs: how many raised it, its highest severity and that one's summary.
struct HintTally {
  size_t runs = 0;
  Severity severity = Severity::Info;
  std::string summary;
};

std::map<std::string, HintTally> TallyHints(const std::vector<RunDigest>& runs);

/// Hints raised by more than half of the runs, with the highest severity seen.
std::map<std::string, HintTally> MajorityHints(const std::vector<RunDigest>& runs);

}  // namespace kprof::compare_detail
