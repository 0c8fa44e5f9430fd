// kprof check's budgets: the median of the checked runs against each budget line, and a budget
// derived from baseline runs (medians plus margins). The file (docs/ci.md) is src/cli/check.cpp's.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "analysis/compare_internal.h"
#include "kprof/compare.h"

namespace kprof {

using compare_detail::AnyHas;
using compare_detail::AsDouble;
using compare_detail::CeilToU64;
using compare_detail::MajorityHints;
using compare_detail::TotalValues;
using compare_detail::Values;

bool CheckResult::Failed() const { return Failures() > 0; }

size_t CheckResult::Failures() const {
  return static_cast<size_t>(
      std::count_if(lines.begin(), lines.end(), [](const BudgetLine& l) { return !l.pass; }));
}

CheckResult CheckBudget(const std::vector<RunDigest>& runs, const Budget& budget) {
  if (runs.empty()) throw InputError("check: no runs");
  CheckResult r;
  r.runs = runs.size();
  auto add = [&](std::string scope, std::string name, std::string metric, MetricKind kind,
                 uint64_t limit, double actual) {
    BudgetLine l;
    l.scope = std::move(scope);
    l.name = std::move(name);
    l.metric = std::move(metric);
    l.kind = kind;
    l.limit = AsDouble(limit);
    l.actual = actual;
    l.pass = actual <= l.limit;
    l.message = fmt::format("{} {} {} budget", FormatMetric(actual, kind), l.pass ? "<=" : ">",
                            FormatMetric(l.limit, kind));
    r.lines.push_back(std::move(l));
  };
  auto run_line = [&](const std::optional<uint64_t>& limit, const char* metric, const char* label,
                      MetricKind kind, uint64_t RunTotals::*field) {
    if (limit) add("run", label, metric, kind, *limit, Median(TotalValues(runs, field)));
  };
  run_line(budget.max_wall_ns, "max_wall_ns", "wall", MetricKind::Time, &RunTotals::wall_ns);
  run_line(budget.max_kernels, "max_kernels", "kernels", MetricKind::Count, &RunTotals::kernels);
  run_line(budget.max_syncs, "max_syncs", "syncs", MetricKind::Count, &RunTotals::syncs);
  run_line(budget.max_peak_memory_bytes, "max_peak_memory_bytes", "peak memory", MetricKind::Memory,
           &RunTotals::peak_memory_bytes);
  // A peak the runs did not record (no allocation traced) is not compared with its budget.
  if (budget.max_peak_memory_bytes &&
      !std::all_of(runs.begin(), runs.end(),
                   [](const RunDigest& d) { return MemoryRecorded(d.totals); })) {
    BudgetLine& l = r.lines.back();
    l.pass = true;
    l.not_recorded = true;
    l.message = "not compared (not recorded in the runs)";
  }

  if (budget.max_hint_severity) {
    BudgetLine l;
    l.scope = "run";
    l.name = "hints";
    l.metric = "max_hint_severity";
    l.kind = MetricKind::Count;
    l.limit = *budget.max_hint_severity;
    l.actual = kNoHintAllowed;
    std::vector<std::string> offending;
    for (const auto& [id, t] : MajorityHints(runs)) {
      l.actual = std::max(l.actual, static_cast<double>(t.severity));
      if (static_cast<int>(t.severity) > *budget.max_hint_severity)
        offending.push_back(fmt::format("{} ({})", id, SeverityName(t.severity)));
    }
    l.pass = offending.empty();
    const std::string allowed =
        *budget.max_hint_severity == kNoHintAllowed
            ? std::string("none")
            : SeverityName(static_cast<Severity>(*budget.max_hint_severity));
    l.message = l.pass ? fmt::format("no hint above {}", allowed)
                       : fmt::format("hints above {}: {}", allowed, fmt::join(offending, ", "));
    r.lines.push_back(std::move(l));
  }

  auto item_lines = [&](const char* scope, const std::map<std::string, BudgetLimits>& limits,
                        auto map, auto calls, auto time) {
    for (const auto& [name, lim] : limits) {
      if (!AnyHas(runs, map, name)) {
        BudgetLine l;
        l.scope = scope;
        l.name = name;
        l.metric = lim.max_gpu_ns ? "max_gpu_ns" : "max_calls";
        l.limit = AsDouble(lim.max_gpu_ns ? *lim.max_gpu_ns : lim.max_calls.value_or(0));
        l.kind = lim.max_gpu_ns ? MetricKind::Time : MetricKind::Count;
        l.missing = true;
        l.message = fmt::format("{} not present in the runs (stale budget line?)", scope);
        r.lines.push_back(std::move(l));
        continue;
      }
      if (lim.max_gpu_ns)
        add(scope, name, "max_gpu_ns", MetricKind::Time, *lim.max_gpu_ns,
            Median(Values(runs, map, name, time)));
      if (lim.max_calls)
        add(scope, name, "max_calls", MetricKind::Count, *lim.max_calls,
            Median(Values(runs, map, name, calls)));
    }
  };
  item_lines(
      "op", budget.ops, &RunDigest::ops, [](const DigestOp& o) { return o.calls; },
      [](const DigestOp& o) { return o.gpu_ns; });
  item_lines(
      "kernel", budget.kernels, &RunDigest::kernels, [](const DigestKernel& k) { return k.calls; },
      [](const DigestKernel& k) { return k.total_ns; });
  return r;
}

Budget BudgetFromRuns(const std::vector<RunDigest>& runs, const BudgetFromRunsOptions& opts) {
  if (runs.empty()) throw InputError("check: no baseline runs");
  constexpr double kMinTimeSlackNs = 50'000;       // the diff's default min-time
  constexpr double kMinMemorySlack = 1024 * 1024;  // the diff's default min-memory
  auto time_limit = [&](double median) {
    return CeilToU64(std::max(median * (1 + opts.margin), median + kMinTimeSlackNs));
  };
  auto count_limit = [&](double median) { return CeilToU64(median * (1 + opts.count_margin)); };
  auto total = [&](uint64_t RunTotals::*field) { return Median(TotalValues(runs, field)); };

  Budget b;
  b.max_wall_ns = time_limit(total(&RunTotals::wall_ns));
  b.max_kernels = count_limit(total(&RunTotals::kernels));
  b.max_syncs = count_limit(total(&RunTotals::syncs));
  const double peak = total(&RunTotals::peak_memory_bytes);
  // No budget for a peak the baseline did not record.
  if (std::all_of(runs.begin(), runs.end(),
                  [](const RunDigest& d) { return MemoryRecorded(d.totals); }))
    b.max_peak_memory_bytes = CeilToU64(std::max(peak * (1 + opts.margin), peak + kMinMemorySlack));
  int worst = static_cast<int>(Severity::Info);
  for (const auto& [id, t] : MajorityHints(runs))
    worst = std::max(worst, static_cast<int>(t.severity));
  b.max_hint_severity = worst;

  std::set<std::string> ops;
  std::map<std::string, double> kernel_time;
  for (const auto& r : runs) {
    for (const auto& [name, op] : r.ops) ops.insert(name);
    for (const auto& [name, k] : r.kernels) kernel_time[name] = 0;
  }
  for (const auto& name : ops) {
    BudgetLimits l;
    l.max_gpu_ns = time_limit(
        Median(Values(runs, &RunDigest::ops, name, [](const DigestOp& o) { return o.gpu_ns; })));
    l.max_calls = count_limit(
        Median(Values(runs, &RunDigest::ops, name, [](const DigestOp& o) { return o.calls; })));
    b.ops[name] = l;
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (auto& [name, t] : kernel_time) {
    t = Median(
        Values(runs, &RunDigest::kernels, name, [](const DigestKernel& k) { return k.total_ns; }));
    ranked.emplace_back(t, name);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& c) {
    return a.first != c.first ? a.first > c.first : a.second < c.second;
  });
  if (ranked.size() > opts.top_kernels) ranked.resize(opts.top_kernels);
  for (const auto& [t, name] : ranked) {
    BudgetLimits l;
    l.max_gpu_ns = time_limit(t);
    l.max_calls = count_limit(Median(
        Values(runs, &RunDigest::kernels, name, [](const DigestKernel& k) { return k.calls; })));
    b.kernels[name] = l;
  }
  return b;
}

}  // namespace kprof
