// Kernel replay with the range profiler, from the launch callbacks: see counters_internal.h and
// docs/counters.md.
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/capture.h"
#include "agent/counters_internal.h"

namespace kprof::agent::counters {

// ---------------------------------------------------------------------------------------------
// Replay: the range profiler, started in a launch's enter callback and stopped in its exit.

ReplayState& Replay() {
  static auto* s = new ReplayState();
  return *s;
}
thread_local bool t_replaying = false;
thread_local uint64_t t_enter_ns = 0;
thread_local CUcontext t_ctx = nullptr;

std::string Demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : name;
  std::free(d);
  return out;
}

// Whether this launch of `name` is one to replay (caller holds Replay().mu). In top-N mode: a
// name the tally of the trace ranks in the top N, and, before the tally knows a name, its first
// launches while fewer than N names have been replayed (a program that queues all its launches
// before the first activity buffer arrives gets its kernels measured all the same; the tally then
// adds the top N it learns, so at most 2N names are replayed).
bool Selected(ReplayState& rs, const std::string& name) {
  // A collective's kernel waits on the other ranks: replayed in one process alone it never ends
  // (a 2-rank DDP job hung on its first NCCL kernel, H200). Never replayed, whatever selects it.
  if (IsCommKernelName(name)) return false;
  auto it = rs.profiled.find(name);
  if (it != rs.profiled.end() && it->second >= g_set.launches) return false;
  if (g_set.use_regex || !g_set.named.empty()) {
    auto m = rs.matches.find(name);
    if (m == rs.matches.end()) {
      const std::string shown = Demangled(name.c_str());
      bool yes = g_set.named.count(name) > 0 || g_set.named.count(shown) > 0;
      if (g_set.use_regex) yes = yes || std::regex_search(shown, g_set.regex);
      m = rs.matches.emplace(name, yes).first;
    }
    return m->second;
  }
  {
    std::lock_guard<std::mutex> lock(rs.tally_mu);
    if (rs.top.count(name) > 0) return true;
    if (rs.tally.count(name) > 0) return false;  // the trace knows it: not a top one
  }
  return it != rs.profiled.end() || rs.profiled.size() < g_set.top;
}

std::string ReplayAccount() {
  if (!g_set.replay) return "";
  ReplayState& rs = Replay();
  std::vector<std::pair<uint64_t, const std::string*>> order;
  std::string out;
  std::lock_guard<std::mutex> lock(rs.mu);
  std::lock_guard<std::mutex> tally(rs.tally_mu);
  for (const auto& entry : rs.seen) {
    const std::string& name = entry.first;
    auto t = rs.tally.find(name);
    order.emplace_back(t == rs.tally.end() ? 0 : t->second, &name);
  }
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : *x.second < *y.second;
  });
  if (order.size() > kMaxAccountNames) order.resize(kMaxAccountNames);
  for (const auto& [ns, name] : order) {
    const ReplayState::Seen& s = rs.seen.at(*name);
    auto p = rs.profiled.find(*name);
    out += std::to_string(p == rs.profiled.end() ? 0 : p->second) + '\t' +
           std::to_string(s.launches) + '\t' + std::to_string(s.selected) + '\t' +
           std::to_string(s.busy) + '\t' + std::to_string(s.failed) + '\t' +
           std::to_string(s.captured) + '\t' + (rs.top.count(*name) > 0 ? "1" : "0") + '\t' +
           *name + '\n';
  }
  return out;
}

ReplayContext* SetUpReplay(ReplayContext& c, CUcontext ctx);
ReplayContext* EnableReplay(ReplayContext& c, CUcontext ctx);

ReplayContext* ContextFor(ReplayState& rs, CUcontext ctx) {
  auto [it, fresh] = rs.contexts.try_emplace(ctx);
  ReplayContext& c = it->second;
  if (!fresh) {
    if (!c.ok) return nullptr;
    if (c.obj != nullptr) return &c;
    c.ok = false;
    return EnableReplay(c, ctx);  // disabled after its last replay
  }
  const uint64_t t0 = Now();
  ReplayContext* out = SetUpReplay(c, ctx);
  if (g_debug)
    std::fprintf(stderr, "kprof agent: counters: replay set up in %.1f ms%s\n", (Now() - t0) * 1e-6,
                 out != nullptr ? "" : " (failed)");
  return out;
}

ReplayContext* SetUpReplay(ReplayContext& c, CUcontext ctx) {
  if (!InitProfiler()) return nullptr;
  uint32_t device = 0;
  if (!Ok(cuptiGetDeviceId(ctx, &device), "cuptiGetDeviceId")) return nullptr;
  c.device = device;
  const std::string chip = ChipName(device);
  if (chip.empty()) return nullptr;
  KPROF_PARAMS(CUpti_Profiler_GetCounterAvailability_Params, ca);
  ca.ctx = ctx;
  if (!Ok(cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability"))
    return nullptr;
  std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
  ca.pCounterAvailabilityImage = avail.data();
  if (!Ok(cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability"))
    return nullptr;
  if (!Configure(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, avail, ReplayMetrics(), false, c.config))
    return nullptr;
  return EnableReplay(c, ctx);
}

// The target half of a set-up: the range profiler enabled on the context and configured.
ReplayContext* EnableReplay(ReplayContext& c, CUcontext ctx) {
  KPROF_PARAMS(CUpti_RangeProfiler_Enable_Params, en);
  en.ctx = ctx;
  if (!Ok(cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable")) return nullptr;
  c.obj = en.pRangeProfilerObject;
  KPROF_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params, cs);
  cs.pRangeProfilerObject = c.obj;
  cs.pMetricNames = c.config.ptrs.data();
  cs.numMetrics = c.config.ptrs.size();
  cs.maxNumOfRanges = 1;
  cs.maxNumRangeTreeNodes = 1;
  if (!Ok(cuptiRangeProfilerGetCounterDataSize(&cs), "cuptiRangeProfilerGetCounterDataSize"))
    return nullptr;
  c.data.assign(cs.counterDataSize, 0);
  KPROF_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, ci);
  ci.pRangeProfilerObject = c.obj;
  ci.counterDataSize = c.data.size();
  ci.pCounterData = c.data.data();
  if (!Ok(cuptiRangeProfilerCounterDataImageInitialize(&ci),
          "cuptiRangeProfilerCounterDataImageInitialize"))
    return nullptr;
  c.blank = c.data;
  KPROF_PARAMS(CUpti_RangeProfiler_SetConfig_Params, sc);
  sc.pRangeProfilerObject = c.obj;
  sc.configSize = c.config.image.size();
  sc.pConfig = c.config.image.data();
  sc.counterDataImageSize = c.data.size();
  sc.pCounterDataImage = c.data.data();
  sc.range = CUPTI_AutoRange;
  sc.replayMode = CUPTI_KernelReplay;
  sc.maxRangesPerPass = 1;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  if (!Ok(cuptiRangeProfilerSetConfig(&sc), "cuptiRangeProfilerSetConfig")) return nullptr;
  c.ok = true;
  return &c;
}

// The stream a launch call queues its kernel on.
CUstream LaunchStream(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return static_cast<const cuLaunchKernel_params*>(params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return static_cast<const cuLaunchKernel_ptsz_params*>(params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_params*>(params)->config;
      return c != nullptr ? c->hStream : nullptr;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_ptsz_params*>(params)->config;
      return c != nullptr ? c->hStream : nullptr;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return static_cast<const cuLaunchCooperativeKernel_params*>(params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(params)->hStream;
    default:
      return nullptr;
  }
}

// Whether a launch on `stream` is being captured into a CUDA graph (it runs nothing now: there
// is no kernel to replay, and starting the range profiler inside a capture broke the capture on
// the H200, CUPTI 13.0). A stream whose status cannot be read counts as capturing.
bool Capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS) return true;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool IsLaunch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
}

void DisableReplay(ReplayContext& c) {
  if (c.obj == nullptr) return;
  KPROF_PARAMS(CUpti_RangeProfiler_Disable_Params, di);
  di.pRangeProfilerObject = c.obj;
  Ok(cuptiRangeProfilerDisable(&di), "cuptiRangeProfilerDisable");
  c.obj = nullptr;
}

void StopReplayAtExit() {
  ReplayState& rs = Replay();
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    rs.closed = true;
  }
  // A replay still running on another thread ends within its launch.
  if (!rs.replay_mu.try_lock_for(std::chrono::milliseconds(kExitFlushTimeoutMs))) return;
  for (auto& [ctx, c] : rs.contexts) {
    DisableReplay(c);
    FreeHost(c.config.host);
    c.config.host = nullptr;
    c.ok = false;
  }
  rs.replay_mu.unlock();
}

void OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
  if (cb.symbolName == nullptr || cb.context == nullptr) return;
  if (OutsideWindow()) return;  // --capture: replays only inside the windows
  ReplayState& rs = Replay();
  const std::string name = cb.symbolName;
  const uint64_t enter_ns = Now();  // kprof's cost includes setting the profiler up
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    if (rs.closed) return;
    ReplayState::Seen& seen = rs.seen[name];
    ++seen.launches;
    if (!Selected(rs, name)) return;
    ++seen.selected;
  }
  if (Capturing(LaunchStream(cbid, cb.functionParams))) {
    std::lock_guard<std::mutex> lock(rs.mu);
    ReplayState::Seen& seen = rs.seen[name];
    --seen.selected;
    ++seen.captured;
    return;
  }
  if (!rs.replay_mu.try_lock()) {  // another thread is replaying
    std::lock_guard<std::mutex> lock(rs.mu);
    ++rs.seen[name].busy;
    return;
  }
  bool still = false;  // (checked again: it may have been replayed meanwhile)
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    still = !rs.closed && Selected(rs, name);
  }
  const auto failed = [&] {
    std::lock_guard<std::mutex> lock(rs.mu);
    ++rs.seen[name].failed;
  };
  ReplayContext* c = still ? ContextFor(rs, cb.context) : nullptr;  // under replay_mu
  if (c == nullptr) {
    if (still) failed();
    rs.replay_mu.unlock();
    return;
  }
  KPROF_PARAMS(CUpti_RangeProfiler_Start_Params, st);
  st.pRangeProfilerObject = c->obj;
  if (!Ok(cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart")) {
    c->ok = false;  // this context replays no more
    failed();
    rs.replay_mu.unlock();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    ++rs.profiled[name];
    if (!rs.exit_handler) rs.exit_handler = std::atexit(StopReplayAtExit) == 0;
  }
  {
    // Pending until the exit callback: a (forced) flush can hand the kernel's record to the
    // writer before then, which then keeps it back.
    std::lock_guard<std::mutex> lock(rs.times_mu);
    rs.times[cb.correlationId] = {0, 0};
  }
  t_replaying = true;
  t_ctx = cb.context;
  t_enter_ns = enter_ns;
  // replay_mu stays locked until this launch's exit callback, on this thread.
}

void OnLaunchExit(const CUpti_CallbackData& cb) {
  if (!t_replaying) return;
  t_replaying = false;
  ReplayState& rs = Replay();
  ReplayContext& c = rs.contexts[t_ctx];
  KPROF_PARAMS(CUpti_RangeProfiler_Stop_Params, sp);
  sp.pRangeProfilerObject = c.obj;
  bool ok = Ok(cuptiRangeProfilerStop(&sp), "cuptiRangeProfilerStop");
  KPROF_PARAMS(CUpti_RangeProfiler_DecodeData_Params, dd);
  dd.pRangeProfilerObject = c.obj;
  ok = ok && Ok(cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData");
  KPROF_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, gi);
  gi.pCounterDataImage = c.data.data();
  gi.counterDataImageSize = c.data.size();
  ok = ok && Ok(cuptiRangeProfilerGetCounterDataInfo(&gi), "cuptiRangeProfilerGetCounterDataInfo");
  const uint64_t exit_ns = Now();
  if (g_debug)
    std::fprintf(stderr, "kprof agent: counters: replay of %s: %.1f ms\n",
                 cb.symbolName != nullptr ? cb.symbolName : "?", (exit_ns - t_enter_ns) * 1e-6);
  std::vector<double> values;
  if (ok && gi.numTotalRanges >= 1 && Evaluate(c.config, c.data, 0, values)) {
    if (sp.isAllPassSubmitted == 0) Problem("a kernel replay did not submit all its passes");
    uint64_t duration = 0;
    for (size_t m = 0; m < values.size(); ++m) {
      if (!std::isfinite(values[m])) continue;
      Record r;
      r.kind = static_cast<uint8_t>(RecordKind::KernelMetric);
      r.device = static_cast<uint16_t>(c.device);
      r.correlation = cb.correlationId;
      r.start_ns = r.end_ns = exit_ns;
      r.a = static_cast<uint32_t>(c.config.passes);
      SetMetricValue(r, values[m]);
      Emit(r, c.config.names[m]);
      if (c.config.names[m] == kKernelDurationMetric)
        duration = static_cast<uint64_t>(std::max(0.0, values[m]));
    }
    std::lock_guard<std::mutex> lock(rs.times_mu);
    if (duration > 0) {
      rs.times[cb.correlationId] = {exit_ns, duration};
    } else {
      rs.times.erase(cb.correlationId);
    }
  } else {
    if (ok) Problem("a kernel replay measured no range");
    if (cb.symbolName != nullptr) {
      std::lock_guard<std::mutex> lock(rs.mu);
      ++rs.seen[cb.symbolName].failed;
    }
    std::lock_guard<std::mutex> lock(rs.times_mu);
    rs.times.erase(cb.correlationId);
  }
  EmitOverhead(OverheadKind::CounterReplay, "Counter Replay", t_enter_ns, exit_ns,
               cb.correlationId);
  c.data = c.blank;  // in place: CUPTI writes into the image SetConfig was given
  if (!g_keep_enabled) {
    // Not left enabled between replays: on the H100 a program hung in a later launch within
    // seconds of the last replay while the profiler stayed enabled (CUPTI 13.0).
    DisableReplay(c);
  }
  rs.replay_mu.unlock();
}
}  // namespace kprof::agent::counters
