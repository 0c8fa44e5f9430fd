// Internal to the analysis library: NVTX/CPU ranges of one process rebuilt as intervals, and
// the lookup of API calls by correlation id. Shared by attribution and the views.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kprof/trace.h"

namespace kprof::detail {

/// One range on a CPU thread: an NVTX push/pop or start/end pair, or a Range record.
struct RangeInterval {
  const Record* start = nullptr;  ///< MarkerStart or Range record (name, domain)
  uint64_t begin_ns = 0, end_ns = 0;
  uint32_t tid = 0;    ///< thread it was opened on
  uint32_t depth = 0;  ///< ranges open around it on its thread when it began
  int parent = -1;     ///< index of the innermost enclosing range on its thread
  bool closed = true;  ///< false: never ended (process died); end_ns = process end
};

/// API call by correlation id; the runtime call wins over the driver call it made. Correlation
/// ids are dense small integers in practice (CUPTI counts them up per process), so a flat table
/// serves them; sparse ids (foreign traces) fall back to a hash map.
class CorrelationIndex {
 public:
  void Build(const ProcessTrace& p);
  const Record* Find(uint32_t correlation) const {
    if (correlation == 0) return nullptr;
    if (!dense_.empty() || sparse_.empty())
      return correlation < dense_.size() ? dense_[correlation] : nullptr;
    auto it = sparse_.find(correlation);
    return it == sparse_.end() ? nullptr : it->second;
  }

 private:
  std::vector<const Record*> dense_;
  std::unordered_map<uint32_t, const Record*> sparse_;
};

struct ProcessIndex {
  const ProcessTrace* process = nullptr;
  std::vector<RangeInterval> ranges;    ///< sorted by (tid, begin, longer first)
  CorrelationIndex api_by_correlation;  ///< launching API call of GPU work
  uint64_t end_ns = 0;                  ///< last timestamp of the process

  /// OpName() of each string id of the process (computed once per id).
  std::vector<std::string_view> op_names;
  /// Operator name of range `i` (its name without PyTorch's emit_nvtx decorations).
  std::string_view Name(size_t i) const {
    uint32_t id = ranges[i].start->name;
    return id < op_names.size() ? op_names[id] : std::string_view();
  }

  /// Ranges open on `tid` at time `t`, outermost first (indices into `ranges`).
  void OpenAt(uint32_t tid, uint64_t t, std::vector<int>& out) const;
  /// "outer/inner" path of range `i`.
  std::string Path(int i) const;

  // Per thread: [first, last) slice of `ranges` (ranges are grouped by thread).
  std::unordered_map<uint32_t, std::pair<size_t, size_t>> thread_slice;
};

ProcessIndex BuildIndex(const ProcessTrace& p);

}  // namespace kprof::detail
