// The hint rules run together: the list (rules.def), the base that percentages are taken of, and
// the order hints are shown in.
#include <algorithm>
#include <cmath>

#include "analysis/hints/rule.h"

namespace kprof {
namespace {

struct RuleEntry {
  const char* id;
  hints::RuleFn fn;
};

const std::vector<RuleEntry>& Rules() {
  static const std::vector<RuleEntry> rules = {
#define KPROF_HINT_RULE(id, function) {id, hints::function},
#include "analysis/hints/rules.def"
#undef KPROF_HINT_RULE
  };
  return rules;
}

/// One-time start-up of a process: everything before its repeated part began
/// (ProcessTimeline::steady_from_ns, counted from the run's start), and after it the GPU idle
/// gaps of kLongGapNs or more that end before a kernel's first execution (imports,
/// initialisation, library set-up).
uint64_t StartupNs(const ProcessTimeline& t, uint64_t run_start) {
  uint64_t warm = t.steady_from_ns > run_start ? t.steady_from_ns - run_start : 0;
  for (const Gap& g : t.gaps)
    if (g.kind == GapKind::Warmup && g.Len() >= kLongGapNs && g.start_ns >= t.steady_from_ns)
      warm += g.Len();
  return warm;
}

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::Info:
      return "info";
    case Severity::Warning:
      return "warning";
    case Severity::Critical:
      return "critical";
  }
  return "info";
}

const std::vector<std::string>& HintIds() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v;
    for (const RuleEntry& r : Rules()) v.emplace_back(r.id);
    return v;
  }();
  return ids;
}

JointSaving EstimateJoint(const std::vector<Hint>& hints) {
  JointSaving j;
  // A sweep over the claims' ends. Open claims: those that remove all of their time, counted,
  // and the others, as the sum of log(1 - fraction): what is left of an instant is the product
  // of (1 - fraction) over the claims covering it.
  struct Edge {
    uint64_t t;
    double fraction;
    int delta;  // +1 opens, -1 closes
  };
  std::vector<Edge> edges;
  uint64_t base = 0;
  for (const Hint& h : hints) {
    // A hint without claims prices no time of the program (profiler-data-loss prices kprof's
    // own overhead, which a run without kprof does not have).
    if (h.est_saving_ns == 0 || h.claims.empty()) continue;
    ++j.hints;
    j.sum_est_ns += h.est_saving_ns;
    base = std::max(base, h.base_ns);
    for (const SavingClaim& c : h.claims) {
      if (c.end_ns <= c.start_ns || c.fraction <= 0) continue;
      edges.push_back({c.start_ns, std::min(c.fraction, 1.0), +1});
      edges.push_back({c.end_ns, std::min(c.fraction, 1.0), -1});
    }
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  int whole = 0, partial = 0;
  double log_left = 0;
  long double removed = 0;
  uint64_t prev = 0;
  for (size_t i = 0; i < edges.size();) {
    const uint64_t t = edges[i].t;
    if (whole > 0) {
      removed += static_cast<long double>(t - prev);
    } else if (partial > 0) {
      removed += static_cast<long double>(t - prev) * (1.0L - std::exp(log_left));
    }
    for (; i < edges.size() && edges[i].t == t; ++i) {
      const Edge& e = edges[i];
      if (e.fraction >= 1) {
        whole += e.delta;
      } else {
        partial += e.delta;
        log_left += e.delta * std::log1p(-e.fraction);
      }
    }
    if (partial == 0) log_left = 0;  // no drift carried past an instant without claims
    prev = t;
  }
  j.est_saving_ns = std::min<uint64_t>(static_cast<uint64_t>(std::llround(removed)), j.sum_est_ns);
  if (base) j.est_saving_ns = std::min(j.est_saving_ns, base);
  j.est_saving_pct = hints::PctOf(j.est_saving_ns, base);
  j.base_ns = base;
  return j;
}

const Hint* FindHint(const std::vector<Hint>& hints, std::string_view id) {
  for (const Hint& h : hints)
    if (h.id == id) return &h;
  return nullptr;
}

std::vector<Hint> ComputeHints(const Timeline& timeline, const Analysis& analysis) {
  std::vector<Hint> out;
  hints::RuleContext c{timeline, analysis, analysis.summary.wall_ns};
  if (c.wall == 0) return out;
  // Percentages are of the run less its one-time start-up. Otherwise a long import hides every
  // steady-state problem of a short profiled run. With several processes only what all of them
  // spent in start-up is taken off.
  uint64_t startup = UINT64_MAX;
  for (const ProcessTimeline& t : timeline.processes)
    startup = std::min(startup, StartupNs(t, analysis.summary.start_ns));
  // The busiest GPU's time (with several GPUs, gpu_busy_ns is their sum).
  uint64_t busiest = analysis.summary.gpus > 1 ? 0 : analysis.summary.gpu_busy_ns;
  for (const DeviceUsage& d : analysis.dist.devices)
    if (analysis.summary.gpus > 1) busiest = std::max(busiest, d.busy_ns);
  if (startup != UINT64_MAX) c.wall = std::max(c.wall - std::min(c.wall, startup), busiest);
  if (c.wall == 0) return out;
  for (const RuleEntry& rule : Rules()) {
    if (auto h = rule.fn(c)) {
      h->id = rule.id;
      out.push_back(std::move(*h));
    }
  }
  std::sort(out.begin(), out.end(), [](const Hint& a, const Hint& b) {
    if (a.est_saving_ns != b.est_saving_ns) return a.est_saving_ns > b.est_saving_ns;
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.id < b.id;
  });
  return out;
}

}  // namespace kprof
