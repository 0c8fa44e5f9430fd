// RunDigest, what diff and check keep of one run: its construction from an analysed run, the
// run-level metrics compared, and the per-run series and hint tallies read back from digests.
#include <set>
#include <utility>

#include "analysis/compare_internal.h"
#include "kprof/compare.h"

namespace kprof {

namespace compare_detail {

std::map<std::string, HintTally> TallyHints(const std::vector<RunDigest>& runs) {
  std::map<std::string, HintTally> out;
  for (const auto& r : runs) {
    std::set<std::string> seen;
    for (const auto& h : r.hints) {
      auto& t = out[h.id];
      if (seen.insert(h.id).second) ++t.runs;
      if (t.summary.empty() || h.severity > t.severity) {
        t.severity = std::max(t.severity, h.severity);
        t.summary = h.summary;
      }
    }
  }
  return out;
}

std::map<std::string, HintTally> MajorityHints(const std::vector<RunDigest>& runs) {
  auto all = TallyHints(runs);
  std::erase_if(all, [&](const auto& kv) { return kv.second.runs * 2 <= runs.size(); });
  return all;
}

std::vector<double> TotalValues(const std::vector<RunDigest>& runs, uint64_t RunTotals::*field) {
  std::vector<double> v;
  v.reserve(runs.size());
  for (const auto& r : runs) v.push_back(AsDouble(r.totals.*field));
  return v;
}

}  // namespace compare_detail

bool MemoryRecorded(const RunTotals& t) { return t.memory_events > 0 || t.peak_memory_bytes > 0; }

const std::vector<RunMetric>& RunMetrics() {
  static const std::vector<RunMetric> kMetrics = {
      {"wall_ns", "wall", MetricKind::Time, &RunTotals::wall_ns},
      {"gpu_busy_ns", "GPU busy", MetricKind::Time, &RunTotals::gpu_busy_ns},
      {"kernel_ns", "kernel time", MetricKind::Time, &RunTotals::kernel_ns},
      {"memcpy_ns", "memcpy time", MetricKind::Time, &RunTotals::memcpy_ns},
      {"sync_ns", "sync time", MetricKind::Time, &RunTotals::sync_ns},
      {"kernels", "kernels", MetricKind::Count, &RunTotals::kernels},
      {"launches", "launches", MetricKind::Count, &RunTotals::launches},
      {"syncs", "syncs", MetricKind::Count, &RunTotals::syncs},
      {"memcpys", "memcpys", MetricKind::Count, &RunTotals::memcpys},
      {"memcpy_bytes", "memcpy bytes", MetricKind::Bytes, &RunTotals::memcpy_bytes},
      {"memsets", "memsets", MetricKind::Count, &RunTotals::memsets},
      {"peak_memory_bytes", "peak memory", MetricKind::Memory, &RunTotals::peak_memory_bytes,
       &MemoryRecorded},
  };
  return kMetrics;
}

RunDigest MakeDigest(const Analysis& analysis, const std::vector<Hint>& hints, std::string source) {
  RunDigest d;
  d.source = std::move(source);
  const RunSummary& s = analysis.summary;
  RunTotals& t = d.totals;
  t.wall_ns = s.wall_ns;
  t.gpu_busy_ns = s.gpu_busy_ns;
  t.kernel_ns = s.kernel_ns;
  t.memcpy_ns = s.memcpy_ns;
  t.sync_ns = s.sync_ns;
  t.kernels = s.kernels;
  t.launches = s.launches;
  t.syncs = s.syncs;
  t.memcpys = s.memcpys;
  for (uint64_t b : s.memcpy_bytes) t.memcpy_bytes += b;
  t.memsets = s.memsets;
  t.peak_memory_bytes = s.peak_memory_bytes > 0 ? static_cast<uint64_t>(s.peak_memory_bytes) : 0;
  t.memory_events = s.allocs + s.frees;
  t.processes = s.processes;
  t.incomplete_processes = s.incomplete_processes;
  t.dropped_records = s.dropped_records;
  for (const auto& row : analysis.ops) {
    auto& op = d.ops[row.key];
    op.calls += row.calls;
    op.gpu_ns += row.gpu_ns;
  }
  for (const auto& k : analysis.kernels) {
    auto& dk = d.kernels[k.name];
    dk.calls += k.stat.count;
    dk.total_ns += k.stat.total_ns;
  }
  for (const auto& row : analysis.modules) {
    auto& m = d.modules[row.key];
    m.calls += row.calls;
    m.gpu_ns += row.gpu_ns;
  }
  for (const auto& row : analysis.compiled)
    if (!row.kind.empty()) d.compiled_callers.insert(row.kind);
  for (const auto& h : hints) d.hints.push_back({h.id, h.severity, h.summary});
  return d;
}

}  // namespace kprof
