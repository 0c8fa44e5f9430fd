// Internal to the views: the accumulator of a module, a source line or a compiled region.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/accumulators.h"

namespace kprof::detail {

/// Its row, its `kind` (GroupRow::kind) and its work's intervals, for the projected time.
struct ViewAcc {
  GroupAcc acc;
  std::string kind;
  std::vector<Interval> intervals;
  void Add(const Record& r, const std::string& kernel_name) {
    acc.AddActivity(r, kernel_name);
    intervals.emplace_back(r.start_ns, std::max(r.start_ns, r.end_ns));
  }
  GroupRow Row(const std::string& key, uint64_t busy_ns) {
    GroupRow row = acc.Row(key, busy_ns);
    row.gpu_projected_ns = UnionLength(intervals);
    row.kind = kind;
    return row;
  }
};

/// The key with the most nanoseconds in `ns` ("" when empty; ties: the smaller key).
inline std::string Top(const std::map<std::string, uint64_t>& ns) {
  const std::pair<const std::string, uint64_t>* best = nullptr;
  for (const auto& kv : ns)
    if (best == nullptr || kv.second > best->second) best = &kv;
  return best ? best->first : std::string();
}

}  // namespace kprof::detail
