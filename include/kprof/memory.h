#pragma once
// Device memory by owner (docs/memory.md): who held the memory at each device's peak, and at
// each allocation call that failed. Built from the MemAlloc/MemFree records (CUPTI's MEMORY2,
// with the library that asked for each allocation) and MemAllocFailed records; nothing here
// knows CUPTI.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kprof {

struct Timeline;
struct ProcessTimeline;

/// Bytes one owner held, and what it allocated over the run (or up to the failure).
struct MemoryOwner {
  std::string name;        ///< "PyTorch caching allocator (libc10_cuda.so)", a range's name, ...
  int64_t live_bytes = 0;  ///< held at the moment described (the peak, the failure)
  uint64_t live_allocations = 0;
  uint64_t allocations = 0;  ///< made up to that moment
};

/// One allocation live at the moment described.
struct LiveAllocation {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t t_ns = 0;     ///< when it was made
  std::string library;   ///< owner by library (as MemoryOwner::name)
  std::string range;     ///< innermost op range open at the allocating call, "" when none
  std::string variable;  ///< a static variable's name, when it is one
};

/// PyTorch's categories of the caching allocator's live blocks (src/pytorch/kprof_memory.py).
inline constexpr size_t kTorchCategories = 5;
/// "parameters", "gradients", "optimizer state", "activations", "other tensors".
std::string_view TorchCategoryName(size_t i);

/// A caching allocator block live at a moment (after the last optimizer step, at a peak).
struct StepEndBlock {
  uint64_t t_ns = 0;  ///< when it was allocated (0: before the history's window began)
  int64_t bytes = 0;
  uint8_t category = 0;  ///< as TorchCategoryName
};

/// StepEndOwner::op of the blocks not made inside an op range, made before the history's window
/// began (no time), and the blocks the layer did not list (summed).
inline constexpr std::string_view kOpNoRange = "(no range)";
inline constexpr std::string_view kOpBeforeWindow = "(made before the history's window)";
inline constexpr std::string_view kOpSmallerBlocks = "(smaller blocks)";

/// Bytes live at a moment, by where they were allocated.
struct StepEndOwner {
  /// The op range open at the allocation (the innermost, on any thread, but an op that only
  /// allocates, aten::empty_strided, gives its enclosing op), or one of kOpNoRange,
  /// kOpBeforeWindow, kOpSmallerBlocks.
  std::string op;
  std::string module;  ///< the innermost nn.Module call open then ("" when none)
  uint8_t category = 0;
  int64_t bytes = 0;
  uint64_t blocks = 0;
};
inline constexpr size_t kStepEndOwners = 32;

/// The caching allocator at one moment of its replayed history.
struct TorchMoment {
  /// "allocated_peak", "reserved_peak", "segment" (a segment change near the reserved peak),
  /// "exit", "oom"; two kinds joined by a comma when they fell on the same entry.
  std::string kind;
  uint64_t t_ns = 0;  ///< on the run's clock (both are the realtime clock)
  int64_t allocated = 0, reserved = 0;
  std::array<int64_t, kTorchCategories> bytes{};  ///< live blocks by category
  /// Of the other tensors, the bytes made in the step before this moment's (they outlived one
  /// optimizer step and were freed before the next): a step's outputs kept into the next.
  int64_t kept = 0;
  std::vector<StepEndBlock> kept_blocks;  ///< the largest of them (category: other tensors)
  std::vector<StepEndOwner> kept_by_op;   ///< kept_blocks by op and module (SummarizeMemory)
  std::vector<std::pair<int64_t, std::string>> largest;  ///< bytes, category
  bool Is(std::string_view k) const;
  /// "parameters 80.1 MiB, optimizer state 166.3 MiB, ..." for the categories holding bytes,
  /// but category `skip`; "" when none does.
  std::string Categories(size_t skip = kTorchCategories) const;
};

/// The categories whose storages the layer counts by dtype (parameters, gradients, optimizer
/// state: TorchCategoryName's first three).
inline constexpr size_t kDtypeCategories = 3;

/// What kprof's PyTorch layer found in one process's caching allocator on one device, at the
/// program's exit or at an out-of-memory error (docs/memory.md "PyTorch's categories").
struct TorchMemory {
  uint32_t pid = 0;
  int rank = -1;
  uint16_t device = 0;
  std::string when;        ///< "exit" or "oom"
  std::string alloc_conf;  ///< PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) of the process
  uint64_t t_ns = 0;       ///< when the layer wrote it
  /// PyTorch's own counts (torch.cuda.memory_stats): max_memory_allocated, max_memory_reserved,
  /// and the current figures then.
  int64_t max_allocated = 0, max_reserved = 0, allocated = 0, reserved = 0, inactive_split = 0;
  int64_t requested = 0;  ///< an out-of-memory error's request
  /// The highest allocated and reserved bytes of the replayed history (equal to PyTorch's own
  /// when the history is complete and nothing reset the peaks).
  int64_t replayed_max_allocated = 0, replayed_max_reserved = 0;
  /// What the allocator would have reserved at its peak with expandable segments, its history
  /// replayed that way (docs/memory.md "Expandable segments, replayed"); 0 = not replayed (a
  /// history not from CUDA's start, or expandable segments already on).
  int64_t expandable_max_reserved = 0;
  /// The history held every entry since CUDA started (its first window) and saw both of
  /// PyTorch's peaks.
  bool complete = false;
  uint64_t entries = 0;
  /// The history's windows: it pauses once PyTorch's peaks held for a few optimizer steps and
  /// resumes when one rises (0: a layer before windows); the optimizer steps run paused.
  uint64_t windows = 0, unrecorded_steps = 0;
  uint64_t optimizer_steps = 0, backward_passes = 0, steps_total = 0;
  std::vector<int64_t> steps;  ///< bytes allocated after each optimizer step (the last 1024)
  /// The segments the allocator took from the driver (address, bytes), from its history and
  /// its state at the end: CUPTI's allocations at these addresses are the allocator's whatever
  /// library CUPTI named (it names libcudart for a DDP rank's).
  std::vector<std::pair<uint64_t, uint64_t>> segments;
  std::vector<TorchMoment> moments;
  /// The blocks live just after the last optimizer step the history saw (step_end_t_ns; 0 and
  /// empty when it saw none): the largest, largest first, and the rest summed.
  uint64_t step_end_t_ns = 0;
  std::vector<StepEndBlock> step_end;
  int64_t step_end_rest_bytes = 0;
  uint64_t step_end_rest_blocks = 0;
  int64_t step_end_live_bytes = 0;  ///< the blocks listed and the rest
  /// step_end by the op and module of each block's allocation, most bytes first (at most
  /// kStepEndOwners): filled by SummarizeMemory, which has the op ranges.
  std::vector<StepEndOwner> step_end_by_op;
  /// Bytes of the storages of parameters, gradients and optimizer state by dtype ("float32",
  /// "bfloat16", ...) at the latest optimizer step the history saw, most bytes first.
  std::array<std::vector<std::pair<std::string, int64_t>>, kDtypeCategories> dtypes;
  const TorchMoment* Find(std::string_view kind) const;
  /// The bytes of category `c` (< kDtypeCategories) held in `dtype`.
  int64_t DtypeBytes(size_t c, std::string_view dtype) const;
  /// The number of the optimizer step `steps` starts at (the layer keeps the last 1024).
  uint64_t FirstStep() const {
    return steps_total > steps.size() ? steps_total - steps.size() + 1 : 1;
  }
};

/// Reads one payload of the layer's mark ("kprof.pytorch.memory:" + JSON); nothing when it is
/// not one or is malformed (a hostile file's mark is data, never trusted).
std::optional<TorchMemory> ParseTorchMemory(std::string_view mark);
inline constexpr std::string_view kTorchMemoryMark = "kprof.pytorch.memory:";

/// The memory of one process on one device at one moment: held by whom.
struct MemoryState {
  uint32_t pid = 0;
  int rank = -1;
  uint16_t device = 0;
  uint64_t t_ns = 0;
  uint64_t since_start_ns = 0;          ///< t_ns after the process's first record
  int64_t live_bytes = 0;               ///< device memory the process's allocations held then
  uint64_t capacity_bytes = 0;          ///< the device's memory (0 = not recorded)
  std::vector<MemoryOwner> by_library;  ///< most bytes first
  /// by_library with the PyTorch caching allocator's share split into PyTorch's categories and
  /// its cached, unused bytes (a PyTorch program under kprof's PyTorch layer); else empty.
  std::vector<MemoryOwner> by_owner;
  /// The caching allocator's moment by_owner was taken from ("" = none): one whose reserved
  /// bytes equal what CUPTI saw the allocator hold (torch_matched).
  std::string torch_moment;
  bool torch_matched = false;
  /// When the joined moment's payload was written (TorchMemory::t_ns: with pid, rank and device,
  /// which payload of MemorySummary::torch; 0 when none was joined) and the moment's index in its
  /// moments.
  uint64_t torch_t_ns = 0;
  size_t torch_moment_index = 0;
  std::vector<MemoryOwner> by_range;    ///< by the innermost op range of the allocating call
  std::vector<LiveAllocation> largest;  ///< the largest live allocations, largest first
  std::string range;  ///< the op range open when the peak was reached ("" = none, or a failure)
  /// The process recorded capture windows: memory was recorded inside them only, so this counts
  /// only what was allocated (and not freed) inside them.
  bool partial = false;
};

/// An allocation call that failed, and the memory at that moment.
struct FailedAllocation {
  std::string call;          ///< "cudaMalloc", "cuMemCreate", ...
  uint64_t bytes = 0;        ///< asked for
  uint32_t code = 0;         ///< the call's return code (2: out of memory)
  bool pinned_host = false;  ///< it asked for page-locked host memory
  uint32_t tid = 0;
  std::string range;  ///< innermost op range open on the calling thread, "" when none
  MemoryState state;  ///< the process's device memory at the failure (device as the call's)
  /// Whether `state` holds the owners: for the first kDescribedFailures of a process and its
  /// last, not for pinned host memory (not device memory).
  bool described = false;
  /// Not out of memory, and the same call succeeded on the same thread within kRetryNs after:
  /// a probe the program recovered from (PyTorch's expandable segments ask cuMemCreate for a
  /// shareable handle first, refused in containers with error 800, then ask without one).
  bool retried = false;
  static constexpr uint64_t kRetryNs = 10'000'000;
  /// cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY (others: a sticky error after a
  /// fault, an allocation during stream capture, ...).
  static constexpr uint32_t kOutOfMemoryCode = 2;
  bool OutOfMemory() const { return code == kOutOfMemoryCode; }
};
inline constexpr size_t kDescribedFailures = 3;

/// Device memory held over time by owner, for one process and device (the HTML report's stacked
/// memory chart): the owners as by_library names them, those holding most at the peak first (at
/// most kSeriesOwners), then "other owners" (every other owner, summed).
struct MemorySeries {
  uint32_t pid = 0;
  int rank = -1;
  uint16_t device = 0;
  std::vector<std::string> owners;  ///< the columns; the last is "other owners"
  std::vector<uint64_t> t_ns;       ///< the points' times, ascending
  /// Per point, the bytes held by each owner (owners.size() values a point): thinned to at most
  /// kSeriesPoints points, each the moment of a time bin when the most was held, and the last
  /// the state after the last event (what was still held at the end).
  std::vector<int64_t> bytes;
  uint64_t peak_t_ns = 0;  ///< the peak of MemorySummary::peaks for this process and device
  int64_t peak_bytes = 0;
};
inline constexpr size_t kSeriesOwners = 8, kSeriesPoints = 1000;

struct MemorySummary {
  std::vector<MemoryState> peaks;          ///< per process and device, the highest first
  std::vector<MemorySeries> series;        ///< series[i]: how peaks[i]'s process got there
  std::vector<FailedAllocation> failures;  ///< in time order
  std::vector<TorchMemory> torch;          ///< the PyTorch layer's findings, in time order
  /// Allocations whose maker is known: CUPTI named a library, or kprof found the library whose
  /// virtual-memory call made it.
  uint64_t sourced_allocations = 0;
  uint64_t allocations = 0;  ///< device allocations recorded
  size_t top = 5;            ///< the lists' cap (SIZE_MAX: every owner)
};

/// Owners and peaks of every process and device of `tl`; `top` caps each list of owners and of
/// largest allocations.
MemorySummary SummarizeMemory(const Timeline& tl, size_t top = 5);

namespace detail {
/// Fills tm.step_end_by_op and each moment's kept_by_op: each block by the op range and module
/// open when it was allocated (the innermost begun last, on any of the process's threads:
/// backward ops run on autograd's threads).
void StepEndByOp(const ProcessTimeline& t, TorchMemory& tm);
/// Fills s.by_owner from s.by_library (uncut) and the PyTorch layer's moment of the same process
/// and device that matches it: the one whose reserved bytes equal the caching allocator's share,
/// nearest in time; none when no moment matches.
void JoinTorchMemory(MemoryState& s, const std::vector<TorchMemory>& torch);
}  // namespace detail

/// The owner name of an allocation made by the shared object or program at `path` (CUPTI's
/// allocation source), e.g. "PyTorch caching allocator (libc10_cuda.so)"; "" for an empty path.
std::string LibraryOwner(const std::string& path);

}  // namespace kprof
