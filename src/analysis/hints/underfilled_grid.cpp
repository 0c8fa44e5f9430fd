// Hint rule underfilled-grid: Long kernels that launch fewer blocks than the GPU has SMs.
// Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#underfilled-grid.
#include <algorithm>
#include <map>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

/// Kernels shorter than this are launch-bound's business, not underfilled-grid's.
constexpr uint64_t kUnderfilledMinNs = 20'000;

std::optional<Hint> UnderfilledGrid(const RuleContext& c) {
  Hint h;
  std::map<uint16_t, uint32_t> sms;
  for (const DeviceInfo& d : c.analysis.summary.devices) sms[d.id] = d.sm_count;
  struct K {
    uint64_t n = 0, ns = 0, save = 0, blocks = 0;
    uint32_t sm = 0;
    const KernelCounters* counters = nullptr;  // when measured
  };
  std::map<std::string, K> ks;
  CounterLookup counters(c);
  uint64_t saturated_ns = 0;
  for (const ProcessTimeline& p : c.timeline.processes)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Kernel || a->DurationNs() < kUnderfilledMinNs) continue;
      auto it = sms.find(a->device);
      if (it == sms.end() || it->second == 0) continue;
      uint64_t blocks = uint64_t{a->a} * a->b * a->c, sm = it->second, d = a->DurationNs();
      if (blocks == 0 || blocks >= sm) continue;
      // NCCL runs a block per channel by design: exposed-communication's, not a small grid.
      if (IsCommKernel(p.KernelName(*a))) continue;
      // Measured: a unit already near its peak with this grid is what limits the kernel, not
      // the SMs left idle.
      const KernelCounters* kc = counters.Of(p, *a);
      if (kc != nullptr) {
        const double sm_pct = kc->values.sm_pct, mem = MemoryPct(kc->values);
        if ((Measured(sm_pct) && sm_pct >= kHighThroughputPct) ||
            (Measured(mem) && mem >= kHighThroughputPct)) {
          saturated_ns += d;
          continue;
        }
      }
      // Same work spread over every SM with perfect scaling: d * blocks / sm.
      uint64_t save = d - d * blocks / sm;
      h.est_saving_ns += save;
      Claim(h, a->start_ns, a->end_ns, static_cast<double>(save) / static_cast<double>(d));
      K& k = ks[p.KernelName(*a)];
      ++k.n;
      k.ns += d;
      k.save += save;
      k.blocks = std::max(k.blocks, blocks);
      k.sm = it->second;
      k.counters = kc;
    }
  if (!Price(h, c)) return std::nullopt;
  std::vector<std::pair<std::string, K>> v(ks.begin(), ks.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.save > b.second.save; });
  h.summary = fmt::format("{} long kernel(s) launch fewer blocks than the GPU has SMs", v.size());
  for (size_t i = 0; i < v.size() && i < 3; ++i)
    h.evidence.push_back(fmt::format("{}: {} launches, {} (mean {}), at most {} blocks for {} SMs",
                                     Short(v[i].first), v[i].second.n, Dur(v[i].second.ns),
                                     Dur(v[i].second.ns / v[i].second.n), v[i].second.blocks,
                                     v[i].second.sm));
  for (size_t i = 0; i < v.size() && i < 3; ++i)
    if (const KernelCounters* kc = v[i].second.counters)
      h.evidence.push_back(
          fmt::format("hardware counters, {}: {}", Short(v[i].first, 40), CounterLine(kc->values)));
  if (saturated_ns > 0)
    h.evidence.push_back(fmt::format(
        "left out: {} of small-grid kernels whose counters show a unit at {:.0f}% of its peak or "
        "more",
        Dur(saturated_ns), kHighThroughputPct));
  h.assumption = fmt::format(
      "The same work spread over all SMs with perfect scaling (time x blocks / SMs); kernels "
      "shorter than {} are left to launch-bound.",
      Dur(kUnderfilledMinNs));
  h.fix_cuda =
      "Launch at least one block per SM (better 2-4 per SM): split the work finer (smaller "
      "tiles, split-K, grid-stride loops sized from cudaOccupancyMaxActiveBlocksPerMultiprocessor "
      "x SM count), or run independent kernels concurrently on several streams.";
  h.fix_pytorch =
      "Increase the batch size or fuse small independent ops (torch.compile); for small GEMMs "
      "batch them (torch.bmm) instead of looping; run independent work on separate "
      "torch.cuda.Streams.";
  return h;
}

}  // namespace kprof::hints
