// Capture windows: see capture.h and docs/capture.md.
//
// A window opens on the program's own thread, inside the NVTX or profiler-API callback, so that
// the kernels it launches next are recorded; it enables what `kprof run` asked for (the same
// calls as a whole-process run, API filters included) and disables it on closing. The timer
// thread opens the --delay window and closes windows after --duration, both counted from the
// first CUDA context. One mutex (State::mu) orders the windows and the switching of CUPTI.
//
// Two things are never switched while the program runs, because CUPTI 13.0 does not survive it
// or loses records (measured on an H200, docs/capture.md "How it works"):
// - graph-level tracing (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) stays on from the start: a graph
//   instantiated with it off and launched with it on crashed in cuGraphLaunch.
// - no kind is switched while a context is being made, or before the first one exists.
// And one thing switched does not always take: in node mode, kernel records switched on before a
// context was made went on for the nodes of its graphs after being switched off. So which graph
// launches a window holds is decided here, in both modes: the driver's cuGraphLaunch callback
// notes the correlation ids of the launches made while a window is open (an interval per
// window: CUPTI numbers calls in order), and the writer keeps a graph's records (its launch,
// or its nodes' work) only when their correlation id falls in one (AdmitGraphWork).
#include "agent/capture.h"

#include <cupti.h>
#include <generated_nvtx_meta.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/capture_graphs.h"
#include "agent/capture_internal.h"
#include "agent/cupti_setup.h"
#include "agent/nvtx_shim.h"
#include "agent/op_rings.h"
#include "kprof/on_demand.h"

namespace kprof::agent {
namespace capture {

std::atomic<uint64_t> g_nvtx_ranges{0};
std::atomic<bool> g_window_open{false};
std::atomic<bool> g_configured{false};

}  // namespace capture
namespace {

using namespace capture;  // NOLINT(google-build-using-namespace): this file's own internals

Settings g_settings;
bool g_debug = false;  // KPROF_CAPTURE_DEBUG=1: each window's opening and closing on stderr
ApiRecords g_api = ApiRecords::Kind;  // KPROF_CAPTURE_API=id: per callback id (diagnosis)
// Context-making driver calls in flight (kContextCalls), and a switch of CUPTI's kinds in
// progress: a context call that begins waits for the switch (briefly), a switch that finds a
// call in flight waits for the call to return. Both sequentially consistent: each side sets its
// flag before it reads the other's.
std::atomic<int> g_context_calls{0};
std::atomic<bool> g_switching{false};
std::atomic<bool> g_switch_pending{false};

// The driver calls that make a context: a switch of the kinds waits while one runs.
constexpr CUpti_CallbackId kContextCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4};
// How long a context call waits for a switch in progress before it goes on regardless.
constexpr auto kSwitchWait = std::chrono::milliseconds(200);

}  // namespace

namespace capture {

bool TrySwitchNow() {
  g_switching = true;
  if (g_context_calls.load() > 0) {
    g_switching = false;
    return false;
  }
  return true;
}

void SwitchDone() { g_switching = false; }

Settings& Config() { return g_settings; }

void WatchContexts(CUpti_SubscriberHandle subscriber) {
  // Context calls and graph launches (see the top of this file); without them windows still
  // work, with the risks those callbacks exist to avoid.
  for (CUpti_CallbackId id : kContextCalls)
    KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                "watch context creation (a capture window may switch during it)");
  KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                  CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
              "watch context creation (a capture window may switch during it)");
  WatchGraphLaunches(subscriber);
}

State& S() {
  static State* s = new State();  // leaked: callbacks may come after static destructors
  return *s;
}

uint64_t Now() { return CuptiTimestamp(); }  // 0 on a failure: the window's record is unplaced

// Brings what CUPTI records in line with what the windows want, unless a context is being made
// (then the context call's return does it) or, for switching off, none exists yet (then the first
// context's creation does it). Returns the API ids enabled. With the state's mutex held.
int Sync(State& s) {
  if (s.kinds_on == s.want_on) {
    g_switch_pending = false;
    return 0;
  }
  if (!s.want_on && !s.context_ready) {
    g_switch_pending = true;
    return 0;
  }
  g_switching = true;
  if (g_context_calls.load() > 0) {
    g_switching = false;
    if (!g_switch_pending.exchange(true)) ++s.deferred_switches;
    return 0;
  }
  int apis = 0;
  if (s.want_on) {
    EnableActivityKinds(s.kinds, &apis, g_api);
  } else {
    // The records of work already done are completed while their kinds are on: switched off
    // first, the nodes of a window's last graph launch got the end times of a launch after the
    // window (H200, CUDA 13.0, node mode: each window's last launch, nodes "lasting" 260-530 ms).
    KPROF_CUPTI(cuptiActivityFlushAll(0), "complete a window's records (its last ones may be off)");
    // (A graph launch outside the windows under way on another thread switches the GPU work's
    // kinds off itself when it returns: GraphLaunchOutsideWindows.)
    DisableActivityKinds(s.kinds & ~(s.outside_launches > 0 ? kGpuWorkKinds : 0u), g_api);
  }
  s.kinds_on = s.want_on;
  g_switching = false;
  g_switch_pending = false;
  return apis;
}

// With the state's mutex held.
void Open(State& s, CaptureTrigger trigger, std::string by) {
  if (s.open || s.ended || s.windows >= g_settings.count) return;
  // The window begins before the kinds are enabled (enabling takes a while, and work the program
  // launches meanwhile may be recorded), the graph launches it holds once they are: a graph
  // launch is the window's when its call was recorded (capture.h).
  s.opened_ns = Now();
  s.opened_wall = ondemand::WallNs();
  s.opened_at = std::chrono::steady_clock::now();
  s.want_on = true;
  const int apis = Sync(s);
  GraphWindowOpened(s.opened_ns, s.windows + 1);
  g_window_open = true;
  ops::TakeClockOffset(&CuptiTimestamp);  // the op observer's times, onto CUPTI's clock
  ops::SetRecording(true);
  if (g_debug)
    std::fprintf(stderr, "kprof capture: window %llu opened by %s: %s in %.1f us\n",
                 static_cast<unsigned long long>(s.windows + 1), by.c_str(),
                 s.kinds_on ? (std::to_string(apis) + " API ids enabled").c_str()
                            : "the kinds wait for a context",
                 static_cast<double>(Now() - s.opened_ns) / 1e3);
  s.open = true;
  s.opened_tid = CuptiThreadId();
  s.opened_trigger = trigger;
  s.opened_by = std::move(by);
  ++s.windows;
  s.cv.notify_all();  // the timer: a --duration starts now
}

// With the state's mutex held.
void Close(State& s, CaptureEnd why) {
  if (!s.open) return;
  const uint64_t closing = Now();
  s.closed_wall = ondemand::WallNs();
  g_window_open = false;
  ops::SetRecording(false);
  GraphWindowClosed(closing);  // graph launches from here on are not the window's
  s.want_on = false;
  // At the process's end collection stops anyway: nothing to switch off.
  if (why != CaptureEnd::ProcessEnd) Sync(s);
  if (g_debug)
    std::fprintf(stderr, "kprof capture: window %llu closed (%u)%s in %.1f us\n",
                 static_cast<unsigned long long>(s.windows), static_cast<unsigned>(why),
                 s.kinds_on ? ": the kinds wait for a context" : "",
                 static_cast<double>(Now() - closing) / 1e3);
  s.open = false;
  s.owner_depth = -1;
  s.owner_range_id = 0;
  Record r;
  r.kind = static_cast<uint8_t>(RecordKind::CaptureWindow);
  r.device = kNoDevice;
  r.start_ns = s.opened_ns;
  r.end_ns = std::max(s.opened_ns, Now());
  r.tid = s.opened_tid;
  r.a = static_cast<uint32_t>(s.windows - 1);
  r.flags = static_cast<uint8_t>(s.opened_trigger);
  r.c = static_cast<uint32_t>(why);
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side.push_back({r, s.opened_by, {}, {}});
  if (s.windows >= g_settings.count) s.ended = true;
  s.cv.notify_all();
}

}  // namespace capture
namespace {

// The timer: waits for the first context, then arms (and for --delay/--duration alone opens)
// after the delay, and closes each window --duration after the later of its opening and the
// first context.
void TimerLoop() {
  BlockSignalsInThisThread();
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait(lock, [&] { return s.stop || s.context_ready; });
  if (s.stop) return;
  if (g_settings.delay_ns > 0) {
    s.cv.wait_until(lock, s.context_at + std::chrono::nanoseconds(g_settings.delay_ns),
                    [&] { return s.stop; });
    if (s.stop) return;
  }
  if (!s.armed) {
    s.armed = true;
    if (g_settings.trigger == CaptureTrigger::Time) Open(s, CaptureTrigger::Time, "delay");
  }
  if (g_settings.duration_ns == 0) return;
  while (!s.stop && !s.ended) {
    s.cv.wait(lock, [&] { return s.stop || s.ended || s.open; });
    if (s.stop || s.ended) return;
    const uint64_t window = s.windows;
    const auto from = std::max(s.opened_at, s.context_at);
    s.cv.wait_until(lock, from + std::chrono::nanoseconds(g_settings.duration_ns),
                    [&] { return s.stop || !s.open || s.windows != window; });
    if (s.stop) return;
    if (s.open && s.windows == window) Close(s, CaptureEnd::Duration);
  }
}

// A context was made: the timer starts counting, and a switch that waited for it is made.
void OnContextCreated() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.context_ready) {
    s.context_ready = true;
    s.context_ns = Now();
    s.context_at = std::chrono::steady_clock::now();
    s.cv.notify_all();
  }
  Sync(s);
}

// A context-making driver call begins or returns.
void OnContextCall(const CUpti_CallbackData& cb) {
  if (cb.callbackSite == CUPTI_API_ENTER) {
    g_context_calls.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + kSwitchWait;
    while (g_switching.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    return;
  }
  if (g_context_calls.fetch_sub(1) == 1 && g_switch_pending.load()) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Sync(s);
  }
}

void OnNvtx(const NvtxEvent& e) {
  State& s = S();
  switch (e.kind) {
    case NvtxEvent::Kind::Push: {
      if (e.message == nullptr || g_settings.range != e.message) return;
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.nvtx_seen;
      if (!s.armed || s.open) return;
      Open(s, CaptureTrigger::Nvtx, g_settings.range);
      if (s.open) SetOwner(s, e);
      return;
    }
    case NvtxEvent::Kind::Pop: {
      if (!g_window_open) return;
      std::lock_guard<std::mutex> lock(s.mu);
      if (OwnerReturned(s, e)) Close(s, CaptureEnd::RangeEnded);
      return;
    }
    case NvtxEvent::Kind::Start: {
      if (e.message == nullptr || g_settings.range != e.message) return;
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.nvtx_seen;
      // Start/end ranges are matched by the id NVTX returns: without it, none can close.
      if (!s.armed || s.open || e.started == nullptr) return;
      Open(s, CaptureTrigger::Nvtx, g_settings.range);
      if (s.open) s.owner_range_id = *static_cast<const nvtxRangeId_t*>(e.started);
      return;
    }
    case NvtxEvent::Kind::End: {
      if (!g_window_open) return;
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.open && s.owner_range_id != 0 && s.owner_range_id == e.end_id)
        Close(s, CaptureEnd::RangeEnded);
      return;
    }
    case NvtxEvent::Kind::Other:
      return;
  }
}

}  // namespace

const CUpti_CallbackId capture::kNvtxIds[11] = {
    CUPTI_CBID_NVTX_nvtxRangePushA,         CUPTI_CBID_NVTX_nvtxRangePushW,
    CUPTI_CBID_NVTX_nvtxRangePushEx,        CUPTI_CBID_NVTX_nvtxDomainRangePushEx,
    CUPTI_CBID_NVTX_nvtxRangePop,           CUPTI_CBID_NVTX_nvtxDomainRangePop,
    CUPTI_CBID_NVTX_nvtxRangeStartA,        CUPTI_CBID_NVTX_nvtxRangeStartEx,
    CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, CUPTI_CBID_NVTX_nvtxRangeEnd,
    CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
};

namespace {

bool IsProfilerStart(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000) ||
         (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
}
bool IsProfilerStop(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000) ||
         (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
}

}  // namespace

bool ConfigureCapture(const AgentConfig& cfg, const std::vector<ConfigProblem>& problems,
                      std::vector<std::pair<std::string, std::string>>& meta) {
  bool bad = false;
  for (const ConfigProblem& p : problems) {
    if (p.area != "capture") continue;
    meta.emplace_back("capture_problem", p.message);
    bad = true;
  }
  Settings s;
  s.delay_ns = cfg.delay_ms * 1'000'000u;
  s.duration_ns = cfg.duration_ms * 1'000'000u;
  s.count = cfg.capture_count;
  if (cfg.capture.rfind("nvtx:", 0) == 0) {
    s.trigger = CaptureTrigger::Nvtx;
    s.range = cfg.capture.substr(5);
  } else if (cfg.capture == "cuda-profiler-api") {
    s.trigger = CaptureTrigger::ProfilerApi;
  } else if (cfg.capture == "on-demand") {
    // Windows as kprof capture asks for them, as many as it asks (capture_on_demand.cpp).
    s.trigger = CaptureTrigger::OnDemand;
    s.count = std::numeric_limits<uint64_t>::max();
  } else if (s.delay_ns > 0 || s.duration_ns > 0) {
    s.trigger = CaptureTrigger::Time;
    s.count = 1;
  }
  if (bad || s.trigger == CaptureTrigger::Unknown) return false;  // the whole process
  g_settings = s;
  meta.emplace_back("capture", s.trigger == CaptureTrigger::Nvtx          ? "nvtx:" + s.range
                               : s.trigger == CaptureTrigger::ProfilerApi ? "cuda-profiler-api"
                               : s.trigger == CaptureTrigger::OnDemand    ? "on-demand"
                                                                          : "time");
  if (s.trigger != CaptureTrigger::OnDemand)
    meta.emplace_back("capture_count", std::to_string(s.count));
  if (s.delay_ns) meta.emplace_back("capture_delay_ns", std::to_string(s.delay_ns));
  if (s.duration_ns) meta.emplace_back("capture_duration_ns", std::to_string(s.duration_ns));
  return true;
}

bool StartCapture(CUpti_SubscriberHandle subscriber, uint32_t kinds) {
  State& s = S();
  s.kinds = kinds;
  g_debug = Knobs().capture_debug;
  if (Knobs().capture_api_ids) g_api = ApiRecords::PerId;
  if (A().dormant) {
    // Nothing of CUPTI until a window opens (any CUPTI call attaches it): CaptureAttached.
    g_configured = true;
    WatchGraphWork();
    std::lock_guard<std::mutex> lock(s.mu);
    s.armed = true;
    // A --duration of nvtx:NAME windows counts from each opening (the timer waits for the first
    // context, which CaptureAttached finds).
    if (g_settings.trigger == CaptureTrigger::Nvtx && g_settings.duration_ns > 0)
      s.timer = std::thread(TimerLoop);
    return true;
  }
  // The API ids are found now, outside any callback, not in the first window on the program's
  // thread.
  const size_t ids = PrepareApiRecords();
  if (g_debug) std::fprintf(stderr, "kprof capture: %zu API ids to record\n", ids);
  if (g_settings.trigger == CaptureTrigger::Nvtx ||
      g_settings.trigger == CaptureTrigger::ProfilerApi) {
    if (subscriber == nullptr) return false;
    bool ok = true;
    if (g_settings.trigger == CaptureTrigger::Nvtx) {
      for (CUpti_CallbackId id : kNvtxIds)
        ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_NVTX, id),
                          "watch NVTX ranges (--capture nvtx: cannot open a window)");
    } else {
      const std::pair<CUpti_CallbackDomain, CUpti_CallbackId> calls[] = {
          {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000},
          {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000},
          {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart},
          {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop}};
      for (const auto& [domain, id] : calls)
        ok &= KPROF_CUPTI(
            cuptiEnableCallback(1, subscriber, domain, id),
            "watch cudaProfilerStart/Stop (--capture cuda-profiler-api cannot open a window)");
    }
    if (!ok) return false;
  }
  if (subscriber != nullptr) {
    WatchContexts(subscriber);
  } else {
    s.context_ready = true;  // nothing will say when the first context comes
    s.context_at = std::chrono::steady_clock::now();
  }
  g_configured = true;
  WatchGraphWork();
  if (g_settings.delay_ns == 0) {
    // Armed from the start; --duration alone opens its window now, on the thread initialising
    // CUDA, before any context and any work: as a whole-process run enables its kinds.
    std::lock_guard<std::mutex> lock(s.mu);
    s.armed = true;
    if (g_settings.trigger == CaptureTrigger::Time) Open(s, CaptureTrigger::Time, "start");
  }
  if (g_settings.delay_ns > 0 || g_settings.duration_ns > 0) s.timer = std::thread(TimerLoop);
  return true;
}

bool OnCaptureCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_configured) return false;
  if (domain == CUPTI_CB_DOMAIN_NVTX) {
    // (On demand, no NVTX callback is enabled: kprof's own NVTX handlers give the windows their
    // events, nvtx_shim.h.)
    const NvtxEvent e = DecodeNvtx(cbid, *static_cast<const CUpti_NvtxData*>(data));
    if (g_settings.trigger == CaptureTrigger::Nvtx) OnNvtx(e);
    return true;
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) OnContextCreated();
    return false;  // the agent and the counters see it too
  }
  if (IsGraphLaunchCall(domain, cbid)) {
    OnGraphLaunchCall(*static_cast<const CUpti_CallbackData*>(data));
    return false;
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
    if (std::find(std::begin(kContextCalls), std::end(kContextCalls), cbid) !=
        std::end(kContextCalls)) {
      OnContextCall(cb);
      return false;  // the counters' preparation sees them too
    }
  }
  if (g_settings.trigger != CaptureTrigger::ProfilerApi) return false;
  const bool start = IsProfilerStart(domain, cbid), stop = IsProfilerStop(domain, cbid);
  if (!start && !stop) return false;
  // cudaProfilerStart calls cuProfilerStart: either opens (on entry, before the work that
  // follows), the second finds the window open. Stop closes on entry, after the work before it.
  const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
  if (cb.callbackSite != CUPTI_API_ENTER) return true;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (start && s.armed) Open(s, CaptureTrigger::ProfilerApi, "cudaProfilerStart");
  if (stop) Close(s, CaptureEnd::ProfilerStop);
  return true;
}

bool OutsideWindow() { return g_configured && !g_window_open; }

void EndCapture() {
  if (!g_configured) return;
  State& s = S();
  uint64_t windows = 0, seen = 0, context_ns = 0, deferred = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stop) return;
    s.stop = true;
    Close(s, CaptureEnd::ProcessEnd);
    s.ended = true;
    windows = s.windows;
    seen = s.nvtx_seen;
    context_ns = s.context_ns;
    deferred = s.deferred_switches;
    s.cv.notify_all();
  }
  if (s.timer.joinable()) s.timer.join();
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side_meta.emplace_back("capture_windows", std::to_string(windows));
  if (context_ns != 0) a.side_meta.emplace_back("first_context_ns", std::to_string(context_ns));
  if (deferred != 0)
    a.side_meta.emplace_back("capture_switches_deferred", std::to_string(deferred));
  GraphWorkMeta(a.side_meta);
  // Dormant, how many times CUPTI was attached (once per window, unless it stayed attached).
  if (a.dormant)
    a.side_meta.emplace_back("cupti_attachments", std::to_string(g_attachments.load()));
  if (g_before_context.load() != 0)
    a.side_meta.emplace_back("capture_range_before_context",
                             std::to_string(g_before_context.load()));
  if (g_attach_ns_max.load() != 0)
    a.side_meta.emplace_back("cupti_attach_max_us", std::to_string(g_attach_ns_max.load() / 1000));
  if (g_settings.trigger == CaptureTrigger::Nvtx) {
    a.side_meta.emplace_back("capture_range_seen", std::to_string(seen));
    a.side_meta.emplace_back("capture_nvtx_ranges",
                             std::to_string(g_nvtx_ranges.load() + nvtx_shim::Unwatched()));
  }
}

}  // namespace kprof::agent
