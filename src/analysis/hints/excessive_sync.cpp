// Hint rule excessive-sync: Host waits for the GPU (synchronize calls, Sync records, synchronous
// copies) followed by GPU idle time. Catalogue entry, thresholds and the reasoning behind the
// estimate: docs/hints.md#excessive-sync.
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

std::optional<Hint> ExcessiveSync(const RuleContext& c) {
  Hint h;
  Tally calls, ops;
  uint64_t blocked = 0, n = 0, gaps = 0;
  for (const ProcessTimeline& p : c.timeline.processes) {
    for (const Gap& g : p.gaps)
      if (g.wait_ns) {
        h.est_saving_ns += g.wait_ns;
        ClaimGapPart(h, p, g, 0, g.wait_ns);
        ++gaps;
      }
    for (const HostWait& s : p.waits) {
      ++n;
      blocked += s.blocked_ns;
      calls.Add(s.what, s.blocked_ns);
      ops.Add(p.OpOf(s.api), s.blocked_ns);
    }
  }
  if (!Price(h, c)) return std::nullopt;
  h.summary =
      fmt::format("Host waits for the GPU {} times; the GPU then idles until new work comes", n);
  for (const auto& [what, v] : calls.Top(4))
    h.evidence.push_back(fmt::format("{}: {} calls, blocked {} (mean {})", what, v.first,
                                     Dur(v.second), Dur(v.first ? v.second / v.first : 0)));
  h.evidence.push_back(fmt::format("host blocked {} in total; GPU idle after {} of these waits",
                                   OfWall(blocked, c), gaps));
  AddTopOps(h, ops, "waits");
  h.assumption =
      "Without the wait the host would queue the next work while the GPU is still busy: per "
      "idle gap that follows a wait, the saving is at most the shorter of the gap and the time "
      "blocked, so never more than the time blocked in synchronizing calls.";
  h.fix_cuda =
      "Remove cudaDeviceSynchronize/cudaStreamSynchronize from the loop; order work with events "
      "(cudaEventRecord + cudaStreamWaitEvent); copy results with cudaMemcpyAsync into pinned "
      "memory and read them a step later.";
  h.fix_pytorch =
      "Take .item(), .cpu(), .tolist(), print(tensor) and data-dependent Python control flow "
      "out of the step loop (accumulate on the GPU, read once per N steps); use "
      "tensor.to('cpu', non_blocking=True) into pinned memory; torch.cuda.set_sync_debug_mode("
      "\"warn\") finds the hidden ones.";
  return h;
}

}  // namespace kprof::hints
