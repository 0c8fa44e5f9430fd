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

using detail::Length;
using detail::Merge;

}  // namespace

std::optional<Hint> NoCopyComputeOverlap(const RuleContext& c) {
  Hint h;
  uint64_t copy_ns = 0, kernel_ns = 0, overlap = 0, copy_alone = 0;
  struct StreamUse {
    uint64_t copies = 0, copy_ns = 0, kernels = 0, kernel_ns = 0;
  };
  std::map<std::pair<uint16_t, uint32_t>, StreamUse> streams;
  std::string limit;  // what bounds the pipelined time on the device that saves most
  uint64_t limit_save = 0;
  for (const ProcessTimeline& p : c.timeline.processes) {
    // Per device: uploads, downloads and kernels, each merged. Pipelined in chunks, the three
    // run at once (two copy engines and the SMs), so the device is busy at least as long as the
    // busiest of them; everything else of their union can hide behind it.
    struct DevUse {
      std::vector<NsInterval> up, down, kernels;
    };
    std::map<uint16_t, DevUse> dev;
    for (const Record* a : p.acts) {
      if (p.StartUp(a->end_ns))
        continue;  // a weight upload before the loop overlaps nothing to fix
      auto& s = streams[{a->device, a->tid}];
      const NsInterval iv{a->start_ns, std::max(a->start_ns, a->end_ns)};
      if (a->Kind() == RecordKind::Kernel) {
        dev[a->device].kernels.push_back(iv);
        ++s.kernels;
        s.kernel_ns += a->DurationNs();
      } else if (a->Kind() == RecordKind::Memcpy && IsHostCopy(*a)) {
        DevUse& d = dev[a->device];
        (static_cast<CopyKind>(a->flags) == CopyKind::HtoD ? d.up : d.down).push_back(iv);
        ++s.copies;
        s.copy_ns += a->DurationNs();
      }
    }
    for (auto& [d, u] : dev) {
      if (u.up.empty() && u.down.empty()) continue;
      std::vector<NsInterval> copies = u.up;
      copies.insert(copies.end(), u.down.begin(), u.down.end());
      const std::vector<NsInterval> cm = Merge(copies), km = Merge(u.kernels);
      std::vector<NsInterval> all = copies;
      all.insert(all.end(), u.kernels.begin(), u.kernels.end());
      const std::vector<NsInterval> busy = Merge(std::move(all));
      const uint64_t cl = Length(cm), kl = Length(km), bl = Length(busy);
      copy_ns += cl;
      kernel_ns += kl;
      overlap += cl + kl - bl;
      copy_alone += bl - kl;
      // The busiest of the three stays; the rest of the device's busy time is the saving.
      std::vector<NsInterval> up = Merge(u.up), down = Merge(u.down);
      const std::vector<NsInterval>* stays = &km;
      const char* what = "kernels";
      if (Length(up) > Length(*stays)) stays = &up, what = "uploads";
      if (Length(down) > Length(*stays)) stays = &down, what = "downloads";
      const uint64_t save = bl - Length(*stays);
      h.est_saving_ns += save;
      for (const NsInterval& b : busy) ClaimUncovered(h, *stays, b.first, b.second);
      if (save > limit_save) {
        limit_save = save;
        limit = fmt::format(
            "dev {}: uploads {}, downloads {}, kernels {}: pipelined, the device is busy at least "
            "as long as its {}",
            d, Dur(Length(up)), Dur(Length(down)), Dur(kl), what);
      }
    }
  }
  // Only where copies run apart from kernels: copies already overlapping them are another story.
  if (copy_alone == 0) return std::nullopt;
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("Host<->device copies ({}) and kernels ({}) run one after the other",
                          Dur(copy_ns), Dur(kernel_ns));
  h.evidence.push_back(fmt::format("copies overlap kernels for {} ({} of copy time)", Dur(overlap),
                                   Pct(PctOf(overlap, copy_ns))));
  h.evidence.push_back(limit);
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
      "Copies and kernels can be pipelined in chunks (upload chunk i+1 and download chunk i-1 "
      "while computing chunk i): uploads, downloads and kernels then run at once, and the "
      "device is busy as long as the busiest of the three; the rest of their time is saved.";
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
