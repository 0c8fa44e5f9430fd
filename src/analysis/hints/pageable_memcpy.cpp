// Hint rule pageable-memcpy: Large host<->device copies from or to pageable memory, priced against
// the pinned bandwidth. Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#pageable-memcpy.
#include <map>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

namespace {

std::string Bandwidth(uint64_t bytes, uint64_t ns) {
  return ns ? fmt::format("{:.1f} GB/s", static_cast<double>(bytes) / static_cast<double>(ns))
            : "n/a";
}

}  // namespace

std::optional<Hint> PageableMemcpy(const RuleContext& c) {
  Hint h;
  auto refs = PinnedReferences(c.timeline);
  struct Dir {
    uint64_t n = 0, bytes = 0, ns = 0;
  };
  std::map<uint8_t, Dir> dirs;
  Tally ops;
  for (const ProcessTimeline& p : c.timeline.processes)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Memcpy || !IsHostCopy(*a) || HostSide(*a) != MemKind::Pageable ||
          a->bytes < kSmallCopyBytes || p.StartUp(a->end_ns))
        continue;
      uint64_t pinned = refs[a->flags].TimeFor(a->bytes);
      uint64_t save = a->DurationNs() > pinned ? a->DurationNs() - pinned : 0;
      h.est_saving_ns += save;
      if (save)
        Claim(h, a->start_ns, a->end_ns,
              static_cast<double>(save) / static_cast<double>(a->DurationNs()));
      Dir& d = dirs[a->flags];
      ++d.n;
      d.bytes += a->bytes;
      d.ns += a->DurationNs();
      ops.Add(p.OpOf(p.Api(*a)), a->DurationNs());
    }
  if (!Price(h, c)) return std::nullopt;
  uint64_t n = 0, bytes = 0;
  for (const auto& [k, d] : dirs) {
    n += d.n;
    bytes += d.bytes;
  }
  h.summary =
      fmt::format("{} large copies ({}) use pageable host memory and run below pinned speed", n,
                  FormatBytes(bytes));
  for (const auto& [k, d] : dirs) {
    const PinnedRef& r = refs[k];
    h.evidence.push_back(fmt::format(
        "{} from/to pageable memory: {} copies, {}, {} at {}; pinned estimate {} ({})",
        CopyKindName(k, "copy"), d.n, FormatBytes(d.bytes), Dur(d.ns), Bandwidth(d.bytes, d.ns),
        r.measured ? Bandwidth(static_cast<uint64_t>(r.bytes), static_cast<uint64_t>(r.ns))
                   : fmt::format("{:.1f} GB/s", kDefaultPinnedBytesPerNs),
        r.measured ? "fastest pinned copy of this run" : "assumed PCIe 5.0 x16"));
  }
  AddTopOps(h, ops, "pageable copies");
  h.assumption =
      "Each copy would run at the pinned bandwidth (the fastest large pinned copy of the same "
      "direction in this run, else 50 GB/s): the saving is the copy time above that.";
  h.fix_cuda =
      "Allocate host buffers with cudaMallocHost/cudaHostAlloc (or register existing ones with "
      "cudaHostRegister) and copy with cudaMemcpyAsync on a stream.";
  h.fix_pytorch =
      "DataLoader(..., pin_memory=True) and tensor.to(device, non_blocking=True); for your own "
      "staging tensors use torch.empty(..., pin_memory=True) or tensor.pin_memory().";
  return h;
}

}  // namespace kprof::hints
