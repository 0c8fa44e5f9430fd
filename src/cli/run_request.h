// Internal to the CLI: what `kprof run` was asked (its options, parsed and checked before the
// program starts) and what it asks of the agent (kprof/agent_config.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/present.h"
#include "kprof/agent_config.h"

namespace kprof::cli {

struct RunRequest {
  std::vector<std::string> program;  ///< PROGRAM ARGS...
  std::string out_dir;               ///< -o (default runs/<date-time>)
  // graph_trace "auto" (no --graph-trace): graph-level, or per node in a dormant process
  std::string kinds, graph_trace = "auto", pytorch = "auto";
  std::string calibrate = "auto";  ///< --calibrate: kprof's own cost per event (cli/calibrate.h)
  int repeat = 1;
  bool quiet = false, force = false;
  // --metrics: what was asked, the top N, and the names taken from --metrics-from.
  bool replay = false, sampled = false;
  int metrics_top = 10, metrics_interval_us = 100, metrics_launches = 1;
  std::string metrics_kernels;
  std::vector<std::string> metric_names;
  // Capture windows.
  std::string capture;
  uint64_t capture_count = 1;
  double delay_s = 0, duration_s = 0;
  bool on_demand = false;  ///< --on-demand: dormant until kprof capture (docs/capture.md)
  ViewOptions view;        ///< the report's options
};

/// Parses and checks kprof run's arguments (options, "--", the program) and the places of its
/// outputs. The exit status to end with when they are not usable (a message was printed).
std::optional<int> ParseRunRequest(const std::vector<std::string>& args, RunRequest& r);

/// The environment that injects `agent` into a program (for CUDA and NVTX) and asks it what `c`
/// asks (kprof/agent_config.h): `kprof run`'s program and its calibration runs alike.
std::vector<std::string> AgentInjection(const std::string& agent, const AgentConfig& c);

/// What the agent is asked for run directory `abs_dir`; `python_dir`: the PyTorch layer's folder
/// ("" when none). Writes the --metrics-from kernel names into the directory.
AgentConfig AgentConfigFor(const RunRequest& r, const std::string& abs_dir,
                           const std::string& python_dir);

}  // namespace kprof::cli
