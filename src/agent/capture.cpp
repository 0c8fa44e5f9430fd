// Capture windows (issue 13): see capture.h and docs/capture.md.
//
// A window opens on the program's own thread, inside the NVTX or profiler-API callback, so that
// the kernels it launches next are recorded; it enables what `kprof run` asked for (the same
// calls as a whole-process run, API filters included) and disables it all on closing. The timer
// thread opens the --delay window and closes windows after --duration. One mutex orders them.
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
#include <unordered_map>

#include "agent/agent.h"
#include "agent/cupti_setup.h"

namespace kprof::agent {
namespace {

struct Settings {
  CaptureTrigger trigger = CaptureTrigger::Unknown;  // Unknown: no windows
  std::string range;                                 // nvtx:NAME
  uint64_t count = 1;                                // windows to record
  uint64_t delay_ns = 0, duration_ns = 0;
};

struct State {
  std::mutex mu;
  std::condition_variable cv;  // the timer waits on it
  bool armed = false;          // --delay has elapsed
  bool open = false;
  bool stop = false;  // EndCapture: the timer ends
  bool ended = false;
  uint64_t windows = 0;  // opened so far
  uint64_t opened_ns = 0;
  uint32_t opened_tid = 0;
  std::string opened_by;
  CaptureTrigger opened_trigger = CaptureTrigger::Unknown;
  // The NVTX range that opened the window: its thread and domain, and the depth of that
  // thread's stack in that domain below it (a pop back to it closes the window); or the id of
  // a start/end range.
  uint32_t owner_thread = 0;
  const void* owner_domain = nullptr;
  int owner_depth = -1;
  uint64_t owner_range_id = 0;
  uint64_t nvtx_seen = 0;  // pushes and starts of the range named
  uint32_t kinds = 0;
  bool graph_level = false;
  std::thread timer;
};

Settings g_settings;
bool g_debug = false;  // KPROF_CAPTURE_DEBUG=1: each window's opening and closing on stderr
ApiRecords g_api = ApiRecords::Kind;  // KPROF_CAPTURE_API=id: per callback id (diagnosis)
std::atomic<bool> g_configured{false};
// Pushes and starts of any range: a window that never opens, did NVTX reach kprof at all?
std::atomic<uint64_t> g_nvtx_ranges{0};
std::atomic<bool> g_window_open{false};

State& S() {
  static State* s = new State();  // leaked: callbacks may come after static destructors
  return *s;
}

uint64_t Now() {
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);  // a failure leaves 0: the window's record is then unplaced
  return ts;
}

uint64_t EnvMs(const char* name, std::vector<std::pair<std::string, std::string>>& meta,
               bool* bad) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const unsigned long long ms = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0') {
    meta.emplace_back("capture_problem", std::string(name) + "=" + v + " is not milliseconds");
    *bad = true;
    return 0;
  }
  return static_cast<uint64_t>(ms) * 1'000'000u;
}

// With the state's mutex held.
void Open(State& s, CaptureTrigger trigger, std::string by) {
  if (s.open || s.ended || s.windows >= g_settings.count) return;
  // The window begins before the kinds are enabled: enabling takes a while, and work the
  // program launches meanwhile may be recorded.
  s.opened_ns = Now();
  int apis = 0;
  EnableActivityKinds(s.kinds, &apis, s.graph_level, g_api);
  if (g_debug)
    std::fprintf(stderr, "kprof capture: window %llu opened by %s: %d API ids enabled in %.1f us\n",
                 static_cast<unsigned long long>(s.windows + 1), by.c_str(), apis,
                 static_cast<double>(Now() - s.opened_ns) / 1e3);
  s.open = true;
  g_window_open = true;
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
  if (why != CaptureEnd::ProcessEnd) DisableActivityKinds(s.kinds, s.graph_level, g_api);
  if (g_debug)
    std::fprintf(stderr, "kprof capture: window %llu closed (%u) in %.1f us\n",
                 static_cast<unsigned long long>(s.windows), static_cast<unsigned>(why),
                 static_cast<double>(Now() - closing) / 1e3);
  s.open = false;
  g_window_open = false;
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
  a.side.push_back({r, s.opened_by});
  if (s.windows >= g_settings.count) s.ended = true;
  s.cv.notify_all();
}

// The timer: arms (and for --delay/--duration alone opens) after the delay, closes each window
// --duration after it opened.
void TimerLoop() {
  BlockSignalsInThisThread();
  State& s = S();
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(s.mu);
  if (g_settings.delay_ns > 0) {
    s.cv.wait_until(lock, start + std::chrono::nanoseconds(g_settings.delay_ns),
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
    const auto opened = std::chrono::steady_clock::now();
    s.cv.wait_until(lock, opened + std::chrono::nanoseconds(g_settings.duration_ns),
                    [&] { return s.stop || !s.open || s.windows != window; });
    if (s.stop) return;
    if (s.open && s.windows == window) Close(s, CaptureEnd::Duration);
  }
}

// The message of an NVTX push or start, when it is ASCII (other kinds never match a name).
const char* Message(CUpti_CallbackId cbid, const void* params, const void** domain) {
  const nvtxEventAttributes_t* attr = nullptr;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
      return static_cast<const nvtxRangePushA_params*>(params)->message;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
      return static_cast<const nvtxRangeStartA_params*>(params)->message;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      attr = static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib;
      break;
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
      attr = static_cast<const nvtxRangeStartEx_params*>(params)->eventAttrib;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      const auto* p = static_cast<const nvtxDomainRangePushEx_params*>(params);
      *domain = p->domain;
      attr = p->core.eventAttrib;
      break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
      const auto* p = static_cast<const nvtxDomainRangeStartEx_params*>(params);
      *domain = p->domain;
      attr = p->core.eventAttrib;
      break;
    }
    default:
      return nullptr;
  }
  if (attr == nullptr || attr->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return attr->message.ascii;
}

// Each thread's push depth per NVTX domain (null: the default domain).
thread_local std::unordered_map<const void*, int> t_depth;

void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData& d) {
  State& s = S();
  const void* domain = nullptr;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
    case CUPTI_CBID_NVTX_nvtxRangePushW:
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      g_nvtx_ranges.fetch_add(1, std::memory_order_relaxed);
      const char* msg = Message(cbid, d.functionParams, &domain);
      int& depth = t_depth[domain];
      const int below = depth++;
      if (msg == nullptr || g_settings.range != msg) return;
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.nvtx_seen;
      if (!s.armed || s.open) return;
      Open(s, CaptureTrigger::Nvtx, g_settings.range);
      if (!s.open) return;
      s.owner_thread = CuptiThreadId();
      s.owner_domain = domain;
      s.owner_depth = below;
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop: {
      if (cbid == CUPTI_CBID_NVTX_nvtxDomainRangePop)
        domain = static_cast<const nvtxDomainRangePop_params*>(d.functionParams)->domain;
      int& depth = t_depth[domain];
      if (depth > 0) --depth;
      if (!g_window_open) return;
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.open && s.owner_depth >= 0 && s.owner_thread == CuptiThreadId() &&
          s.owner_domain == domain && depth <= s.owner_depth)
        Close(s, CaptureEnd::RangeEnded);
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
      g_nvtx_ranges.fetch_add(1, std::memory_order_relaxed);
      const char* msg = Message(cbid, d.functionParams, &domain);
      if (msg == nullptr || g_settings.range != msg) return;
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.nvtx_seen;
      // Start/end ranges are matched by the id NVTX returns: without it, none can close.
      if (!s.armed || s.open || d.functionReturnValue == nullptr) return;
      Open(s, CaptureTrigger::Nvtx, g_settings.range);
      if (s.open) s.owner_range_id = *static_cast<const nvtxRangeId_t*>(d.functionReturnValue);
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd: {
      if (!g_window_open) return;
      const nvtxRangeId_t id =
          cbid == CUPTI_CBID_NVTX_nvtxRangeEnd
              ? static_cast<const nvtxRangeEnd_params*>(d.functionParams)->id
              : static_cast<const nvtxDomainRangeEnd_params*>(d.functionParams)->core.id;
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.open && s.owner_range_id != 0 && s.owner_range_id == id)
        Close(s, CaptureEnd::RangeEnded);
      return;
    }
    default:
      return;
  }
}

constexpr CUpti_CallbackId kNvtxIds[] = {
    CUPTI_CBID_NVTX_nvtxRangePushA,         CUPTI_CBID_NVTX_nvtxRangePushW,
    CUPTI_CBID_NVTX_nvtxRangePushEx,        CUPTI_CBID_NVTX_nvtxDomainRangePushEx,
    CUPTI_CBID_NVTX_nvtxRangePop,           CUPTI_CBID_NVTX_nvtxDomainRangePop,
    CUPTI_CBID_NVTX_nvtxRangeStartA,        CUPTI_CBID_NVTX_nvtxRangeStartEx,
    CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, CUPTI_CBID_NVTX_nvtxRangeEnd,
    CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
};

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

bool ConfigureCapture(std::vector<std::pair<std::string, std::string>>& meta) {
  const char* capture = std::getenv("KPROF_CAPTURE");
  bool bad = false;
  Settings s;
  s.delay_ns = EnvMs("KPROF_DELAY_MS", meta, &bad);
  s.duration_ns = EnvMs("KPROF_DURATION_MS", meta, &bad);
  if (const char* n = std::getenv("KPROF_CAPTURE_COUNT"); n != nullptr && *n != '\0') {
    char* end = nullptr;
    s.count = std::strtoull(n, &end, 10);
    if (end == n || *end != '\0' || s.count == 0) {
      meta.emplace_back("capture_problem",
                        std::string("KPROF_CAPTURE_COUNT=") + n + " is not a positive count");
      bad = true;
    }
  }
  const std::string c = capture != nullptr ? capture : "";
  if (c.rfind("nvtx:", 0) == 0 && c.size() > 5) {
    s.trigger = CaptureTrigger::Nvtx;
    s.range = c.substr(5);
  } else if (c == "cuda-profiler-api") {
    s.trigger = CaptureTrigger::ProfilerApi;
  } else if (!c.empty()) {
    meta.emplace_back("capture_problem",
                      "KPROF_CAPTURE=" + c + " is not nvtx:NAME or cuda-profiler-api");
    bad = true;
  } else if (s.delay_ns > 0 || s.duration_ns > 0) {
    s.trigger = CaptureTrigger::Time;
    s.count = 1;
  }
  if (bad || s.trigger == CaptureTrigger::Unknown) return false;  // the whole process
  g_settings = s;
  meta.emplace_back("capture", s.trigger == CaptureTrigger::Nvtx          ? "nvtx:" + s.range
                               : s.trigger == CaptureTrigger::ProfilerApi ? "cuda-profiler-api"
                                                                          : "time");
  meta.emplace_back("capture_count", std::to_string(s.count));
  if (s.delay_ns) meta.emplace_back("capture_delay_ns", std::to_string(s.delay_ns));
  if (s.duration_ns) meta.emplace_back("capture_duration_ns", std::to_string(s.duration_ns));
  return true;
}

bool StartCapture(CUpti_SubscriberHandle subscriber, uint32_t kinds, bool graph_level) {
  State& s = S();
  s.kinds = kinds;
  s.graph_level = graph_level;
  g_debug = std::getenv("KPROF_CAPTURE_DEBUG") != nullptr;
  if (const char* api = std::getenv("KPROF_CAPTURE_API");
      api != nullptr && std::string(api) == "id")
    g_api = ApiRecords::PerId;
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
        ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_NVTX, id));
    } else {
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                            CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000));
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                            CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000));
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                            CUPTI_DRIVER_TRACE_CBID_cuProfilerStart));
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                            CUPTI_DRIVER_TRACE_CBID_cuProfilerStop));
    }
    if (!ok) return false;
  }
  g_configured = true;
  if (g_settings.delay_ns == 0) {
    // Armed from the start; --duration alone opens its window now, on the thread initialising
    // CUDA, before any work.
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
    if (g_settings.trigger == CaptureTrigger::Nvtx)
      OnNvtx(cbid, *static_cast<const CUpti_NvtxData*>(data));
    return true;
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
  uint64_t windows = 0, seen = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stop) return;
    s.stop = true;
    Close(s, CaptureEnd::ProcessEnd);
    s.ended = true;
    windows = s.windows;
    seen = s.nvtx_seen;
    s.cv.notify_all();
  }
  if (s.timer.joinable()) s.timer.join();
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side_meta.emplace_back("capture_windows", std::to_string(windows));
  if (g_settings.trigger == CaptureTrigger::Nvtx) {
    a.side_meta.emplace_back("capture_range_seen", std::to_string(seen));
    a.side_meta.emplace_back("capture_nvtx_ranges", std::to_string(g_nvtx_ranges.load()));
  }
}

}  // namespace kprof::agent
