#pragma once
// Device memory by owner (docs/memory.md): who held the memory at each device's peak, and at
// each allocation call that failed. Built from the MemAlloc/MemFree records (CUPTI's MEMORY2,
// with the library that asked for each allocation) and MemAllocFailed records; nothing here
// knows CUPTI.
#include <cstdint>
#include <string>
#include <vector>

namespace kprof {

struct Timeline;

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
  /// cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY (others: a sticky error after a
  /// fault, an allocation during stream capture, ...).
  static constexpr uint32_t kOutOfMemoryCode = 2;
  bool OutOfMemory() const { return code == kOutOfMemoryCode; }
};
inline constexpr size_t kDescribedFailures = 3;

struct MemorySummary {
  std::vector<MemoryState> peaks;          ///< per process and device, the highest first
  std::vector<FailedAllocation> failures;  ///< in time order
  uint64_t sourced_allocations = 0;        ///< allocations whose library CUPTI named
  uint64_t allocations = 0;                ///< device allocations recorded
};

/// Owners and peaks of every process and device of `tl`; `top` caps each list of owners and of
/// largest allocations.
MemorySummary SummarizeMemory(const Timeline& tl, size_t top = 5);

/// The owner name of an allocation made by the shared object or program at `path` (CUPTI's
/// allocation source), e.g. "PyTorch caching allocator (libc10_cuda.so)"; "" for an empty path.
std::string LibraryOwner(const std::string& path);

}  // namespace kprof
