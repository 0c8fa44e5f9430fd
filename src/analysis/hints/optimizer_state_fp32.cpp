// Hint rule fp32-optimizer-state: at PyTorch's allocated peak much of the memory is optimizer
// state kept in FP32 (AdamW's two moments, master copies). Catalogue entry, thresholds and the
// estimate: docs/hints.md#fp32-optimizer-state.
#include <fmt/format.h>

#include "analysis/hints/memory_common.h"

namespace kprof::hints {

namespace {
constexpr size_t kParameters = 0, kOptimizerState = 2;  // indices in TorchMoment::bytes

// "float32 2.00 GiB, bfloat16 1.00 GiB" for one category's storages.
std::string Dtypes(const TorchMemory& t, size_t c) {
  std::string out;
  for (const auto& [name, bytes] : t.dtypes[c])
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name,
                       FormatBytes(static_cast<uint64_t>(bytes)));
  return out;
}
}  // namespace

std::optional<Hint> OptimizerStateFp32(const RuleContext& c) {
  for (const TorchMemory* t : TorchAtExit(c)) {
    const TorchMoment* p = t->Find("allocated_peak");
    if (p == nullptr || p->allocated <= 0 || !MemoryIsShort(c, *t)) continue;
    // The FP32 part of the state live at the peak (the layer counts the state's storages by
    // dtype at the latest optimizer step; the peak's state is that state once it exists).
    const int64_t fp32 = std::min(p->bytes[kOptimizerState], t->DtypeBytes(2, "float32"));
    if (fp32 <= 0) continue;
    Hint h;
    if (!PriceBytes(h, fp32 / 2, p->allocated)) continue;
    h.summary = fmt::format(
        "optimizer state in FP32 holds {} of the {} allocated at PyTorch's peak (GPU {}, pid {})",
        FormatBytes(static_cast<uint64_t>(fp32)), FormatBytes(static_cast<uint64_t>(p->allocated)),
        t->device, t->pid);
    h.evidence.push_back("optimizer state by dtype: " + Dtypes(*t, kOptimizerState));
    h.evidence.push_back("the process's peak on this GPU is within 30% of its memory");
    if (const std::string params = Dtypes(*t, kParameters); !params.empty())
      h.evidence.push_back("parameters by dtype: " + params);
    if (const std::string rest = p->Categories(kOptimizerState); !rest.empty())
      h.evidence.push_back("the rest of the allocated peak: " + rest);
    h.assumption =
        "the state kept in bfloat16 takes half (the saving given); 8-bit states take a quarter; "
        "either changes the numerics: check the loss curve";
    h.fix_cuda = "keep the optimizer's moments in 16 or 8 bits, updating FP32 weights in registers";
    h.fix_pytorch =
        "AdamW with bfloat16 moments (torchao.optim's low-bit AdamW, or bitsandbytes' 8-bit "
        "AdamW), or shard the state across ranks (ZeroRedundancyOptimizer, FSDP)";
    return h;
  }
  return std::nullopt;
}

}  // namespace kprof::hints
