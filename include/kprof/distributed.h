// Several GPUs and several ranks (docs/distributed.md): what each physical GPU did, what each
// rank did, and the collectives that tie the ranks together, matched across ranks so that the
// time a rank spent waiting for a later one is known.
// Pure C++ over the timeline; knows nothing of CUPTI. Times are integer nanoseconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/timeline.h"

namespace kprof {

/// Is this (demangled) kernel name a communication kernel: NCCL's (and RCCL's) collectives and
/// point-to-point kernels ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)", "ncclKernel_...",
/// "ncclSymDevKernel_..."). Holistic Trace Analysis classifies kernels the same way: a name
/// beginning with "nccl" (or holding "ncclKernel").
bool IsCommKernel(std::string_view name);
/// The collective an NCCL kernel runs, from its name: "AllReduce", "ReduceScatter", "AllGather",
/// "Broadcast", "Reduce", "SendRecv" or "Generic" (NCCL's kernel for grouped or other work);
/// "" for a name that is not one. NCCL names a kernel that runs several grouped operations after
/// the first.
std::string_view CollectiveOf(std::string_view name);

/// What kind of work an activity is, for the partitions below: communication kernels, other
/// kernels (and CUDA graph launches traced as a whole), copies and memsets.
enum class WorkClass : uint8_t { Compute, Comm, Copy };

/// The device an activity of process `p` ran on, as a row key shared by every view: "dev 0
/// NVIDIA H100 80GB HBM3" ("dev 0" when the name is unknown). Two processes' ordinals name one
/// GPU when they agree on its UUID (meta device.N.uuid) or, without UUIDs, when they are on one
/// host; where one label would name two GPUs the key gets the UUID's first characters or the
/// host ("dev 0 NVIDIA H100 [GPU-1a2b3c4d]", "dev 0 NVIDIA H100 on node2").
class DeviceKeys {
 public:
  explicit DeviceKeys(const Timeline& tl);
  /// The key of device ordinal `device` of process `process` (index in the timeline).
  const std::string& Key(size_t process, uint16_t device) const;
  /// Index of that physical device among Devices() (stable: by host, ordinal, key).
  size_t Index(size_t process, uint16_t device) const;
  const std::vector<std::string>& Devices() const { return keys_; }

 private:
  struct Entry {
    size_t process;
    uint16_t device;
    size_t index;
  };
  std::vector<Entry> entries_;  // sorted by (process, device)
  std::vector<std::string> keys_;
};

/// One physical GPU over the run. Its wall time is split into four parts that add up to it:
/// compute (some non-communication kernel ran), communication only (an NCCL kernel ran and no
/// other kernel), copy only (a copy or memset ran and no kernel) and idle.
struct DeviceUsage {
  std::string key;                 ///< DeviceKeys's key
  std::vector<std::string> users;  ///< the processes that ran work on it ("rank 0 (pid 12)")
  uint64_t wall_ns = 0;       ///< time its processes were recorded (union of their spans/windows)
  uint64_t busy_ns = 0;       ///< union of the activities that ran on it
  uint64_t compute_ns = 0;    ///< union of its non-communication kernels
  uint64_t comm_ns = 0;       ///< union of its communication kernels
  uint64_t comm_only_ns = 0;  ///< communication with no other kernel running: comm_ns - overlap
  uint64_t copy_only_ns = 0;  ///< copies and memsets with no kernel running
  uint64_t idle_ns = 0;       ///< wall_ns - busy_ns
  uint64_t gaps = 0;          ///< idle stretches between its busy intervals
  uint64_t long_gaps = 0;     ///< of those, kLongGapNs or longer
  uint64_t long_gap_ns = 0;   ///< their total length
  double utilisation = 0;     ///< busy_ns / wall_ns (0..1)
};

/// One process (a rank of a multi-process job, or any process that ran GPU work), over the
/// devices it used. wall_ns = compute_ns + comm_only_ns + copy_only_ns + idle_ns.
struct RankUsage {
  size_t process = 0;  ///< index in the timeline
  int rank = -1;       ///< its RANK (-1: not set)
  uint32_t pid = 0;
  std::string label;    ///< ProcessTrace::Label()
  std::string devices;  ///< the keys of the devices it used, comma-separated
  uint64_t wall_ns = 0, busy_ns = 0, compute_ns = 0, comm_ns = 0, comm_only_ns = 0,
           copy_only_ns = 0, idle_ns = 0;
  uint64_t overlap_ns = 0;  ///< communication while a compute kernel ran (comm_ns - comm_only)
  uint64_t kernels = 0, kernel_ns = 0;            ///< every kernel: count, summed durations
  uint64_t comm_kernels = 0, comm_kernel_ns = 0;  ///< communication kernels among them
  /// Matched collectives (Collective): the time it waited inside them for a later rank to
  /// arrive (`wait_ns`), and the part of that during which it ran no compute kernel itself
  /// (`exposed_wait_ns`: what waiting cost it).
  uint64_t wait_ns = 0, exposed_wait_ns = 0;
  uint64_t collectives = 0;  ///< matched collectives it took part in
  uint64_t last = 0;         ///< of those, the ones it arrived at last (with a wait caused)
};

/// One collective call matched across ranks: the n-th communication kernel of one communicator
/// on every rank (a communicator is a stream of communication kernels in each process; the
/// communicators of different processes pair up by the order of their first kernels).
struct Collective {
  std::string kind;      ///< CollectiveOf(name)
  uint32_t channel = 0;  ///< which communicator (0 = the first to run)
  uint64_t seq = 0;      ///< its order on that communicator
  struct Part {
    size_t rank = 0;                     ///< index into DistributedSummary::ranks
    const Record* kernel = nullptr;      ///< the rank's kernel
    uint64_t arrive_ns = 0, end_ns = 0;  ///< when the kernel began (arrived) and ended
    uint64_t wait_ns = 0;                ///< min(last arrival, end) - arrive
    uint64_t exposed_wait_ns = 0;        ///< of wait_ns, with no compute kernel of the rank
  };
  std::vector<Part> parts;  ///< one per rank that took part, in rank order
  size_t last = 0;          ///< index in `parts` of the last to arrive
  uint64_t spread_ns = 0;   ///< last arrival - first arrival
};

struct DistributedSummary {
  std::vector<DeviceUsage> devices;  ///< every GPU that ran work, in DeviceKeys order
  std::vector<RankUsage> ranks;      ///< every process that ran GPU work, by rank then pid
  /// Matched collectives in time order (of their first arrival). Empty with one rank.
  std::vector<Collective> collectives;
  uint64_t communicators = 0;      ///< communicators matched across ranks
  uint64_t unmatched_kernels = 0;  ///< communication kernels without a partner on every rank
  uint64_t p2p_kernels = 0;        ///< SendRecv kernels: communication, never matched
  /// Per DistributedSummary::ranks: the merged intervals of its compute kernels, its
  /// communication kernels, its waits in collectives, all its GPU work, and the time it was
  /// recorded (its span or capture windows) (for the hints).
  std::vector<std::vector<NsInterval>> compute, comm, waits, busy, recorded;
  bool Multi() const { return devices.size() > 1 || ranks.size() > 1; }
};

/// Per-device and per-rank usage and matched collectives. `spans[i]` is the time process i was
/// recorded (its capture windows, or its first-to-last record), merged.
DistributedSummary SummarizeDistributed(const Timeline& tl, const DeviceKeys& keys,
                                        const std::vector<std::vector<NsInterval>>& spans);

}  // namespace kprof
