// What `kprof run` asks of the agent it injects, and how it travels: environment variables the
// launcher sets (AgentEnvironment) and the agent reads once when CUDA starts (ReadAgentConfig).
// One definition of the names and of their values' forms, shared by the CLI and the agent (the
// round trip is tested: tests/unit/format/agent_config_test.cpp). User settings only: the
// agent's knobs for diagnosis and measurement are DiagnosticKnobs (docs/cli.md lists both).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kprof {

struct AgentConfig {
  std::string output_dir;  ///< KPROF_OUTPUT_DIR: where the run files go ("." if none)
  std::string kinds;       ///< KPROF_KINDS: "kernel,memcpy,...", empty = all
  /// KPROF_GRAPH_TRACE: graph | node | auto (graph-level, unless the process is dormant until a
  /// window: then per node, since graph-level tracing needs CUPTI before graphs are made)
  std::string graph_trace = "graph";
  std::string pytorch;  ///< KPROF_PYTORCH: what the PyTorch layer adds (empty: not asked)
  // Capture windows (docs/capture.md).
  std::string capture;  ///< KPROF_CAPTURE: nvtx:NAME | cuda-profiler-api | on-demand; empty = none
  uint64_t capture_count = 1;  ///< KPROF_CAPTURE_COUNT: windows to record
  uint64_t delay_ms = 0;       ///< KPROF_DELAY_MS: after the first context; 0 = none
  uint64_t duration_ms = 0;    ///< KPROF_DURATION_MS: each window at most; 0 = no limit
  // Hardware counters (docs/counters.md).
  bool replay = false;                 ///< KPROF_METRICS has "replay": the top kernels replayed
  bool sampled = false;                ///< KPROF_METRICS has "sampled": PM sampling
  uint64_t metrics_top = 10;           ///< KPROF_METRICS_TOP (1..1000)
  uint64_t metrics_launches = 1;       ///< KPROF_METRICS_LAUNCHES (1..1000)
  uint64_t metrics_interval_us = 100;  ///< KPROF_METRICS_INTERVAL_US (10..1,000,000)
  std::string metrics_kernels;  ///< KPROF_METRICS_KERNELS: a regular expression, empty = top N
  std::string metrics_names;    ///< KPROF_METRICS_NAMES: a file of kernel names, empty = none
  /// KPROF_SELF_COST: kprof's own cost per event on this machine (kprof/self_cost.h's text),
  /// written into the meta for the analysis; empty = not measured.
  std::string self_cost;

  bool operator==(const AgentConfig&) const = default;
};

/// The environment the launcher adds for `c` ("NAME=VALUE" each): what differs from the
/// defaults, and the output directory and graph mode always.
std::vector<std::string> AgentEnvironment(const AgentConfig& c);

/// A value the agent could not read: the part of the agent it concerns ("capture", "metrics",
/// "agent") and what is wrong ("KPROF_CAPTURE_COUNT=0 is not a positive count").
struct ConfigProblem {
  std::string area;
  std::string message;
};

/// The configuration in the environment (`get`: getenv, or a test's map). A value that cannot
/// be read is left at its default and named in `problems`.
AgentConfig ReadAgentConfig(const std::function<const char*(const char*)>& get,
                            std::vector<ConfigProblem>& problems);

/// Every variable of AgentConfig: the launcher takes them out of its own environment before it
/// builds the program's (a kprof run started inside another must not inherit its windows).
const std::vector<std::string_view>& AgentConfigNames();

/// The agent's knobs for diagnosis and measurement, read once (never set by `kprof run`; a user
/// may set them by hand, docs/cli.md): not part of the contract above.
struct DiagnosticKnobs {
  bool backtrace = false;              ///< KPROF_AGENT_BACKTRACE: a stack on fatal signals
  bool capture_debug = false;          ///< KPROF_CAPTURE_DEBUG: each window's switching on stderr
  bool capture_api_ids = false;        ///< KPROF_CAPTURE_API=id: windows switch API records per id
  bool counters_debug = false;         ///< KPROF_COUNTERS_DEBUG
  bool replay_keep_enabled = false;    ///< KPROF_REPLAY_KEEP_ENABLED
  bool counters_evaluate = true;       ///< KPROF_COUNTERS_EVALUATE=0: decode, evaluate nothing
  bool pm_prepare = true;              ///< KPROF_PM_PREPARE=0: no preparation thread
  bool pm_availability = false;        ///< KPROF_PM_AVAILABILITY=1
  bool pm_refuse_chip_config = false;  ///< KPROF_PM_REFUSE_CHIP_CONFIG=1 (a test's fault)
  bool graph_names = true;             ///< KPROF_GRAPH_NAMES=0: no kernel names of graph nodes
  bool device_graphs = true;           ///< KPROF_DEVICE_GRAPHS=0: no device-launched graphs
  bool on_demand_detach = true;  ///< KPROF_ON_DEMAND_DETACH=0: CUPTI stays attached after a window
  bool on_demand_hold = true;  ///< KPROF_ON_DEMAND_DETACH=nohold: GPU records off at a window's end
  bool alloc_source = true;    ///< KPROF_ALLOC_SOURCE=0: no allocating library in memory records
  /// KPROF_DORMANT=0: --capture nvtx:NAME and --delay attach CUPTI from the start (as before)
  bool dormant_nvtx = true;
  uint64_t buffer_mb = 0;         ///< KPROF_BUFFER_MB (1..256): CUPTI buffer size; 0 = default
  uint64_t device_buffer_mb = 0;  ///< KPROF_DEVICE_BUFFER_MB (1..1024); 0 = default
  uint64_t flush_ms = 0;          ///< KPROF_FLUSH_MS (10 or more); 0 = default
};
DiagnosticKnobs ReadDiagnosticKnobs(const std::function<const char*(const char*)>& get);

/// Whether the agent stays dormant, CUPTI not attached, until a window opens, and detaches it
/// again after (docs/capture.md, "Dormant"): on demand; for --capture nvtx:NAME, whose trigger
/// kprof's own NVTX handlers watch, unless a --delay arms it; and for a --delay of the whole
/// process, which the agent's control thread times. Not when hardware counters were asked for
/// (they are set up at the start), graph-level tracing was asked for explicitly (graph_trace
/// "graph": it needs CUPTI from the start), or KPROF_DORMANT=0 (on demand excepted).
bool DormantCapture(const AgentConfig& c, const DiagnosticKnobs& k);

}  // namespace kprof
