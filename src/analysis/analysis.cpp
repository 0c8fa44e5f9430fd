// Analyze: one pass over the timeline feeding the run's totals (totals.cpp) and every view
// (views/, one file each, listed in views/views.def), then each view's rows. See analysis.h for
// the definitions.
#include "kprof/analysis.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <queue>
#include <regex>

#include "analysis/counters.h"
#include "analysis/intervals.h"
#include "analysis/totals.h"
#include "analysis/views/view.h"

namespace kprof {
namespace {

using detail::UnionAcc;

/// Calls f(process, index in its acts) for every GPU activity of the run in start order.
template <typename F>
void ForEachActivityInStartOrder(const Timeline& tl, F&& f) {
  if (tl.processes.size() == 1) {
    for (size_t i = 0; i < tl.processes[0].acts.size(); ++i) f(size_t{0}, i);
    return;
  }
  using Head = std::pair<uint64_t, size_t>;  // (start, process)
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<size_t> next(tl.processes.size());
  for (size_t p = 0; p < tl.processes.size(); ++p)
    if (!tl.processes[p].acts.empty()) heads.emplace(tl.processes[p].acts[0]->start_ns, p);
  while (!heads.empty()) {
    const size_t p = heads.top().second;
    heads.pop();
    const auto& acts = tl.processes[p].acts;
    f(p, next[p]);
    if (++next[p] < acts.size()) heads.emplace(acts[next[p]]->start_ns, p);
  }
}

}  // namespace

Stat MakeStat(std::vector<uint64_t>& d) {
  Stat s;
  if (d.empty()) return s;
  std::sort(d.begin(), d.end());
  s.count = d.size();
  for (uint64_t v : d) s.total_ns += v;
  s.mean_ns = s.total_ns / s.count;
  s.min_ns = d.front();
  s.max_ns = d.back();
  s.median_ns = d[(d.size() - 1) / 2];
  // Nearest rank: the smallest value with at least 95% of the values at or below it.
  size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(d.size())));
  s.p95_ns = d[std::max<size_t>(rank, 1) - 1];
  return s;
}

std::optional<GroupBy> ParseGroupBy(const std::string& s) {
  if (s == "kernel") return GroupBy::Kernel;
  if (s == "op") return GroupBy::Op;
  if (s == "range-path") return GroupBy::RangePath;
  if (s == "stream") return GroupBy::Stream;
  if (s == "device") return GroupBy::Device;
  if (s == "graph") return GroupBy::Graph;
  if (s == "module") return GroupBy::Module;
  if (s == "source") return GroupBy::Source;
  if (s == "compiled") return GroupBy::Compiled;
  if (s == "memory") return GroupBy::Memory;
  return std::nullopt;
}

const char* GroupByName(GroupBy by) {
  switch (by) {
    case GroupBy::Kernel:
      return "kernel";
    case GroupBy::Op:
      return "op";
    case GroupBy::RangePath:
      return "range-path";
    case GroupBy::Stream:
      return "stream";
    case GroupBy::Device:
      return "device";
    case GroupBy::Graph:
      return "graph";
    case GroupBy::Module:
      return "module";
    case GroupBy::Source:
      return "source";
    case GroupBy::Compiled:
      return "compiled";
    case GroupBy::Memory:
      return "memory";
  }
  return "op";
}

uint64_t UnionLength(std::vector<std::pair<uint64_t, uint64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());  // in place: no second list
  UnionAcc u;
  for (const auto& [s, e] : intervals) u.Add(s, std::max(s, e));
  return u.Total();
}

Analysis Analyze(const Timeline& tl, const AnalysisOptions& opts) {
  Analysis an;
  an.by = opts.by;
  std::optional<std::regex> filter;
  if (!opts.filter.empty()) {
    try {
      filter.emplace(opts.filter, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      throw InputError("--filter '" + opts.filter + "': invalid regular expression");
    }
  }
  // The device view's rows and the per-GPU usage: one per physical GPU, whatever ordinal each
  // process gave it.
  const DeviceKeys device_keys(tl);
  const detail::ViewOptions wanted{opts.by, opts.all_views};
  std::vector<std::unique_ptr<detail::View>> views = detail::MakeViews({tl, wanted, device_keys});
  detail::RunTotals totals(tl, device_keys, an, opts.timeline);

  // Each process: its ranges, its records, its GPU activities in time order with the range open
  // at their launch.
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const ProcessTimeline& t = tl.processes[pi];
    const detail::ProcessPass pass{pi, t, *t.process, t.index};
    totals.BeginProcess(pass);
    for (auto& v : views) v->BeginProcess(pass);
    for (const Record& r : pass.p.records) {
      totals.Note(pass, r);
      // Memory per op: the op open on the thread of the allocating call.
      const auto delta = detail::DeviceMemoryDelta(r);
      if (!delta) continue;
      if (const Record* api = pass.ix.api_by_correlation.Find(r.correlation)) {
        const int inner = pass.ix.OpRangeAt(api->tid, api->start_ns);
        for (auto& v : views) v->Memory(pass, inner, *delta);
      }
    }
    for (size_t i = 0; i < t.acts.size(); ++i) {
      const Record& r = *t.acts[i];
      const std::string& kname = r.Kind() == RecordKind::Kernel ? t.KernelName(r) : pass.p.Name(r);
      const detail::ActivityEvent a{i, r, kname, t.act_range[i], detail::CapturedGraph(t, r)};
      totals.Activity(pass, a);
      for (auto& v : views) v->Activity(pass, a);
    }
    totals.EndProcess(pass);
  }
  totals.EndProcesses();
  // Every union in one pass over the activities of all processes in start order: a merge of
  // the timeline's per-process lists, which are in start order already.
  ForEachActivityInStartOrder(tl, [&](size_t proc, size_t i) {
    const ProcessTimeline& t = tl.processes[proc];
    const Record& r = *t.acts[i];
    const uint64_t s = r.start_ns, e = std::max(r.start_ns, r.end_ns);
    totals.Busy(proc, t, i, s, e);
    for (auto& v : views) v->Busy(proc, t, i, s, e);
  });
  totals.Finish();
  // Hardware counters: each measured kernel's class, and (in the views) each group's.
  an.counters = detail::SummarizeCounters(tl);
  an.memory =
      SummarizeMemory(tl, opts.by == GroupBy::Memory || opts.every_memory_owner ? SIZE_MAX : 5);
  for (auto& v : views) v->Finish(an);

  // The rows of one view, unfiltered and unsorted.
  const auto rows_of = [&](GroupBy by) {
    for (auto& v : views)
      if (v->Serves(by)) return v->Rows(an);
    return std::vector<GroupRow>();
  };
  an.rows = rows_of(opts.by);
  if (opts.all_views) {
    for (GroupBy by : {GroupBy::RangePath, GroupBy::Stream, GroupBy::Device}) {
      std::vector<GroupRow> rows = by == opts.by ? an.rows : rows_of(by);
      detail::SortRows(rows, AnalysisOptions::Sort::Gpu);
      (by == GroupBy::RangePath ? an.paths
       : by == GroupBy::Stream  ? an.streams
                                : an.devices) = std::move(rows);
    }
  }
  if (filter) {
    std::erase_if(an.rows, [&](const GroupRow& g) { return !std::regex_search(g.key, *filter); });
  }
  // The module view keeps its tree order unless another order is asked for.
  if (opts.by != GroupBy::Module || opts.sort != AnalysisOptions::Sort::Gpu)
    detail::SortRows(an.rows, opts.sort);
  if (opts.top && an.rows.size() > opts.top) an.rows.resize(opts.top);
  return an;
}

}  // namespace kprof
