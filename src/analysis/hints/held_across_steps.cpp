// Hint rule held-across-steps: at the allocated peak, tensors made in the step before are still
// held (no parameter, gradient or optimizer state): a step's outputs or loss kept in a variable
// until the next step overwrites them. Catalogue entry, thresholds and the
// estimate: docs/hints.md#held-across-steps.
#include <fmt/format.h>

#include "analysis/hints/memory_common.h"

namespace kprof::hints {

namespace {
constexpr uint8_t kOther = 4;  // index in TorchMoment::bytes: other tensors

// Where an owner's blocks were made, as a phrase ("made in aten::cat in model.head").
std::string Made(const StepEndOwner& o) {
  if (o.op == kOpNoRange) return "made outside any op range";
  if (o.op == kOpBeforeWindow) return "made before the history's window";
  if (o.op == kOpSmallerBlocks) return "in blocks too small to list";
  return "made in " + o.op + (o.module.empty() ? "" : " in " + o.module);
}
}  // namespace

std::optional<Hint> HeldAcrossSteps(const RuleContext& c) {
  for (const TorchMemory* t : TorchAtExit(c)) {
    const TorchMoment* p = t->Find("allocated_peak");
    // What the peak held of other tensors made in the step before it (the layer's replay: they
    // outlived one optimizer step and were freed in the next, so nothing reads them across more
    // than one step boundary).
    if (p == nullptr || p->allocated <= 0 || p->kept_by_op.empty()) continue;
    const StepEndOwner& top = p->kept_by_op.front();  // most bytes first
    Hint h;
    const int64_t kept =
        std::min(p->kept, p->bytes[kOther]);  // a payload's figures, trusted no more
    if (!PriceBytes(h, kept, p->allocated)) continue;
    h.summary = fmt::format(
        "{} of tensors made in the step before are still held at PyTorch's allocated peak "
        "(GPU {}, pid {}): no parameter, gradient or optimizer state; the most, {}, {}",
        FormatBytes(static_cast<uint64_t>(kept)), t->device, t->pid,
        FormatBytes(static_cast<uint64_t>(top.bytes)), Made(top));
    for (const StepEndOwner& o : p->kept_by_op)
      if (h.evidence.size() < 3)
        h.evidence.push_back(fmt::format("{} in {} block{} {}",
                                         FormatBytes(static_cast<uint64_t>(o.bytes)), o.blocks,
                                         o.blocks == 1 ? "" : "s", Made(o)));
    h.evidence.push_back(fmt::format(
        "at the allocated peak ({}): {} of other tensors, {} of them made in the step before",
        FormatBytes(static_cast<uint64_t>(p->allocated)),
        FormatBytes(static_cast<uint64_t>(p->bytes[kOther])),
        FormatBytes(static_cast<uint64_t>(kept))));
    h.assumption =
        "the step that holds them does not read them (a step's outputs or loss kept in a "
        "variable until the next step replaces them, tensors kept for logging); inputs "
        "prefetched one step ahead are read, and save nothing";
    h.fix_cuda = "release a step's buffers once the step is done, or reuse them in the next";
    h.fix_pytorch =
        "del the step's outputs and loss after optimizer.step() (or set them to None), log "
        "loss.item() or .detach().cpu() rather than the tensor";
    return h;
  }
  return std::nullopt;
}

}  // namespace kprof::hints
