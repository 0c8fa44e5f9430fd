// Capture windows in the agent (docs/capture.md): recording only between two events of the
// program (an NVTX range, cudaProfilerStart/Stop) or two moments (--delay, --duration, counted
// from the first CUDA context). Outside a window no activity kind and no API record is enabled,
// except graph-level tracing, which CUPTI cannot have switched while the program runs: the work
// of graphs launched outside the windows is left out when its records arrive
// (capture_graphs.h).
// Each window becomes a CaptureWindow record.
//
// Asked for through the agent's configuration (kprof/agent_config.h): capture, capture_count,
// delay_ms and duration_ms.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kprof/agent_config.h"
#include "kprof/record.h"

namespace kprof::agent {

/// Takes the windows' settings from the agent's configuration; true when recording is limited
/// to windows (the activity kinds must then not be enabled at start: the first window enables
/// them). Meta describing the settings, and a line for each problem of the configuration's
/// "capture" area (which disables windows: the whole process is recorded), go to `meta`.
bool ConfigureCapture(const AgentConfig& cfg, const std::vector<ConfigProblem>& problems,
                      std::vector<std::pair<std::string, std::string>>& meta);
/// Enables the callbacks the windows need on kprof's subscriber (NVTX pushes and pops, the
/// profiler API), context creation and graph launches, and starts the timer for --delay and
/// --duration. `kinds` is what each window enables. False when the trigger cannot work (no
/// subscriber): the caller then records the whole process.
bool StartCapture(CUpti_SubscriberHandle subscriber, uint32_t kinds);
/// A callback for the windows: NVTX and the profiler API (true: handled), context creation and
/// graph launches (false: other parts of the agent see them too); false for any other.
bool OnCaptureCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
/// True when windows were asked for and none is open: the counters' replay stays idle.
bool OutsideWindow();

// On demand (--on-demand, on_demand.h): the agent's control thread drives the windows; CUPTI is
// attached only around them.
/// Some device's primary context is active (`device`: the first such, when not null).
bool ActivePrimaryContext(CUdevice* device);
/// CUPTI was attached (again): the callbacks the windows need are enabled on `subscriber`
/// (context creation, graph launches; NVTX comes from kprof's own handlers, nvtx_shim.h);
/// nothing is recorded until a window opens.
void CaptureAttached(CUpti_SubscriberHandle subscriber);
/// CUPTI was detached: nothing is switched on any more.
void CaptureDetached();
/// The outermost callback of a graph launch made while CUPTI is attached and no window is open
/// (dormant): the GPU work's kinds (kernels, copies, memsets) are switched on from its entry
/// (`enter`) to its exit, so that the graph is never launched attached with them off (attach.cpp
/// says why); its work is left out as outside the windows (AdmitGraphWork).
void GraphLaunchOutsideWindows(bool enter);
/// How many graph launches GraphLaunchOutsideWindows switched the kinds on for, so far, and how
/// many times a context being made kept it from switching them (on or off).
std::pair<uint64_t, uint64_t> GraphLaunchesOutsideWindows();
/// Attaches CUPTI for a window (AttachCupti); a refusal is said once, on stderr and in the meta
/// (capture_problem), and no --capture nvtx:NAME push tries again.
bool AttachForWindow();
/// Opens a window now (kprof capture --duration; a dormant --delay's, with its trigger); false
/// when one is open.
bool OpenOnDemand(CaptureTrigger trigger = CaptureTrigger::OnDemand,
                  const char* by = "kprof capture");
/// Closes the open window, if any.
void CloseOnDemand(CaptureEnd why);
/// Notes the begin times (WallNs) of the NVTX range `range` from now on ("" stops).
void WatchSteps(const std::string& range);
/// The last begin times noted (oldest first, at most 8).
std::vector<uint64_t> StepBegins();
/// The window opens at the first begin of the watched range at or after `at_ns` (WallNs) and
/// closes at the end of the `steps`-th step.
void ArmSteps(uint64_t steps, uint64_t at_ns);
/// The windows as the control thread sees them.
struct WindowStatus {
  bool open = false;
  bool armed = false;    // ArmSteps waits for its step
  uint64_t windows = 0;  // opened so far in this process
  uint64_t steps_done = 0;
  uint64_t opened_wall_ns = 0, closed_wall_ns = 0;  // the last window's (WallNs)
  bool ended = false;                               // every window asked for was recorded
};
WindowStatus CaptureStatus();

// Dormant --capture nvtx:NAME (DormantCapture): the program's thread that pushes the range
// attaches CUPTI and opens the window (capture::DormantNvtx); the control thread detaches after.
/// The agent has started (the end of its initialisation): from now a push of the range may attach
/// CUPTI and open a window.
void DormantReady();
/// CUPTI is to be detached after a window (DetachCupti: at the program's next synchronization,
/// unless a window opens first); false when a window is open.
bool DetachAfterWindow(const std::atomic<bool>& stop);

/// Ends the windows at the end of collection: an open one is recorded as ended with the process;
/// the timer stops; the number of windows and the NVTX ranges seen go to the meta. Idempotent.
void EndCapture();

}  // namespace kprof::agent
