// The windows of an on-demand run (capture.h, "On demand"; docs/capture.md): opened and closed
// for the agent's control thread (on_demand.cpp), or at the steps of an NVTX range it watches.
#include <cuda.h>
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/capture.h"
#include "agent/capture_internal.h"
#include "agent/cupti_setup.h"
#include "agent/nvtx_shim.h"
#include "kprof/on_demand.h"

namespace kprof::agent {
namespace {

using namespace capture;  // NOLINT(google-build-using-namespace): the windows' internals

constexpr size_t kStepsKept = 8;
// A step range is watched: the NVTX events are compared by name (else only depths count).
std::atomic<bool> g_watching_steps{false};

// Dormant --capture nvtx:NAME: one attachment at a time, by the programs' threads opening a
// window or the control thread detaching after one (lock order: this, then the state's).
std::mutex g_attach_mu;
// The agent has started (the end of its Initialize, inside cuInit): before, a push of the range
// opens no window (CUPTI attached while cuInit runs on another thread hung processes).
std::atomic<bool> g_agent_ready{false};
// CUPTI refused to attach once: no push tries again.
std::atomic<bool> g_attach_failed{false};
// This thread's graph launch switched the GPU work's kinds on (GraphLaunchOutsideWindows).
thread_local bool t_outside_launch = false;

}  // namespace

bool ActivePrimaryContext(CUdevice* device) {
  int n = 0;
  if (cuDeviceGetCount(&n) != CUDA_SUCCESS) return false;
  for (int i = 0; i < n; ++i) {
    CUdevice dev = 0;
    unsigned flags = 0;
    int active = 0;
    if (cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
        cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active != 0) {
      if (device != nullptr) *device = dev;
      return true;
    }
  }
  return false;
}

void CaptureAttached(CUpti_SubscriberHandle subscriber) {
  g_attachments.fetch_add(1);
  PrepareApiRecords();  // (once; any CUPTI call attaches CUPTI, so not before now)
  // No NVTX callbacks: kprof's own NVTX handlers give the windows their pushes and pops
  // (nvtx_shim.h), attached or not.
  WatchContexts(subscriber);
  // (Asked outside the state's mutex, which a context's making takes in its callback.)
  const bool context = ActivePrimaryContext(nullptr);
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  // (a window opened now may switch at once)
  if (!s.context_ready && context) {
    s.context_ready = true;
    s.context_ns = Now();
    s.context_at = std::chrono::steady_clock::now();
    s.cv.notify_all();  // the timer of a --duration
  }
}

void CaptureDetached() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kinds_on = false;
  s.want_on = false;
  s.outside_launches = 0;
  A().attached = false;  // (under the state's mutex: a graph launch then switches nothing)
}

void GraphLaunchOutsideWindows(bool enter) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint32_t gpu = s.kinds & kGpuWorkKinds;
  if (gpu == 0) return;
  if (enter) {
    // (This thread's launch before, if any, is over: its exit may never have come, CUPTI
    // detached meanwhile, which counted it out: CaptureDetached.)
    t_outside_launch = false;
    if (s.kinds_on || !A().attached) return;  // a window's: recorded as its own
    if (s.outside_launches == 0) {
      // Not while a context is being made (capture.cpp): then launched with them off.
      if (!TrySwitchNow()) {
        ++s.outside_launches_unswitched;
        return;
      }
      EnableActivityKinds(gpu, nullptr, ApiRecords::Kind);
      SwitchDone();
    }
    ++s.outside_launches;
    ++s.outside_launches_total;
    t_outside_launch = true;
    return;
  }
  if (!t_outside_launch) return;
  t_outside_launch = false;
  if (s.outside_launches == 0 || --s.outside_launches > 0 || s.kinds_on) return;
  // (A window opened meanwhile keeps them on.) Not while a context is being made: then left on
  // until the next window's end (not waited for here: the context's callback needs this mutex).
  if (!TrySwitchNow()) {
    ++s.outside_launches_unswitched;
    return;
  }
  DisableActivityKinds(gpu, ApiRecords::Kind);
  SwitchDone();
}

std::pair<uint64_t, uint64_t> GraphLaunchesOutsideWindows() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return {s.outside_launches_total, s.outside_launches_unswitched};
}

bool OpenOnDemand(CaptureTrigger trigger, const char* by) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.open) return false;
  Open(s, trigger, by);
  return s.open;
}

void CloseOnDemand(CaptureEnd why) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.steps_armed = false;
  Close(s, why);
}

void WatchSteps(const std::string& range) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.steps_range = range;
  s.step_begins.clear();
  s.steps_armed = false;
  g_watching_steps = !range.empty();
  nvtx_shim::Watch(!range.empty());
}

std::vector<uint64_t> StepBegins() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.step_begins;
}

void ArmSteps(uint64_t steps, uint64_t at_ns) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.steps_wanted = steps;
  s.steps_done = 0;
  s.steps_at = at_ns;
  s.steps_armed = true;
}

WindowStatus CaptureStatus() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  WindowStatus w;
  w.open = s.open;
  w.armed = s.steps_armed;
  w.windows = s.windows;
  w.steps_done = s.steps_done;
  w.opened_wall_ns = s.opened_wall;
  w.closed_wall_ns = s.closed_wall;
  w.ended = s.ended;
  return w;
}

// (A program's thread opening a --capture nvtx:NAME window holds g_attach_mu; a dormant --delay's
// control thread is the only one to attach.)
bool AttachForWindow() {
  std::string why;
  if (AttachCupti(&why)) return true;
  g_attach_failed = true;
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr, "kprof agent: no window: CUPTI could not be attached: %s\n", why.c_str());
    Agent& a = A();
    std::lock_guard<std::mutex> lock(a.side_mu);
    a.side_meta.emplace_back("capture_problem", "CUPTI could not be attached: " + why);
  });
  return false;
}

namespace {

// The range of --capture nvtx:NAME, as the environment names it (the agent's configuration reads
// the same; a push may come before the agent has started): null until first asked.
std::atomic<const char*> g_range_text{nullptr};
const char* RangeText() {
  if (const char* r = g_range_text.load(std::memory_order_acquire)) return r;
  static const std::string range = [] {
    const char* c = std::getenv("KPROF_CAPTURE");
    return c != nullptr && std::strncmp(c, "nvtx:", 5) == 0 ? std::string(c + 5) : std::string();
  }();
  g_range_text.store(range.c_str(), std::memory_order_release);
  return range.c_str();
}

}  // namespace

void DormantReady() { g_agent_ready.store(true, std::memory_order_release); }

bool DetachAfterWindow(const std::atomic<bool>& stop) {
  std::lock_guard<std::mutex> attach(g_attach_mu);
  if (CaptureStatus().open) return false;
  // (Not waited for here: a program's thread may want to attach for its next window meanwhile.)
  DetachCupti(0, stop);
  return true;
}

namespace capture {

// The step range's begins are noted; the armed window opens at the first begin at or after its
// moment, on that thread, and closes when that thread's stack has come back below it as many
// times as the steps asked (a step is a push and its pop at the same depth).
void OnDemandNvtx(const NvtxEvent& e) {
  if (e.kind == NvtxEvent::Kind::Push) {
    if (!g_watching_steps.load(std::memory_order_relaxed) || e.message == nullptr) return;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.steps_range != e.message) return;
    const uint64_t now = ondemand::WallNs();
    s.step_begins.push_back(now);
    if (s.step_begins.size() > kStepsKept) s.step_begins.erase(s.step_begins.begin());
    if (!s.steps_armed || s.open || now < s.steps_at) return;
    s.steps_armed = false;
    Open(s, CaptureTrigger::OnDemandSteps, s.steps_range);
    if (s.open) SetOwner(s, e);
  } else if (e.kind == NvtxEvent::Kind::Pop && g_window_open) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.opened_trigger == CaptureTrigger::OnDemandSteps && OwnerReturned(s, e) &&
        ++s.steps_done >= s.steps_wanted)
      Close(s, CaptureEnd::Steps);
  }
}

std::atomic<uint64_t> g_attach_ns_max{0};
std::atomic<uint64_t> g_before_context{0};

namespace {

// Whether CUPTI may be attached now: cuInit has returned (a device can be counted) and a context
// has been made: this thread's current one, or a device's primary context, retained (which waits
// for a making under way on another thread). Attaching while cuInit or the first context was
// under way hung processes (on_demand.cpp, WaitForCuda); attached after cuInit and before any
// context, the program crashed when it made its context (H200, CUDA 13.0: SIGSEGV in
// GpuCaptureFaults.MatrixOfWindowsAroundGraphs, nvtx_before_context).
bool CudaSettled() {
  int n = 0;
  if (cuDeviceGetCount(&n) != CUDA_SUCCESS) return false;
  if (CUcontext current = nullptr; cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr)
    return true;
  CUdevice dev = 0;
  if (!ActivePrimaryContext(&dev)) return false;
  CUcontext ctx = nullptr;
  if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return false;
  cuDevicePrimaryCtxRelease(dev);
  return true;
}

// The range's push or start: CUPTI attached, the window opened.
__attribute__((noinline)) void DormantBegin(const NvtxEvent& e) {
  State& s = S();
  const bool start = e.kind == NvtxEvent::Kind::Start;
  // Start/end ranges are matched by the id NVTX returns: without it, none can close.
  if (start && e.started == nullptr) return;
  const auto wanted = [&s] { return s.armed && !s.open && !s.ended; };
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.nvtx_seen;
    if (!wanted()) return;
  }
  // Not before the agent has started, nor before a context is made (docs/capture.md, "Limits").
  if (!g_agent_ready.load(std::memory_order_acquire) || g_attach_failed.load()) return;
  // (Attached already, CUDA has settled; and a push made where CUDA calls are not allowed, a
  // host function's callback, makes none then.)
  if (!A().attached && !CudaSettled()) {
    g_before_context.fetch_add(1);
    return;
  }
  std::lock_guard<std::mutex> attach(g_attach_mu);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!wanted()) return;  // another thread's push opened it meanwhile
  }
  const bool was_attached = A().attached;
  const auto t0 = std::chrono::steady_clock::now();
  const bool attached = AttachForWindow();
  if (!was_attached && attached) {  // the program's thread waited this long
    const auto ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    if (ns > g_attach_ns_max.load()) g_attach_ns_max.store(ns);
  }
  if (!attached) return;
  // A window needs NVTX at CUPTI too: kprof's handlers keep depths, and give pops, only then.
  // CUPTI refusing NVTX is not tried again (attached without a window, CUPTI is detached again
  // by the control thread).
  if (!nvtx_shim::Forwarding()) {
    g_attach_failed = true;
    return;
  }
  // NVTX handed to CUPTI since this push was counted (by this push, or another thread's) starts
  // the threads' depths again, this push the first of its thread's (nvtx_shim.h).
  const bool handed = nvtx_shim::Generation() != e.generation;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!wanted()) return;
  Open(s, CaptureTrigger::Nvtx, Config().range);
  if (!s.open) return;
  if (start) {
    s.owner_range_id = *static_cast<const nvtxRangeId_t*>(e.started);
  } else {
    SetOwner(s, e);
    if (handed) s.owner_depth = 0;
  }
}

// A pop or end while a window is open: the window's own closes it.
__attribute__((noinline)) void DormantEnd(const NvtxEvent& e) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!(e.kind == NvtxEvent::Kind::Pop ? OwnerReturned(s, e)
                                         : (e.kind == NvtxEvent::Kind::End && s.open &&
                                            s.owner_range_id != 0 && s.owner_range_id == e.end_id)))
      return;
    Close(s, CaptureEnd::RangeEnded);
  }
  WakeControl();  // CUPTI detached at the program's next synchronization
}

}  // namespace

void WatchDormantRange() {
  // Not attached, only the range's own pushes reach DormantNvtx (the others cost a comparison
  // of their first character in kprof's handler, nvtx_shim.h).
  nvtx_shim::OnlyNamed(RangeText());
  nvtx_shim::Watch(true);
}

// The pushes of the range (and, attached, every push, pop, start and end) come here. The range's
// push (or start) opens a window: CUPTI is attached first, on the program's thread, and gets the
// push after this (nvtx_shim.h). Its pop (or end) closes the window; the control thread detaches
// CUPTI after (on_demand.cpp, StartDormant).
void DormantNvtx(const NvtxEvent& e) {
  if (e.kind == NvtxEvent::Kind::Push || e.kind == NvtxEvent::Kind::Start) {
    // (Counted without a locked instruction; threads pushing at once may lose a count.)
    g_nvtx_ranges.store(g_nvtx_ranges.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
    const char* m = e.message;
    const char* r = RangeText();
    if (m == nullptr || r[0] == '\0' || m[0] != r[0] || std::strcmp(m, r) != 0) return;
    DormantBegin(e);
    return;
  }
  if (g_window_open.load(std::memory_order_relaxed)) DormantEnd(e);
}

}  // namespace capture
}  // namespace kprof::agent
