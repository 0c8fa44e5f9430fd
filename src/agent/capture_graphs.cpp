// Graph work of the capture windows: see capture_graphs.h.
#include "agent/capture_graphs.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <unordered_set>

#include "agent/cupti_setup.h"

namespace kprof::agent {
namespace {

// Graph launches: the driver's calls, and the runtime's (which make a driver call each; each call
// has its own correlation id, and a launch's records carry one of the two).
constexpr CUpti_CallbackId kDriverCalls[] = {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                                             CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
constexpr CUpti_CallbackId kRuntimeCalls[] = {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                              CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};

// The graph launches made inside one window: the lowest and highest correlation id.
struct LaunchIds {
  uint64_t window;
  uint32_t low, high;
};

// All under one mutex but the flags the launch callbacks read first.
struct State {
  std::mutex mu;
  std::vector<LaunchIds> launches;  // in window order, ids rising
  // Every window's span (open, close; close 0 while open), for launches from the GPU.
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  // Launch calls made inside a window that returned after it closed (or after another opened):
  // their calls' records may be lost with the switch while their work is recorded, so neither
  // is the window's. Few: only calls that straddle a close.
  std::unordered_set<uint32_t> revoked;
};
State& G() {
  static State* s = new State();  // leaked: callbacks may come after static destructors
  return *s;
}
std::atomic<bool> g_watching{false};
std::atomic<bool> g_open{false};
std::atomic<uint64_t> g_window{0};  // the open window's number
std::atomic<bool> g_ids{true};      // the callbacks give correlation ids
std::atomic<uint64_t> g_kept{0}, g_left_out{0};

// True when a graph launch with this correlation id was made inside a window.
bool LaunchedInside(uint32_t correlation) {
  State& s = G();
  std::lock_guard<std::mutex> lock(s.mu);
  // Windows in order, their ids rising: the last window whose lowest id is not above it.
  auto it = std::upper_bound(s.launches.begin(), s.launches.end(), correlation,
                             [](uint32_t id, const LaunchIds& w) { return id < w.low; });
  return it != s.launches.begin() && correlation <= std::prev(it)->high &&
         s.revoked.count(correlation) == 0;
}

// The graph-launch call in flight on this thread: the outermost (a runtime call makes a driver
// call) decides for both, by the window it entered and whether that window is still open when it
// returns.
struct InFlight {
  int depth = 0;
  uint64_t window = 0;  // 0: entered outside any window
  uint32_t ids[4] = {};
  int n = 0;
};
thread_local InFlight t_call;

void Note(State& s, uint64_t window, uint32_t id) {
  if (s.launches.empty() || s.launches.back().window != window) {
    s.launches.push_back({window, id, id});
    return;
  }
  LaunchIds& ids = s.launches.back();
  ids.low = std::min(ids.low, id);
  ids.high = std::max(ids.high, id);
}

// True when `ns` falls inside a window (one still open counts up to now).
bool InsideSpan(uint64_t ns) {
  State& s = G();
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& [open, close] : s.spans)
    if (ns >= open && (close == 0 || ns <= close)) return true;
  return false;
}

}  // namespace

void WatchGraphWork() { g_watching = true; }

void WatchGraphLaunches(CUpti_SubscriberHandle subscriber) {
  constexpr const char* kDoing =
      "watch graph launches (graph work is then kept by the time it ran)";
  for (CUpti_CallbackId id : kDriverCalls)
    if (!KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id), kDoing))
      g_ids = false;
  for (CUpti_CallbackId id : kRuntimeCalls)
    if (!KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id), kDoing))
      g_ids = false;
}

bool IsGraphLaunchCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const auto in = [cbid](const auto& ids) {
    return std::find(std::begin(ids), std::end(ids), cbid) != std::end(ids);
  };
  return domain == CUPTI_CB_DOMAIN_DRIVER_API    ? in(kDriverCalls)
         : domain == CUPTI_CB_DOMAIN_RUNTIME_API ? in(kRuntimeCalls)
                                                 : false;
}

void OnGraphLaunchCall(const CUpti_CallbackData& cb) {
  InFlight& f = t_call;
  if (cb.callbackSite == CUPTI_API_EXIT) {
    if (f.depth == 0 || --f.depth > 0 || f.window == 0) return;
    if (g_open.load() && g_window.load() == f.window) return;
    State& s = G();
    std::lock_guard<std::mutex> lock(s.mu);
    s.revoked.insert(f.ids, f.ids + f.n);
    return;
  }
  if (f.depth++ == 0) {
    f.n = 0;
    f.window = g_open.load() ? g_window.load() : 0;
  }
  if (f.window == 0) return;
  if (cb.correlationId == 0) {
    g_ids = false;  // no ids to match: graph work is kept by time (InsideSpan)
    return;
  }
  if (f.n < static_cast<int>(std::size(f.ids))) f.ids[f.n++] = cb.correlationId;
  if (!g_open.load() || g_window.load() != f.window) return;  // revoked when it returns
  State& s = G();
  std::lock_guard<std::mutex> lock(s.mu);
  Note(s, f.window, cb.correlationId);
}

void GraphWindowOpened(uint64_t ns, uint64_t number) {
  {
    State& s = G();
    std::lock_guard<std::mutex> lock(s.mu);
    s.spans.emplace_back(ns, 0);
  }
  g_window = number;
  g_open = true;
}

void GraphWindowClosed(uint64_t ns) {
  g_open = false;
  State& s = G();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.spans.empty()) s.spans.back().second = ns;
}

bool AdmitGraphWork(const Record& r) {
  if (!g_watching) return true;
  const bool launch = r.Kind() == RecordKind::GraphLaunch;
  const bool call =
      (r.Kind() == RecordKind::RuntimeApi && IsGraphLaunchCall(CUPTI_CB_DOMAIN_RUNTIME_API, r.a)) ||
      (r.Kind() == RecordKind::DriverApi && IsGraphLaunchCall(CUPTI_CB_DOMAIN_DRIVER_API, r.a));
  // The calls are not counted in the meta: their work is.
  if (call) return g_ids.load() ? LaunchedInside(r.correlation) : InsideSpan(r.start_ns);
  if (!launch && GraphNodeOf(r) == 0) return true;  // not a graph's work
  bool kept = false;
  if ((launch && (r.flags & kGraphLaunchFromDevice) != 0) || !g_ids.load())
    kept = InsideSpan(r.start_ns);
  else
    kept = LaunchedInside(r.correlation);
  (kept ? g_kept : g_left_out).fetch_add(1, std::memory_order_relaxed);
  return kept;
}

void GraphWorkMeta(std::vector<std::pair<std::string, std::string>>& meta) {
  meta.emplace_back("capture_graph_records_kept", std::to_string(g_kept));
  meta.emplace_back("capture_graph_records_outside", std::to_string(g_left_out));
  meta.emplace_back("capture_graph_match", g_ids.load() ? "correlation" : "time");
}

}  // namespace kprof::agent
