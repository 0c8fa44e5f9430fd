// Hint rule launch-bound: Short GPU idle gaps before kernels that no host wait or allocation
// explains: the CPU does not launch work fast enough. Catalogue entry, thresholds and the reasoning
// behind the estimate: docs/hints.md#launch-bound.
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

std::optional<Hint> LaunchBound(const RuleContext& c) {
  Hint h;
  uint64_t gaps = 0, compiled_gaps = 0, compiled_ns = 0;
  std::vector<uint64_t> gap_len, kernel_ns, launch_ns;
  Tally ops;
  const bool readbacks = ReadbacksPriced(c);
  for (const ProcessTimeline& p : c.timeline.processes) {
    for (const Gap& g : p.gaps) {
      // After a per-step read-back the next launch starts from an empty queue whatever the
      // launch rate: sync-readback's, and a CUDA graph could not hold the copy.
      if (!g.launch_ns() || (readbacks && ReadbackBefore(p, g) != nullptr)) continue;
      h.est_saving_ns += g.launch_ns();
      ClaimGapPart(h, p, g, g.explained_ns(), g.rest_ns);
      ++gaps;
      gap_len.push_back(g.Len());
      ops.Add(p.OpOfActivity(g.next), g.launch_ns());
      if (InCompiledCode(p, g.next)) {
        ++compiled_gaps;
        compiled_ns += g.launch_ns();
      }
    }
  }
  if (!Price(h, c)) return std::nullopt;
  for (const ProcessTimeline& p : c.timeline.processes) {
    std::vector<bool> seen(p.process->records.size());  // launching calls, by record index
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Kernel || GraphNodeOf(*a) != 0) continue;  // eager kernels
      kernel_ns.push_back(a->DurationNs());
      const Record* api = p.Api(*a);
      if (api == nullptr) continue;
      auto idx = static_cast<size_t>(api - p.process->records.data());
      if (!seen[idx]) {
        seen[idx] = true;
        launch_ns.push_back(api->DurationNs());
      }
    }
  }
  const RunSummary& S = c.analysis.summary;
  h.summary = fmt::format(
      "GPU idle {} of the steady state between short kernels: the CPU does not "
      "launch work fast enough",
      Pct(h.est_saving_pct));
  h.evidence.push_back(fmt::format("{} kernel launches at {:.0f}/s; GPU utilisation {} of wall",
                                   S.launches, S.launch_rate_per_s, Pct(100 * S.utilisation)));
  h.evidence.push_back(fmt::format("median kernel {} vs median launch call {}",
                                   Dur(Median(kernel_ns)), Dur(Median(launch_ns))));
  h.evidence.push_back(fmt::format("{} idle gaps shorter than {} before a kernel (median {}), {}",
                                   gaps, Dur(kLongGapNs), Dur(Median(gap_len)),
                                   OfWall(h.est_saving_ns, c)));
  AddTopOps(h, ops, "gaps before its kernels");
  if (compiled_gaps)
    h.evidence.push_back(
        fmt::format("{} of these gaps ({}) are between kernels of torch.compile'd "
                    "code",
                    compiled_gaps, Dur(compiled_ns)));
  // Advice fits where the gaps are: torch.compile is not advised for code it already compiled.
  const bool compiled = compiled_ns * 2 > h.est_saving_ns;
  h.assumption =
      "The GPU could run these kernels back to back: at most the idle time between them (short "
      "gaps not explained by a host wait or an allocation) is saved; never more than wall time "
      "minus GPU busy time.";
  h.fix_cuda =
      "Capture the launch sequence once in a CUDA graph (cudaStreamBeginCapture / "
      "cudaGraphInstantiate / cudaGraphLaunch) and replay it; fuse small kernels; launch fewer, "
      "larger kernels (more work per launch).";
  h.fix_pytorch =
      compiled
          ? "Most of this time is between kernels of code torch.compile already compiled: "
            "compiling again will not remove it. mode=\"reduce-overhead\" replays the compiled "
            "code as CUDA graphs; fewer graph breaks (torch._dynamo.explain) give fewer, larger "
            "compiled regions; larger batches give fewer launches per sample."
          : "torch.compile(model, mode=\"reduce-overhead\") (fusion + CUDA graphs) or "
            "torch.cuda.graphs; fewer, larger ops (batch the work, avoid Python loops over "
            "tensors); use fused optimizers (fused=True / foreach=True).";
  return h;
}

}  // namespace kprof::hints
