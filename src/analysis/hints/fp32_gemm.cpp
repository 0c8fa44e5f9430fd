// Hint rule fp32-gemm: GEMMs computed in FP32 on the FMA pipes instead of the tensor cores.
// Catalogue entry, thresholds and the reasoning behind the estimate: docs/hints.md#fp32-gemm.
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

/// Peak BF16 tensor-core over FP32 FMA throughput, A100 (312/19.5) and H100 SXM (989/67).
constexpr uint64_t kTensorCoreSpeedup = 16;

/// With counters: a GEMM whose tensor pipes are this busy runs on the tensor cores already.
constexpr double kTensorBusyPct = 20.0;

std::optional<Hint> Fp32Gemm(const RuleContext& c) {
  Hint h;
  KernelFamilies families;
  CounterLookup counters(c);
  Tally ks;
  uint64_t total = 0, confirmed_ns = 0, refuted_ns = 0;
  double tensor_sum = 0, sm_sum = 0;
  for (const ProcessTimeline& p : c.timeline.processes)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Kernel) continue;
      if (!(families.Fp32Gemm(p, *a))) continue;
      // Measured: the tensor pipes say whether the name told the truth.
      if (const KernelCounters* kc = counters.Of(p, *a); kc && Measured(kc->values.tensor_pct)) {
        if (kc->values.tensor_pct >= kTensorBusyPct) {
          refuted_ns += a->DurationNs();
          continue;
        }
        confirmed_ns += a->DurationNs();
        const double w = static_cast<double>(a->DurationNs());
        tensor_sum += kc->values.tensor_pct * w;
        sm_sum += (Measured(kc->values.sm_pct) ? kc->values.sm_pct : 0) * w;
      }
      const std::string& name = p.KernelName(*a);
      uint64_t d = a->DurationNs();
      h.est_saving_ns += d - d / kTensorCoreSpeedup;
      if (d)
        Claim(h, a->start_ns, a->end_ns,
              static_cast<double>(d - d / kTensorCoreSpeedup) / static_cast<double>(d));
      total += d;
      ks.Add(Short(name), d);
    }
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("FP32 GEMMs without tensor cores take {} of GPU time",
                          Pct(PctOf(total, c.analysis.summary.gpu_busy_ns)));
  for (const auto& [name, v] : ks.Top(3))
    h.evidence.push_back(fmt::format("{}: {} calls, {}", name, v.first, Dur(v.second)));
  h.evidence.push_back(fmt::format("FP32 GEMM kernels: {} in total", OfWall(total, c)));
  if (confirmed_ns > 0) {
    const double w = static_cast<double>(confirmed_ns);
    h.evidence.push_back(fmt::format(
        "hardware counters: tensor pipes {:.1f}% busy, SM {:.1f}%, on the measured kernels ({} "
        "of their time): the FMA pipes do the work",
        tensor_sum / w, sm_sum / w, Dur(confirmed_ns)));
  } else if (counters.Any()) {
    h.evidence.push_back("hardware counters: none of these kernels measured (names only)");
  }
  if (refuted_ns > 0)
    h.evidence.push_back(fmt::format(
        "left out: {} of kernels named like FP32 GEMMs whose tensor pipes were {:.0f}% or more "
        "busy",
        Dur(refuted_ns), kTensorBusyPct));
  h.assumption = fmt::format(
      "Tensor cores run the same GEMMs at most {}x faster (peak BF16 tensor-core vs FP32 FMA "
      "throughput on A100/H100): time x (1 - 1/{}) is saved at most.",
      kTensorCoreSpeedup, kTensorCoreSpeedup);
  h.fix_cuda =
      "cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH) for TF32, or store BF16/FP16 and "
      "call cublasGemmEx/cublasLtMatmul with CUBLAS_COMPUTE_32F (FP32 accumulation).";
  h.fix_pytorch =
      "torch.backends.cuda.matmul.allow_tf32 = True (or "
      "torch.set_float32_matmul_precision(\"high\")), torch.backends.cudnn.allow_tf32 = True, "
      "or run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16).";
  return h;
}

}  // namespace kprof::hints
