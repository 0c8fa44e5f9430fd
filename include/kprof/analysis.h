// Analysis of recorded runs: attribution of GPU work to API calls and NVTX ranges, per-kernel /
// per-op / per-range-path / per-stream / per-device views, and run-level totals.
// Pure functions over the run's timeline (kprof/timeline.h); knows nothing of CUPTI. All times
// are integer nanoseconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/counters.h"
#include "kprof/distributed.h"
#include "kprof/memory.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {

/// Distribution of durations (ns). Empty distribution: all zero.
struct Stat {
  uint64_t count = 0;
  uint64_t total_ns = 0;
  uint64_t mean_ns = 0;
  uint64_t min_ns = 0;
  uint64_t median_ns = 0;
  uint64_t p95_ns = 0;
  uint64_t max_ns = 0;
};
/// Builds a Stat from a list of durations (sorts `durations` in place).
Stat MakeStat(std::vector<uint64_t>& durations);

/// Memory is not a grouping of GPU time: it shows who held device memory (Analysis::memory).
enum class GroupBy {
  Kernel,
  Op,
  RangePath,
  Stream,
  Device,
  Graph,
  Module,
  Source,
  Compiled,
  Memory
};
/// Parses "kernel|op|range-path|stream|device|graph|module|source|compiled|memory"; nullopt for
/// anything else.
std::optional<GroupBy> ParseGroupBy(const std::string& s);
const char* GroupByName(GroupBy by);

/// A kernel (by name) inside a group, or at top level in the Kernel view.
struct KernelRow {
  std::string name;
  Stat stat;         ///< durations of each execution
  double share = 0;  ///< total_ns / GPU busy time of the run (0..1, may exceed 1 with overlap)
  // Launch configuration of the most frequent launch (for hints): grid/block/regs/smem.
  Dim3 grid, block;
  uint32_t registers = 0;
  uint32_t shared_mem = 0;
  uint64_t max_blocks = 0;       ///< largest grid (blocks) seen
  Bound bound = Bound::Unknown;  ///< from hardware counters, when measured (Analysis::counters)
};

/// One row of a grouped view: an op (innermost NVTX range / cpu_op at launch), a range path
/// ("step/forward/linear"), a stream ("dev 0 stream 7"), a device ("dev 0 NVIDIA H100"),
/// or, in the kernel view, a kernel.
struct GroupRow {
  std::string key;                ///< op name, path, stream label, device label or kernel name
  uint64_t calls = 0;             ///< range occurrences (op/path), launches (kernel), activities
  uint64_t gpu_ns = 0;            ///< sum of durations of attributed GPU activities
  uint64_t gpu_projected_ns = 0;  ///< length of the union of their intervals
  uint64_t cpu_ns = 0;            ///< total duration of the range itself on its CPU thread
  uint64_t kernels = 0;           ///< kernel executions attributed
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t bytes = 0;                  ///< bytes moved by attributed memcpy + memset
  double share = 0;                    ///< gpu_ns / GPU busy time of the run
  int64_t mem_delta_bytes = 0;         ///< device memory allocated minus freed inside the range
  std::vector<KernelRow> kernel_rows;  ///< kernels beneath (Op/RangePath views), by total desc
  /// PyTorch autograd (docs/pytorch.md). Op view: GPU time of the backward work of the autograd
  /// nodes this op made in the forward pass (that work is also in the rows of the ops that ran
  /// it). Module view: the part of gpu_ns that is backward work of the module's forward ops.
  uint64_t bwd_gpu_ns = 0;
  /// Module view: the module's class ("Linear"). Source view: the op called from that line with
  /// most GPU time (its backward work counted for it). Compiled view: the module that called the
  /// compiled code ("" if unknown).
  std::string kind;
  /// Op view, with source lines (--pytorch stack): the program's FILE:LINE its GPU work was
  /// called from most (for backward work, the line of the forward op); "" otherwise.
  std::string source;
  uint32_t depth = 0;  ///< module view: enclosing modules shown above it (tree order)
  /// From hardware counters: the kernel's class (kernel view), or the class of most of the
  /// measured GPU time of its kernels (op and range-path views); Unknown when none was measured.
  Bound bound = Bound::Unknown;
};

/// An NVTX range name with its calls and CPU-side time (the range's own duration).
struct RangeRow {
  std::string name;
  std::string domain;
  uint64_t calls = 0;
  Stat stat;  ///< CPU durations
  uint32_t max_depth = 0;
};

struct StreamBusy {
  uint16_t device = 0;
  uint32_t stream = 0;
  uint64_t busy_ns = 0;  ///< union of GPU activity intervals on this stream
  uint64_t activities = 0;
};

struct DeviceInfo {
  uint16_t id = 0;
  std::string name;
  uint32_t sm_count = 0;
  uint64_t memory_bytes = 0;
  std::string compute_capability;  ///< "9.0"
};

/// A point of the device memory timeline (after an allocation or free).
struct MemPoint {
  uint64_t t_ns = 0;
  uint16_t device = 0;
  int64_t bytes_in_use = 0;
};

/// Run-level totals. Times are over all processes unless noted.
struct RunSummary {
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t wall_ns = 0;  ///< last record end - first record start (inside capture windows)
  /// Union of all GPU activity intervals; with several GPUs, the sum over GPUs of each one's
  /// union (docs/distributed.md).
  uint64_t gpu_busy_ns = 0;
  uint64_t gpu_idle_ns = 0;  ///< wall_ns - gpu_busy_ns; with several GPUs, the sum of theirs
  /// gpu_busy_ns / wall_ns; with several GPUs, over the sum of their wall times (0..1).
  double utilisation = 0;
  uint64_t gpus = 0;       ///< GPUs that ran work (Analysis::dist.devices)
  uint64_t kernel_ns = 0;  ///< sum of kernel durations
  uint64_t kernels = 0;
  uint64_t memcpys = 0;
  uint64_t memcpy_ns = 0;
  uint64_t memcpy_bytes[6] = {};  ///< indexed by CopyKind
  uint64_t memcpy_count[6] = {};  ///< indexed by CopyKind
  uint64_t memsets = 0;
  uint64_t memset_bytes = 0;
  uint64_t graph_launches = 0;  ///< CUDA graph launches recorded as a whole (graph-level)
  uint64_t graph_ns = 0;        ///< their GPU time
  uint64_t graph_node_activities =
      0;                        ///< kernels, copies and memsets run inside graphs (node-level)
  uint64_t graph_captures = 0;  ///< graphs created (stream capture or the graph API)
  uint64_t graph_instantiations = 0;   ///< executable graphs created
  uint64_t graph_device_launches = 0;  ///< graph launches made from the device (graph-level)
  /// Executable graphs instantiated for launch from the device in processes that did not
  /// record such launches (node-level tracing; CUPTI records them only at graph level).
  uint64_t graph_device_unrecorded = 0;
  uint64_t syncs = 0;
  uint64_t sync_ns = 0;  ///< host time blocked in Sync records
  uint64_t api_calls = 0;
  uint64_t api_ns = 0;                   ///< time in runtime + driver API calls (outermost only)
  uint64_t launches = 0;                 ///< kernel launch API calls
  double launch_rate_per_s = 0;          ///< launches / wall
  uint64_t copy_compute_overlap_ns = 0;  ///< time where a copy and a kernel ran concurrently
  int64_t peak_memory_bytes = 0;         ///< peak device memory in use (sum over devices)
  uint64_t allocs = 0, frees = 0;
  uint64_t nvtx_ranges = 0;
  uint64_t dropped_records = 0;
  uint64_t missing_timestamps = 0;
  uint64_t processes = 0;
  uint64_t incomplete_processes = 0;  ///< files without End block (crash / kill)
  uint64_t overhead_ns = 0;           ///< CUPTI overhead records
  /// `kprof run --pytorch MODE` (the processes' meta), "" when not asked; and what the PyTorch
  /// layer added where torch was imported ("ops,modules"), "" when nothing.
  std::string pytorch_mode, pytorch_added;
  /// What named PyTorch's ops: kprof's op observer, as its meta describes it ("PyTorch
  /// RecordFunction observer, torch 2.11.0+cu130"); "" for PyTorch's NVTX mode, or none.
  std::string pytorch_ops;
  uint64_t backward_linked_ns = 0;  ///< GPU time of backward work traced to its forward op
  bool aten_ranges = false;         ///< PyTorch's own op ranges ("aten::...") were recorded
  /// Capture windows (kprof run --capture/--delay/--duration; docs/capture.md): what opened
  /// them ("nvtx:step", "cuda-profiler-api", "time"; "" when whole processes were recorded),
  /// the windows recorded over all processes, and why some process recorded none. wall_ns is
  /// then the time inside windows (the union over processes), not the span from first to last.
  std::string capture;
  uint64_t capture_windows = 0;
  std::string capture_problem;
  /// kprof's own cost (docs/hints.md, "kprof's own cost"): what was taken out of the priced idle
  /// gaps for it, over all processes; the figures per event of the first process that had them
  /// (all processes of one kprof run share them); processes recorded without them.
  uint64_t self_cost_ns = 0;
  std::optional<SelfCost> self_cost;
  /// Start-up told from the steady state (docs/hints.md, "Start-up and the steady state"): the
  /// root module whose first call begins the repeated part (ProcessTimeline::steady_from_what of
  /// the first process that has one), and the GPU work before it, which no hint prices.
  std::string steady_from;
  uint64_t startup_copies = 0, startup_copy_bytes = 0, startup_copy_ns = 0, startup_kernels = 0;
  uint64_t self_cost_unmeasured = 0;
  std::vector<StreamBusy> streams;
  std::vector<DeviceInfo> devices;
};

/// A CUDA graph that was launched: the graph view (docs/analysis.md, "CUDA graphs").
struct GraphRow {
  uint32_t pid = 0;
  uint32_t id = 0;              ///< CUPTI's id of the executable graph
  uint64_t launches = 0;        ///< launches with GPU time recorded
  uint64_t nodes = 0;           ///< nodes of the graph, where its building was recorded (else 0)
  uint64_t instantiations = 0;  ///< executable graphs made from the same template (1 = once)
  Stat per_launch;              ///< GPU time of each launch (first node's start to last node's end)
  uint64_t node_activities = 0;  ///< node-level: kernels, copies and memsets recorded
  uint64_t busy_ns = 0;  ///< union of its work on the GPU (idle time inside launches excluded)
  /// Where its nodes were captured, most nodes first: "capture/layer3 (10%), ...".
  std::string captured_in;
  uint64_t device_launches = 0;  ///< launches made from the device, by a kernel of another graph
  std::string launched_by;       ///< the graphs whose kernels launched it: "graph 11, ..."

  std::string Key() const;  ///< "graph ID" (with "pid P " before it when pid != 0)
};

/// Per-process summary (rank view).
struct ProcessSummary {
  uint32_t pid = 0;
  int rank = -1;
  std::string source;
  bool complete = true;
  uint64_t wall_ns = 0, gpu_busy_ns = 0, kernels = 0, kernel_ns = 0;
  uint64_t windows = 0;  ///< capture windows recorded (0: the whole process)
};

struct AnalysisOptions {
  GroupBy by = GroupBy::Op;
  std::string
      filter;      ///< ECMAScript regex on row keys (kernel names in the kernel view); empty = all
  size_t top = 0;  ///< 0 = all rows
  enum class Sort { Gpu, Calls, Cpu, Name } sort = Sort::Gpu;
  bool timeline = false;   ///< fill Analysis::memory_timeline
  bool all_views = false;  ///< also fill Analysis::paths, streams and devices (one pass)
  /// Analysis::memory's owner lists uncut, as with --by memory (kprof export's owner tables).
  bool every_memory_owner = false;
};

struct Hint;  // kprof/hints.h

/// The result of analysing a Run.
struct Analysis {
  GroupBy by = GroupBy::Op;
  RunSummary summary;
  std::vector<GroupRow> rows;      ///< the requested view, sorted, filtered, top-N applied
  std::vector<GroupRow> ops;       ///< the full op view (all ops, by GPU time), for diff/hints
  std::vector<KernelRow> kernels;  ///< all kernels by total GPU time (not truncated)
  /// With AnalysisOptions::all_views: the range-path, stream and device views, every row, by
  /// GPU time, unfiltered (the HTML report's tables). Empty otherwise.
  std::vector<GroupRow> paths, streams, devices;
  std::vector<RangeRow> ranges;  ///< NVTX ranges by name
  std::vector<ProcessSummary> processes;
  std::vector<MemPoint> memory_timeline;
  std::vector<GraphRow> graphs;  ///< every launched CUDA graph, most GPU time first
  /// Every nn.Module with its calls and GPU time, forward and backward, inclusive of the modules
  /// inside it, in tree order (kprof run --pytorch, docs/pytorch.md). Empty without modules.
  std::vector<GroupRow> modules;
  /// --pytorch stack: GPU time by the program's source line (FILE:LINE) of the torch call that
  /// launched it (backward work: the line of its forward op), by GPU time. Empty otherwise.
  std::vector<GroupRow> sources;
  /// torch.compile: GPU time by compiled region ("compiled 0/0 forward"), compilation itself
  /// (kCompilingRegion) and the rest (kEagerRegion), by GPU time. Empty without torch.compile.
  std::vector<GroupRow> compiled;
  uint64_t unattributed_gpu_ns = 0;  ///< GPU time launched outside any range ("(no range)")
  /// Hardware counters (kprof run --metrics): per kernel name, cost, tracks. Empty without.
  CounterSummary counters;
  /// Per GPU and per rank, and the collectives matched across ranks (docs/distributed.md).
  DistributedSummary dist;
  /// Device memory by owner at each process's peak and at each failed allocation
  /// (docs/memory.md).
  MemorySummary memory;
};

/// One GPU activity with what it was attributed to (exposed for hints, diff and tests).
struct Attributed {
  const ProcessTrace* process = nullptr;
  const Record* activity = nullptr;   ///< Kernel / Memcpy / Memset
  const Record* api = nullptr;        ///< launching API record, null if not found
  std::vector<const Record*> ranges;  ///< open ranges at launch, outermost first (may be empty)
};

/// The operator name of an NVTX range: its name without the decorations PyTorch's emit_nvtx()
/// appends (", seq = N", ", op_id = N", ", sizes = [...]", ", input_op_ids = [...]").
std::string_view OpName(std::string_view range_name);

/// Of each process of `run`, only its `k`-th capture window (1 = the first): the window's record
/// and the records that began from its opening until the next window's (work launched inside a
/// window may end after it), with the records that carry no time. Processes with fewer windows
/// are left out. Throws InputError when none has `k` windows (kprof report --window).
Run KeepWindow(const Run& run, uint64_t k);

/// Attributes every GPU activity of the timeline's run (order: by process, then activity start
/// time). Invariant: every Kernel/Memcpy/Memset record appears exactly once.
std::vector<Attributed> Attribute(const Timeline& timeline);

/// Full analysis of the timeline's run. Never throws on well-formed input; an invalid filter
/// regex throws InputError.
Analysis Analyze(const Timeline& timeline, const AnalysisOptions& opts = {});

/// Length of the union of [start,end) intervals (sorts in place).
uint64_t UnionLength(std::vector<std::pair<uint64_t, uint64_t>>& intervals);

/// A mangled C++ symbol demangled ("_Z3fooPf" -> "foo(float*)"); any other name unchanged.
std::string Demangle(const std::string& name);

/// Duration for tables: "999 ns", "1.50 us", "2.50 ms", "3.210 s".
std::string FormatDuration(uint64_t ns);
/// Size in binary units: "512 B", "12.5 KiB", "17.0 MiB", "1.5 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace kprof
