// Hint rule small-transfers: Many small host<->device copies, each paying the fixed cost of a
// transfer. Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#small-transfers.
#include <algorithm>
#include <map>
#include <optional>

#include "analysis/hints/rule.h"
#include "analysis/intervals.h"

namespace kprof::hints {

namespace {

using detail::Covered;

/// Fewest small copies for batching to mean anything.
constexpr uint64_t kMinSmallCopies = 10;

}  // namespace

std::optional<Hint> SmallTransfers(const RuleContext& c) {
  Hint h;
  auto refs = PinnedReferences(c.timeline);
  std::vector<uint64_t> costs;
  uint64_t bytes = 0, total = 0, transfer = 0;
  std::map<uint8_t, uint64_t> by_dir;
  Tally apis, ops;
  for (const ProcessTimeline& p : c.timeline.processes)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Memcpy || !IsHostCopy(*a) || a->bytes >= kSmallCopyBytes)
        continue;
      // The operation's cost: its API call and its copy, counted once where they overlap.
      // A synchronous copy's wait for earlier GPU work is excessive-sync's, not this rule's.
      uint64_t cost = a->DurationNs();
      const Record* api = p.Api(*a);
      if (api) {
        uint64_t lo = std::max(api->start_ns, a->start_ns);
        uint64_t hi = std::min(api->end_ns, a->end_ns);
        cost += api->DurationNs() - (hi > lo ? hi - lo : 0);
        cost -= Covered(p.busy, api->start_ns, std::min(a->start_ns, api->end_ns));
        apis.Add(p.process->Name(*api), cost);
      }
      ops.Add(p.OpOf(api), cost);
      costs.push_back(cost);
      total += cost;
      bytes += a->bytes;
      transfer += refs[a->flags].TimeFor(a->bytes);
      ++by_dir[a->flags];
    }
  if (costs.size() < kMinSmallCopies) return std::nullopt;
  uint64_t batched = Median(costs) + transfer;
  h.est_saving_ns = total > batched ? total - batched : 0;
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("{} copies smaller than {} each pay the fixed cost of a transfer",
                          costs.size(), FormatBytes(kSmallCopyBytes));
  std::string dirs;
  for (const auto& [k, n] : by_dir)
    dirs += fmt::format("{}{} {}", dirs.empty() ? "" : ", ", CopyKindName(k, "copy"), n);
  h.evidence.push_back(fmt::format("{} copies ({}), {} in total, mean {} per copy", costs.size(),
                                   dirs, FormatBytes(bytes), FormatBytes(bytes / costs.size())));
  h.evidence.push_back(fmt::format("they take {} (call + copy), median {} each", OfWall(total, c),
                                   Dur(Median(costs))));
  for (const auto& [api, v] : apis.Top(3))
    h.evidence.push_back(fmt::format("{}: {} small copies, {}", api, v.first, Dur(v.second)));
  AddTopOps(h, ops, "small copies");
  h.assumption =
      "All these copies batched into one: it costs one median copy plus the bytes at pinned "
      "bandwidth; everything above that is saved.";
  h.fix_cuda =
      "Pack the values into one pinned staging buffer and issue one cudaMemcpyAsync; keep "
      "scalars on the device (pass device pointers to kernels) instead of copying each one.";
  h.fix_pytorch =
      "torch.stack/torch.cat the small tensors and move them with one .to(device, "
      "non_blocking=True); build tensors directly on the device (torch.tensor(..., device=...)); "
      "avoid per-element .item()/.cpu() in loops.";
  return h;
}

}  // namespace kprof::hints
