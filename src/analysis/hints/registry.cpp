// The hint rules run together: the list (rules.def), the base that percentages are taken of, and
// the order hints are shown in.
#include <algorithm>

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

/// One-time start-up of a process: GPU idle gaps of kLongGapNs or more that end before a
/// kernel's first execution (imports, initialisation, library set-up).
uint64_t StartupNs(const ProcessTimeline& t) {
  uint64_t warm = 0;
  for (const Gap& g : t.gaps)
    if (g.kind == GapKind::Warmup && g.Len() >= kLongGapNs) warm += g.Len();
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

std::vector<Hint> ComputeHints(const Timeline& timeline, const Analysis& analysis) {
  std::vector<Hint> out;
  hints::RuleContext c{timeline, analysis, analysis.summary.wall_ns};
  if (c.wall == 0) return out;
  // Percentages are of the run less its one-time start-up. Otherwise a long import hides every
  // steady-state problem of a short profiled run. With several processes only what all of them
  // spent in start-up is taken off.
  uint64_t startup = UINT64_MAX;
  for (const ProcessTimeline& t : timeline.processes) startup = std::min(startup, StartupNs(t));
  if (startup != UINT64_MAX)
    c.wall = std::max(c.wall - std::min(c.wall, startup), analysis.summary.gpu_busy_ns);
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
