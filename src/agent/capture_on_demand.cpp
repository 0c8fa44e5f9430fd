// The windows of an on-demand run (capture.h, "On demand"; docs/capture.md): opened and closed
// for the agent's control thread (on_demand.cpp), or at the steps of an NVTX range it watches.
#include <cuda.h>
#include <cupti.h>

#include <algorithm>
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
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  // (a window opened now may switch at once)
  if (!s.context_ready && ActivePrimaryContext(nullptr)) {
    s.context_ready = true;
    s.context_ns = Now();
    s.context_at = std::chrono::steady_clock::now();
  }
}

void CaptureDetached() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kinds_on = false;
  s.want_on = false;
}

bool OpenOnDemand() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.open) return false;
  Open(s, CaptureTrigger::OnDemand, "kprof capture");
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
  return w;
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

}  // namespace capture
}  // namespace kprof::agent
