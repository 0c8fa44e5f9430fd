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
using detail::Length;
using detail::Merge;

/// Fewest small copies for batching to mean anything.
constexpr uint64_t kMinSmallCopies = 10;

}  // namespace

std::optional<Hint> SmallTransfers(const RuleContext& c) {
  Hint h;
  auto refs = PinnedReferences(c.timeline);
  std::vector<uint64_t> costs;
  uint64_t bytes = 0, total = 0, runs = 0, longest = 0;
  std::map<uint8_t, uint64_t> by_dir;
  Tally apis, ops;
  // A run: small copies one thread issued one after another, no other GPU work launched between
  // them. Batching joins a run into one copy; copies with kernels between them would need the
  // program restructured (excessive-sync and launch-bound price that).
  struct Run {
    std::vector<uint64_t> costs;
    uint64_t transfer = 0;
    std::vector<NsInterval> pieces;  // where its copies' cost lies: their calls and copies
  };
  Run run;
  const auto close = [&] {
    uint64_t sum = 0;
    for (uint64_t v : run.costs) sum += v;
    const size_t n = run.costs.size();
    const uint64_t batched = n ? Median(run.costs) + run.transfer : 0;
    if (n >= 2 && sum > batched) {
      const uint64_t save = sum - batched;
      h.est_saving_ns += save;
      ++runs;
      longest = std::max<uint64_t>(longest, n);
      // The run's saving is spread over its copies' cost: the same share of each.
      const std::vector<NsInterval> pieces = Merge(std::move(run.pieces));
      const uint64_t span = Length(pieces);
      for (const NsInterval& iv : pieces)
        Claim(h, iv.first, iv.second,
              span ? static_cast<double>(save) / static_cast<double>(span) : 0);
    }
    run = Run{};
  };
  for (const ProcessTimeline& p : c.timeline.processes) {
    // GPU work in the order each thread launched it.
    std::vector<std::pair<const Record*, const Record*>> launched;  // (call, activity)
    for (const Record* a : p.acts)
      if (const Record* api = p.Api(*a); api != nullptr && !p.StartUp(a->end_ns))
        launched.emplace_back(api, a);
    std::stable_sort(launched.begin(), launched.end(), [](const auto& x, const auto& y) {
      return x.first->tid != y.first->tid ? x.first->tid < y.first->tid
                                          : x.first->start_ns < y.first->start_ns;
    });
    uint32_t tid = 0;
    for (const auto& [api, a] : launched) {
      if (api->tid != tid) {
        close();
        tid = api->tid;
      }
      if (a->Kind() != RecordKind::Memcpy || !IsHostCopy(*a) || a->bytes >= kSmallCopyBytes) {
        close();
        continue;
      }
      // The operation's cost: its API call and its copy, counted once where they overlap.
      // A synchronous copy's wait for earlier GPU work is excessive-sync's, not this rule's.
      uint64_t lo = std::max(api->start_ns, a->start_ns);
      uint64_t hi = std::min(api->end_ns, a->end_ns);
      uint64_t cost = a->DurationNs() + api->DurationNs() - (hi > lo ? hi - lo : 0);
      const uint64_t wait_end = std::min(a->start_ns, api->end_ns);
      cost -= std::min(cost, Covered(p.busy, api->start_ns, wait_end));
      // The call less its wait for earlier work, then the copy.
      detail::ForEachUncovered(p.busy, api->start_ns, wait_end, [&](uint64_t from, uint64_t to) {
        run.pieces.emplace_back(from, to);
        return true;
      });
      run.pieces.emplace_back(std::max(wait_end, api->start_ns), api->end_ns);
      run.pieces.emplace_back(a->start_ns, std::max(a->start_ns, a->end_ns));
      run.costs.push_back(cost);
      run.transfer += refs[a->flags].TimeFor(a->bytes);
      apis.Add(p.process->Name(*api), cost);
      ops.Add(p.OpOf(api), cost);
      costs.push_back(cost);
      total += cost;
      bytes += a->bytes;
      ++by_dir[a->flags];
    }
    close();
  }
  if (costs.size() < kMinSmallCopies || !Price(h, c)) return std::nullopt;
  h.summary = fmt::format("{} copies smaller than {} each pay the fixed cost of a transfer",
                          costs.size(), FormatBytes(kSmallCopyBytes));
  std::string dirs;
  for (const auto& [k, n] : by_dir)
    dirs += fmt::format("{}{} {}", dirs.empty() ? "" : ", ", CopyKindName(k, "copy"), n);
  h.evidence.push_back(fmt::format("{} copies ({}), {} in total, mean {} per copy", costs.size(),
                                   dirs, FormatBytes(bytes), FormatBytes(bytes / costs.size())));
  h.evidence.push_back(fmt::format("they take {} (call + copy), median {} each", OfWall(total, c),
                                   Dur(Median(costs))));
  h.evidence.push_back(fmt::format(
      "{} runs of copies issued back to back (no other GPU work launched between them), up to {} "
      "copies each",
      runs, longest));
  for (const auto& [api, v] : apis.Top(3))
    h.evidence.push_back(fmt::format("{}: {} small copies, {}", api, v.first, Dur(v.second)));
  AddTopOps(h, ops, "small copies");
  h.assumption =
      "Each run of copies issued back to back batched into one: it costs one median copy of the "
      "run plus its bytes at pinned bandwidth; everything above that is saved. Copies with other "
      "GPU work between them are not joined (reading results less often is excessive-sync's "
      "and launch-bound's fix).";
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
