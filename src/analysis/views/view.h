// Internal to the analysis library: the views of Analyze (analysis.cpp) as units. Each view (op,
// range path, kernel, module, source line, compiled region, stream, device, graph; and the list of
// NVTX ranges) is one class in this folder, fed by the one pass Analyze makes over the timeline,
// and registered in one list (views.def). Adding a view: its file, its line in views.def, its
// GroupBy (kprof/analysis.h) and its test.
//
// The pass, per process in timeline order: BeginProcess (its ranges are known: names, calls, CPU
// time), Memory for each device allocation or release whose call is known, Activity for each GPU
// activity in the process's time order with what it is attributed to, EndProcess. Then Busy for
// every activity of every process in start order (the unions behind projected times). Then
// Finish in views.def's order (the run's totals, the counters and the GPU busy time known), and
// Rows for the view asked for.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/distributed.h"
#include "kprof/timeline.h"

namespace kprof::detail {

inline constexpr const char* kNoRange = "(no range)";

/// The process being read.
struct ProcessPass {
  size_t index;  ///< its position in the timeline (and in Analysis::processes)
  const ProcessTimeline& t;
  const ProcessTrace& p;
  const ProcessIndex& ix;
};

/// One GPU activity of the process being read, with what it is attributed to.
struct ActivityEvent {
  size_t i;  ///< its index in the process's acts
  const Record& r;
  const std::string& kname;  ///< the kernel's name (kernels) or the record's
  int inner_range;           ///< the innermost range open at its launch (-1: none)
  /// The graph a graph-level launch ran, when where its nodes were made is known: its GPU time
  /// is shared among the ranges they were made in.
  const GraphInfo* graph;
};

/// What the views are built for.
struct ViewOptions {
  GroupBy by = GroupBy::Op;
  bool all_views = false;
  /// True when view `v`'s rows are wanted (the one asked for, or all of them).
  bool Wants(GroupBy v) const { return by == v || all_views; }
};

class View {
 public:
  virtual ~View() = default;
  /// Whether Rows(by) gives this view's rows.
  virtual bool Serves(GroupBy by) const = 0;
  virtual void BeginProcess(const ProcessPass&) {}
  /// A device allocation (delta > 0) or release whose call was recorded; `inner`: the innermost
  /// range open on the calling thread then (-1: none).
  virtual void Memory(const ProcessPass&, int /*inner*/, int64_t /*delta*/) {}
  virtual void Activity(const ProcessPass&, const ActivityEvent&) {}
  /// Activity `i` of process `process` again, in start order over all processes: [s, e].
  virtual void Busy(size_t /*process*/, const ProcessTimeline&, size_t /*i*/, uint64_t /*s*/,
                    uint64_t /*e*/) {}
  /// Fills the view's part of `an` (an.summary, an.counters and the views before it in views.def
  /// are complete).
  virtual void Finish(Analysis&) {}
  /// The view's rows, unsorted and unfiltered.
  virtual std::vector<GroupRow> Rows(const Analysis&) { return {}; }
};

/// What a view is made with.
struct ViewContext {
  const Timeline& tl;
  ViewOptions opts;
  const DeviceKeys& devices;  ///< the physical devices of the run (the device view's rows)
};

/// Every view, in views.def's order.
std::vector<std::unique_ptr<View>> MakeViews(const ViewContext& ctx);
#define KPROF_VIEW(make) std::unique_ptr<View> make(const ViewContext&);
#include "analysis/views/views.def"
#undef KPROF_VIEW

// Shared by the views and the run's totals.

/// The graph a graph-level launch ran, when where its nodes were made is known.
const GraphInfo* CapturedGraph(const ProcessTimeline& t, const Record& r);
/// The signed size of a device allocation (+) or release (-); none for other records and for
/// host memory (pinned or pageable).
std::optional<int64_t> DeviceMemoryDelta(const Record& r);
/// Sorts rows by `sort`, then GPU time, then key.
void SortRows(std::vector<GroupRow>& rows, AnalysisOptions::Sort sort);
/// Sets the class (compute/memory/latency-bound) of each row's kernels and of the row, from the
/// measured kernels (nothing without counters).
void ClassifyGroups(const CounterSummary& counters, std::vector<GroupRow>& rows);
/// A graph launch's GPU time `dur` shared among the ranges its nodes were made in, by node
/// count: add(range, ns) for each (range -1: none; nodes made outside any range go, like
/// node-level work, to `inner`, the range open at the launch). The last share takes the rest;
/// n <= nodes, so each share <= dur, and it is split so that dur * n cannot wrap (hostile files).
template <typename Add>
void ShareGraphTime(const GraphInfo& g, uint64_t dur, int inner, Add&& add) {
  uint64_t given = 0;
  for (size_t j = 0; j < g.capture_ranges.size(); ++j) {
    const auto [range, n] = g.capture_ranges[j];
    const uint64_t ns = j + 1 == g.capture_ranges.size()
                            ? dur - given
                            : dur / g.nodes * n + dur % g.nodes * n / g.nodes;
    given += ns;
    add(range >= 0 ? range : inner, ns);
  }
}
/// "model.0|Linear" (after the module prefix) -> ("model.0", "Linear").
std::pair<std::string_view, std::string_view> SplitModuleName(std::string_view name);

}  // namespace kprof::detail
