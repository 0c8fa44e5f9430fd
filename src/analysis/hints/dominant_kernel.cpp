// Hint rule dominant-kernel: One kernel takes most of the GPU time: where to look first (not
// priced). Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#dominant-kernel.
#include <algorithm>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

/// One kernel's share of GPU busy time from which it is "dominant".
constexpr double kDominantShare = 0.5;

std::optional<Hint> DominantKernel(const RuleContext& c) {
  // Communication kernels are left out: their time is transfers and waiting for other ranks
  // (exposed-communication, rank-imbalance), nothing Nsight Compute would explain.
  auto top = std::find_if(c.analysis.kernels.begin(), c.analysis.kernels.end(),
                          [](const KernelRow& k) { return !IsCommKernel(k.name); });
  if (top == c.analysis.kernels.end()) return std::nullopt;
  const KernelRow& k = *top;
  if (k.share < kDominantShare) return std::nullopt;
  Hint h;
  h.severity = Severity::Info;
  h.summary = fmt::format("One kernel takes {} of GPU time: start there", Pct(100 * k.share));
  h.evidence.push_back(Short(k.name, 160));
  h.evidence.push_back(fmt::format("{} calls, total {}, mean {}, median {}, p95 {}, max {}",
                                   k.stat.count, Dur(k.stat.total_ns), Dur(k.stat.mean_ns),
                                   Dur(k.stat.median_ns), Dur(k.stat.p95_ns), Dur(k.stat.max_ns)));
  h.evidence.push_back(fmt::format(
      "grid ({},{},{}) block ({},{},{}), {} registers/thread, {} shared memory", k.grid.x, k.grid.y,
      k.grid.z, k.block.x, k.block.y, k.block.z, k.registers, FormatBytes(k.shared_mem)));
  for (const GroupRow& op : c.analysis.ops)
    for (const KernelRow& kr : op.kernel_rows)
      if (kr.name == k.name && kr.stat.total_ns * 2 >= k.stat.total_ns)
        h.evidence.push_back(
            fmt::format("launched mostly from op '{}' ({} calls)", op.key, kr.stat.count));
  h.est_saving_ns = 0;
  h.est_saving_pct = 0;
  h.assumption =
      "No estimate: without hardware counters kprof cannot say how far this kernel is from the "
      "GPU's limits. This is where to look first, not a diagnosed problem.";
  h.fix_cuda =
      "Profile this kernel with Nsight Compute (ncu --kernel-name <name> --set full) and compare "
      "its achieved memory/compute throughput with the roofline; check occupancy and "
      "coalescing.";
  h.fix_pytorch =
      "Find the op that launches it (the op view), then check its dtype (bf16/TF32), shapes "
      "(multiples of 8/16) and whether a fused or library implementation exists; torch.compile "
      "or a Triton kernel for custom ops.";
  return h;
}

}  // namespace kprof::hints
