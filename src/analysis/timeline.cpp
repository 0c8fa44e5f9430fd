// BuildTimeline: the per-process timeline of a run (kprof/timeline.h), built once and read by
// the views, the hints, the comparison and the Chrome trace writer.
#include "kprof/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_set>

#include "analysis/graphs.h"
#include "analysis/intervals.h"
#include "analysis/self_cost.h"
#include "kprof/analysis.h"

namespace kprof {
namespace {

using detail::Covered;
using detail::Interval;
using detail::Merge;

const char* SyncKindName(uint8_t k) {
  switch (static_cast<SyncKind>(k)) {
    case SyncKind::EventSynchronize:
      return "event synchronize";
    case SyncKind::StreamWaitEvent:
      return "stream wait event";
    case SyncKind::StreamSynchronize:
      return "stream synchronize";
    case SyncKind::ContextSynchronize:
      return "device synchronize";
    case SyncKind::Unknown:
      break;
  }
  return "synchronize";
}

/// Outermost API calls: driver calls made inside a runtime call on the same thread are that
/// runtime call's implementation and would count its time twice. Also the merged intervals of
/// the allocation calls among them.
void OutermostApis(const ProcessTrace& p, ProcessTimeline& t) {
  std::map<uint32_t, std::vector<Interval>> runtime_by_tid;
  // (Only needed when there are driver calls: PyTorch profiler traces have none.)
  if (std::any_of(p.records.begin(), p.records.end(),
                  [](const Record& r) { return r.Kind() == RecordKind::DriverApi; }))
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::RuntimeApi)
        runtime_by_tid[r.tid].emplace_back(r.start_ns, r.end_ns);
  for (auto& [tid, v] : runtime_by_tid) std::sort(v.begin(), v.end());
  std::vector<Interval> allocs, replays;
  for (const Record& r : p.records) {
    auto k = r.Kind();
    if (k == RecordKind::Overhead && (r.a == static_cast<uint32_t>(OverheadKind::CounterReplay) ||
                                      r.a == static_cast<uint32_t>(OverheadKind::CounterSetup)))
      replays.emplace_back(r.start_ns, r.end_ns);
    if (k != RecordKind::RuntimeApi && k != RecordKind::DriverApi) continue;
    if (k == RecordKind::DriverApi) {
      auto it = runtime_by_tid.find(r.tid);
      if (it != runtime_by_tid.end()) {
        auto& v = it->second;
        auto up = std::upper_bound(v.begin(), v.end(), Interval{r.start_ns, UINT64_MAX});
        if (up != v.begin() && std::prev(up)->second >= r.end_ns) continue;
      }
    }
    t.apis.push_back(&r);
    if (IsAllocApi(p.Name(r))) allocs.emplace_back(r.start_ns, r.end_ns);
  }
  t.alloc_calls = Merge(std::move(allocs));
  t.replays = Merge(std::move(replays));
}

/// GPU activities in time order with their launch's innermost range and first runs.
void Activities(const ProcessTrace& p, ProcessTimeline& t) {
  t.acts.reserve(
      static_cast<size_t>(std::count_if(p.records.begin(), p.records.end(),
                                        [](const Record& r) { return IsGpuActivity(r.Kind()); })));
  for (const Record& r : p.records)
    if (IsGpuActivity(r.Kind())) t.acts.push_back(&r);
  std::stable_sort(t.acts.begin(), t.acts.end(), [](const Record* a, const Record* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns < b->end_ns;
  });
  // Graph work without a correlation id of its own takes the launch of its graph that was
  // running: launches of one executable graph run one after the other, and acts are in start
  // order. A graph launched from the device takes the launch of the graph that launched it.
  std::unordered_map<uint32_t, uint32_t> running;  // graph id -> correlation of its latest launch
  for (const Record* a : t.acts) {
    uint32_t graph = 0, launcher = 0;
    if (a->Kind() == RecordKind::GraphLaunch) {
      graph = a->a;
      if ((a->flags & kGraphLaunchFromDevice) != 0) launcher = a->c;
    } else if (const uint64_t node = GraphNodeOf(*a); node != 0) {
      graph = static_cast<uint32_t>(node >> 32);
    }
    if (graph == 0) continue;
    if (a->correlation != 0) {
      running[graph] = a->correlation;
      continue;
    }
    auto it = running.find(launcher != 0 ? launcher : graph);
    if (it == running.end()) continue;
    t.inherited_correlation.emplace(a, it->second);
    running[graph] = it->second;
  }
  t.act_range.resize(t.acts.size(), -1);
  if (!t.index.modules.ranges.empty()) t.act_module.assign(t.acts.size(), -1);
  if (!t.index.sources.ranges.empty()) t.act_source.assign(t.acts.size(), -1);
  t.first_run.resize(t.acts.size());
  std::vector<bool> seen(p.strings.size());
  for (size_t i = 0; i < t.acts.size(); ++i) {
    const Record* a = t.acts[i];
    // Inside a graph: the op that captured the node, else (unknown node, or captured outside
    // any range) the range of the launch, as for any other work.
    const Record* at = nullptr;  // the call that launched it, or the capture of its node
    if (const uint64_t node = GraphNodeOf(*a); node != 0) {
      t.act_range[i] = t.graphs.CaptureRange(node);
      if (t.act_range[i] >= 0) at = t.graphs.made.find(node)->second;
    }
    if (t.act_range[i] < 0) {
      at = t.Api(*a);
      if (at != nullptr) t.act_range[i] = t.index.OpRangeAt(at->tid, at->start_ns);
    }
    // nn.Module and source line: the one open at the launch; for a backward node's work, the
    // one open when the forward op that made the node began. Work run while torch.compile
    // compiles (autotuning) belongs to no module.
    const auto open_at_launch = [&](const RangeForest& forest) {
      if (const int fwd = t.index.ForwardOf(t.act_range[i]); fwd >= 0) {
        const RangeInterval& f = t.index.ranges[static_cast<size_t>(fwd)];
        return forest.InnermostAt(f.tid, f.begin_ns);
      }
      if (at == nullptr || t.index.InBackward(t.act_range[i])) return -1;
      return forest.InnermostAt(at->tid, at->start_ns);
    };
    if (!t.act_module.empty() && t.index.RegionOf(t.act_range[i]) != ProcessIndex::kCompiling)
      t.act_module[i] = open_at_launch(t.index.modules);
    if (!t.act_source.empty()) t.act_source[i] = open_at_launch(t.index.sources);
    if (a->Kind() == RecordKind::Kernel && a->name < seen.size() && !seen[a->name]) {
      seen[a->name] = true;
      t.first_run[i] = true;
    }
  }
}

/// The capture windows (ProcessTimeline::windows), merged where a window's work runs into the
/// next window.
void Windows(const ProcessTrace& p, ProcessTimeline& t) {
  for (const Record& r : p.records)
    if (r.Kind() == RecordKind::CaptureWindow && r.start_ns != 0)
      t.windows.emplace_back(r.start_ns, std::max(r.start_ns, r.end_ns));
  if (t.windows.empty()) return;
  std::sort(t.windows.begin(), t.windows.end());
  for (const Record& r : p.records) {
    if (r.start_ns == 0 || r.Kind() == RecordKind::CaptureWindow) continue;
    auto it = std::upper_bound(t.windows.begin(), t.windows.end(), r.start_ns,
                               [](uint64_t v, const NsInterval& w) { return v < w.first; });
    if (it == t.windows.begin()) continue;  // before the first window (none should be)
    std::prev(it)->second = std::max(std::prev(it)->second, r.end_ns);
  }
  size_t n = 0;
  for (size_t i = 1; i < t.windows.size(); ++i) {
    if (t.windows[i].first <= t.windows[n].second) {
      t.windows[n].second = std::max(t.windows[n].second, t.windows[i].second);
    } else {
      t.windows[++n] = t.windows[i];
    }
  }
  t.windows.resize(n + 1);
}

/// Busy intervals and the gaps between them, each with the activity that ends it (counted
/// first, so that the vectors are allocated once at their final size).
void BusyAndGaps(ProcessTimeline& t) {
  size_t runs = 0;
  uint64_t end = 0;
  for (const Record* a : t.acts) {
    if (runs == 0 || a->start_ns > end) {
      ++runs;
      end = std::max(a->start_ns, a->end_ns);
    } else {
      end = std::max(end, a->end_ns);
    }
  }
  t.busy.reserve(runs);
  t.gaps.reserve(runs);
  for (size_t i = 0; i < t.acts.size(); ++i) {
    const Record* a = t.acts[i];
    uint64_t s = a->start_ns, e = std::max(a->start_ns, a->end_ns);
    if (!t.busy.empty() && s <= t.busy.back().second) {
      t.busy.back().second = std::max(t.busy.back().second, e);
      continue;
    }
    if (!t.busy.empty()) {
      Gap g;
      g.start_ns = t.busy.back().second;
      g.end_ns = s;
      g.next = static_cast<uint32_t>(i);
      t.gaps.push_back(g);
    }
    t.busy.emplace_back(s, e);
  }
}

/// Host waits: Sync records, synchronize calls without one, and synchronous copies.
void HostWaits(const ProcessTrace& p, ProcessTimeline& t) {
  std::unordered_set<uint32_t> sync_corr;
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::Sync) continue;
    if (static_cast<SyncKind>(r.flags) == SyncKind::StreamWaitEvent) continue;  // GPU-side wait
    if (r.correlation) sync_corr.insert(r.correlation);
    const Record* api = t.index.api_by_correlation.Find(r.correlation);
    t.waits.push_back({api, api ? p.Name(*api) : SyncKindName(r.flags), r.DurationNs(), r.end_ns});
  }
  for (const Record* api : t.apis)
    if (IsSyncApi(p.Name(*api)) && !sync_corr.count(api->correlation))
      t.waits.push_back({api, p.Name(*api), api->DurationNs(), api->end_ns});
  for (const Record* a : t.acts) {
    if (a->Kind() != RecordKind::Memcpy || (a->c & kCopyAsync)) continue;
    const Record* api = t.Api(*a);
    if (!api || p.Name(*api).find("Async") != std::string::npos) continue;
    // The wait is the part of the call before its copy began during which the GPU was busy
    // with earlier work (the implicit stream synchronization of a synchronous copy).
    uint64_t blocked = Covered(t.busy, api->start_ns, std::min(a->start_ns, api->end_ns));
    if (blocked == 0) continue;
    t.waits.push_back(
        {api, fmt::format("{} ({}, synchronous)", p.Name(*api), CopyKindName(a->flags, "copy")),
         blocked, api->end_ns});
  }
}

/// One-time set-up inside an op: a Long gap, or a warm-up gap of kLongGapNs or more, that lies
/// inside one call of a nested op range (the range open at mid-gap on the thread that launched
/// the work ending the gap, and still open at that launch), of an op with kSetupMinCalls calls
/// or more of which at most a quarter hold such a gap, and that had been called kSetupMinCalls
/// times before (set-up in an op's first calls is start-up). The other calls run without it, so
/// the gap is what those few calls set up: a plan, a compiled kernel, an autotuning result for a
/// shape or configuration the op had not seen.
void SetupGaps(ProcessTimeline& t) {
  const ProcessIndex& ix = t.index;
  struct Candidate {
    size_t gap;
    int range;
  };
  std::vector<Candidate> cands;
  for (size_t i = 0; i < t.gaps.size(); ++i) {
    const Gap& g = t.gaps[i];
    if (g.kind != GapKind::Long && !(g.kind == GapKind::Warmup && g.Len() >= kLongGapNs)) continue;
    if (t.StartUp(g.end_ns)) continue;  // start-up (SteadyState): not a shape's set-up
    const Record* api = t.Api(*t.acts[g.next]);
    if (api == nullptr) continue;
    const int r = ix.OpRangeAt(api->tid, g.start_ns + g.Len() / 2);
    if (r < 0) continue;
    const RangeInterval& call = ix.ranges[static_cast<size_t>(r)];
    if (call.depth == 0 || api->start_ns < call.begin_ns || api->start_ns > call.end_ns) continue;
    cands.push_back({i, r});
  }
  if (cands.empty()) return;
  // Per op: when its calls began, and the calls that hold a candidate gap.
  struct Op {
    std::vector<uint64_t> begins;
    std::unordered_set<int> with_gap;
  };
  std::unordered_map<std::string_view, Op> ops;
  for (const Candidate& c : cands)
    ops[ix.Name(static_cast<size_t>(c.range))].with_gap.insert(c.range);
  for (size_t i = 0; i < ix.ranges.size(); ++i)
    if (auto it = ops.find(ix.Name(i)); it != ops.end())
      it->second.begins.push_back(ix.ranges[i].begin_ns);
  for (auto& [name, op] : ops) std::sort(op.begins.begin(), op.begins.end());
  for (const Candidate& c : cands) {
    const Op& op = ops[ix.Name(static_cast<size_t>(c.range))];
    const uint64_t calls = op.begins.size();
    if (calls < kSetupMinCalls || op.with_gap.size() * 4 > calls) continue;
    const uint64_t begin = ix.ranges[static_cast<size_t>(c.range)].begin_ns;
    const auto before = static_cast<uint64_t>(
        std::lower_bound(op.begins.begin(), op.begins.end(), begin) - op.begins.begin());
    if (before < kSetupMinCalls) continue;
    Gap& g = t.gaps[c.gap];
    if (g.kind == GapKind::Warmup) {
      uint64_t rest = g.Len() - g.wait_ns;
      g.rest_ns = rest - std::min(rest, Covered(t.alloc_calls, g.start_ns, g.end_ns));
    }
    g.kind = GapKind::Setup;
  }
}

/// The start of the repeated part: the first call of a root module (a module range with no
/// module around it) that is called twice or more (a model called once per step, or once per
/// generated token): of those, the one called first, so that a module called often late in the
/// run (a metric at validation) never makes the training before it start-up.
void SteadyState(const ProcessTrace& p, ProcessTimeline& t) {
  struct Root {
    uint64_t calls = 0, first = UINT64_MAX;
  };
  std::unordered_map<std::string_view, Root> roots;
  for (const RangeInterval& r : t.index.modules.ranges) {
    if (r.depth != 0 || r.start == nullptr) continue;
    Root& root = roots[p.strings.Get(r.start->name)];
    ++root.calls;
    root.first = std::min(root.first, r.begin_ns);
  }
  const std::pair<const std::string_view, Root>* best = nullptr;
  for (const auto& e : roots)
    if (e.second.calls >= 2 && (best == nullptr || e.second.first < best->second.first)) best = &e;
  if (best == nullptr) return;
  t.steady_from_ns = best->second.first;
  std::string_view name = best->first.substr(kModuleRangePrefix.size());
  t.steady_from_what = std::string(name.substr(0, name.find('|')));
}

/// Classifies each gap: first the waits released in it (capped by the time blocked), then
/// one-time warm-up, then the host work after the waits, then host time in alloc/free calls, then
/// long gaps or short ones before a kernel, then one-time set-up inside ops (SetupGaps). The rest
/// never overlaps what the waits, the work after them or the alloc/free calls explain.
void ClassifyGaps(ProcessTimeline& t) {
  std::vector<uint64_t> released(t.gaps.size(), 0);  // the last wait released in each gap
  for (const HostWait& w : t.waits) {
    auto it = std::upper_bound(t.gaps.begin(), t.gaps.end(), w.release_ns,
                               [](uint64_t v, const Gap& g) { return v < g.start_ns; });
    if (it == t.gaps.begin()) continue;
    --it;
    if (w.release_ns >= it->end_ns) continue;
    it->wait_ns += w.blocked_ns;
    uint64_t& last = released[static_cast<size_t>(it - t.gaps.begin())];
    last = std::max(last, w.release_ns);
  }
  // Index of the first kernel at or after each activity (one backward pass; acts.size() = none).
  std::vector<uint32_t> next_kernel(t.acts.size() + 1, static_cast<uint32_t>(t.acts.size()));
  for (size_t i = t.acts.size(); i-- > 0;)
    next_kernel[i] =
        t.acts[i]->Kind() == RecordKind::Kernel ? static_cast<uint32_t>(i) : next_kernel[i + 1];
  for (size_t gi = 0; gi < t.gaps.size(); ++gi) {
    Gap& g = t.gaps[gi];
    g.wait_ns = std::min(g.Len(), g.wait_ns);
    if (!t.windows.empty() && Covered(t.windows, g.start_ns, g.end_ns) < g.Len()) {
      g.kind = GapKind::Unrecorded;  // it spans time between capture windows
      continue;
    }
    // Before the repeated part: start-up, whatever follows (SteadyState), its waits included.
    if (t.StartUp(g.end_ns)) {
      g.kind = GapKind::Warmup;
      g.wait_ns = 0;
      continue;
    }
    // Warm-up: the first kernel after the gap (a library's first call often begins with a
    // memset or copy, a training loop with an input upload) runs for the first time: module
    // loading, library set-up, autotuning, the program's own initialisation.
    if (uint32_t k = next_kernel[g.next]; k < t.acts.size() && t.first_run[k]) {
      g.kind = GapKind::Warmup;
      continue;
    }
    // The program's own work after the wait: from its release to the call that launched the
    // next activity, outside alloc/free calls.
    if (const uint64_t from = std::max(released[gi], g.start_ns); released[gi] != 0) {
      const Record* api = t.Api(*t.acts[g.next]);
      if (api != nullptr && api->start_ns > from) {
        const uint64_t to = std::min(api->start_ns, g.end_ns);
        uint64_t host = to - from;
        host -= std::min(host, Covered(t.alloc_calls, from, to));
        host -= std::min(host, Covered(t.replays, from, to));
        if (host >= kHostWorkAfterWaitNs) {
          g.host_ns = host;
          g.host_at = from - g.start_ns;
        }
      }
    }
    uint64_t rest = g.Len() - std::min(g.Len(), g.explained_ns());
    rest -= std::min(rest, Covered(t.alloc_calls, g.start_ns, g.end_ns));
    rest -= std::min(rest, Covered(t.replays, g.start_ns, g.end_ns));
    if (g.Len() >= kLongGapNs) {
      g.kind = GapKind::Long;
      g.rest_ns = rest;
    } else if (t.acts[g.next]->Kind() == RecordKind::Kernel && GraphNodeOf(*t.acts[g.next]) == 0) {
      // (A gap before a node of a CUDA graph is inside a graph launch: the host launched the
      // graph once, and no launch of its own delays the node.)
      g.kind = GapKind::Short;
      g.rest_ns = rest;
    }
  }
  SetupGaps(t);
}

}  // namespace

bool IsSyncApi(std::string_view n) {
  static const std::unordered_set<std::string_view> k = {
      "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
      "cudaThreadSynchronize", "cuCtxSynchronize",      "cuStreamSynchronize",
      "cuEventSynchronize"};
  return k.count(n) != 0;
}

GraphApi GraphApiOf(std::string_view n) {
  const auto starts = [&](std::string_view runtime, std::string_view driver) {
    return n.substr(0, runtime.size()) == runtime || n.substr(0, driver.size()) == driver;
  };
  if (starts("cudaGraphInstantiate", "cuGraphInstantiate")) return GraphApi::Instantiate;
  if (starts("cudaStreamBeginCapture", "cuStreamBeginCapture")) return GraphApi::BeginCapture;
  if (starts("cudaStreamEndCapture", "cuStreamEndCapture")) return GraphApi::EndCapture;
  if (starts("cudaGraphLaunch", "cuGraphLaunch")) return GraphApi::Launch;
  return GraphApi::None;
}

bool IsAllocApi(std::string_view n) {
  static const std::unordered_set<std::string_view> k = {"cudaMalloc",
                                                         "cudaFree",
                                                         "cudaMallocAsync",
                                                         "cudaFreeAsync",
                                                         "cudaMallocManaged",
                                                         "cudaMallocPitch",
                                                         "cudaMalloc3D",
                                                         "cudaMallocHost",
                                                         "cudaHostAlloc",
                                                         "cudaFreeHost",
                                                         "cudaMallocFromPoolAsync",
                                                         "cudaMallocArray",
                                                         "cudaFreeArray",
                                                         "cuMemAlloc",
                                                         "cuMemFree",
                                                         "cuMemAllocAsync",
                                                         "cuMemFreeAsync",
                                                         "cuMemAllocHost",
                                                         "cuMemFreeHost",
                                                         "cuMemAllocManaged",
                                                         "cuMemAllocPitch",
                                                         "cuMemHostAlloc",
                                                         "cuMemAllocFromPoolAsync"};
  return k.count(n) != 0;
}

std::string ProcessTimeline::OpAt(uint32_t tid, uint64_t t) const {
  int i = index.OpRangeAt(tid, t);
  return i < 0 ? "(no range)" : std::string(index.Name(static_cast<size_t>(i)));
}

std::string ProcessTimeline::OpOfActivity(size_t i) const {
  int r = act_range[i];
  return r < 0 ? "(no range)" : std::string(index.Name(static_cast<size_t>(r)));
}

Timeline BuildTimeline(const Run& run) {
  Timeline tl;
  tl.run = &run;
  tl.names = std::make_unique<std::unordered_set<std::string>>();
  tl.processes.reserve(run.processes.size());
  for (const ProcessTrace& p : run.processes) {
    ProcessTimeline& t = tl.processes.emplace_back();
    t.process = &p;
    t.index = BuildIndex(p);
    OutermostApis(p, t);
    detail::BuildGraphIndex(p, t.index, t.graphs);
    Activities(p, t);
    Windows(p, t);
    BusyAndGaps(t);
    HostWaits(p, t);
    SteadyState(p, t);
    ClassifyGaps(t);
    detail::TakeOutSelfCost(t);
    // Kernel display names, as the views show them, once per name.
    t.kernel_names.assign(p.strings.size(), nullptr);
    t.unnamed = &*tl.names->insert("(unnamed)").first;
    for (const Record* a : t.acts) {
      if ((a->Kind() != RecordKind::Kernel && a->Kind() != RecordKind::GraphLaunch) ||
          a->name >= t.kernel_names.size() || t.kernel_names[a->name] != nullptr)
        continue;
      std::string name = Demangle(p.Name(*a));
      if (name.empty()) name = "(unnamed)";
      t.kernel_names[a->name] = &*tl.names->insert(std::move(name)).first;
    }
  }
  return tl;
}

}  // namespace kprof
