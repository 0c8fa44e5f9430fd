// Which CUDA graph launches, and which graph work, belong to the capture windows (capture.h,
// docs/capture.md "CUDA graphs"). Graph-level tracing cannot be switched with the windows
// (CUPTI 13.0 crashes in cuGraphLaunch), and kernel records switched off do not always stop for
// graph nodes: so the runtime's and the driver's graph-launch callbacks note the correlation ids
// of the launches made while a window is open (per window, the lowest and the highest: CUPTI
// numbers calls in order), and the writer keeps a graph's records only when their id falls in a
// window's. A graph launched from the GPU (no call) belongs to the window its start falls in.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kprof/record.h"

namespace kprof::agent {

/// Windows are in use: from now on AdmitGraphWork decides.
void WatchGraphWork();
/// Enables the graph-launch callbacks on `subscriber` (if that fails, graph work is kept by the
/// time it ran).
void WatchGraphLaunches(CUpti_SubscriberHandle subscriber);
/// True for the runtime's and the driver's graph-launch calls.
bool IsGraphLaunchCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
/// A graph-launch call's callbacks: a launch entered inside a window is the window's, unless the
/// window closed before it returned (its call's record may then be lost while its work is kept:
/// neither is kept). A runtime launch and the driver call it makes go together.
void OnGraphLaunchCall(const CUpti_CallbackData& cb);
/// Window `number` (1, 2, ...) opened at `ns` (CUPTI clock), once recording is on.
void GraphWindowOpened(uint64_t ns, uint64_t number);
/// The open window closed at `ns`, before recording is switched off.
void GraphWindowClosed(uint64_t ns);
/// The writer's question for each record: does it belong to the windows? True without windows
/// and for anything but a graph launch and its work. A graph launch's call, the launch (graph
/// mode) or a node's kernel, copy or memset (node mode) belongs to the window open when the call
/// was made; a launch from the GPU to the window its start falls in.
bool AdmitGraphWork(const Record& r);
/// The counts for the run's meta: capture_graph_records_kept, _outside, capture_graph_match.
void GraphWorkMeta(std::vector<std::pair<std::string, std::string>>& meta);

}  // namespace kprof::agent
