// Internal to the capture windows (capture.cpp, capture_on_demand.cpp): their settings, their
// state under one mutex, and the steps that open and close a window. See capture.h.
#pragma once

#include <cupti.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kprof/record.h"

namespace kprof::agent::capture {

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
  std::thread timer;
  // What CUPTI records now (the kinds of `kinds`) and what the windows want: they differ while
  // a switch waits for a context (Sync).
  bool kinds_on = false;
  bool want_on = false;
  // Dormant, a graph launched outside the windows while CUPTI is attached is launched with the GPU
  // work's kinds on (attach.cpp says why): how many such launches are under way now.
  int outside_launches = 0;
  uint64_t outside_launches_total = 0;
  // Times a context being made kept such a launch's switching from being made.
  uint64_t outside_launches_unswitched = 0;
  bool context_ready = false;                        // the first context exists
  uint64_t context_ns = 0;                           // when it was made (CUPTI clock)
  std::chrono::steady_clock::time_point context_at;  // the same, for the timer
  std::chrono::steady_clock::time_point opened_at;   // the open window's opening, for the timer
  uint64_t deferred_switches = 0;                    // switches that waited for a context
  // On demand (capture_on_demand.cpp): the step range watched, its last begins (WallNs), and the
  // window ArmSteps waits for.
  std::string steps_range;
  std::vector<uint64_t> step_begins;
  bool steps_armed = false;
  uint64_t steps_at = 0, steps_wanted = 0, steps_done = 0;
  uint64_t opened_wall = 0, closed_wall = 0;
};

Settings& Config();
State& S();
/// CUPTI's clock (a failure gives 0: the window's record is then unplaced).
uint64_t Now();
/// Brings what CUPTI records in line with what the windows want (see capture.cpp). With the
/// state's mutex held; returns the API ids enabled.
int Sync(State& s);
/// Opens a window (with the state's mutex held); nothing when one is open or all were recorded.
void Open(State& s, CaptureTrigger trigger, std::string by);
/// Closes the open window and makes its record (with the state's mutex held).
void Close(State& s, CaptureEnd why);
/// Enables the callbacks of context creation and graph launches on `subscriber`.
void WatchContexts(CUpti_SubscriberHandle subscriber);
/// True while a window is open (read without the mutex by the callbacks).
extern std::atomic<bool> g_window_open;
/// A switch of CUPTI's kinds outside Sync begins (false, nothing to undo: a context-making call
/// is in flight, and no kind may be switched then: capture.cpp); SwitchDone ends it.
bool TrySwitchNow();
void SwitchDone();
/// CUPTI attachments so far (on demand: one per window; else 1).
extern std::atomic<uint64_t> g_attachments;
/// Pushes and starts of any NVTX range seen.
extern std::atomic<uint64_t> g_nvtx_ranges;
/// An NVTX call as the windows see it, decoded once from CUPTI's callback (DecodeNvtx) or made by
/// kprof's own NVTX handlers (on demand, nvtx_shim.h): its kind, the ASCII message of a push or
/// start, its domain (null: the default), and this thread's push depth in that domain since
/// CUPTI was last attached: for a push the depth below it, for a pop the depth after it.
struct NvtxEvent {
  enum class Kind { Push, Pop, Start, End, Other } kind = Kind::Other;
  const char* message = nullptr;
  const void* domain = nullptr;
  int depth = 0;
  uint64_t end_id = 0;            // End: the id of the range ended
  uint64_t generation = 0;        // kprof's NVTX handlers: the hand-over its depth counts from
  const void* started = nullptr;  // Start: where NVTX returns the new range's id (may be null)
};
/// Decodes a callback, keeping this thread's depths and counting pushes and starts.
NvtxEvent DecodeNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData& d);
/// The open window now belongs to the range `push` began on this thread (the mutex held).
void SetOwner(State& s, const NvtxEvent& push);
/// The window is open and `pop` brought its owner's thread back below the range that opened it
/// (the mutex held).
bool OwnerReturned(const State& s, const NvtxEvent& pop);
/// The NVTX callbacks of an on-demand run (capture_on_demand.cpp).
void OnDemandNvtx(const NvtxEvent& e);
/// Those of a dormant --capture nvtx:NAME run: the range's push attaches CUPTI and opens the
/// window, its pop closes it (capture_on_demand.cpp).
void DormantNvtx(const NvtxEvent& e);
/// kprof's NVTX handlers watch the range of a dormant --capture nvtx:NAME from the program's first
/// NVTX call (only its own pushes reach DormantNvtx until CUPTI is attached).
void WatchDormantRange();
/// The longest a program's thread waited for CUPTI to attach at a dormant window's push.
extern std::atomic<uint64_t> g_attach_ns_max;
/// Pushes of a dormant range that opened no window because no context was made yet.
extern std::atomic<uint64_t> g_before_context;
/// StartCapture has run: the windows can open.
extern std::atomic<bool> g_configured;
/// Every NVTX callback id the windows watch.
extern const CUpti_CallbackId kNvtxIds[11];

}  // namespace kprof::agent::capture
