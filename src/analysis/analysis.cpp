// Views and run-level totals over attributed activities. See analysis.h for the definitions.
#include "kprof/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <queue>
#include <regex>
#include <unordered_map>
#include <unordered_set>

#include "analysis/accumulators.h"
#include "analysis/counters.h"
#include "analysis/graphs.h"
#include "analysis/intervals.h"

namespace kprof {
namespace {

using detail::GroupAcc;
using detail::Interval;
using detail::KernelAcc;
using detail::SatAdd;
using detail::UnionAcc;

const char* kNoRange = "(no range)";

std::string StreamKey(uint16_t dev, uint32_t stream) {
  return "dev " + std::to_string(dev) + " stream " + std::to_string(stream);
}

void SortRows(std::vector<GroupRow>& rows, AnalysisOptions::Sort sort) {
  std::sort(rows.begin(), rows.end(), [sort](const GroupRow& x, const GroupRow& y) {
    switch (sort) {
      case AnalysisOptions::Sort::Calls:
        if (x.calls != y.calls) return x.calls > y.calls;
        break;
      case AnalysisOptions::Sort::Cpu:
        if (x.cpu_ns != y.cpu_ns) return x.cpu_ns > y.cpu_ns;
        break;
      case AnalysisOptions::Sort::Name:
        return x.key < y.key;
      case AnalysisOptions::Sort::Gpu:
        break;
    }
    if (x.gpu_ns != y.gpu_ns) return x.gpu_ns > y.gpu_ns;
    return x.key < y.key;
  });
}

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

/// Time in API calls: per thread, the length of the union of the outermost calls (a driver call
/// made inside a runtime call adds nothing to it). Calls of a thread are usually in time order:
/// one pass; otherwise that thread's intervals are sorted first.
uint64_t ApiTimeNs(const ProcessTimeline& t) {
  struct Thread {
    UnionAcc busy;
    uint64_t last_start = 0;
    bool ordered = true;
  };
  std::unordered_map<uint32_t, Thread> threads;
  for (const Record* a : t.apis) {
    Thread& th = threads[a->tid];
    if (a->start_ns < th.last_start) th.ordered = false;
    th.last_start = a->start_ns;
    if (th.ordered) th.busy.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
  }
  uint64_t total = 0;
  std::unordered_map<uint32_t, std::vector<Interval>> unordered;  // one more pass, if any
  for (auto& [tid, th] : threads) {
    if (th.ordered)
      total += th.busy.Total();
    else
      unordered[tid];
  }
  if (unordered.empty()) return total;
  for (const Record* a : t.apis)
    if (auto it = unordered.find(a->tid); it != unordered.end())
      it->second.emplace_back(a->start_ns, std::max(a->start_ns, a->end_ns));
  for (auto& [tid, iv] : unordered) total += UnionLength(iv);
  return total;
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
  }
  return "op";
}

uint64_t UnionLength(std::vector<std::pair<uint64_t, uint64_t>>& intervals) {
  std::sort(intervals.begin(), intervals.end());  // in place: no second list
  UnionAcc u;
  for (const auto& [s, e] : intervals) u.Add(s, std::max(s, e));
  return u.Total();
}

namespace {

/// The accumulator of a module, a source line or a compiled region: its row, its `kind`
/// (GroupRow::kind) and its work's intervals, for the projected time.
struct ViewAcc {
  GroupAcc acc;
  std::string kind;
  std::vector<Interval> intervals;
  void Add(const Record& r, const std::string& kernel_name) {
    acc.AddActivity(r, kernel_name);
    intervals.emplace_back(r.start_ns, std::max(r.start_ns, r.end_ns));
  }
  GroupRow Row(const std::string& key, uint64_t busy_ns) {
    GroupRow row = acc.Row(key, busy_ns);
    row.gpu_projected_ns = UnionLength(intervals);
    row.kind = kind;
    return row;
  }
};

/// The key with the most nanoseconds in `ns` ("" when empty; ties: the smaller key).
std::string Top(const std::map<std::string, uint64_t>& ns) {
  const std::pair<const std::string, uint64_t>* best = nullptr;
  for (const auto& kv : ns)
    if (best == nullptr || kv.second > best->second) best = &kv;
  return best ? best->first : std::string();
}

/// "model.0|Linear" (after the prefix) -> ("model.0", "Linear").
std::pair<std::string_view, std::string_view> SplitModuleName(std::string_view name) {
  name.remove_prefix(std::min(name.size(), kModuleRangePrefix.size()));
  const size_t bar = name.rfind('|');
  if (bar == std::string_view::npos) return {name, {}};
  return {name.substr(0, bar), name.substr(bar + 1)};
}

/// Module rows in tree order: each module after its parent (the longest dotted prefix that is
/// a module too), siblings by GPU time; depth set.
std::vector<GroupRow> ModuleTree(std::vector<GroupRow> rows) {
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < rows.size(); ++i) at[rows[i].key] = i;
  std::vector<std::vector<size_t>> children(rows.size());
  std::vector<size_t> roots;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string_view k = rows[i].key;
    size_t parent = SIZE_MAX;
    for (size_t dot = k.rfind('.'); dot != std::string_view::npos && dot > 0;
         dot = k.rfind('.', dot - 1)) {
      auto it = at.find(std::string(k.substr(0, dot)));
      if (it != at.end()) {
        parent = it->second;
        break;
      }
    }
    (parent == SIZE_MAX ? roots : children[parent]).push_back(i);
  }
  const auto by_gpu = [&](size_t a, size_t b) {
    return rows[a].gpu_ns != rows[b].gpu_ns ? rows[a].gpu_ns > rows[b].gpu_ns
                                            : rows[a].key < rows[b].key;
  };
  std::vector<GroupRow> out;
  std::vector<std::pair<size_t, uint32_t>> stack;  // (row, depth), depth first
  std::sort(roots.begin(), roots.end(), by_gpu);
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.emplace_back(*it, 0);
  while (!stack.empty()) {
    auto [i, depth] = stack.back();
    stack.pop_back();
    rows[i].depth = depth;
    out.push_back(rows[i]);
    std::sort(children[i].begin(), children[i].end(), by_gpu);
    for (auto it = children[i].rbegin(); it != children[i].rend(); ++it)
      stack.emplace_back(*it, depth + 1);
  }
  return out;
}

/// The graph a graph-level launch ran, when where its nodes were made is known.
const GraphInfo* CapturedGraph(const ProcessTimeline& t, const Record& r) {
  if (r.Kind() != RecordKind::GraphLaunch) return nullptr;
  auto it = t.graphs.graphs.find(r.a);
  if (it == t.graphs.graphs.end() || it->second.nodes == 0 || it->second.capture_ranges.empty())
    return nullptr;
  return &it->second;
}

/// A process's capture windows (docs/capture.md; ps.windows counted in the pass over its
/// records): named in the run's summary; a process that asked for windows and recorded none, or
/// whose windows hold no work, says why, as far as its meta tells.
void CaptureOf(const ProcessTrace& p, const ProcessTimeline& t, ProcessSummary& ps, RunSummary& S) {
  const std::string& capture = p.Meta("capture");
  if (capture.empty()) return;
  if (S.capture.empty()) {
    S.capture = capture;
  } else if (("," + S.capture + ",").find("," + capture + ",") == std::string::npos) {
    S.capture += "," + capture;
  }
  S.capture_windows += ps.windows;
  // A process that made no CUDA context (a launcher that only counted the GPUs, such as
  // torchrun's) had nothing to record.
  if (p.Meta("contexts") == "0") return;
  if (ps.windows > 0) {
    // Windows that hold no work at all: they closed before the program launched any (a
    // --duration shorter than what the program does before its first launch).
    if (!t.acts.empty() || !t.apis.empty()) return;
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::GraphLaunch) return;
    uint64_t inside = 0;
    for (const auto& [from, to] : t.windows) inside += to - from;
    std::string why =
        fmt::format("its window{} ({}) closed before the program launched any GPU work",
                    ps.windows == 1 ? "" : "s", FormatDuration(inside));
    const uint64_t start = p.MetaU64("start_time_ns"), context = p.MetaU64("first_context_ns");
    if (start != 0 && context >= start)
      why += fmt::format(" (its first CUDA context was ready {} after CUDA started)",
                         FormatDuration(context - start));
    S.capture_problem +=
        (S.capture_problem.empty() ? "" : "; ") + fmt::format("pid {}: {}", p.pid, why);
    return;
  }
  std::string why = "its window never opened";
  if (capture.rfind("nvtx:", 0) == 0 && p.meta.count("capture_nvtx_ranges")) {
    const uint64_t ranges = p.MetaU64("capture_nvtx_ranges");
    why += ranges == 0 ? " (no NVTX range reached kprof)"
                       : fmt::format(" (no range '{}' among its {} NVTX ranges)", capture.substr(5),
                                     ranges);
  } else if (capture == "cuda-profiler-api" && p.meta.count("capture_windows")) {
    why += " (no cudaProfilerStart)";
  } else if (!p.complete) {
    why += " (the process ended without closing its file)";
  }
  const std::string line = fmt::format("pid {}: {}", p.pid, why);
  S.capture_problem += (S.capture_problem.empty() ? "" : "; ") + line;
}

}  // namespace

Analysis Analyze(const Timeline& tl, const AnalysisOptions& opts) {
  Analysis an;
  an.by = opts.by;
  // The views accumulated in this pass: the requested one, or every one (all_views).
  const auto want = [&](GroupBy by) { return opts.by == by || opts.all_views; };
  RunSummary& S = an.summary;
  std::optional<std::regex> filter;
  if (!opts.filter.empty()) {
    try {
      filter.emplace(opts.filter, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      throw InputError("--filter '" + opts.filter + "': invalid regular expression");
    }
  }

  // The accumulators each process's GPU activities feed, kept until every process is read: the
  // intervals are then merged in one pass in time order (no per-group interval lists).
  using GroupIt = std::map<std::string, GroupAcc>::iterator;
  struct Feeds {
    std::vector<GroupAcc*> op_of;                        ///< per range of the process's index
    std::vector<GroupIt> path_of;                        ///< per range
    std::unordered_map<uint32_t, KernelAcc*> kernel_of;  ///< by kernel name id
    GroupAcc *no_op = nullptr, *no_path = nullptr;
  };
  std::vector<Feeds> feeds(tl.processes.size());
  std::map<std::pair<uint16_t, uint32_t>, uint32_t> streams;  ///< (device, stream) -> index
  std::vector<std::pair<UnionAcc, uint64_t>> stream_acc;      ///< busy, activities
  std::map<std::string, KernelAcc> kernels;
  std::map<std::string, GroupAcc> ops, paths, view_stream, view_device;
  std::map<std::string, ViewAcc> modules, sources, compiled;
  // --pytorch stack: GPU time per (op, source line), for the op's top line and the line's top op.
  std::map<std::string, std::map<std::string, uint64_t>> op_lines, line_ops;
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<uint64_t>, uint32_t>> ranges;
  struct MemEvent {
    uint64_t t;
    uint16_t dev;
    int64_t delta;
  };
  std::vector<MemEvent> mem;
  // The device view's rows: one per physical GPU (DeviceKeys), whatever ordinal each process
  // gave it.
  const DeviceKeys device_keys(tl);
  std::vector<GroupAcc*> device_row(device_keys.Devices().size());
  // The time each process was recorded (its windows, or its first to last record): the wall
  // time of the devices it used (docs/distributed.md).
  std::vector<std::vector<NsInterval>> spans(tl.processes.size());
  uint64_t first = UINT64_MAX, last = 0;
  std::vector<Interval> recorded;  ///< each process's windows, or its span when recorded whole
  for (const ProcessTimeline& t : tl.processes) {
    const ProcessTrace& p = *t.process;
    const ProcessIndex& ix = t.index;
    ProcessSummary ps;
    ps.pid = p.pid;
    ps.rank = p.rank;
    ps.source = p.source;
    ps.complete = p.complete;
    uint64_t pfirst = UINT64_MAX, plast = 0;
    Feeds& fd = feeds[an.processes.size()];
    ++S.processes;
    if (!p.complete) ++S.incomplete_processes;
    S.dropped_records += p.stats.dropped_records;
    S.missing_timestamps += p.stats.missing_timestamps;

    // Launching calls already counted, by record index (graph launches start many kernels).
    std::vector<bool> launched(p.records.size());
    uint64_t launches = 0;

    // Ranges: calls and CPU time by name, path and op (innermost name). Map entries are looked
    // up once per distinct name (or parent path and name) and reached by pointer afterwards:
    // PyTorch traces hold millions of ranges over a few hundred names.
    std::vector<GroupAcc*>& op_of = fd.op_of;
    std::vector<GroupIt>& path_of = fd.path_of;
    op_of.resize(ix.ranges.size());
    path_of.resize(ix.ranges.size());
    std::unordered_map<uint64_t, std::pair<std::vector<uint64_t>, uint32_t>*> range_acc;
    std::unordered_map<uint32_t, GroupAcc*> op_acc;
    std::map<std::pair<const GroupAcc*, uint32_t>, GroupIt> path_acc;  // (parent, name) -> path
    for (size_t i = 0; i < ix.ranges.size(); ++i) {
      const auto& r = ix.ranges[i];
      uint64_t dur = r.end_ns - r.begin_ns;
      const uint32_t name_id = r.start->name;
      auto& rr = range_acc[(uint64_t{name_id} << 32) | r.start->b];
      if (rr == nullptr) rr = &ranges[{std::string(ix.Name(i)), p.strings.Get(r.start->b)}];
      rr->first.push_back(dur);
      rr->second = std::max(rr->second, r.depth);
      GroupAcc*& op = op_acc[name_id];
      if (op == nullptr) {
        op = &ops[std::string(ix.Name(i))];
        S.aten_ranges |= ix.Name(i).starts_with("aten::");
      }
      op_of[i] = op;
      ++op->calls;
      op->cpu_ns += dur;
      const GroupAcc* parent =
          r.parent >= 0 ? &path_of[static_cast<size_t>(r.parent)]->second : nullptr;
      auto pit = path_acc.find({parent, name_id});
      if (pit == path_acc.end()) {
        std::string path = r.parent >= 0 ? path_of[static_cast<size_t>(r.parent)]->first + "/" +
                                               std::string(ix.Name(i))
                                         : std::string(ix.Name(i));
        pit =
            path_acc.emplace(std::make_pair(parent, name_id), paths.try_emplace(path).first).first;
        // Kernel rows beneath a path are shown only in the range-path view.
        pit->second->second.with_kernels = want(GroupBy::RangePath);
      }
      path_of[i] = pit->second;
      ++path_of[i]->second.calls;
      path_of[i]->second.cpu_ns += dur;
      ++S.nvtx_ranges;
    }
    // nn.Module ranges (kprof run --pytorch): calls and CPU time per qualified name.
    std::vector<ViewAcc*> module_of(ix.modules.ranges.size());
    {
      std::unordered_map<uint32_t, ViewAcc*> by_name;
      for (size_t i = 0; i < ix.modules.ranges.size(); ++i) {
        const RangeInterval& r = ix.modules.ranges[i];
        ViewAcc*& m = by_name[r.start->name];
        if (m == nullptr) {
          auto [name, kind] = SplitModuleName(p.strings.Get(r.start->name));
          m = &modules[std::string(name)];
          m->acc.with_kernels = false;
          if (m->kind.empty()) m->kind = kind;
        }
        module_of[i] = m;
        ++m->acc.calls;
        m->acc.cpu_ns += r.end_ns - r.begin_ns;
      }
    }
    // Source lines (--pytorch stack): calls and CPU time per FILE:LINE.
    std::vector<std::pair<const std::string*, ViewAcc*>> source_of(ix.sources.ranges.size());
    for (size_t i = 0; i < ix.sources.ranges.size(); ++i) {
      const RangeInterval& r = ix.sources.ranges[i];
      std::string_view line = p.strings.Get(r.start->name);
      line.remove_prefix(std::min(line.size(), kSourceRangePrefix.size()));
      auto it = sources.try_emplace(std::string(line)).first;
      it->second.acc.with_kernels = false;
      source_of[i] = {&it->first, &it->second};
      ++it->second.acc.calls;
      it->second.acc.cpu_ns += r.end_ns - r.begin_ns;
    }
    // torch.compile: the outermost op range of each entry into a compiled region gives the
    // region's calls, CPU time and the module that called it.
    std::vector<ViewAcc*> region_acc(ix.regions.size());
    for (size_t g = 0; g < ix.regions.size(); ++g) region_acc[g] = &compiled[ix.regions[g]];
    for (size_t i = 0; i < ix.region_of.size(); ++i) {
      const int reg = ix.region_of[i];
      const RangeInterval& r = ix.ranges[i];
      if (reg < 0 || (r.parent >= 0 && ix.region_of[static_cast<size_t>(r.parent)] == reg))
        continue;
      ViewAcc& acc = *region_acc[static_cast<size_t>(reg)];
      ++acc.acc.calls;
      acc.acc.cpu_ns += r.end_ns - r.begin_ns;
      if (!acc.kind.empty() || reg == ProcessIndex::kCompiling) continue;
      const int fwd = ix.ForwardOf(static_cast<int>(i));
      const RangeInterval& at = fwd >= 0 ? ix.ranges[static_cast<size_t>(fwd)] : r;
      if (const int m = ix.modules.InnermostAt(at.tid, at.begin_ns); m >= 0)
        acc.kind =
            SplitModuleName(p.strings.Get(ix.modules.ranges[static_cast<size_t>(m)].start->name))
                .first;
    }
    ViewAcc* eager = ix.regions.empty() ? nullptr : &compiled[std::string(kEagerRegion)];
    if (!ix.pytorch_added.empty()) S.pytorch_added = ix.pytorch_added;
    if (auto py = p.meta.find("pytorch"); py != p.meta.end()) S.pytorch_mode = py->second;
    std::vector<ViewAcc*> chain;

    GroupAcc*& no_op = fd.no_op;
    GroupAcc*& no_path = fd.no_path;
    const auto no_range = [&]() {
      if (no_op == nullptr) {
        no_op = &ops[kNoRange];
        no_path = &paths[kNoRange];
        no_path->with_kernels = want(GroupBy::RangePath);
      }
      return std::make_pair(no_op, no_path);
    };

    for (const Record& r : p.records) {
      auto k = r.Kind();
      if (k == RecordKind::Invalid) continue;
      uint64_t s = r.start_ns, e = std::max(r.start_ns, r.end_ns);
      if (s || IsGpuActivity(k)) {  // 0 is "no timestamp", except for GPU work (rebased traces)
        pfirst = std::min(pfirst, s);
        plast = std::max(plast, e);
      }
      switch (k) {
        case RecordKind::Sync:
          ++S.syncs;
          S.sync_ns += r.DurationNs();
          break;
        case RecordKind::RuntimeApi:
        case RecordKind::DriverApi:
          ++S.api_calls;
          break;
        case RecordKind::MemAlloc:
        case RecordKind::MemFree: {
          // Device memory only: pinned or pageable host allocations (cudaHostAlloc) are not.
          auto mk = static_cast<MemKind>(r.c);
          if (mk == MemKind::Pinned || mk == MemKind::Pageable) break;
          bool alloc = k == RecordKind::MemAlloc;
          alloc ? ++S.allocs : ++S.frees;
          const auto bytes = static_cast<int64_t>(std::min<uint64_t>(r.bytes, INT64_MAX));
          const int64_t delta = alloc ? bytes : -bytes;
          mem.push_back({r.start_ns, r.device, delta});
          // Memory change per op: the op open on the thread of the allocating API call.
          if (const Record* api = ix.api_by_correlation.Find(r.correlation)) {
            int inner = ix.InnermostAt(api->tid, api->start_ns);
            if (inner < 0) {
              SatAdd(ops[kNoRange].mem_delta, delta);
            } else {
              SatAdd(op_of[static_cast<size_t>(inner)]->mem_delta, delta);
              SatAdd(path_of[static_cast<size_t>(inner)]->second.mem_delta, delta);
            }
          }
          break;
        }
        case RecordKind::CaptureWindow:
          ++ps.windows;
          break;
        case RecordKind::Overhead:
          S.overhead_ns += r.DurationNs();
          break;
        default:
          break;
      }
    }

    // GPU activities, in time order, with the range open at their launch.
    for (size_t i = 0; i < t.acts.size(); ++i) {
      const Record& r = *t.acts[i];
      const auto k = r.Kind();
      auto [sit, fresh] =
          streams.try_emplace({r.device, r.tid}, static_cast<uint32_t>(stream_acc.size()));
      if (fresh) stream_acc.emplace_back();
      ++stream_acc[sit->second].second;
      const std::string& kname = k == RecordKind::Kernel ? t.KernelName(r) : p.Name(r);
      if (k == RecordKind::Kernel) {
        ++S.kernels;
        S.kernel_ns += r.DurationNs();
        ++ps.kernels;
        ps.kernel_ns += r.DurationNs();
        KernelAcc*& ka = fd.kernel_of[r.name];
        if (ka == nullptr) ka = &kernels[kname];
        ka->Add(r);
      } else if (k == RecordKind::Memcpy) {
        ++S.memcpys;
        S.memcpy_ns += r.DurationNs();
        size_t ck = r.flags < 6 ? r.flags : 0;
        S.memcpy_bytes[ck] += r.bytes;
        ++S.memcpy_count[ck];
      } else if (k == RecordKind::Memset) {
        ++S.memsets;
        S.memset_bytes += r.bytes;
      } else {
        ++S.graph_launches;
        S.graph_ns += r.DurationNs();
        if ((r.flags & kGraphLaunchFromDevice) != 0) ++S.graph_device_launches;
      }
      if (k != RecordKind::GraphLaunch && GraphNodeOf(r) != 0) ++S.graph_node_activities;

      // Attribution to the launching call and the innermost range open on its thread.
      if (const Record* api = t.Api(r); api != nullptr && k == RecordKind::Kernel) {
        auto idx = static_cast<size_t>(api - p.records.data());
        if (!launched[idx]) {
          launched[idx] = true;
          ++launches;
        }
      }
      const int inner_range = t.act_range[i];
      if (const GraphInfo* g = CapturedGraph(t, r)) {
        // A graph launched as a whole: its GPU time is shared among the ranges its nodes were
        // captured in, by node count (the graph's own row is in the graph view). Nodes captured
        // outside any range go, like node-level work, to the range of the launch.
        const uint64_t dur = r.DurationNs();
        uint64_t given = 0;
        for (size_t j = 0; j < g->capture_ranges.size(); ++j) {
          const auto [range, n] = g->capture_ranges[j];
          // n <= nodes, so each share <= dur; split so that dur * n cannot wrap (hostile files;
          // (dur % nodes) * n < nodes * n, and nodes counts records of one file).
          const uint64_t ns = j + 1 == g->capture_ranges.size()
                                  ? dur - given
                                  : dur / g->nodes * n + dur % g->nodes * n / g->nodes;
          given += ns;
          const int to = range >= 0 ? range : inner_range;
          if (to < 0) {
            no_range().first->AddGraphShare(ns);
            no_range().second->AddGraphShare(ns);
            an.unattributed_gpu_ns += ns;
          } else {
            op_of[static_cast<size_t>(to)]->AddGraphShare(ns);
            path_of[static_cast<size_t>(to)]->second.AddGraphShare(ns);
          }
        }
      } else if (inner_range < 0) {
        no_range();
        no_op->AddActivity(r, kname);
        no_path->AddActivity(r, kname);
        an.unattributed_gpu_ns += r.DurationNs();
      } else {
        const auto inner = static_cast<size_t>(inner_range);
        op_of[inner]->AddActivity(r, kname);
        path_of[inner]->second.AddActivity(r, kname);
        // Backward work: also priced on the forward op whose autograd node ran it.
        if (const int fwd = ix.ForwardOf(inner_range); fwd >= 0) {
          op_of[static_cast<size_t>(fwd)]->bwd_gpu_ns += r.DurationNs();
          S.backward_linked_ns += r.DurationNs();
        }
      }
      // nn.Module: the module open at the launch and every module around it (each once).
      chain.clear();
      for (int m = t.ModuleOf(i); m >= 0; m = ix.modules.ranges[static_cast<size_t>(m)].parent) {
        ViewAcc* acc = module_of[static_cast<size_t>(m)];
        if (std::find(chain.begin(), chain.end(), acc) == chain.end()) chain.push_back(acc);
      }
      const bool backward = ix.InBackward(inner_range);
      for (ViewAcc* acc : chain) {
        acc->Add(r, kname);
        if (backward) acc->acc.bwd_gpu_ns += r.DurationNs();
      }
      // Source line of the program (--pytorch stack), with the op it called.
      if (const int src = t.SourceOf(i); src >= 0) {
        auto [line, acc] = source_of[static_cast<size_t>(src)];
        acc->Add(r, kname);
        if (backward) acc->acc.bwd_gpu_ns += r.DurationNs();
        if (inner_range >= 0) {
          // The op's row names the line; the line's row names the op it called (for backward
          // work, the forward op whose backward it is).
          op_lines[std::string(ix.Name(inner_range))][*line] += r.DurationNs();
          const int fwd = ix.ForwardOf(inner_range);
          line_ops[*line][std::string(ix.Name(fwd >= 0 ? fwd : inner_range))] += r.DurationNs();
        }
      }
      // Compiled code (torch.compile): its region, or eager.
      if (eager != nullptr) {
        const int reg = ix.RegionOf(inner_range);
        (reg < 0 ? eager : region_acc[static_cast<size_t>(reg)])->Add(r, kname);
      }
      if (want(GroupBy::Stream)) view_stream[StreamKey(r.device, r.tid)].AddActivity(r, kname);
      if (want(GroupBy::Device)) {
        const size_t d = device_keys.Index(an.processes.size(), r.device);
        if (device_row[d] == nullptr) device_row[d] = &view_device[device_keys.Devices()[d]];
        device_row[d]->AddActivity(r, kname);
      }
    }

    CaptureOf(p, t, ps, S);
    S.launches += launches;
    S.graph_captures += t.graphs.captures;
    S.graph_instantiations += t.graphs.instantiations;
    if (auto dg = p.meta.find("device_graph_trace"); dg == p.meta.end() || dg->second != "on")
      S.graph_device_unrecorded += t.graphs.device_launch_execs;
    S.api_ns += ApiTimeNs(t);
    if (pfirst != UINT64_MAX) {
      first = std::min(first, pfirst);
      last = std::max(last, plast);
      ps.wall_ns = plast - pfirst;
      if (!t.windows.empty()) {
        ps.wall_ns = detail::Length(t.windows);
        spans[an.processes.size()] = detail::Merge(t.windows);
      } else {
        spans[an.processes.size()] = {{pfirst, plast}};
      }
      const auto& span = spans[an.processes.size()];
      recorded.insert(recorded.end(), span.begin(), span.end());
    }
    an.processes.push_back(ps);

    // Devices from the agent's DEVICE records (meta keys device.<id>.*).
    for (const auto& [key, value] : p.meta) {
      if (key.rfind("device.", 0) != 0 || key.size() < 13 || key.substr(key.size() - 5) != ".name")
        continue;
      std::string id_s = key.substr(7, key.size() - 12);
      if (id_s.empty() || id_s.find_first_not_of("0123456789") != std::string::npos) continue;
      DeviceInfo d;
      d.id = static_cast<uint16_t>(std::strtoul(id_s.c_str(), nullptr, 10));
      const std::string& name = value;  // clang 14 cannot capture a structured binding
      if (std::any_of(S.devices.begin(), S.devices.end(),
                      [&](const DeviceInfo& x) { return x.id == d.id && x.name == name; }))
        continue;
      d.name = value;
      std::string pre = "device." + id_s + ".";
      d.sm_count = static_cast<uint32_t>(p.MetaU64(pre + "sm_count"));
      d.memory_bytes = p.MetaU64(pre + "memory_bytes");
      auto cc = p.meta.find(pre + "cc");
      if (cc != p.meta.end()) d.compute_capability = cc->second;
      S.devices.push_back(d);
    }
  }

  // Run level.
  if (first != UINT64_MAX) {
    S.start_ns = first;
    S.end_ns = last;
    S.wall_ns = last - first;
    // With capture windows, the time recorded: the union of every process's windows (and the
    // spans of processes recorded whole).
    if (!S.capture.empty()) S.wall_ns = detail::Length(detail::Merge(std::move(recorded)));
  }
  // Every union in one pass over the activities of all processes in start order: a merge of
  // the timeline's per-process lists, which are in start order already.
  UnionAcc all, kern, copy, kern_or_copy;
  std::vector<UnionAcc> proc_busy(an.processes.size());
  std::vector<UnionAcc> device_busy(device_row.size());
  ForEachActivityInStartOrder(tl, [&](size_t proc, size_t i) {
    const ProcessTimeline& t = tl.processes[proc];
    const Feeds& fd = feeds[proc];
    const Record& r = *t.acts[i];
    uint64_t s = r.start_ns, e = std::max(r.start_ns, r.end_ns);
    all.Add(s, e);
    proc_busy[proc].Add(s, e);
    stream_acc[streams.find({r.device, r.tid})->second].first.Add(s, e);
    if (want(GroupBy::Device)) device_busy[device_keys.Index(proc, r.device)].Add(s, e);
    if (r.Kind() == RecordKind::Kernel) {
      kern.Add(s, e);
      kern_or_copy.Add(s, e);
      fd.kernel_of.find(r.name)->second->busy.Add(s, e);
    } else if (r.Kind() == RecordKind::Memcpy) {
      copy.Add(s, e);
      kern_or_copy.Add(s, e);
    }
    if (const GraphInfo* g = CapturedGraph(t, r)) {
      for (const auto& [range, n] : g->capture_ranges) {
        const int to = range >= 0 ? range : t.act_range[i];
        if (to < 0) {
          fd.no_op->busy.Add(s, e);
          fd.no_path->busy.Add(s, e);
        } else {
          fd.op_of[static_cast<size_t>(to)]->busy.Add(s, e);
          fd.path_of[static_cast<size_t>(to)]->second.busy.Add(s, e);
        }
      }
    } else if (const int inner = t.act_range[i]; inner < 0) {
      fd.no_op->busy.Add(s, e);
      fd.no_path->busy.Add(s, e);
    } else {
      fd.op_of[static_cast<size_t>(inner)]->busy.Add(s, e);
      fd.path_of[static_cast<size_t>(inner)]->second.busy.Add(s, e);
    }
  });
  std::vector<Feeds>().swap(feeds);
  for (size_t i = 0; i < proc_busy.size(); ++i) an.processes[i].gpu_busy_ns = proc_busy[i].Total();
  S.gpu_busy_ns = all.Total();
  S.gpu_idle_ns = S.wall_ns > S.gpu_busy_ns ? S.wall_ns - S.gpu_busy_ns : 0;
  S.utilisation =
      S.wall_ns ? static_cast<double>(S.gpu_busy_ns) / static_cast<double>(S.wall_ns) : 0;
  S.launch_rate_per_s =
      S.wall_ns ? static_cast<double>(S.launches) * 1e9 / static_cast<double>(S.wall_ns) : 0;
  // |K ∩ C| = |K| + |C| - |K ∪ C| for the unions of kernel and copy intervals.
  S.copy_compute_overlap_ns = kern.Total() + copy.Total() - kern_or_copy.Total();
  for (const auto& [key, i] : streams)
    S.streams.push_back({key.first, key.second, stream_acc[i].first.Total(), stream_acc[i].second});
  // The stream and device views group exactly like these unions.
  for (const auto& [key, i] : streams) {
    auto it = view_stream.find(StreamKey(key.first, key.second));
    if (it != view_stream.end()) it->second.busy = stream_acc[i].first;
  }
  for (size_t d = 0; d < device_row.size(); ++d)
    if (device_row[d] != nullptr) device_row[d]->busy = device_busy[d];

  // Per GPU and per rank (docs/distributed.md). With several GPUs, GPU busy time and
  // utilisation are per GPU: the sum of each GPU's busy time, over the sum of their wall times
  // (a union over GPUs would hide one GPU's idle time behind another's work).
  an.dist = SummarizeDistributed(tl, device_keys, spans);
  S.gpus = an.dist.devices.size();
  if (S.gpus > 1) {
    uint64_t busy_sum = 0, wall_sum = 0;
    for (const DeviceUsage& d : an.dist.devices) {
      busy_sum += d.busy_ns;
      wall_sum += d.wall_ns;
    }
    S.gpu_busy_ns = busy_sum;
    S.gpu_idle_ns = wall_sum - busy_sum;
    S.utilisation = wall_sum ? static_cast<double>(busy_sum) / static_cast<double>(wall_sum) : 0;
  }

  // Device memory timeline and peak (sum over devices).
  std::stable_sort(mem.begin(), mem.end(),
                   [](const MemEvent& a, const MemEvent& b) { return a.t < b.t; });
  std::map<uint16_t, int64_t> in_use;
  int64_t total = 0;
  for (const auto& m : mem) {
    SatAdd(in_use[m.dev], m.delta);
    SatAdd(total, m.delta);
    S.peak_memory_bytes = std::max(S.peak_memory_bytes, total);
    if (opts.timeline) an.memory_timeline.push_back({m.t, m.dev, in_use[m.dev]});
  }

  // Views.
  const uint64_t busy = S.gpu_busy_ns;
  for (auto& [name, acc] : kernels) an.kernels.push_back(acc.Row(name, busy));
  std::sort(an.kernels.begin(), an.kernels.end(), [](const KernelRow& x, const KernelRow& y) {
    return x.stat.total_ns != y.stat.total_ns ? x.stat.total_ns > y.stat.total_ns : x.name < y.name;
  });
  for (auto& [name, acc] : ops) {
    if (acc.gpu_ns == 0 && acc.kernels + acc.memcpys + acc.memsets == 0 && name == kNoRange)
      continue;
    an.ops.push_back(acc.Row(name, busy));
  }
  SortRows(an.ops, AnalysisOptions::Sort::Gpu);

  // Hardware counters: each measured kernel's class, and the class of each group's kernels.
  an.counters = detail::SummarizeCounters(tl);
  const auto bound_of = [&](const std::string& kernel) {
    const KernelCounters* k = an.counters.Find(kernel);
    return k != nullptr ? k->bound : Bound::Unknown;
  };
  const auto classify_groups = [&](std::vector<GroupRow>& rows) {
    if (an.counters.kernels.empty()) return;
    for (GroupRow& g : rows) {
      for (KernelRow& k : g.kernel_rows) k.bound = bound_of(k.name);
      g.bound = detail::GroupBound(g.kernel_rows);
    }
  };
  if (!an.counters.kernels.empty()) {
    for (KernelRow& k : an.kernels) k.bound = bound_of(k.name);
    classify_groups(an.ops);
  }

  // The rows of one view, unfiltered and unsorted. Each view's accumulators are read once.
  const auto view_rows = [&](GroupBy by) {
    std::vector<GroupRow> rows;
    switch (by) {
      case GroupBy::Kernel:
        for (const auto& k : an.kernels) {
          GroupRow g;
          g.key = k.name;
          g.calls = k.stat.count;
          g.kernels = k.stat.count;
          g.gpu_ns = k.stat.total_ns;
          g.share = k.share;
          g.bound = k.bound;
          auto it = kernels.find(g.key);
          if (it != kernels.end()) g.gpu_projected_ns = it->second.busy.Total();
          rows.push_back(g);
        }
        break;
      case GroupBy::Op:
        rows = an.ops;
        break;
      case GroupBy::RangePath:
        for (auto& [key, acc] : paths)
          if (acc.gpu_ns || acc.calls) rows.push_back(acc.Row(key, busy));
        classify_groups(rows);
        break;
      case GroupBy::Stream:
        for (auto& [key, acc] : view_stream) {
          acc.calls = acc.kernels + acc.memcpys + acc.memsets;
          rows.push_back(acc.Row(key, busy));
        }
        break;
      case GroupBy::Device:
        // A device's share is its busy time's (not its work's, which overlaps itself across
        // streams): the devices' shares add up to 100%.
        for (auto& [key, acc] : view_device) {
          acc.calls = acc.kernels + acc.memcpys + acc.memsets;
          rows.push_back(acc.Row(key, busy));
          rows.back().share =
              busy ? static_cast<double>(rows.back().gpu_projected_ns) / static_cast<double>(busy)
                   : 0;
        }
        break;
      case GroupBy::Module:
        rows = an.modules;
        break;
      case GroupBy::Source:
        rows = an.sources;
        break;
      case GroupBy::Compiled:
        rows = an.compiled;
        break;
      case GroupBy::Graph:
        for (const GraphRow& gr : an.graphs) {
          GroupRow g;
          g.key = gr.Key();
          g.calls = gr.launches;
          g.gpu_ns = gr.per_launch.total_ns;
          // GPU time: the launches' spans (first node's start to last node's end); projected:
          // the union of the work, without the idle time inside launches (node-level).
          g.gpu_projected_ns = gr.busy_ns;
          g.kernels = gr.node_activities;
          g.share = busy ? static_cast<double>(gr.busy_ns) / static_cast<double>(busy) : 0;
          rows.push_back(std::move(g));
        }
        break;
    }
    return rows;
  };
  an.graphs = detail::GraphRows(tl);
  for (auto& [name, m] : modules) an.modules.push_back(m.Row(name, busy));
  an.modules = ModuleTree(std::move(an.modules));
  for (auto& [line, m] : sources) {
    m.kind = Top(line_ops[line]);
    an.sources.push_back(m.Row(line, busy));
  }
  SortRows(an.sources, AnalysisOptions::Sort::Gpu);
  for (auto& [name, m] : compiled) an.compiled.push_back(m.Row(name, busy));
  SortRows(an.compiled, AnalysisOptions::Sort::Gpu);
  if (!op_lines.empty())
    for (GroupRow& op : an.ops)
      if (auto it = op_lines.find(op.key); it != op_lines.end()) op.source = Top(it->second);
  an.rows = view_rows(opts.by);
  if (opts.all_views) {
    for (GroupBy by : {GroupBy::RangePath, GroupBy::Stream, GroupBy::Device}) {
      std::vector<GroupRow> rows = by == opts.by ? an.rows : view_rows(by);
      SortRows(rows, AnalysisOptions::Sort::Gpu);
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
    SortRows(an.rows, opts.sort);
  if (opts.top && an.rows.size() > opts.top) an.rows.resize(opts.top);

  for (auto& [key, v] : ranges) {
    RangeRow rr;
    rr.name = key.first;
    rr.domain = key.second;
    rr.stat = MakeStat(v.first);
    rr.calls = rr.stat.count;
    rr.max_depth = v.second;
    an.ranges.push_back(std::move(rr));
  }
  std::sort(an.ranges.begin(), an.ranges.end(), [](const RangeRow& x, const RangeRow& y) {
    return x.stat.total_ns != y.stat.total_ns ? x.stat.total_ns > y.stat.total_ns : x.name < y.name;
  });
  return an;
}

}  // namespace kprof
