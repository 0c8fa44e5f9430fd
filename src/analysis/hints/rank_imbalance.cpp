// Hint rule rank-imbalance: one rank arrives last at the collectives and the others wait for it
// (the straggler), with what it did differently and what the waiting costs. Catalogue entry,
// thresholds and the reasoning behind the estimate: docs/hints.md#rank-imbalance.
#include <algorithm>
#include <map>
#include <optional>

#include "analysis/hints/rule.h"
#include "analysis/intervals.h"

namespace kprof::hints {
namespace {

/// The straggler arrives last at no fewer than this share of the collectives that had a wait:
/// ranks that take turns being late (noise, or an imbalance that moves) have no one to blame.
constexpr double kStragglerShare = 2.0 / 3.0;
/// A range or op explains the imbalance when the straggler spent at least this share of the
/// waiting it caused more in it than the other ranks did.
constexpr double kExplainsShare = 0.25;
/// Ranks that reach a collective less than this apart arrived together: which one was last is
/// noise.
constexpr uint64_t kTogetherNs = 50'000;
/// The run's collectives are cut into this many consecutive stretches (equal numbers of
/// collectives, to within one): the estimate is at most what the straggler cost per collective
/// it was late to in the median stretch, times those collectives. Waiting that one or two
/// stretches hold (a rank's slower warm-up, a one-off stall) is not a pace the job runs at; a
/// straggler late in fewer than three of the five is not priced.
constexpr size_t kStretches = 5;

/// A rank's GPU over [from, to) within the time it was recorded: idle, and running compute.
struct Use {
  uint64_t idle = 0, compute = 0;
};
Use UseOver(const DistributedSummary& D, size_t r, uint64_t from, uint64_t to) {
  Use u;
  for (const NsInterval& rec : D.recorded[r]) {
    const uint64_t a = std::max(from, rec.first), b = std::min(to, rec.second);
    if (b <= a) continue;
    u.idle += (b - a) - detail::Covered(D.busy[r], a, b);
    u.compute += detail::Covered(D.compute[r], a, b);
  }
  return u;
}

uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/// Per rank: total time (ns) and calls of each NVTX range by name (CPU time) and the GPU time
/// of each op's non-communication work.
struct Phases {
  std::map<std::string, std::pair<uint64_t, uint64_t>> cpu, gpu;  // name -> (ns, calls)
};

Phases PhasesOf(const ProcessTimeline& t) {
  Phases ph;
  const ProcessIndex& ix = t.index;
  for (size_t i = 0; i < ix.ranges.size(); ++i) {
    auto& v = ph.cpu[std::string(ix.Name(i))];
    v.first += ix.ranges[i].end_ns - ix.ranges[i].begin_ns;
    ++v.second;
  }
  for (size_t i = 0; i < t.acts.size(); ++i) {
    const Record& r = *t.acts[i];
    if (r.Kind() == RecordKind::Kernel && IsCommKernel(t.KernelName(r))) continue;
    const int range = t.act_range[i];
    auto& v = ph.gpu[range < 0 ? std::string("(no range)")
                               : std::string(ix.Name(static_cast<size_t>(range)))];
    v.first += r.DurationNs();
    ++v.second;
  }
  return ph;
}

/// The name whose time on the straggler most exceeds the other ranks' median, with that
/// excess; among names close to the largest excess, the one with the least time (the most
/// specific: "load_batch" rather than the "step" around it).
struct Excess {
  std::string name;
  uint64_t excess = 0, straggler_ns = 0, others_ns = 0, calls = 0, other_calls = 0;
};
Excess MostExcess(
    const std::map<std::string, std::pair<uint64_t, uint64_t>>& straggler,
    const std::vector<const std::map<std::string, std::pair<uint64_t, uint64_t>>*>& others) {
  std::vector<Excess> all;
  for (const auto& [name, v] : straggler) {
    std::vector<uint64_t> ns, calls;
    for (const auto* o : others) {
      auto it = o->find(name);
      ns.push_back(it == o->end() ? 0 : it->second.first);
      calls.push_back(it == o->end() ? 0 : it->second.second);
    }
    const uint64_t med = Median(ns), med_calls = Median(calls);
    if (v.first > med) all.push_back({name, v.first - med, v.first, med, v.second, med_calls});
  }
  Excess best;
  for (const Excess& e : all) best = e.excess > best.excess ? e : best;
  for (const Excess& e : all)
    if (e.excess * 5 >= best.excess * 4 && e.straggler_ns < best.straggler_ns) best = e;
  return best;
}

std::string PerCall(uint64_t ns, uint64_t calls) {
  return calls ? Dur(ns / calls) : std::string("none");
}

/// The straggler: the rank that caused the most waiting, if it arrived last at enough of the
/// collectives that had a wait; with, per rank, its last arrivals and the waiting it caused.
struct Straggler {
  size_t rank = 0;
  std::vector<uint64_t> last, caused, caused_exposed;
  uint64_t with_wait = 0;
};
std::optional<Straggler> FindStraggler(const DistributedSummary& D) {
  const size_t n = D.ranks.size();
  Straggler st;
  std::vector<uint64_t>&last = st.last, &caused = st.caused, &caused_exposed = st.caused_exposed;
  last.assign(n, 0);
  caused.assign(n, 0);
  caused_exposed.assign(n, 0);
  uint64_t& with_wait = st.with_wait;
  // Per rank: how often it arrived last, and the others' waiting it caused (all of it, and the
  // part with no compute of their own to run).
  for (const Collective& col : D.collectives) {
    if (col.spread_ns < kTogetherNs) continue;
    ++with_wait;
    const size_t s = col.parts[col.last].rank;
    ++last[s];
    for (const Collective::Part& part : col.parts) {
      if (part.rank == s) continue;
      caused[s] += part.wait_ns;
      caused_exposed[s] += part.exposed_wait_ns;
    }
  }
  const size_t s =
      static_cast<size_t>(std::max_element(caused.begin(), caused.end()) - caused.begin());
  if (caused[s] == 0 ||
      static_cast<double>(last[s]) < kStragglerShare * static_cast<double>(with_wait))
    return std::nullopt;
  st.rank = s;
  return st;
}

/// What the straggler costs the job, and the figures that bound it (see the comment inside).
struct Cost {
  size_t stretches = 0;
  std::vector<NsInterval> waits_for;  ///< the others' waits for it, merged
  uint64_t waiting = 0, more_idle = 0, more_compute = 0, late = 0, late_at = 0;
  uint64_t steady_each = 0, steady = 0;
  std::vector<uint64_t> waited, waited_exposed, waits;  ///< per rank
  std::map<std::string, uint64_t> kinds;                ///< of the collectives it was last at
};
Cost CostOf(const DistributedSummary& D, size_t s) {
  const size_t n = D.ranks.size();
  Cost k;
  // Where the others lose time: their waits for the straggler (union over ranks: they wait for
  // it at the same time). How much of it the job loses: what the straggler does that the others
  // do not, over the same stretch of the run (from the first collective to the end of the last):
  // the time its GPU sat idle and the time it computed, beyond the other ranks' (their median).
  // The others' waits overstate it (a waiting rank runs its own backward pass beside the
  // collective); the part of them with no compute of their own understates it (a spinning NCCL
  // kernel slows the compute beside it, and transfers that backward hid are then exposed).
  //
  // A second bound, from the arrivals alone: the straggler's lateness at the collectives the
  // others reached on their own, past the end of their previous call on that communicator (at a
  // call they were held at by the previous one, which waited for the straggler, its lateness is
  // only work the others had done ahead). It does not count the others' normal launch gaps,
  // which a waiting rank's spinning kernel covers and the idle comparison then takes for the
  // straggler's (on the H100 that took one run of the planted 1.000 s to 1.17 s).
  // The same three figures per stretch of the run (kStretches of them, or one per collective
  // when there are fewer): the estimate is also at most the median stretch's figure per
  // collective the straggler was last at, times all such collectives.
  const size_t stretches = k.stretches = std::min(kStretches, D.collectives.size());
  struct Stretch {
    std::vector<NsInterval> waits_for;
    uint64_t from = UINT64_MAX, to = 0, late = 0;
    uint64_t late_at = 0;  // collectives the straggler was last at
  };
  std::vector<Stretch> part_of(stretches);
  std::vector<uint64_t>&waited = k.waited, &waited_exposed = k.waited_exposed, &waits = k.waits;
  waited.assign(n, 0);
  waited_exposed.assign(n, 0);
  waits.assign(n, 0);
  std::map<std::string, uint64_t>& kinds = k.kinds;
  std::map<std::pair<size_t, uint32_t>, uint64_t> prev_end;  // (rank, communicator) -> end
  for (size_t i = 0; i < D.collectives.size(); ++i) {
    const Collective& col = D.collectives[i];
    Stretch& st = part_of[i * stretches / D.collectives.size()];
    const Collective::Part* second = nullptr;  // the latest arrival but the straggler's
    for (const Collective::Part& part : col.parts) {
      st.from = std::min(st.from, part.arrive_ns);
      st.to = std::max(st.to, part.end_ns);
      if (part.rank != s && (second == nullptr || part.arrive_ns > second->arrive_ns))
        second = &part;
    }
    const bool straggler_last = col.spread_ns >= kTogetherNs && col.parts[col.last].rank == s;
    if (straggler_last && second != nullptr) {
      auto it = prev_end.find({second->rank, col.channel});
      if (it == prev_end.end() || second->arrive_ns > it->second + kTogetherNs)
        st.late += col.parts[col.last].arrive_ns - second->arrive_ns;
    }
    for (const Collective::Part& part : col.parts) prev_end[{part.rank, col.channel}] = part.end_ns;
    if (!straggler_last) continue;
    ++st.late_at;
    ++kinds[col.kind];
    for (const Collective::Part& part : col.parts) {
      if (part.rank == s || part.wait_ns == 0) continue;
      waited[part.rank] += part.wait_ns;
      waited_exposed[part.rank] += part.exposed_wait_ns;
      ++waits[part.rank];
      st.waits_for.emplace_back(part.arrive_ns, part.arrive_ns + part.wait_ns);
    }
  }
  // What the straggler spent beyond the others' median over [from, to): idle and compute.
  const auto beyond = [&](uint64_t from, uint64_t to) {
    std::vector<uint64_t> others_idle, others_compute;
    Use mine;
    for (size_t r = 0; r < n; ++r) {
      const Use u = UseOver(D, r, from, to);
      if (r == s) {
        mine = u;
        continue;
      }
      others_idle.push_back(u.idle);
      others_compute.push_back(u.compute);
    }
    return std::pair{Minus(mine.idle, Median(others_idle)),
                     Minus(mine.compute, Median(others_compute))};
  };
  std::vector<NsInterval>& waits_for = k.waits_for;
  std::vector<uint64_t> per_late;  // each stretch's figure per collective the straggler was last at
  uint64_t from = UINT64_MAX, to = 0, &late = k.late, &late_at = k.late_at;
  for (Stretch& st : part_of) {
    from = std::min(from, st.from);
    to = std::max(to, st.to);
    late += st.late;
    late_at += st.late_at;
    st.waits_for = detail::Merge(std::move(st.waits_for));
    const auto [idle, compute] = beyond(st.from, st.to);
    const uint64_t figure = std::min({detail::Length(st.waits_for), idle + compute, st.late});
    per_late.push_back(st.late_at ? figure / st.late_at : 0);
    waits_for.insert(waits_for.end(), st.waits_for.begin(), st.waits_for.end());
  }
  waits_for = detail::Merge(std::move(waits_for));
  k.waiting = detail::Length(waits_for);
  std::tie(k.more_idle, k.more_compute) = beyond(from, to);
  k.steady_each = Median(per_late);
  k.steady = k.steady_each * late_at;
  return k;
}

/// What the straggler did differently: the NVTX range (host time) or op (GPU time) it spent
/// most more time in than the other ranks (their median), when it explains enough of the cost.
void Explain(const RuleContext& c, size_t s, uint64_t more_idle, uint64_t more_compute, Hint& h) {
  const DistributedSummary& D = c.analysis.dist;
  const size_t n = D.ranks.size();
  std::vector<Phases> phases;
  for (const RankUsage& u : D.ranks) phases.push_back(PhasesOf(c.timeline.processes[u.process]));
  std::vector<const std::map<std::string, std::pair<uint64_t, uint64_t>>*> other_cpu, other_gpu;
  for (size_t r = 0; r < n; ++r) {
    if (r == s) continue;
    other_cpu.push_back(&phases[r].cpu);
    other_gpu.push_back(&phases[r].gpu);
  }
  const std::string than = n == 2 ? D.ranks[s == 0 ? 1 : 0].label : "the other ranks (median)";
  const Excess cpu = MostExcess(phases[s].cpu, other_cpu);
  const Excess gpu = MostExcess(phases[s].gpu, other_gpu);
  const double explains = kExplainsShare * static_cast<double>(h.est_saving_ns);
  bool explained = false;
  if (static_cast<double>(cpu.excess) >= explains) {
    h.evidence.push_back(
        fmt::format("it spent {} more than {} in range '{}' ({} calls, {} each, against {})",
                    Dur(cpu.excess), than, cpu.name, cpu.calls,
                    PerCall(cpu.straggler_ns, cpu.calls), PerCall(cpu.others_ns, cpu.other_calls)));
    explained = true;
  }
  if (static_cast<double>(gpu.excess) >= explains) {
    h.evidence.push_back(
        fmt::format("its GPU work in op '{}' took {} more than {}'s ({} against {})", gpu.name,
                    Dur(gpu.excess), than, Dur(gpu.straggler_ns), Dur(gpu.others_ns)));
    explained = true;
  }
  if (!explained)
    h.evidence.push_back(more_idle >= more_compute
                             ? "no NVTX range explains its idle GPU: host work outside ranges, or "
                               "a slower host"
                             : "no op explains its longer compute: a slower GPU (clocks, "
                               "throttling) or more data");
}

}  // namespace

std::optional<Hint> RankImbalance(const RuleContext& c) {
  const DistributedSummary& D = c.analysis.dist;
  if (D.ranks.size() < 2 || D.collectives.empty()) return std::nullopt;
  const std::optional<Straggler> found = FindStraggler(D);
  if (!found) return std::nullopt;
  const size_t s = found->rank;
  const Cost k = CostOf(D, s);
  Hint h;
  h.est_saving_ns = std::min({k.waiting, k.more_idle + k.more_compute, k.late, k.steady});
  if (h.est_saving_ns == 0) return std::nullopt;
  const double fraction = static_cast<double>(h.est_saving_ns) / static_cast<double>(k.waiting);
  for (const NsInterval& iv : k.waits_for) Claim(h, iv.first, iv.second, fraction);
  if (!Price(h, c)) return std::nullopt;
  const RankUsage& S = D.ranks[s];
  const std::string who = S.rank >= 0 ? "rank " + std::to_string(S.rank) : S.label;
  h.summary = fmt::format("{} is the straggler: the other ranks wait for it in {} collectives", who,
                          found->last[s]);
  std::string what;
  for (const auto& [kind, count] : k.kinds)
    what += fmt::format("{}{} {}", what.empty() ? "" : ", ", count, kind);
  h.evidence.push_back(fmt::format(
      "{} arrived last at {} of the {} collectives that had a wait ({} on {} "
      "communicator{}); the others waited {} in them, {} of it with nothing else to run",
      S.label, found->last[s], found->with_wait, what, D.communicators,
      D.communicators == 1 ? "" : "s", Dur(found->caused[s]), Dur(found->caused_exposed[s])));
  h.evidence.push_back(fmt::format(
      "from the first collective to the end of the last, its GPU sat idle {} more than the other "
      "ranks' and computed {} more; it arrived {} after them at the collectives they reached on "
      "their own: the job loses about {} to it",
      Dur(k.more_idle), Dur(k.more_compute), Dur(k.late), Dur(h.est_saving_ns)));
  // Said where it binds by more than a tenth (stretches of a steady straggler differ a little).
  if (k.steady * 10 < std::min({k.waiting, k.more_idle + k.more_compute, k.late}) * 9)
    h.evidence.push_back(fmt::format(
        "the waiting is uneven over the run: in the median of {} stretches with equal numbers of "
        "collectives it cost {} per collective it arrived last at; over its {} such collectives "
        "{}, without what one stretch (a slower warm-up, a one-off stall) adds",
        k.stretches, Dur(k.steady_each), k.late_at, Dur(k.steady)));
  const size_t n = D.ranks.size();
  std::vector<size_t> order;
  for (size_t r = 0; r < n; ++r)
    if (r != s && k.waits[r]) order.push_back(r);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return k.waited_exposed[a] > k.waited_exposed[b]; });
  for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i) {
    const size_t r = order[i];
    h.evidence.push_back(fmt::format("{} waited {} ({} idle) in {} collectives, {} each on average",
                                     D.ranks[r].label, Dur(k.waited[r]), Dur(k.waited_exposed[r]),
                                     k.waits[r], Dur(k.waited[r] / k.waits[r])));
  }
  Explain(c, s, k.more_idle, k.more_compute, h);
  h.assumption = fmt::format(
      "If {} arrived with the others, they would not wait for it: the job, which runs at its "
      "slowest rank's pace, saves what {} spent beyond them (idle GPU and longer compute, from "
      "the first collective to the end of the last), at most its lateness where the others "
      "arrived on their own, at most their waiting, and at most what it cost per late collective "
      "in the median of five stretches of the run, for each collective it was late to (a slower "
      "warm-up or a one-off stall is not its pace). Ranks are compared on each host's clock; "
      "collectives are matched by their order on each communicator.",
      who, who);
  h.fix_cuda = fmt::format(
      "Give every rank the same work and the same speed: find what {} does differently (above), "
      "split data and sequence lengths evenly, move host work off the step's critical path (a "
      "loader thread, prefetching), and check that GPU's clocks, its NVLink/PCIe placement and "
      "the process's CPU/NUMA binding.",
      who);
  h.fix_pytorch =
      "DataLoader(num_workers>0, pin_memory=True, persistent_workers=True) on every rank; equal "
      "batch sizes and sequence lengths per rank (bucket or pad); keep rank-0-only work "
      "(logging, checkpointing, evaluation) out of the step or on a thread; check the slow "
      "rank's GPU (nvidia-smi clocks, throttling) and its NUMA binding (torchrun "
      "--local-ranks-filter / numactl).";
  return h;
}

}  // namespace kprof::hints
