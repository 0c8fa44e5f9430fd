// What the views (view.h) share with each other and with the run's totals.
#include <algorithm>

#include "analysis/counters.h"
#include "analysis/views/view.h"

namespace kprof::detail {

const GraphInfo* CapturedGraph(const ProcessTimeline& t, const Record& r) {
  if (r.Kind() != RecordKind::GraphLaunch) return nullptr;
  auto it = t.graphs.graphs.find(r.a);
  if (it == t.graphs.graphs.end() || it->second.nodes == 0 || it->second.capture_ranges.empty())
    return nullptr;
  return &it->second;
}

std::optional<int64_t> DeviceMemoryDelta(const Record& r) {
  const RecordKind k = r.Kind();
  if (k != RecordKind::MemAlloc && k != RecordKind::MemFree) return std::nullopt;
  // Device memory only: pinned or pageable host allocations (cudaHostAlloc) are not.
  const auto mk = static_cast<MemKind>(r.c);
  if (mk == MemKind::Pinned || mk == MemKind::Pageable) return std::nullopt;
  const auto bytes = static_cast<int64_t>(std::min<uint64_t>(r.bytes, INT64_MAX));
  return k == RecordKind::MemAlloc ? bytes : -bytes;
}

void SortRows(std::vector<GroupRow>& rows, AnalysisOptions::Sort sort) {
  std::sort(rows.begin(), rows.end(), [sort](const GroupRow& x, const GroupRow& y) {
    switch (sort) {
      case AnalysisOptions::Sort::Calls:
        if (x.calls != y.calls) return x.calls > y.calls;
        break;
      case AnalysisOptions::Sort::Cpu:
        if (x.cpu_ns != y.cpu_ns) return x.cpu_ns > y.cpu_ns;
        break;
      case AnalysisOptions::Sort::Name:
        return x.key < y.key;
      case AnalysisOptions::Sort::Gpu:
        break;
    }
    if (x.gpu_ns != y.gpu_ns) return x.gpu_ns > y.gpu_ns;
    return x.key < y.key;
  });
}

void ClassifyGroups(const CounterSummary& counters, std::vector<GroupRow>& rows) {
  if (counters.kernels.empty()) return;
  for (GroupRow& g : rows) {
    for (KernelRow& k : g.kernel_rows) {
      const KernelCounters* c = counters.Find(k.name);
      k.bound = c != nullptr ? c->bound : Bound::Unknown;
    }
    g.bound = GroupBound(g.kernel_rows);
  }
}

std::pair<std::string_view, std::string_view> SplitModuleName(std::string_view name) {
  name.remove_prefix(std::min(name.size(), kModuleRangePrefix.size()));
  const size_t bar = name.rfind('|');
  if (bar == std::string_view::npos) return {name, {}};
  return {name.substr(0, bar), name.substr(bar + 1)};
}

}  // namespace kprof::detail
