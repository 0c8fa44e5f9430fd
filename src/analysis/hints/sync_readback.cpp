// Hint rule sync-readback: a small result read back to the host every step (a synchronous
// 4-byte cudaMemcpy, PyTorch's `.item()`), each read-back emptying the GPU's queue so that the next
// launch starts from idle. Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#sync-readback.
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

std::optional<Hint> SyncReadback(const RuleContext& c) {
  Hint h;
  uint64_t n = 0, bytes = 0;
  std::vector<uint64_t> gap_len;
  Tally ops;
  for (const ProcessTimeline& p : c.timeline.processes) {
    for (const Gap& g : p.gaps) {
      if (!g.launch_ns()) continue;
      const Record* copy = ReadbackBefore(p, g);
      if (copy == nullptr) continue;
      h.est_saving_ns += g.launch_ns();
      ClaimGapPart(h, p, g, g.explained_ns(), g.rest_ns);
      ++n;
      bytes = std::max<uint64_t>(bytes, copy->bytes);
      gap_len.push_back(g.launch_ns());
      const Record* api = p.Api(*copy);
      ops.Add(api != nullptr ? p.OpOf(api) : std::string("(no op)"), g.launch_ns());
    }
  }
  // The same test as ReadbacksPriced (launch-bound's), made on the sums taken here.
  if (n < kMinReadbacks || !Price(h, c)) return std::nullopt;
  h.summary = fmt::format(
      "GPU idle {} of the steady state after {} small read-backs: each waits for the GPU, and "
      "the next kernel is launched onto an empty queue",
      Pct(h.est_saving_pct), n);
  h.evidence.push_back(fmt::format(
      "{} device-to-host copies of at most {} that the host waited for, each followed by the GPU "
      "idling until the next kernel (median {}): {}",
      n, FormatBytes(bytes), Dur(Median(gap_len)), OfWall(h.est_saving_ns, c)));
  AddTopOps(h, ops, "idle after its read-backs");
  h.assumption =
      "Read back once the loop is done, or a step late: the host then queues the next kernels "
      "while the GPU works and these gaps close, down to what launching alone costs (launch-bound "
      "prices that rest). A CUDA graph cannot hold a synchronous copy.";
  h.fix_cuda =
      "Read the result back less often (every N steps, or after the loop); or copy it with "
      "cudaMemcpyAsync into pinned host memory, record an event, and read it one step later; keep "
      "flags, counters and sums on the GPU.";
  h.fix_pytorch =
      "Do not call .item(), .cpu(), float(t) or print(t) on a GPU tensor every step (nor branch "
      "on one): accumulate on the GPU (a running loss as a tensor) and read it every N steps, or "
      "t.to('cpu', non_blocking=True) into pinned memory and read it after the next step is "
      "queued.";
  return h;
}

}  // namespace kprof::hints
