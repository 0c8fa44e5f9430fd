// kprof diff: matches the ops, kernels and run totals of base and new runs, compares each
// metric across the runs of both sides and decides a verdict per item; also the hints that
// appeared or went away and the data-quality warnings. Statistics are in compare_stats.cpp.
#include "kprof/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "analysis/compare_internal.h"

namespace kprof {
namespace {

using compare_detail::AnyHas;
using compare_detail::AsDouble;
using compare_detail::CeilToU64;
using compare_detail::FormatCount;
using compare_detail::HintTally;
using compare_detail::MajorityHints;
using compare_detail::TallyHints;
using compare_detail::TotalValues;
using compare_detail::Values;

constexpr double kInf = std::numeric_limits<double>::infinity();

int VerdictRank(Verdict v) {
  switch (v) {
    case Verdict::Regression:
      return 5;
    case Verdict::Added:
    case Verdict::Removed:
      return 4;
    case Verdict::Improvement:
      return 3;
    case Verdict::Changed:
      return 2;
    case Verdict::NotCompared:
      return 1;
    case Verdict::Same:
      return 0;
  }
  return 0;
}

/// Most severe of two verdicts for an item (Added/Removed are set by the caller, not merged).
Verdict Worse(Verdict a, Verdict b) { return VerdictRank(b) > VerdictRank(a) ? b : a; }

std::string FormatP(double p) {
  if (p < 0.001) return "p<0.001";
  return fmt::format("p={:.3f}", p);
}

bool AllEqual(const std::vector<double>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

/// Compares one metric across the runs of both sides; fills everything but `metric`'s name.
MetricDiff CompareValues(std::string metric, MetricKind kind, std::vector<double> base,
                         std::vector<double> now, DiffMode mode, const DiffOptions& opts) {
  MetricDiff d;
  d.metric = std::move(metric);
  d.kind = kind;
  d.base_median = Median(base);
  d.new_median = Median(now);
  d.abs_change = d.new_median - d.base_median;
  if (d.base_median != 0)
    d.rel_change = d.abs_change / d.base_median;
  else
    d.rel_change = d.new_median == 0 ? 0 : kInf;

  const double thr = opts.threshold;
  const bool up = d.rel_change > thr;
  const bool down = d.rel_change < -thr;
  switch (kind) {
    case MetricKind::Count:
    case MetricKind::Bytes: {
      if (d.abs_change == 0) break;
      d.verdict = d.abs_change > 0 ? Verdict::Regression : Verdict::Improvement;
      const bool fmt_bytes = kind == MetricKind::Bytes;
      d.reason = fmt::format(
          "{}{} ({} -> {})", d.abs_change > 0 ? "+" : "-",
          FormatMetric(std::fabs(d.abs_change), kind),
          fmt_bytes ? FormatBytes(CeilToU64(d.base_median)) : FormatCount(d.base_median),
          fmt_bytes ? FormatBytes(CeilToU64(d.new_median)) : FormatCount(d.new_median));
      if (!AllEqual(base) || !AllEqual(now)) d.reason += ", varies between runs";
      break;
    }
    case MetricKind::Memory: {
      const bool big = std::fabs(d.abs_change) > AsDouble(opts.min_memory_bytes);
      if (up && big) d.verdict = Verdict::Regression;
      if (down && big) d.verdict = Verdict::Improvement;
      if (d.verdict != Verdict::Same)
        d.reason =
            fmt::format("{} ({}{})", FormatPercent(d.rel_change), d.abs_change > 0 ? "+" : "-",
                        FormatBytes(CeilToU64(std::fabs(d.abs_change))));
      break;
    }
    case MetricKind::Time: {
      const bool big = std::fabs(d.abs_change) > AsDouble(opts.min_time_ns);
      bool significant = true;
      if (mode == DiffMode::Test) {
        const MannWhitneyResult mw = MannWhitneyU(now, base);
        d.p_value = mw.p;
        d.p_exact = mw.exact;
        d.rel_ci = BootstrapRelChangeCi(base, now, opts.bootstrap_resamples);
        significant = mw.p < opts.alpha;
      }
      const std::string change =
          fmt::format("{} ({})", FormatPercent(d.rel_change), FormatSignedDuration(d.abs_change));
      if ((up || down) && big && significant) {
        d.verdict = up ? Verdict::Regression : Verdict::Improvement;
        d.reason = d.p_value ? fmt::format("{}, {}", change, FormatP(*d.p_value)) : change;
      } else if ((up || down) && big) {
        d.reason = fmt::format("{}, not significant ({})", change, FormatP(*d.p_value));
      } else if (up || down) {
        d.reason = fmt::format("{}, below min-time", change);
      }
      break;
    }
  }
  d.base_values = std::move(base);
  d.new_values = std::move(now);
  return d;
}

void SortByImpact(std::vector<ItemDiff>& items) {
  std::sort(items.begin(), items.end(), [](const ItemDiff& a, const ItemDiff& b) {
    if (a.impact_ns != b.impact_ns) return a.impact_ns > b.impact_ns;
    if (a.verdict != b.verdict) return VerdictRank(a.verdict) > VerdictRank(b.verdict);
    return a.name < b.name;
  });
}

/// Op/kernel item: calls (count) and time, plus added/removed.
template <class Map, class CallsFn, class TimeFn>
ItemDiff CompareItem(Section section, const std::string& name, const std::vector<RunDigest>& base,
                     const std::vector<RunDigest>& now, Map RunDigest::*map, CallsFn calls,
                     const char* time_metric, TimeFn time, DiffMode mode, const DiffOptions& opts) {
  ItemDiff item;
  item.section = section;
  item.name = name;
  MetricDiff c = CompareValues("calls", MetricKind::Count, Values(base, map, name, calls),
                               Values(now, map, name, calls), mode, opts);
  // Op calls are range occurrences: a change says the workload differs, not that it is slower.
  // Kernel calls are launches: more of them is a regression.
  // Module calls likewise.
  if ((section == Section::Op || section == Section::Module) && c.verdict != Verdict::Same)
    c.verdict = Verdict::Changed;
  MetricDiff t = CompareValues(time_metric, MetricKind::Time, Values(base, map, name, time),
                               Values(now, map, name, time), mode, opts);
  // More launches of a kernel whose time fell (a reduction split in two, say) are a change in
  // how the work is done, not a regression: the time is what the launches cost.
  if (c.verdict == Verdict::Regression && t.verdict == Verdict::Improvement) {
    c.verdict = Verdict::Changed;
    c.reason += ", while its time fell";
  }
  item.impact_ns = std::fabs(t.abs_change);
  item.verdict = Worse(c.verdict, t.verdict);
  const bool in_base = AnyHas(base, map, name);
  const bool in_new = AnyHas(now, map, name);
  if (!in_base) item.verdict = Verdict::Added;
  if (!in_new) item.verdict = Verdict::Removed;
  item.metrics.push_back(std::move(c));
  item.metrics.push_back(std::move(t));
  return item;
}

/// A metric not recorded by every run of a side is not compared: a figure one side did not
/// record is neither a regression nor an improvement.
void NotRecorded(const std::vector<RunDigest>& base, const std::vector<RunDigest>& now,
                 bool (*recorded)(const RunTotals&), MetricDiff& d) {
  const auto all = [&](const std::vector<RunDigest>& side) {
    return std::all_of(side.begin(), side.end(),
                       [&](const RunDigest& r) { return recorded(r.totals); });
  };
  const bool in_base = all(base), in_new = all(now);
  if (in_base && in_new) return;
  d.verdict = Verdict::NotCompared;
  d.p_value.reset();
  d.rel_ci.reset();
  d.reason = fmt::format("not compared (not recorded in {})", !in_base && !in_new ? "either"
                                                              : !in_base          ? "base"
                                                                                  : "new");
}

/// A run whose wall time fell, with no time figure worse, is faster: more kernels, memsets or
/// bytes there say how the new run does its work (torch.compile splits a reduction in two), not
/// that it regressed. Those counts become changes.
void SubordinateCounts(std::vector<ItemDiff>& run) {
  bool wall_fell = false;
  for (const ItemDiff& i : run) {
    const MetricDiff& m = i.metrics.front();
    if (m.kind != MetricKind::Time) continue;
    if (m.verdict == Verdict::Regression) return;
    if (m.metric == "wall_ns" && m.verdict == Verdict::Improvement) wall_fell = true;
  }
  if (!wall_fell) return;
  for (ItemDiff& i : run) {
    MetricDiff& m = i.metrics.front();
    if ((m.kind != MetricKind::Count && m.kind != MetricKind::Bytes) ||
        m.verdict != Verdict::Regression)
      continue;
    m.verdict = i.verdict = Verdict::Changed;
    m.reason += ", while the run's wall time fell";
  }
}

void AddQualityWarnings(const std::vector<RunDigest>& runs, const char* side,
                        std::vector<std::string>& out) {
  for (const auto& r : runs) {
    if (r.totals.incomplete_processes > 0)
      out.push_back(
          fmt::format("{} run {}: {} process(es) did not finish writing (crash or "
                      "kill); its totals may be short",
                      side, r.source, r.totals.incomplete_processes));
    if (r.totals.dropped_records > 0)
      out.push_back(fmt::format("{} run {}: {} records dropped by CUPTI; its totals are short",
                                side, r.source, r.totals.dropped_records));
  }
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::Same:
      return "same";
    case Verdict::Changed:
      return "changed";
    case Verdict::Improvement:
      return "improvement";
    case Verdict::Regression:
      return "regression";
    case Verdict::Added:
      return "added";
    case Verdict::Removed:
      return "removed";
    case Verdict::NotCompared:
      return "not compared";
  }
  return "?";
}

const char* SectionName(Section s) {
  switch (s) {
    case Section::Run:
      return "run";
    case Section::Op:
      return "op";
    case Section::Kernel:
      return "kernel";
    case Section::Module:
      return "module";
  }
  return "?";
}

const MetricDiff* ItemDiff::Find(std::string_view metric) const {
  for (const auto& m : metrics)
    if (m.metric == metric) return &m;
  return nullptr;
}

bool DiffResult::Regressed() const { return Count(Verdict::Regression) > 0; }

bool DiffResult::Improved() const { return !Regressed() && Count(Verdict::Improvement) > 0; }

size_t DiffResult::Count(Verdict v) const {
  size_t n = 0;
  for (const auto* items : {&run, &ops, &kernels, &modules})
    for (const auto& i : *items) n += i.verdict == v ? 1 : 0;
  return n;
}

DiffResult Diff(const std::vector<RunDigest>& base, const std::vector<RunDigest>& now,
                const DiffOptions& opts) {
  if (base.empty()) throw InputError("diff: no base runs");
  if (now.empty()) throw InputError("diff: no new runs");
  DiffResult r;
  r.options = opts;
  r.base_runs = base.size();
  r.new_runs = now.size();
  const size_t min_runs = std::max<size_t>(opts.min_runs_for_test, 2);
  if (base.size() >= min_runs && now.size() >= min_runs) {
    r.mode = DiffMode::Test;
    r.mode_note =
        fmt::format("{} vs {} runs: Mann-Whitney U (alpha {}), threshold {}, min-time {}",
                    base.size(), now.size(), opts.alpha, FormatPercent(opts.threshold).substr(1),
                    FormatDuration(opts.min_time_ns));
  } else {
    r.mode = DiffMode::ThresholdOnly;
    const std::string why = base.size() == 1 && now.size() == 1
                                ? std::string("single run per side")
                                : fmt::format("{} vs {} runs (fewer than {} per side)", base.size(),
                                              now.size(), min_runs);
    r.mode_note =
        fmt::format("{}: threshold only ({}, min-time {})", why,
                    FormatPercent(opts.threshold).substr(1), FormatDuration(opts.min_time_ns));
  }

  for (const auto& m : RunMetrics()) {
    ItemDiff item;
    item.section = Section::Run;
    item.name = m.label;
    item.metrics.push_back(CompareValues(m.key, m.kind, TotalValues(base, m.field),
                                         TotalValues(now, m.field), r.mode, opts));
    if (m.recorded != nullptr) NotRecorded(base, now, m.recorded, item.metrics.back());
    item.verdict = item.metrics.back().verdict;
    if (m.kind == MetricKind::Time) item.impact_ns = std::fabs(item.metrics.back().abs_change);
    r.run.push_back(std::move(item));
  }
  SubordinateCounts(r.run);

  std::set<std::string> op_names, kernel_names, module_names;
  for (const auto* side : {&base, &now}) {
    for (const auto& d : *side) {
      for (const auto& [name, op] : d.ops) op_names.insert(name);
      for (const auto& [name, k] : d.kernels) kernel_names.insert(name);
      for (const auto& [name, m] : d.modules) module_names.insert(name);
    }
  }
  for (const auto& name : op_names)
    r.ops.push_back(CompareItem(
        Section::Op, name, base, now, &RunDigest::ops, [](const DigestOp& o) { return o.calls; },
        "gpu_ns", [](const DigestOp& o) { return o.gpu_ns; }, r.mode, opts));
  for (const auto& name : kernel_names)
    r.kernels.push_back(CompareItem(
        Section::Kernel, name, base, now, &RunDigest::kernels,
        [](const DigestKernel& k) { return k.calls; }, "total_ns",
        [](const DigestKernel& k) { return k.total_ns; }, r.mode, opts));
  for (const auto& name : module_names)
    r.modules.push_back(CompareItem(
        Section::Module, name, base, now, &RunDigest::modules,
        [](const DigestOp& m) { return m.calls; }, "gpu_ns",
        [](const DigestOp& m) { return m.gpu_ns; }, r.mode, opts));
  // A module present on one side only, inside a module that called compiled code on the other:
  // torch.compile inlined it there.
  const auto inside_compiled = [](const std::vector<RunDigest>& side, const std::string& name) {
    for (const auto& d : side)
      for (const auto& c : d.compiled_callers)
        if (name.size() > c.size() && name.compare(0, c.size(), c) == 0 && name[c.size()] == '.')
          return true;
    return false;
  };
  for (ItemDiff& m : r.modules) {
    if (m.verdict == Verdict::Removed && inside_compiled(now, m.name))
      m.note = "inside compiled code in the new runs (torch.compile: no module ranges there)";
    if (m.verdict == Verdict::Added && inside_compiled(base, m.name))
      m.note = "inside compiled code in the base runs (torch.compile: no module ranges there)";
  }
  SortByImpact(r.ops);
  SortByImpact(r.kernels);
  SortByImpact(r.modules);

  const auto hb = MajorityHints(base), hn = MajorityHints(now);
  const auto all_b = TallyHints(base), all_n = TallyHints(now);
  auto runs_with = [](const std::map<std::string, HintTally>& m, const std::string& id) {
    auto it = m.find(id);
    return it == m.end() ? size_t{0} : it->second.runs;
  };
  for (const auto& [id, t] : hn)
    if (!hb.count(id))
      r.hints.push_back({id, t.severity, t.summary, true, runs_with(all_b, id), t.runs});
  for (const auto& [id, t] : hb)
    if (!hn.count(id))
      r.hints.push_back({id, t.severity, t.summary, false, t.runs, runs_with(all_n, id)});
  std::stable_sort(r.hints.begin(), r.hints.end(), [](const HintChange& a, const HintChange& b) {
    if (a.appeared != b.appeared) return a.appeared;
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.id < b.id;
  });

  AddQualityWarnings(base, "base", r.warnings);
  AddQualityWarnings(now, "new", r.warnings);
  return r;
}

}  // namespace kprof
