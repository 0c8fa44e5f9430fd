// Capture windows in the agent (issue 13, docs/capture.md): recording only between two events of
// the program (an NVTX range, cudaProfilerStart/Stop) or two moments (--delay, --duration).
// Outside a window no activity kind and no API record is enabled, so the program runs at close
// to its unprofiled speed; each window becomes a CaptureWindow record.
//
// Asked for through the environment `kprof run` sets: KPROF_CAPTURE ("nvtx:NAME" or
// "cuda-profiler-api"), KPROF_CAPTURE_COUNT (windows to record, default 1), KPROF_DELAY_MS and
// KPROF_DURATION_MS.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kprof::agent {

/// Reads the settings; true when recording is limited to windows (the activity kinds must then
/// not be enabled at start: the first window enables them). Meta describing the settings, and a
/// line for each bad setting (which disables windows: the whole process is recorded), go to
/// `meta`.
bool ConfigureCapture(std::vector<std::pair<std::string, std::string>>& meta);
/// Enables the callbacks the windows need on kprof's subscriber (NVTX pushes and pops, the
/// profiler API) and starts the timer for --delay and --duration. `kinds` and `graph_level` are
/// what each window enables. False when the trigger cannot work (no subscriber): the caller then
/// records the whole process.
bool StartCapture(CUpti_SubscriberHandle subscriber, uint32_t kinds, bool graph_level);
/// A callback for the windows (NVTX, profiler API); false for any other.
bool OnCaptureCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
/// True when windows were asked for and none is open: the counters' replay stays idle.
bool OutsideWindow();
/// Ends the windows at the end of collection: an open one is recorded as ended with the process;
/// the timer stops; the number of windows and the NVTX ranges seen go to the meta. Idempotent.
void EndCapture();

}  // namespace kprof::agent
