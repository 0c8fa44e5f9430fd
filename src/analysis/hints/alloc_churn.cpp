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
    // Churn is allocating again after freeing: an allocation counts once a free came before it,
    // a free once an allocation comes after it. Buffers allocated at set-up and freed at the
    // end never churn, however many share a size.
    const auto is_free = [&](const Record* api) {
      return p.process->Name(*api).find("Free") != std::string::npos;
    };
    uint64_t first_free = UINT64_MAX, last_alloc = 0;
    for (const Record* api : p.apis) {
      if (!IsAllocApi(p.process->Name(*api))) continue;
      if (is_free(api))
        first_free = std::min(first_free, api->start_ns);
      else
        last_alloc = std::max(last_alloc, api->start_ns);
    }
    std::set<std::pair<std::string, uint64_t>> seen;
    for (const Record* api : p.apis) {
      const std::string& name = p.process->Name(*api);
      if (!IsAllocApi(name)) continue;
      auto b = bytes_of.find(api->correlation);
      uint64_t bytes = b == bytes_of.end() ? 0 : b->second;
      bool first = seen.insert({name, bytes}).second;
      if (first || api->start_ns < steady_from) continue;
      if (is_free(api) ? api->start_ns > last_alloc : api->start_ns < first_free) continue;
      ++n;
      // While the GPU works, a call costs the run nothing (cudaFree waiting for earlier work is
      // that): only its time with the GPU idle is priced.
      const uint64_t idle = ClaimUncovered(h, p.busy, api->start_ns, api->end_ns);
      h.est_saving_ns += idle;
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
  h.evidence.push_back(fmt::format("their time with the GPU idle: {}", OfWall(h.est_saving_ns, c)));
  AddTopOps(h, ops, "calls");
  h.assumption = fmt::format(
      "A pool makes these calls nearly free: at most their time during which the GPU had "
      "nothing to do is saved (a call made while the GPU works costs the run nothing). Only "
      "allocations made after a free and frees followed by an allocation count; calls in the "
      "first {:.0f}% of the run and the first call of each size are start-up.",
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
