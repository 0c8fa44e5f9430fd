// Hint rule memory-leak: the bytes a PyTorch program holds after each optimizer step grow step
// over step. Catalogue entry, thresholds and the estimate: docs/hints.md#memory-leak.
#include <fmt/format.h>

#include "analysis/hints/memory_common.h"

namespace kprof::hints {

namespace {
/// Steps needed to call a trend: more than a warm-up's few (torch.compile's CUDA-graph pools, a
/// lazily made optimizer state grow over the first two or three steps, then stop).
constexpr size_t kMinSteps = 6;
/// Share of the step-to-step changes that must be growth.
constexpr double kGrowingShare = 0.75;
}  // namespace

std::optional<Hint> MemoryLeak(const RuleContext& c) {
  for (const TorchMemory* t : TorchAtExit(c)) {
    const std::vector<int64_t>& s = t->steps;
    if (s.size() < kMinSteps || t->steps_total < s.size()) continue;
    // The hook runs after each step: the first step's figure already holds the optimizer state
    // it made, so what grew since then is kept from step to step.
    size_t grew = 0;
    for (size_t i = 1; i < s.size(); ++i) grew += s[i] > s[i - 1] ? 1 : 0;
    const int64_t growth = s.back() - s.front();
    const size_t changes = s.size() - 1;
    if (growth <= 0 || static_cast<double>(grew) < kGrowingShare * static_cast<double>(changes))
      continue;
    Hint h;
    if (!PriceBytes(h, growth, t->max_allocated)) continue;
    const int64_t per_step = growth / static_cast<int64_t>(changes);
    h.summary = fmt::format(
        "the memory live after each optimizer step grows by {} a step (GPU {}, pid {}): "
        "something keeps tensors from one step to the next",
        FormatBytes(static_cast<uint64_t>(per_step)), t->device, t->pid);
    h.evidence.push_back(
        fmt::format("allocated after step {}: {}; after step {}: {} ({} of {} changes were growth)",
                    t->FirstStep(), FormatBytes(static_cast<uint64_t>(s.front())), t->steps_total,
                    FormatBytes(static_cast<uint64_t>(s.back())), grew, changes));
    h.evidence.push_back(fmt::format("PyTorch's peak allocated: {}",
                                     FormatBytes(static_cast<uint64_t>(t->max_allocated))));
    h.assumption = "what grew since the first step is held at the peak, and nothing reads it again";
    h.fix_pytorch =
        "find what keeps tensors across steps: a list of losses or outputs appended each step "
        "(keep loss.item() or .detach().cpu() instead), a cache keyed by step, a graph kept by "
        "retain_graph=True";
    h.fix_cuda = "free what each step allocates, or reuse one buffer across steps";
    return h;
  }
  return std::nullopt;
}

}  // namespace kprof::hints
