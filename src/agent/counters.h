// Hardware counters in the agent (docs/counters.md): PM sampling of GPU-wide
// throughputs on a thread of its own, and the range profiler replaying selected kernel launches
// from the launch callbacks. It only measures and hands records to the writer (KernelMetric,
// CounterSample, Overhead/CounterReplay); what the values mean is the analysis's.
//
// Asked for through the agent's configuration (kprof/agent_config.h), which `kprof run --metrics`
// sets: replay, sampled, the interval, the top N, the launches per kernel, a regular expression
// on kernel names, a file of kernel names from an earlier run.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kprof/agent_config.h"

namespace kprof::agent {

/// Takes the counters' settings from the agent's configuration; true when counters were asked
/// for. Problems with them (the configuration's "metrics" area, a bad regular expression, an
/// empty file of names) are written to stderr and to the file's meta (counters_problem).
bool ConfigureCounters(const AgentConfig& cfg, const std::vector<ConfigProblem>& problems);
/// Enables the callbacks the counters need on kprof's subscriber (null: none, and replay is
/// reported as impossible); sampling starts with each device's first context. Meta to write goes to
/// `meta`.
void StartCounters(CUpti_SubscriberHandle subscriber,
                   std::vector<std::pair<std::string, std::string>>& meta);
/// A callback for the counters (launch enter/exit, context created); false for any other.
bool OnCounterCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
/// Writer thread: kernel GPU time seen so far, by CUPTI's (mangled) name, for the top N.
void NoteKernelTimes(std::vector<std::pair<std::string, uint64_t>>& batch);
/// What the replay knows of a kernel CUPTI recorded without times.
enum class ReplayTimes : uint8_t {
  Unknown,  ///< not a replayed launch (or its replay measured nothing)
  Pending,  ///< its replay has not ended yet: ask again with a later buffer
  Known,    ///< the times are set
};
/// Writer thread: the times to give a kernel CUPTI recorded without (its launch was replayed):
/// its duration as the replay measured it, ending when its launch call returned.
ReplayTimes ReplayedKernelTimes(uint32_t correlation, uint64_t* start_ns, uint64_t* end_ns);
/// Stops the counters. In a context's destruction (`at_exit` false): sampling's thread is told
/// to stop, without waiting, and replay ends. At the exit, before the final flush: the sampling
/// thread is joined (the last samples were decoded by the exit handler while CUDA was up) and
/// the counters' problems go to the meta. Idempotent.
void StopCounters(bool at_exit);

}  // namespace kprof::agent
