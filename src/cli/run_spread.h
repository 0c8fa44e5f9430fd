// Internal to the CLI: how far the hints' estimates of `kprof run --repeat N` spread over the
// repetitions (docs/hints.md, "Estimates that repeat").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kprof/hints.h"

namespace kprof::cli {

struct EstimateSpread {
  std::string id;          ///< the hint (or "joint" for the joint figure)
  uint64_t runs = 0;       ///< repetitions that raised it (of all of them)
  uint64_t median_ns = 0;  ///< over all repetitions, 0 for one that did not raise it
  uint64_t min_ns = 0, max_ns = 0;
  double spread = 0;  ///< (max - min) / median; 0 when the median is 0
};

/// Per hint raised by any repetition (and the joint figure), in order of median estimate.
std::vector<EstimateSpread> SpreadOf(const std::vector<std::vector<Hint>>& reps);

/// The table kprof run prints after its report: one line per row, "" for fewer than 2 runs.
std::string SpreadTable(const std::vector<EstimateSpread>& rows, size_t reps);

}  // namespace kprof::cli
