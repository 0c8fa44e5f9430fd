// Hint rule alloc-churn: Device memory allocations and frees in the steady state of the run.
// Catalogue entry, thresholds and the reasoning behind the estimate: docs/hints.md#alloc-churn.
#include <optional>
#include <set>

#include "analysis/hints/rule.h"

namespace kprof::hints {

/// Steady state: calls in this leading fraction of the run are start-up.
constexpr double kWarmupFraction = 0.10;

std::optional<Hint> AllocChurn(const RuleContext& c) {
  Hint h;
  const uint64_t steady_from = c.analysis.summary.start_ns +
                               static_cast<uint64_t>(kWarmupFraction * static_cast<double>(c.wall));
  Tally calls, sizes, ops;
  uint64_t n = 0;
  for (const ProcessTimeline& p : c.timeline.processes) {
    std::unordered_map<uint32_t, uint64_t> bytes_of;  // correlation -> bytes
    for (const Record& r : p.process->records)
      if ((r.Kind() == RecordKind::MemAlloc || r.Kind() == RecordKind::MemFree) && r.correlation)
        bytes_of[r.correlation] = r.bytes;
    std::set<std::pair<std::string, uint64_t>> seen;
    for (const Record* api : p.apis) {
      const std::string& name = p.process->Name(*api);
      if (!IsAllocApi(name)) continue;
      auto b = bytes_of.find(api->correlation);
      uint64_t bytes = b == bytes_of.end() ? 0 : b->second;
      bool first = seen.insert({name, bytes}).second;
      if (first || api->start_ns < steady_from) continue;
      ++n;
      h.est_saving_ns += api->DurationNs();
      calls.Add(name, api->DurationNs());
      sizes.Add(bytes ? FormatBytes(bytes) : "size unknown", api->DurationNs());
      ops.Add(p.OpOf(api), api->DurationNs());
    }
  }
  if (n < 2 || !Price(h, c)) return std::nullopt;
  h.summary = fmt::format("{} device memory allocations/frees in the steady state", n);
  for (const auto& [name, v] : calls.Top(4))
    h.evidence.push_back(fmt::format("{}: {} calls, {} (mean {})", name, v.first, Dur(v.second),
                                     Dur(v.second / v.first)));
  std::string sz;
  for (const auto& [s, v] : sizes.Top(3))
    sz += fmt::format("{}{} x{}", sz.empty() ? "" : ", ", s, v.first);
  h.evidence.push_back("sizes: " + sz);
  AddTopOps(h, ops, "calls");
  h.assumption = fmt::format(
      "A pool makes these calls nearly free: at most their time is saved. Calls in the first "
      "{:.0f}% "
      "of the run and the first call of each size are start-up and not counted.",
      100 * kWarmupFraction);
  h.fix_cuda =
      "Allocate once before the loop and reuse the buffers, or use the stream-ordered pool "
      "(cudaMallocAsync/cudaFreeAsync with cudaMemPoolAttrReleaseThreshold raised); cudaFree "
      "also synchronizes the device.";
  h.fix_pytorch =
      "Keep the caching allocator on (do not set PYTORCH_NO_CUDA_MEMORY_CACHING; avoid "
      "torch.cuda.empty_cache() in the loop); preallocate and reuse tensors (out=, in-place "
      "ops); use PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.";
  return h;
}

}  // namespace kprof::hints
