// The run's totals over the pass of Analyze (totals.h).
#include "analysis/totals.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "analysis/accumulators.h"

namespace kprof::detail {
namespace {

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

/// A process's capture windows (docs/capture.md): named in the run's summary; a process that
/// asked for windows and recorded none, or whose windows hold no work, says why, as far as its
/// meta tells.
void CaptureOf(const ProcessTrace& p, const ProcessTimeline& t, const ProcessSummary& ps,
               RunSummary& S) {
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
  const auto say = [&](const std::string& why) {
    S.capture_problem +=
        (S.capture_problem.empty() ? "" : "; ") + fmt::format("pid {}: {}", p.pid, why);
  };
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
    say(why);
    return;
  }
  std::string why = "its window never opened";
  if (capture == "on-demand") {
    why = "no window was asked for (kprof capture)";
  } else if (capture.rfind("nvtx:", 0) == 0 && p.meta.count("capture_nvtx_ranges")) {
    const uint64_t ranges = p.MetaU64("capture_nvtx_ranges");
    why += ranges == 0 ? " (no NVTX range reached kprof)"
                       : fmt::format(" (no range '{}' among its {} NVTX ranges)", capture.substr(5),
                                     ranges);
  } else if (capture == "cuda-profiler-api" && p.meta.count("capture_windows")) {
    why += " (no cudaProfilerStart)";
  } else if (!p.complete) {
    why += " (the process ended without closing its file)";
  }
  say(why);
}

/// The devices of a process's meta (the agent's DEVICE records: device.<id>.*), each once.
void DevicesOf(const ProcessTrace& p, RunSummary& S) {
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

}  // namespace

RunTotals::RunTotals(const Timeline& tl, const DeviceKeys& devices, Analysis& an, bool timeline)
    : tl_(tl),
      devices_(devices),
      an_(an),
      S(an.summary),
      timeline_(timeline),
      spans_(tl.processes.size()),
      proc_busy_(tl.processes.size()) {}

void RunTotals::BeginProcess(const ProcessPass& pp) {
  const ProcessTrace& p = pp.p;
  ps_ = ProcessSummary();
  ps_.pid = p.pid;
  ps_.rank = p.rank;
  ps_.source = p.source;
  ps_.complete = p.complete;
  pfirst_ = UINT64_MAX;
  plast_ = 0;
  launched_.assign(p.records.size(), false);
  launches_ = 0;
  ++S.processes;
  if (!p.complete) ++S.incomplete_processes;
  S.dropped_records += p.stats.dropped_records;
  S.missing_timestamps += p.stats.missing_timestamps;
  if (!pp.ix.pytorch_added.empty()) S.pytorch_added = pp.ix.pytorch_added;
  if (auto py = p.meta.find("pytorch"); py != p.meta.end()) S.pytorch_mode = py->second;
  if (auto o = p.meta.find("op_observer"); o != p.meta.end() && !o->second.empty())
    S.pytorch_ops = o->second;
  if (S.steady_from.empty()) S.steady_from = pp.t.steady_from_what;
  // kprof's own cost taken out of the priced gaps (docs/hints.md, "kprof's own cost").
  if (pp.t.self_cost) {
    S.self_cost_ns += pp.t.self_cost_ns;
    if (!S.self_cost) S.self_cost = pp.t.self_cost;
  } else {
    ++S.self_cost_unmeasured;
  }
}

void RunTotals::Note(const ProcessPass&, const Record& r) {
  const auto k = r.Kind();
  if (k == RecordKind::Invalid) return;
  const uint64_t s = r.start_ns, e = std::max(r.start_ns, r.end_ns);
  if (s || IsGpuActivity(k)) {  // 0 is "no timestamp", except for GPU work (rebased traces)
    pfirst_ = std::min(pfirst_, s);
    plast_ = std::max(plast_, e);
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
    case RecordKind::MemFree:
      if (const auto delta = DeviceMemoryDelta(r)) {
        (k == RecordKind::MemAlloc ? S.allocs : S.frees) += 1;
        mem_.push_back({r.start_ns, r.device, *delta});
      }
      break;
    case RecordKind::CaptureWindow:
      ++ps_.windows;
      break;
    case RecordKind::Overhead:
      S.overhead_ns += r.DurationNs();
      break;
    default:
      break;
  }
}

void RunTotals::Activity(const ProcessPass& pp, const ActivityEvent& a) {
  const Record& r = a.r;
  const auto k = r.Kind();
  auto [sit, fresh] =
      streams_.try_emplace({r.device, r.tid}, static_cast<uint32_t>(stream_acc_.size()));
  if (fresh) stream_acc_.emplace_back();
  ++stream_acc_[sit->second].second;
  if (k == RecordKind::Kernel) {
    ++S.kernels;
    S.kernel_ns += r.DurationNs();
    ++ps_.kernels;
    ps_.kernel_ns += r.DurationNs();
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
  // Start-up work (before the repeated part; docs/hints.md, "Start-up and the steady state").
  if (pp.t.StartUp(r.end_ns)) {
    if (k == RecordKind::Memcpy) {
      ++S.startup_copies;
      S.startup_copy_bytes += r.bytes;
      S.startup_copy_ns += r.DurationNs();
    } else if (k == RecordKind::Kernel) {
      ++S.startup_kernels;
    }
  }
  // Launching calls: each once (a graph launch starts many kernels).
  if (const Record* api = pp.t.Api(r); api != nullptr && k == RecordKind::Kernel) {
    auto idx = static_cast<size_t>(api - pp.p.records.data());
    if (!launched_[idx]) {
      launched_[idx] = true;
      ++launches_;
    }
  }
}

void RunTotals::EndProcess(const ProcessPass& pp) {
  const ProcessTimeline& t = pp.t;
  const ProcessTrace& p = pp.p;
  CaptureOf(p, t, ps_, S);
  S.launches += launches_;
  S.graph_captures += t.graphs.captures;
  S.graph_instantiations += t.graphs.instantiations;
  if (auto dg = p.meta.find("device_graph_trace"); dg == p.meta.end() || dg->second != "on")
    S.graph_device_unrecorded += t.graphs.device_launch_execs;
  S.api_ns += ApiTimeNs(t);
  if (pfirst_ != UINT64_MAX) {
    first_ = std::min(first_, pfirst_);
    last_ = std::max(last_, plast_);
    ps_.wall_ns = plast_ - pfirst_;
    if (!t.windows.empty()) {
      ps_.wall_ns = Length(t.windows);
      spans_[pp.index] = Merge(t.windows);
    } else {
      spans_[pp.index] = {{pfirst_, plast_}};
    }
    const auto& span = spans_[pp.index];
    recorded_.insert(recorded_.end(), span.begin(), span.end());
  }
  an_.processes.push_back(ps_);
  DevicesOf(p, S);
}

void RunTotals::EndProcesses() {
  if (first_ == UINT64_MAX) return;
  S.start_ns = first_;
  S.end_ns = last_;
  S.wall_ns = last_ - first_;
  // With capture windows, the time recorded: the union of every process's windows (and the
  // spans of processes recorded whole).
  if (!S.capture.empty()) S.wall_ns = Length(Merge(std::move(recorded_)));
}

void RunTotals::Busy(size_t process, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e) {
  const Record& r = *t.acts[i];
  all_.Add(s, e);
  proc_busy_[process].Add(s, e);
  stream_acc_[streams_.find({r.device, r.tid})->second].first.Add(s, e);
  if (r.Kind() == RecordKind::Kernel) {
    kern_.Add(s, e);
    kern_or_copy_.Add(s, e);
  } else if (r.Kind() == RecordKind::Memcpy) {
    copy_.Add(s, e);
    kern_or_copy_.Add(s, e);
  }
}

void RunTotals::Finish() {
  for (size_t i = 0; i < proc_busy_.size() && i < an_.processes.size(); ++i)
    an_.processes[i].gpu_busy_ns = proc_busy_[i].Total();
  S.gpu_busy_ns = all_.Total();
  S.gpu_idle_ns = S.wall_ns > S.gpu_busy_ns ? S.wall_ns - S.gpu_busy_ns : 0;
  S.utilisation =
      S.wall_ns ? static_cast<double>(S.gpu_busy_ns) / static_cast<double>(S.wall_ns) : 0;
  S.launch_rate_per_s =
      S.wall_ns ? static_cast<double>(S.launches) * 1e9 / static_cast<double>(S.wall_ns) : 0;
  // |K ∩ C| = |K| + |C| - |K ∪ C| for the unions of kernel and copy intervals.
  S.copy_compute_overlap_ns = kern_.Total() + copy_.Total() - kern_or_copy_.Total();
  for (const auto& [key, i] : streams_)
    S.streams.push_back(
        {key.first, key.second, stream_acc_[i].first.Total(), stream_acc_[i].second});

  // Per GPU and per rank (docs/distributed.md). With several GPUs, GPU busy time and
  // utilisation are per GPU: the sum of each GPU's busy time, over the sum of their wall times
  // (a union over GPUs would hide one GPU's idle time behind another's work).
  an_.dist = SummarizeDistributed(tl_, devices_, spans_);
  S.gpus = an_.dist.devices.size();
  if (S.gpus > 1) {
    uint64_t busy_sum = 0, wall_sum = 0;
    for (const DeviceUsage& d : an_.dist.devices) {
      busy_sum += d.busy_ns;
      wall_sum += d.wall_ns;
    }
    S.gpu_busy_ns = busy_sum;
    S.gpu_idle_ns = wall_sum - busy_sum;
    S.utilisation = wall_sum ? static_cast<double>(busy_sum) / static_cast<double>(wall_sum) : 0;
  }

  // Device memory timeline and peak (sum over devices).
  std::stable_sort(mem_.begin(), mem_.end(),
                   [](const MemEvent& a, const MemEvent& b) { return a.t < b.t; });
  std::map<uint16_t, int64_t> in_use;
  int64_t total = 0;
  for (const auto& m : mem_) {
    SatAdd(in_use[m.dev], m.delta);
    SatAdd(total, m.delta);
    S.peak_memory_bytes = std::max(S.peak_memory_bytes, total);
    if (timeline_) an_.memory_timeline.push_back({m.t, m.dev, in_use[m.dev]});
  }
}

}  // namespace kprof::detail
