// CUPTI attached and detached again around the windows of an on-demand run (agent.h "attach.cpp";
// docs/capture.md "On demand"). What was found on an H200 with CUDA 13.0, and what it decided:
// - cuptiFinalize is allowed in an API callback only. Made at the exit of a successful
//   synchronization it leaves the program at its own speed, and CUPTI attaches again for the next
//   window, any number of times.
// - A CUDA graph launched while CUPTI was attached with the GPU work's records (kernels, copies
//   and memsets) all switched off faults at its first launch after cuptiFinalize ("unspecified
//   launch failure"), unless it was launched again with them on before (tests/gpu/probes,
//   measurements/h200-2026-11-27g-issue35-graph-detach: 20 of 20 such runs, 0 of 46 with them
//   on). So, dormant, a graph launched outside the windows while CUPTI is attached is launched
//   with them switched on, from its call's entry to its exit (GraphLaunchOutsideWindows; its work
//   is left out as the windows' graph work is kept, by its launch's correlation id), and the
//   detachment waits for graph launches under way, which wait for it in turn.
//   KPROF_ON_DEMAND_DETACH=nohold launches them with the records off, to see the fault.
// - a duration window closes at the program's next synchronization: graph nodes still running
//   when a window closed got, once recorded, the end times of a later launch.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/capture.h"
#include "agent/capture_graphs.h"
#include "agent/cupti_setup.h"
#include "agent/nvtx_shim.h"

namespace kprof::agent {
namespace {

std::atomic<bool> g_finalize{false};         // detach at the next synchronization
std::atomic<bool> g_close_at_sync{false};    // close the window at the next synchronization
std::atomic<uint64_t> g_detachments{0};      // cuptiFinalize calls that succeeded
std::atomic<uint64_t> g_attach_requests{0};  // AttachCupti calls that succeeded
std::mutex g_detach_mu;
std::condition_variable g_detach_cv;  // a detachment or a closing was made

// A detachment under way: graph launches on other threads wait before they begin, and the
// detachment waits for those under way to return (cuptiFinalize racing a launch). Atomics only:
// a waiting launch holds no mutex (cuptiFinalize may wait for callbacks in progress).
std::atomic<bool> g_detaching{false};
// The detachments made (high 32 bits: a thread's depth from before one is stale) and the graph
// launches under way between their outermost entry and exit (low 32), in one word: a launch
// counted before a detachment is never counted out after it (the count restarts at 0).
std::atomic<uint64_t> g_launch_state{0};
constexpr uint64_t kCountMask = 0xffffffffu;
uint64_t Generation() { return g_launch_state.load() >> 32; }
uint64_t LaunchesUnderWay() { return g_launch_state.load() & kCountMask; }
// Counts a launch in (out) when `generation` is still the current one; false when it is not.
bool CountLaunch(uint64_t generation, bool in) {
  uint64_t s = g_launch_state.load();
  while (true) {
    if ((s >> 32) != generation || (!in && (s & kCountMask) == 0)) return false;
    if (g_launch_state.compare_exchange_weak(s, in ? s + 1 : s - 1)) return true;
  }
}
thread_local int t_launch_depth = 0;  // this thread's graph-launch calls under way
thread_local uint64_t t_launch_generation = 0;
thread_local bool t_launch_counted = false;  // this thread's outermost launch is counted in
std::atomic<uint64_t> g_launch_waits{0};     // graph launches that waited for a detachment
constexpr auto kLaunchWait = std::chrono::seconds(1);  // at most, then either side goes on

constexpr CUpti_CallbackId kRuntimeSyncs[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020};
constexpr CUpti_CallbackId kDriverSyncs[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize};

// The synchronization calls come to kprof's callback (on) or not.
void WatchSyncs(bool on) {
  const char* doing = on ? "watch the program's synchronizations (a window may not close)"
                         : "stop watching the program's synchronizations";
  for (CUpti_CallbackId id : kRuntimeSyncs)
    KPROF_CUPTI(cuptiEnableCallback(on ? 1 : 0, A().subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id),
                doing);
  for (CUpti_CallbackId id : kDriverSyncs)
    KPROF_CUPTI(cuptiEnableCallback(on ? 1 : 0, A().subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                doing);
}

// The exit of a synchronization that succeeded: the work it waited for is done.
bool SynchronizedHere(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d->callbackSite != CUPTI_API_EXIT || d->functionReturnValue == nullptr) return false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    for (CUpti_CallbackId id : kRuntimeSyncs)
      if (cbid == id)
        return *static_cast<const cudaError_t*>(d->functionReturnValue) == cudaSuccess;
    return false;
  }
  for (CUpti_CallbackId id : kDriverSyncs)
    if (cbid == id) return *static_cast<const CUresult*>(d->functionReturnValue) == CUDA_SUCCESS;
  return false;
}

// Waits (yielding) until `done` or kLaunchWait has passed; false when it has passed.
template <typename Done>
bool WaitBriefly(Done done) {
  const auto until = std::chrono::steady_clock::now() + kLaunchWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

// The entry of a graph-launch call. The outermost (the driver's call inside the runtime's is
// not) is counted under way once no detachment is: Entered::Switch; after waiting kLaunchWait for
// one in vain it goes on uncounted, its kinds not switched (CUPTI is being finalized): NoSwitch;
// and once one has detached CUPTI meanwhile, no exit of this launch will come: Ignore.
enum class Entered { Ignore, Switch, NoSwitch };
Entered GraphLaunchEntered() {
  const uint64_t generation = Generation();
  if (t_launch_generation != generation) {
    t_launch_depth = 0;
    t_launch_generation = generation;
  }
  if (t_launch_depth++ > 0) return Entered::Ignore;
  bool waited = false;
  while (true) {
    if (!CountLaunch(generation, true)) {  // detached while this one waited: CUPTI is gone
      t_launch_counted = false;
      return Entered::Ignore;
    }
    if (!g_detaching.load()) {
      t_launch_counted = true;
      return Entered::Switch;
    }
    CountLaunch(generation, false);
    if (!waited) g_launch_waits.fetch_add(1);
    waited = true;
    if (!WaitBriefly([] { return !g_detaching.load(); })) {
      t_launch_counted = false;  // nor its exit
      return Entered::NoSwitch;
    }
  }
}

// The exit of a graph-launch call: true for the outermost (then LaunchDone after its work).
bool GraphLaunchReturned() {
  if (t_launch_generation != Generation() || t_launch_depth == 0) return false;
  return --t_launch_depth == 0 && t_launch_counted;
}
void LaunchDone() { CountLaunch(t_launch_generation, false); }

// Graph launches outside the windows get the GPU work's kinds on (above).
bool SwitchForLaunches() {
  return A().dormant && Knobs().on_demand_detach && Knobs().on_demand_hold;
}

// Detaches CUPTI, inside the exit callback of a synchronization. (No CUPTI call is made while
// g_detach_mu is held but cuptiFinalize, which the mutex serialises with attaching; a graph
// launch waits for a detachment without it.)
void FinalizeHere() {
  {
    // Not obtained: another thread's synchronization is detaching (or attaching) now; this one
    // does nothing (waiting here, inside a callback, for cuptiFinalize could deadlock).
    std::unique_lock<std::mutex> lock(g_detach_mu, std::try_to_lock);
    if (!lock.owns_lock() || !g_finalize.exchange(false)) return;
    g_detaching = true;
  }
  WaitBriefly([] { return LaunchesUnderWay() == 0; });  // launches under way on other threads
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(g_detach_mu);
    Agent& a = A();
    nvtx_shim::TakeBack(/*finalized=*/true);  // CUPTI's NVTX handlers are not called after this
    if (!KPROF_CUPTI(cuptiFinalize(), "detach CUPTI after a window (it stays attached)")) {
      failed = true;
    } else {
      CaptureDetached();
      {
        // A buffer CUPTI took after the flush before never comes back: it is kprof's again.
        std::lock_guard<std::mutex> pool(a.pool_mu);
        for (const auto& [buf, lending] : a.lent) {
          std::memset(buf, 0, g_buffer_bytes);  // CUPTI is told buffers arrive zeroed
          a.free_buffers.push_back(buf);
        }
        a.lent.clear();
        a.pool_cv.notify_all();
      }
      a.subscriber = nullptr;
      a.attached = false;
      g_detachments.fetch_add(1);
      g_launch_state.store((Generation() + 1) << 32);  // (those under way are counted out)
    }
    g_detaching = false;
    g_detach_cv.notify_all();
  }
  if (failed) {
    WatchSyncs(false);
    HandNvtxToCupti();
  }
}

// AttachCupti's work (below).
bool AttachCuptiOnce(std::string* why);

}  // namespace

bool OnAttachCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (IsGraphLaunchCall(domain, cbid)) {
    if (static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_ENTER) {
      if (GraphLaunchEntered() == Entered::Switch && SwitchForLaunches())
        GraphLaunchOutsideWindows(true);
    } else if (GraphLaunchReturned()) {
      if (SwitchForLaunches()) GraphLaunchOutsideWindows(false);
      LaunchDone();
    }
    return false;  // (the windows' graph launches are noted too: capture_graphs.cpp)
  }
  if (!g_finalize.load(std::memory_order_acquire) &&
      !g_close_at_sync.load(std::memory_order_acquire))
    return false;
  if (!SynchronizedHere(domain, cbid, data)) return false;
  if (g_close_at_sync.exchange(false)) {
    CloseOnDemand(CaptureEnd::Duration);
    // (Not waited for inside a callback: CloseAtSync's wait is bounded and looks again.)
    std::unique_lock<std::mutex> lock(g_detach_mu, std::try_to_lock);
    g_detach_cv.notify_all();
  }
  if (g_finalize.load(std::memory_order_acquire)) FinalizeHere();
  return true;
}

bool CloseAtSync(int timeout_ms, const std::atomic<bool>& stop) {
  if (!A().attached) return false;
  g_close_at_sync = true;
  WatchSyncs(true);
  bool closed = false;
  {
    std::unique_lock<std::mutex> lock(g_detach_mu);
    g_detach_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                         [&] { return !g_close_at_sync.load() || stop.load(); });
    closed = !g_close_at_sync.exchange(false);  // else the program's thread can no longer close it
  }
  WatchSyncs(false);
  return closed;
}

uint64_t Detachments() { return g_detachments.load(); }

void CancelDetach() {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(g_detach_mu);
    cancelled = A().attached && g_finalize.exchange(false);
  }
  if (cancelled) WatchSyncs(false);
}

bool AttachCupti(std::string* why) {
  if (!AttachCuptiOnce(why)) return false;
  g_attach_requests.fetch_add(1);
  return true;
}

uint64_t AttachRequests() { return g_attach_requests.load(); }

namespace {

bool AttachCuptiOnce(std::string* why) {
  Agent& a = A();
  bool attached = false, cancelled = false;
  {
    std::unique_lock<std::mutex> lock(g_detach_mu);
    // A detachment under way is let finish (then CUPTI is attached again, below); it ends within
    // kLaunchWait and cuptiFinalize, unless that hangs.
    if (!g_detach_cv.wait_for(lock, std::chrono::seconds(5), [] { return !g_detaching.load(); })) {
      *why = "a detachment of CUPTI did not end within 5 s";
      return false;
    }
    attached = a.attached;
    // Still attached: a detachment that waited for a synchronization in vain is called off.
    if (attached) cancelled = g_finalize.exchange(false);
  }
  if (attached) {
    if (cancelled) {
      WatchSyncs(false);
      KPROF_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE),
                  "record the devices' properties (the run's meta will lack them)");
      PauseFlusher(false);
    }
    return true;
  }
  // The subscriber first: after cuptiFinalize, the activity calls answer
  // CUPTI_ERROR_NOT_INITIALIZED until CUPTI is initialised again (H200, CUDA 13.0).
  if (!Subscribe()) {
    *why = a.subscriber_error;
    return false;
  }
  bool configured = true;  // (the attributes only tune: recording works without them)
  if (!HandBuffers(&configured)) {
    *why = "CUPTI refused kprof's record buffers";
    KPROF_CUPTI(cuptiUnsubscribe(a.subscriber), "unsubscribe after CUPTI refused the buffers");
    a.subscriber = nullptr;
    return false;
  }
  KPROF_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE),
              "record the devices' properties (the run's meta will lack them)");
  // NVTX reaches CUPTI from now (its ranges are recorded in the windows): kprof's own handlers
  // have watched it so far (nvtx_shim.h).
  if (!HandNvtxToCupti())
    std::fprintf(stderr, "kprof agent: CUPTI did not take NVTX: no range will be recorded\n");
  CaptureAttached(a.subscriber);
  a.attached = true;
  PauseFlusher(false);
  static std::once_flag version;
  std::call_once(version, [&] {
    uint32_t v = 0;
    if (KPROF_CUPTI(cuptiGetVersion(&v), "read the loaded CUPTI's version")) {
      std::lock_guard<std::mutex> lock(a.side_mu);
      a.side_meta.emplace_back("cupti_version", std::to_string(v));
    }
  });
  return true;
}

}  // namespace

bool DetachCupti(int timeout_ms, const std::atomic<bool>& stop) {
  Agent& a = A();
  if (!a.attached) return true;
  PauseFlusher(true);
  KPROF_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DEVICE),
              "stop the devices' records after a window");
  // Everything CUPTI holds goes to the file first: after cuptiFinalize no buffer comes back, and
  // the writer must not read one with CUPTI detached.
  FlushWithTimeout(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, kExitFlushTimeoutMs);
  WaitDrained(kExitFlushTimeoutMs);
  // (The synchronizations watched before the detachment is armed: a synchronization's callback
  // on another thread may finalize CUPTI as soon as it is, and no CUPTI call may follow that.)
  WatchSyncs(true);
  g_finalize = true;
  std::unique_lock<std::mutex> lock(g_detach_mu);
  g_detach_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return !a.attached || stop.load(); });
  return !a.attached;
}

uint64_t LaunchesThatWaitedForDetachment() { return g_launch_waits.load(); }

}  // namespace kprof::agent
