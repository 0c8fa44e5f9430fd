// Hint rule no-copy-compute-overlap: Host<->device copies and kernels that run one after the other
// instead of overlapping. Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#no-copy-compute-overlap.
#include <algorithm>
#include <map>
#include <optional>

#include "analysis/hints/rule.h"
#include "analysis/intervals.h"

namespace kprof::hints {

namespace {

using detail::UnionAcc;

}  // namespace

std::optional<Hint> NoCopyComputeOverlap(const RuleContext& c) {
  Hint h;
  uint64_t copy_alone = 0, kernel_alone = 0, copy_ns = 0, kernel_ns = 0, overlap = 0;
  struct StreamUse {
    uint64_t copies = 0, copy_ns = 0, kernels = 0, kernel_ns = 0;
  };
  std::map<std::pair<uint16_t, uint32_t>, StreamUse> streams;
  for (const ProcessTimeline& p : c.timeline.processes) {
    struct DevUse {
      UnionAcc copies, kernels, either;
    };
    std::map<uint16_t, DevUse> dev;  // p.acts is in start order: unions in one pass
    for (const Record* a : p.acts) {
      auto& s = streams[{a->device, a->tid}];
      if (a->Kind() == RecordKind::Kernel) {
        DevUse& d = dev[a->device];
        d.kernels.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        d.either.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        ++s.kernels;
        s.kernel_ns += a->DurationNs();
      } else if (a->Kind() == RecordKind::Memcpy && IsHostCopy(*a)) {
        DevUse& d = dev[a->device];
        d.copies.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        d.either.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        ++s.copies;
        s.copy_ns += a->DurationNs();
      }
    }
    for (auto& [d, u] : dev) {
      uint64_t cl = u.copies.Total(), kl = u.kernels.Total(), both = cl + kl - u.either.Total();
      copy_ns += cl;
      kernel_ns += kl;
      overlap += both;
      copy_alone += cl - both;
      kernel_alone += kl - both;
    }
  }
  h.est_saving_ns = std::min(copy_alone, kernel_alone);
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("Host<->device copies ({}) and kernels ({}) run one after the other",
                          Dur(copy_ns), Dur(kernel_ns));
  h.evidence.push_back(fmt::format("copies overlap kernels for {} ({} of copy time)", Dur(overlap),
                                   Pct(PctOf(overlap, copy_ns))));
  std::vector<std::pair<std::pair<uint16_t, uint32_t>, StreamUse>> v(streams.begin(),
                                                                     streams.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.copy_ns > b.second.copy_ns; });
  for (size_t i = 0; i < v.size() && i < 3 && v[i].second.copies; ++i)
    h.evidence.push_back(fmt::format(
        "dev {} stream {}: {} copies ({}) and {} kernels ({}){}", v[i].first.first,
        v[i].first.second, v[i].second.copies, Dur(v[i].second.copy_ns), v[i].second.kernels,
        Dur(v[i].second.kernel_ns), v[i].second.kernels ? " on the same stream" : ""));
  h.assumption =
      "Copies and kernels can be pipelined in chunks (copy chunk i+1 while computing chunk i): "
      "with perfect overlap the shorter of the non-overlapped copy and kernel times is hidden.";
  h.fix_cuda =
      "Split the data into chunks; issue cudaMemcpyAsync from pinned memory on one stream and "
      "the kernels on another, ordered with cudaEventRecord/cudaStreamWaitEvent (double "
      "buffering); the copy engines then run alongside the SMs.";
  h.fix_pytorch =
      "Pinned memory plus .to(device, non_blocking=True); prefetch the next batch on a side "
      "torch.cuda.Stream (with torch.cuda.stream(s): ...; then "
      "torch.cuda.current_stream().wait_stream(s)); DataLoader(pin_memory=True).";
  return h;
}

}  // namespace kprof::hints
