// The timeline model: what ran when, per process, built once per run by BuildTimeline() and read
// by everything downstream (the views in Analyze, the hint rules, the Chrome trace writer, the
// comparison of runs). Nothing downstream rebuilds any part of it.
//
// Per process it holds the NVTX/CPU ranges as intervals with their nesting, the API call behind
// each correlation id, the GPU activities in time order with the range open at their launch, the
// GPU's busy intervals and the idle gaps between them, each gap classified once (host wait,
// warm-up, long, short), the outermost API calls, the allocation calls and the host waits.
//
// Invariants (tests/unit/analysis/timeline_test.cpp):
//   - every Kernel/Memcpy/Memset record of the process is in `acts` exactly once;
//   - `busy` is sorted, disjoint and covers exactly the union of the activities' intervals;
//   - gaps[i] lies between busy[i] and busy[i+1]: there is one gap fewer than busy intervals;
//   - a gap's claims never exceed its length: explained_ns() + rest_ns <= Len().
// Pure C++ over kprof::Run; knows nothing of CUPTI. Times are integer nanoseconds. A Timeline
// holds pointers into the Run it was built from: the Run must outlive it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kprof/self_cost.h"
#include "kprof/trace.h"

namespace kprof {

/// A GPU idle gap at least this long is not launch latency (a launch costs a few us): the host
/// was doing something else. docs/hints.md, "Thresholds".
inline constexpr uint64_t kLongGapNs = 1'000'000;
/// Host time between a wait's release and the next launch at least this long is the program's
/// own work after the wait, not the latency of launching again (a launch costs a few us, one
/// from Python 5-20 us): docs/hints.md, "Thresholds".
inline constexpr uint64_t kHostWorkAfterWaitNs = 50'000;
/// One-time set-up inside an op (GapKind::Setup): the op has at least this many calls, at most a
/// quarter of them hold such a gap, and the call holding it had this many before it.
inline constexpr uint64_t kSetupMinCalls = 4;

/// [start, end) in ns (the same type as the analysis library's interval helpers use).
using NsInterval = std::pair<uint64_t, uint64_t>;

/// One range on a CPU thread: an NVTX push/pop or start/end pair, or a Range record.
struct RangeInterval {
  const Record* start = nullptr;  ///< MarkerStart or Range record (name, domain)
  uint64_t begin_ns = 0, end_ns = 0;
  uint32_t tid = 0;    ///< thread it was opened on
  uint32_t depth = 0;  ///< ranges open around it on its thread when it began
  int parent = -1;     ///< index of the innermost enclosing range on its thread
  bool closed = true;  ///< false: never ended (process died); end_ns = process end
};

/// API call by correlation id; the runtime call wins over the driver call it made. Correlation
/// ids are dense small integers in practice (CUPTI counts them up per process), so a flat table
/// serves them; sparse ids (foreign traces) fall back to a hash map.
class CorrelationIndex {
 public:
  void Build(const ProcessTrace& p);
  const Record* Find(uint32_t correlation) const {
    if (correlation == 0) return nullptr;
    if (!dense_.empty() || sparse_.empty())
      return correlation < dense_.size() ? dense_[correlation] : nullptr;
    auto it = sparse_.find(correlation);
    return it == sparse_.end() ? nullptr : it->second;
  }

 private:
  std::vector<const Record*> dense_;
  std::unordered_map<uint32_t, const Record*> sparse_;
};

/// Ranges of one process nested per thread: each range's parent is the innermost range of the
/// same set that encloses it on its thread.
struct RangeForest {
  std::vector<RangeInterval> ranges;  ///< sorted by (tid, begin, longer first)
  // Per thread: [first, last) slice of `ranges` (ranges are grouped by thread).
  std::unordered_map<uint32_t, std::pair<size_t, size_t>> thread_slice;
  /// Ranges open on `tid` at time `t`, outermost first (indices into `ranges`).
  void OpenAt(uint32_t tid, uint64_t t, std::vector<int>& out) const;
  /// The innermost of OpenAt(tid, t) (the last one), or -1 when no range is open.
  int InnermostAt(uint32_t tid, uint64_t t) const;
  /// Sorts `ranges` and sets depth, parent and thread_slice.
  void Nest();
};

/// Prefixes of the ranges kprof's PyTorch layer adds (src/pytorch/sitecustomize.py): they are
/// kept apart from the op ranges (docs/pytorch.md).
inline constexpr std::string_view kModuleRangePrefix = "kprof.module:";   ///< NAME|Class
inline constexpr std::string_view kSourceRangePrefix = "kprof.src:";      ///< FILE:LINE
inline constexpr std::string_view kPyTorchMarkPrefix = "kprof.pytorch:";  ///< MODE:ADDED
/// The region of GPU work run while torch.compile compiles (ProcessIndex::regions).
inline constexpr std::string_view kCompilingRegion = "torch.compile compiling";
/// GPU work of a process with compiled code that ran outside it (the compiled view's row).
inline constexpr std::string_view kEagerRegion = "(eager)";

/// The ranges of one process and the lookup of API calls by correlation id. Its own `ranges`
/// are the op ranges (NVTX ranges of the program, PyTorch's aten ops); those of kprof's PyTorch
/// layer are in `modules` and `sources`.
struct ProcessIndex : RangeForest {
  const ProcessTrace* process = nullptr;
  RangeForest modules;        ///< nn.Module calls ("kprof.module:" ranges)
  RangeForest sources;        ///< the program's source line of a torch call ("kprof.src:")
  std::string pytorch_added;  ///< what the PyTorch layer added ("auto:ops,modules"), or ""
  /// What the PyTorch layer costs per op call and per module call, as it measured at import
  /// (0 when not measured): kprof's own cost (docs/hints.md).
  double pytorch_op_ns = 0, pytorch_module_ns = 0;
  /// Autograd: per op range, the backward node it runs in (a range directly inside
  /// "autograd::engine::evaluate_function: ..."; the node's own index for the node), -1 outside
  /// backward. Empty when the process ran no backward.
  std::vector<int> backward_node;
  /// Per op range: for a backward node, the forward op range that created it (the last op range
  /// with the node's sequence number begun before the node), else -1.
  std::vector<int> creator;
  /// torch.compile (docs/pytorch.md, "Compiled code"): per op range, the compiled code it runs
  /// in, an index into `regions`, -1 for eager code. regions[kCompiling] is compilation itself
  /// (Dynamo and Inductor at work, autotuning included); the others are "compiled F forward" /
  /// "compiled F backward" per Dynamo frame F ("0/0"). Both empty without torch.compile.
  std::vector<int> region_of;
  std::vector<std::string> regions;
  static constexpr int kCompiling = 0;
  int RegionOf(int i) const {
    return i < 0 || region_of.empty() ? -1 : region_of[static_cast<size_t>(i)];
  }
  CorrelationIndex api_by_correlation;  ///< launching API call of GPU work
  uint64_t end_ns = 0;                  ///< last timestamp of the process

  /// OpName() of each string id of the process (computed once per id).
  std::vector<std::string_view> op_names;
  /// Operator name of range `i` (its name without PyTorch's emit_nvtx decorations).
  std::string_view Name(size_t i) const {
    uint32_t id = ranges[i].start->name;
    return id < op_names.size() ? op_names[id] : std::string_view();
  }

  /// Per op range: the range its GPU work belongs to. Itself, but for a library's range (one in
  /// a named NVTX domain: CUB's "CCCL", NCCL's) opened inside a PyTorch op, which belongs to that
  /// op (docs/pytorch.md "Library ranges inside an op"). Empty when no range is such.
  std::vector<int> owner;
  /// The range `r`'s work belongs to (`owner`); -1 for -1.
  int Owner(int r) const { return r < 0 || owner.empty() ? r : owner[static_cast<size_t>(r)]; }
  /// The op range work launched on `tid` at `t` belongs to: the Owner of the innermost range
  /// open there (InnermostAt), -1 when none is open.
  int OpRangeAt(uint32_t tid, uint64_t t) const { return Owner(InnermostAt(tid, t)); }
  /// "outer/inner" path of range `i`.
  std::string Path(int i) const;
  /// The forward op range whose autograd node runs op range `i`, or -1.
  int ForwardOf(int i) const {
    if (i < 0 || backward_node.empty()) return -1;
    const int node = backward_node[static_cast<size_t>(i)];
    return node < 0 ? -1 : creator[static_cast<size_t>(node)];
  }
  bool InBackward(int i) const {
    return i >= 0 && !backward_node.empty() && backward_node[static_cast<size_t>(i)] >= 0;
  }
};

ProcessIndex BuildIndex(const ProcessTrace& p);

/// What an idle gap between two busy intervals of a process is, decided once, in this order.
enum class GapKind : uint8_t {
  Warmup,  ///< the next kernel runs for the first time: module loading, library set-up
  Long,    ///< kLongGapNs or longer: the host was busy elsewhere (gpu-idle-gaps prices rest_ns)
  Short,   ///< shorter, before a kernel: launch latency (launch-bound prices rest_ns)
  Other,   ///< shorter, before a copy or memset: not priced
  /// Long (or warm-up) and inside one call of a nested op, past its first calls, that few of its
  /// calls pay: one-time set-up for a new shape or configuration, a library building a plan,
  /// compiling or autotuning (shape-setup prices rest_ns; docs/hints.md#shape-setup).
  Setup,
  /// Holds time kprof did not record (between two capture windows, docs/capture.md): what the
  /// GPU did there is unknown, so the gap is not priced.
  Unrecorded,
};

/// An idle interval between busy intervals of one process. There is one per kernel in a
/// launch-bound run, so it stays small (56 bytes).
///
/// What explains it: a host wait released in it (wait_ns: without the wait, the host's next
/// steps start that much earlier), the program's own host work after that wait (host_ns: the
/// stretch from the release to the next launch), host time in alloc/free calls (alloc-churn's),
/// and the rest (rest_ns), priced by the rule of its kind. A wait and the work after it are two
/// fixes for the same idle time: each is priced alone, and where they overlap (the first
/// wait_ns of the gap and the host work from host_at on) the joint figure counts it once. The
/// rest never overlaps either.
struct Gap {
  uint64_t start_ns = 0, end_ns = 0;
  /// Host time blocked in waits released inside the gap, at most the gap (excessive-sync's).
  uint64_t wait_ns = 0;
  /// Host time between the last wait released in the gap and the call that launched the next
  /// activity, when it is kHostWorkAfterWaitNs or more; outside alloc/free calls
  /// (host-work-after-sync's). 0 for Warmup gaps.
  uint64_t host_ns = 0;
  uint64_t host_at = 0;  ///< where that work begins: ns into the gap (the wait's release)
  /// Long/Short/Setup: the gap less what the wait and the work after it explain and less the
  /// time in alloc/free calls (alloc-churn prices those calls itself); 0 for Warmup and Other.
  uint64_t rest_ns = 0;
  uint32_t next = 0;  ///< index in ProcessTimeline::acts of the first activity after the gap
  GapKind kind = GapKind::Other;

  uint64_t Len() const { return end_ns - start_ns; }
  /// The part of the gap the wait and the work after it explain together: [0, wait_ns) and
  /// [host_at, host_at + host_ns), counted once where they overlap.
  uint64_t explained_ns() const {
    if (host_ns == 0) return wait_ns;
    return wait_ns >= host_at ? std::max(wait_ns, host_at + host_ns) : wait_ns + host_ns;
  }
  uint64_t launch_ns() const { return kind == GapKind::Short ? rest_ns : 0; }
  uint64_t idle_ns() const { return kind == GapKind::Long ? rest_ns : 0; }
  uint64_t setup_ns() const { return kind == GapKind::Setup ? rest_ns : 0; }
};

/// A point where the host waited for the GPU: a Sync record, a synchronize call without one, or
/// the implicit wait of a synchronous copy.
struct HostWait {
  const Record* api = nullptr;  ///< the call (null for a Sync record without its call)
  std::string what;             ///< "cudaStreamSynchronize", "cudaMemcpy (DtoH, synchronous)"
  uint64_t blocked_ns = 0;
  uint64_t release_ns = 0;  ///< when the host went on
};

/// A CUDA graph as the run saw it: built (GraphNode/GraphEvent records) and launched.
struct GraphInfo {
  uint32_t id = 0;      ///< the id its launches carry (CUPTI's graph id of the launched graph)
  uint32_t source = 0;  ///< id of the graph it was instantiated from, when known (else 0)
  uint64_t nodes = 0;   ///< nodes known to belong to it
  /// Instantiated for launch from the device (cudaGraphInstantiateFlagDeviceLaunch).
  bool device_launch = false;
  /// Where its nodes were made: (innermost range open on the making thread, or -1 for none;
  /// nodes made there), by range index. Sums to `nodes`.
  std::vector<std::pair<int, uint64_t>> capture_ranges;
};

/// The CUDA graphs of one process: how each node was made, and which graphs were launched.
struct GraphIndex {
  /// Node id -> the GraphNode record of the node it descends from by cloning (the node made
  /// by capture or the graph API), or of itself. Only nodes with a record.
  std::unordered_map<uint64_t, const Record*> made;
  /// Node id -> CaptureRange(node id), for every node in `made`.
  std::unordered_map<uint64_t, int> node_range;
  /// Graph id -> what is known of it (launched graphs and the graphs they came from).
  std::unordered_map<uint32_t, GraphInfo> graphs;
  /// Graphs the program created (stream capture or cudaGraphCreate); not those instantiation
  /// makes itself (inside the instantiate call, or the executable graph).
  uint64_t captures = 0;
  uint64_t instantiations = 0;       ///< executable graphs created
  uint64_t device_launch_execs = 0;  ///< of those, instantiated for launch from the device
  /// Graph id -> a hash of its structure (the number of nodes made in it, and the names of their
  /// kernels where recorded), for graphs whose nodes were made by capture or the graph API: two
  /// graphs with equal hashes were built the same way.
  std::unordered_map<uint32_t, uint64_t> structure;
  /// GraphCreated and ExecCreated records, in time order: which graph a capture or an
  /// instantiate call made.
  std::vector<const Record*> events;
  /// The innermost range open on the thread that made `node_id`, when it was made; -1 when the
  /// node is unknown or no range was open.
  int CaptureRange(uint64_t node_id) const;
  const ProcessIndex* index = nullptr;
};

/// One process of the run on the timeline.
struct ProcessTimeline {
  const ProcessTrace* process = nullptr;
  ProcessIndex index;
  std::vector<const Record*> acts;  ///< Kernel/Memcpy/Memset by start, then end
  /// Parallel to acts: the innermost range open on the launching thread when the launching API
  /// call began (index into index.ranges), -1 when none or the call is not recorded. For work
  /// inside a CUDA graph whose node is known (node-level tracing): the range open when the node
  /// was captured, on the capturing thread (docs/analysis.md, "CUDA graphs").
  std::vector<int> act_range;
  /// Parallel to acts when the process has module ranges (else empty): the innermost module
  /// range (index into index.modules) open at its launch; for work of a backward node, the one
  /// open when the forward op that created the node began; none (-1) for work run while
  /// torch.compile compiles.
  std::vector<int> act_module;
  int ModuleOf(size_t i) const { return act_module.empty() ? -1 : act_module[i]; }
  /// Parallel to acts when the process has source-line ranges (--pytorch stack; else empty):
  /// the innermost one (index into index.sources) open at its launch, found as act_module is.
  std::vector<int> act_source;
  int SourceOf(size_t i) const { return act_source.empty() ? -1 : act_source[i]; }
  GraphIndex graphs;
  /// Parallel to acts: the first execution of its kernel name in this process.
  std::vector<bool> first_run;
  /// The capture windows of the process (kprof run --capture/--delay/--duration), in time
  /// order: each from when recording began to when it stopped or, later, to the end of the last
  /// record that began before the next window (work launched in a window runs on after it
  /// closes). Empty when the whole process was recorded.
  std::vector<NsInterval> windows;
  std::vector<NsInterval> busy;         ///< merged activity intervals
  std::vector<Gap> gaps;                ///< between consecutive busy intervals
  std::vector<const Record*> apis;      ///< outermost API calls (runtime, unnested driver)
  std::vector<NsInterval> alloc_calls;  ///< merged intervals of outermost alloc/free calls
  /// Merged intervals of kprof replaying kernels for their counters (--metrics replay) or
  /// setting up PM sampling (--metrics sampled): kprof's own time, which no gap's rest includes
  /// (docs/counters.md).
  std::vector<NsInterval> replays;
  std::vector<HostWait> waits;
  /// kprof's own cost per event in this recording (meta `self_cost`; kprof/self_cost.h), when
  /// it was measured, and what was taken out of the priced gaps' rest for it (docs/hints.md,
  /// "kprof's own cost").
  std::optional<SelfCost> self_cost;
  uint64_t self_cost_ns = 0;
  /// Where the program's repeated part begins (docs/hints.md, "Start-up and the steady state"):
  /// with kprof's module ranges, the first call of the root module called most often (twice or
  /// more); 0 when unknown. GPU work and idle time before it are start-up (weights uploaded
  /// once, conversions, first-call set-up): no hint prices them.
  uint64_t steady_from_ns = 0;
  std::string steady_from_what;  ///< that module ("model"), "" when none
  /// Is what ended at `end_ns` start-up (before steady_from_ns)? No hint prices it.
  bool StartUp(uint64_t end_ns) const { return steady_from_ns != 0 && end_ns <= steady_from_ns; }
  /// Display name (demangled, "(unnamed)" for none) of each string id used by a kernel; null for
  /// other ids. Equal names of all processes share one address.
  std::vector<const std::string*> kernel_names;
  const std::string* unnamed = nullptr;  ///< "(unnamed)", for ids outside the string table

  /// The API call that launched `activity`, or null.
  const Record* Api(const Record& activity) const {
    return index.api_by_correlation.Find(Correlation(activity));
  }
  /// The correlation id of the launch an activity belongs to: its own, or, for graph work CUPTI
  /// gives none (the body of a conditional node, a graph launched from the device), the one of
  /// the launch of its graph (of the graph that launched it) that was running (inherited).
  uint32_t Correlation(const Record& activity) const {
    if (activity.correlation != 0 || inherited_correlation.empty()) return activity.correlation;
    auto it = inherited_correlation.find(&activity);
    return it == inherited_correlation.end() ? 0 : it->second;
  }
  std::unordered_map<const Record*, uint32_t> inherited_correlation;
  /// Display name of a kernel, as the views show it; interned: equal names, equal addresses.
  const std::string& KernelName(const Record& kernel) const {
    return kernel.name < kernel_names.size() && kernel_names[kernel.name]
               ? *kernel_names[kernel.name]
               : *unnamed;
  }
  /// Operator name of the innermost range open on `tid` at `t`, or "(no range)".
  std::string OpAt(uint32_t tid, uint64_t t) const;
  /// Operator name at the start of `api` ("(no range)" for null).
  std::string OpOf(const Record* api) const {
    return api ? OpAt(api->tid, api->start_ns) : "(no range)";
  }
  /// Operator name of acts[i]'s launch.
  std::string OpOfActivity(size_t i) const;
};

/// The timeline of a whole run.
struct Timeline {
  const Run* run = nullptr;
  std::vector<ProcessTimeline> processes;  ///< in run.processes order
  /// Storage of the interned kernel display names.
  std::unique_ptr<std::unordered_set<std::string>> names;
};

/// Builds the timeline of `run` (which must outlive it).
Timeline BuildTimeline(const Run& run);

/// Is this the name of a call that blocks the host until the GPU is done?
bool IsSyncApi(std::string_view name);
/// Is this the name of a device or host memory allocation or release call?
bool IsAllocApi(std::string_view name);
/// CUDA graph calls by name (runtime and driver, every version suffix): instantiation, stream
/// capture begin and end, graph launch.
enum class GraphApi : uint8_t { None, Instantiate, BeginCapture, EndCapture, Launch };
GraphApi GraphApiOf(std::string_view name);

}  // namespace kprof
