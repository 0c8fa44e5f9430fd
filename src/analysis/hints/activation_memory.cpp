// Hint rule activation-memory: at PyTorch's allocated peak most of the memory is activations
// kept for the backward pass. Catalogue entry, thresholds and the estimate:
// docs/hints.md#activation-memory.
#include <fmt/format.h>

#include "analysis/hints/memory_common.h"

namespace kprof::hints {

namespace {
/// The activations' share of the allocated peak from which the rule speaks.
constexpr double kActivationShare = 0.5;
constexpr size_t kActivations = 3;  // index in TorchMoment::bytes
}  // namespace

std::optional<Hint> ActivationMemory(const RuleContext& c) {
  for (const TorchMemory* t : TorchAtExit(c)) {
    const TorchMoment* p = t->Find("allocated_peak");
    if (p == nullptr || p->allocated <= 0 || t->backward_passes == 0 || !MemoryIsShort(c, *t))
      continue;
    const int64_t acts = p->bytes[kActivations];
    if (static_cast<double>(acts) < kActivationShare * static_cast<double>(p->allocated)) continue;
    Hint h;
    if (!PriceBytes(h, acts, p->allocated)) continue;
    h.summary = fmt::format(
        "activations kept for the backward pass hold {} of the {} allocated at PyTorch's peak "
        "(GPU {}, pid {})",
        FormatBytes(static_cast<uint64_t>(acts)), FormatBytes(static_cast<uint64_t>(p->allocated)),
        t->device, t->pid);
    h.evidence.push_back("the process's peak on this GPU is within 30% of its memory");
    if (const std::string rest = p->Categories(kActivations); !rest.empty())
      h.evidence.push_back("the rest of the allocated peak: " + rest);
    h.assumption =
        "recomputing every block in the backward pass keeps only the blocks' inputs: an upper "
        "bound; a micro-batch half as large halves the activations instead";
    h.fix_cuda =
        "recompute intermediate results in the backward pass instead of keeping them, or run the "
        "batch in smaller pieces";
    h.fix_pytorch =
        "activation checkpointing (torch.utils.checkpoint on each block, use_reentrant=False), "
        "or smaller micro-batches with gradient accumulation";
    return h;
  }
  return std::nullopt;
}

}  // namespace kprof::hints
