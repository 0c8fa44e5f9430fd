// Hint rule allocator-fragmentation: at PyTorch's reserved peak much of what the caching
// allocator holds is cached but unused. Catalogue entry, thresholds and the estimate:
// docs/hints.md#allocator-fragmentation.
#include <fmt/format.h>

#include <algorithm>

#include "analysis/hints/memory_common.h"

namespace kprof::hints {

namespace {
/// The share of the reserved peak the fix must save: below it, the slack any allocator keeps
/// (a healthy training step on an H200: 1.9% with the replay, 8.5-10.2% reserved less allocated).
constexpr double kUnusedShare = 10.0;
}  // namespace

std::optional<Hint> AllocatorFragmentation(const RuleContext& c) {
  for (const TorchMemory* t : TorchAtExit(c)) {
    // Segments that grow in place already: the fix below is in.
    if (Lower(t->alloc_conf).find("expandable_segments:true") != std::string::npos) continue;
    // What a growing segment (expandable_segments) would not have reserved: the reserved peak
    // less what the history replayed with expandable segments reserved at its peak (never less
    // than the allocated peak); without the replay, less the allocated peak (an upper bound).
    // (Only when the history saw PyTorch's peaks: a peak it missed may need more pages.)
    const bool replayed = t->expandable_max_reserved > 0 && t->complete;
    const int64_t unused =
        t->max_reserved - std::max(t->max_allocated, replayed ? t->expandable_max_reserved : 0);
    Hint h;
    if (!PriceBytes(h, unused, t->max_reserved) || h.est_saving_bytes_pct < kUnusedShare) continue;
    const TorchMoment* r = t->Find("reserved_peak");
    h.summary = fmt::format(
        "PyTorch's caching allocator reserved {} at its peak but never had more than {} "
        "allocated (GPU {}, pid {}): segments that grow in place would reserve {} less",
        FormatBytes(static_cast<uint64_t>(t->max_reserved)),
        FormatBytes(static_cast<uint64_t>(t->max_allocated)), t->device, t->pid,
        FormatBytes(static_cast<uint64_t>(unused)));
    if (r != nullptr)
      h.evidence.push_back(fmt::format(
          "when the reserved peak was reached: {} allocated, {} cached and unused",
          FormatBytes(static_cast<uint64_t>(r->allocated)),
          FormatBytes(static_cast<uint64_t>(std::max<int64_t>(0, r->reserved - r->allocated)))));
    h.evidence.push_back(
        fmt::format("at exit: {} reserved, {} allocated, {} in split blocks that were freed",
                    FormatBytes(static_cast<uint64_t>(t->reserved)),
                    FormatBytes(static_cast<uint64_t>(t->allocated)),
                    FormatBytes(static_cast<uint64_t>(t->inactive_split))));
    if (replayed)
      h.evidence.push_back(fmt::format(
          "the allocator's history replayed with expandable segments reserves {} at its peak",
          FormatBytes(static_cast<uint64_t>(t->expandable_max_reserved))));
    h.assumption =
        replayed ? "the same requests, replayed as PyTorch's allocator serves them with "
                   "expandable segments (best fit, 2 and 20 MiB pages, nothing unmapped)"
                 : "segments that grow in place reserve about what is allocated at the peak (an "
                   "upper bound: the history did not start with CUDA)";
    h.fix_pytorch =
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow instead of new ones "
        "being made for each size); or keep tensor shapes steady from step to step";
    h.fix_cuda =
        "allocate once at the largest size and reuse, or use a stream-ordered pool "
        "(cudaMallocAsync)";
    return h;
  }
  return std::nullopt;
}

}  // namespace kprof::hints
