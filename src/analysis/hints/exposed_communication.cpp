// Hint rule exposed-communication: collective communication that no compute hides, less the
// waiting for late ranks (rank-imbalance's). Catalogue entry, thresholds and the reasoning
// behind the estimate: docs/hints.md#exposed-communication.
#include <algorithm>
#include <map>
#include <optional>

#include "analysis/hints/rule.h"
#include "analysis/intervals.h"

namespace kprof::hints {

std::optional<Hint> ExposedCommunication(const RuleContext& c) {
  const DistributedSummary& D = c.analysis.dist;
  Hint h;
  std::vector<NsInterval> exposed;
  struct PerRank {
    uint64_t exposed = 0;
  };
  std::vector<PerRank> ranks(D.ranks.size());
  for (size_t r = 0; r < D.ranks.size(); ++r) {
    if (D.comm[r].empty()) continue;
    // What hides communication: the rank's compute; what is not the transfer's: its waits.
    std::vector<NsInterval> cover(D.compute[r]);
    cover.insert(cover.end(), D.waits[r].begin(), D.waits[r].end());
    cover = detail::Merge(std::move(cover));
    for (const NsInterval& iv : D.comm[r])
      detail::ForEachUncovered(cover, iv.first, iv.second, [&](uint64_t a, uint64_t b) {
        exposed.emplace_back(a, b);
        ranks[r].exposed += b - a;
        return true;
      });
  }
  if (exposed.empty()) return std::nullopt;
  // The job's saving: the instants at which some rank's GPU only communicated (ranks
  // communicate at the same time: their exposed stretches overlap, counted once).
  for (const NsInterval& iv : detail::Merge(std::move(exposed))) {
    Claim(h, iv.first, iv.second);
    h.est_saving_ns += iv.second - iv.first;
  }
  if (!Price(h, c)) return std::nullopt;

  // Exposed time per collective kind, from the matched calls.
  std::map<std::string, std::pair<uint64_t, uint64_t>> kinds;  // kind -> (calls, exposed ns)
  for (const Collective& col : D.collectives)
    for (const Collective::Part& part : col.parts) {
      const uint64_t from = part.arrive_ns + part.wait_ns;
      const uint64_t covered = detail::Covered(D.compute[part.rank], from, part.end_ns);
      auto& k = kinds[col.kind];
      ++k.first;
      k.second += part.end_ns > from ? part.end_ns - from - covered : 0;
    }
  uint64_t comm = 0;
  for (const RankUsage& u : D.ranks) comm += u.comm_ns;
  h.summary = fmt::format("Communication not hidden behind compute: {} of the job's time",
                          Dur(h.est_saving_ns));
  for (size_t r = 0; r < D.ranks.size(); ++r) {
    const RankUsage& u = D.ranks[r];
    if (!u.comm_ns) continue;
    h.evidence.push_back(fmt::format(
        "{}: {} in communication kernels, {} of it beside compute ({} of it), {} waiting for other "
        "ranks, {} exposed",
        u.label, Dur(u.comm_ns), Dur(u.overlap_ns), Pct(PctOf(u.overlap_ns, u.comm_ns)),
        Dur(u.wait_ns), Dur(ranks[r].exposed)));
    if (h.evidence.size() >= 4) break;
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> by(kinds.begin(), kinds.end());
  std::sort(by.begin(), by.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::string top;
  for (size_t i = 0; i < std::min<size_t>(3, by.size()); ++i)
    top += fmt::format("{}{} ({} calls over the ranks, {} exposed)", top.empty() ? "" : ", ",
                       by[i].first, by[i].second.first, Dur(by[i].second.second));
  if (!top.empty()) h.evidence.push_back("by collective: " + top);
  h.assumption =
      "Communication that runs beside compute costs nothing; hiding the rest behind compute "
      "(or making it faster) saves at most its exposed time. Waiting for a late rank is "
      "rank-imbalance's, not counted here.";
  h.fix_cuda =
      "Overlap collectives with independent compute (their own stream, launched as soon as "
      "their inputs are ready), group small collectives (ncclGroupStart/End) into fewer large "
      "ones, and check that NCCL uses NVLink or InfiniBand, not PCIe or sockets (NCCL_DEBUG=INFO).";
  h.fix_pytorch =
      "DDP: let gradient buckets reduce during backward (find_unused_parameters=False, "
      "gradient_as_bucket_view=True), tune bucket_cap_mb, accumulate gradients under no_sync() "
      "and reduce once every N steps, compress with a bf16 comm hook; FSDP: "
      "backward_prefetch=BACKWARD_PRE, forward_prefetch=True, limit_all_gathers=True.";
  return h;
}

}  // namespace kprof::hints
