// kprof record format: the plain, fixed-size records shared by the agent (writer) and the CLI
// (reader). No CUDA or CUPTI header may be included here: this file is the seam between the
// injected agent and everything else. The on-disk layout is described in docs/format.md.
//
// Every value of every enum below is serialized: never renumber one, and keep retired values
// reserved so that old files still read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kprof {

/// Is this kernel name (mangled or demangled) a communication kernel: NCCL's (and RCCL's)
/// collectives and point-to-point kernels ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)",
/// "ncclKernel_...", "ncclSymDevKernel_..."), as Holistic Trace Analysis classifies them: a name
/// beginning with "nccl" or holding "ncclKernel" or "ncclDevKernel". Shared by the agent (replay
/// never replays one: it waits on the other ranks) and the analysis.
inline bool IsCommKernelName(std::string_view n) {
  if (n.rfind("void ", 0) == 0) n.remove_prefix(5);
  // CUPTI gives mangled names (`_Z39ncclDevKernel_…`, `_Z…ncclSymDevKernel_…`): matched inside.
  return n.rfind("nccl", 0) == 0 || n.find("ncclKernel") != std::string_view::npos ||
         n.find("ncclDevKernel") != std::string_view::npos ||
         n.find("ncclSymDevKernel") != std::string_view::npos;
}

/// The domain of PyTorch's ops and autograd nodes in Range records: PyTorch's own trace category
/// for them, which kprof's op observer uses too (format 1.7).
inline constexpr std::string_view kCpuOpDomain = "cpu_op";

/// File magic: the first 8 bytes of every kprof run file.
inline constexpr char kFileMagic[8] = {'K', 'P', 'R', 'O', 'F', 'R', 'U', 'N'};
/// Major version: a reader refuses files with a larger major version.
inline constexpr uint16_t kFormatMajor = 1;
/// Minor version: additions that older readers may ignore (new block types, new meta keys).
inline constexpr uint16_t kFormatMinor = 7;  // 1: graph records (kinds 15-17); 2: their end_ns;
                                             // 3: hardware counters (kinds 18-19);
                                             // 4: capture windows (kind 20);
                                             // 5: failed allocations (kind 21), the
                                             //    allocating library of MemAlloc/MemFree;
                                             // 6: virtual-memory calls and their callers;
                                             // 7: the op observer's Range records (d = the
                                             //    autograd sequence number + 1)
/// Largest payload a block may declare; anything larger is treated as corruption.
inline constexpr uint32_t kMaxBlockPayload = 64u << 20;

/// What a record describes. Serialized as one byte.
enum class RecordKind : uint8_t {
  Invalid = 0,
  Kernel = 1,         ///< GPU kernel execution (GPU clock converted by CUPTI to the CPU clock)
  Memcpy = 2,         ///< GPU copy; flags = CopyKind
  Memset = 3,         ///< GPU memset
  Sync = 4,           ///< host blocked in a synchronization call; flags = SyncKind
  RuntimeApi = 5,     ///< CUDA runtime API call on a CPU thread
  DriverApi = 6,      ///< CUDA driver API call on a CPU thread
  MarkerStart = 7,    ///< NVTX push or range start; a = marker id, b = domain string id
  MarkerEnd = 8,      ///< NVTX pop or range end; a = marker id (matches its MarkerStart)
  MarkerInstant = 9,  ///< NVTX mark
  MemAlloc = 10,      ///< device memory allocation (MEMORY2)
  MemFree = 11,       ///< device memory release (MEMORY2)
  Overhead = 12,      ///< profiler overhead interval on a CPU thread; a = OverheadKind
  Range = 13,         ///< complete CPU range (start,end) on a thread: foreign traces' ranges/ops,
                      ///< and the ops kprof's op observer records (format 1.7);
                      ///< b = domain string id, c = nesting hint (0 unknown)
  GpuRange = 14,      ///< an annotation projected on a GPU stream (foreign traces), informational
  GraphLaunch = 15,   ///< one launch of a CUDA graph, as a whole (graph-level tracing)
  GraphNode = 16,     ///< a graph node made (captured, added or cloned), on the thread that made it
  GraphEvent = 17,    ///< a graph or executable graph made or destroyed; flags = GraphEventKind
  CounterSample = 18,   ///< one metric of one GPU-wide counter sample (PM sampling), on a device
  KernelMetric = 19,    ///< one metric of one kernel launch, measured by replaying it
  CaptureWindow = 20,   ///< a stretch of time kprof recorded (--capture, --delay, --duration)
  MemAllocFailed = 21,  ///< an allocation call that failed (out of memory): what it asked for
};

/// Number of RecordKind values, for table sizing (highest value + 1).
inline constexpr size_t kRecordKindCount = 22;

/// How a GraphNode record's node came to be (GraphNode.flags).
enum class GraphNodeOrigin : uint8_t {
  Unknown = 0,
  Created = 1,  ///< captured from a stream or added with the graph API: the thread's ranges apply
  Cloned = 2,   ///< copied from another node (graph clone or instantiation): see its original
};

/// What a GraphEvent record reports (GraphEvent.flags).
enum class GraphEventKind : uint8_t {
  Unknown = 0,
  GraphCreated = 1,   ///< a graph (template) was created: stream capture or cudaGraphCreate
  GraphCloned = 2,    ///< a graph was cloned (cudaGraphClone, or internally)
  ExecCreated = 3,    ///< a graph was instantiated: a = executable graph id, b = its graph's id
  ExecDestroyed = 4,  ///< an executable graph was destroyed
};

/// Direction of a copy (Memcpy.flags). Values follow the user's view, not CUPTI's enum.
enum class CopyKind : uint8_t {
  Unknown = 0,
  HtoD = 1,
  DtoH = 2,
  DtoD = 3,
  HtoH = 4,
  PtoP = 5,
};

/// "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"; `unknown` for anything else (a byte from a file).
inline const char* CopyKindName(uint8_t k, const char* unknown = "Unknown") {
  switch (static_cast<CopyKind>(k)) {
    case CopyKind::HtoD:
      return "HtoD";
    case CopyKind::DtoH:
      return "DtoH";
    case CopyKind::DtoD:
      return "DtoD";
    case CopyKind::HtoH:
      return "HtoH";
    case CopyKind::PtoP:
      return "PtoP";
    case CopyKind::Unknown:
      break;
  }
  return unknown;
}

/// Host memory kind of a copy's host side (Memcpy.a = src, Memcpy.b = dst).
enum class MemKind : uint8_t {
  Unknown = 0,
  Pageable = 1,
  Pinned = 2,
  Device = 3,
  Array = 4,
  Managed = 5,
  DeviceStatic = 6,
  ManagedStatic = 7,
};

/// What a Sync record waited for (Sync.flags).
enum class SyncKind : uint8_t {
  Unknown = 0,
  EventSynchronize = 1,
  StreamWaitEvent = 2,
  StreamSynchronize = 3,
  ContextSynchronize = 4,  ///< cudaDeviceSynchronize / cuCtxSynchronize
};

/// Profiler overhead kinds (Overhead.a).
enum class OverheadKind : uint8_t {
  Unknown = 0,
  BufferFlush = 1,
  Instrumentation = 2,
  Resource = 3,
  RuntimeTriggeredModuleLoading = 4,
  LazyFunctionLoading = 5,
  CommandBufferFull = 6,
  ActivityBufferRequest = 7,
  UvmActivityInit = 8,
  DriverCompiler = 9,
  CounterReplay = 10,  ///< kprof replaying a kernel for its counters (--metrics replay)
  CounterSetup = 11,   ///< kprof setting up PM sampling on a device (--metrics sampled)
};

/// What opened a capture window (CaptureWindow.flags).
enum class CaptureTrigger : uint8_t {
  Unknown = 0,
  Nvtx = 1,           ///< the push (or start) of the NVTX range --capture nvtx:NAME names
  ProfilerApi = 2,    ///< cudaProfilerStart / cuProfilerStart (--capture cuda-profiler-api)
  Time = 3,           ///< --delay elapsed (or the process began: --duration alone)
  OnDemand = 4,       ///< kprof capture --duration: opened by the agent's control thread
  OnDemandSteps = 5,  ///< kprof capture --step-range NAME: the push of NAME after the chosen moment
};
/// What closed a capture window (CaptureWindow.c).
enum class CaptureEnd : uint8_t {
  Unknown = 0,
  RangeEnded = 1,    ///< the NVTX range that opened it ended
  ProfilerStop = 2,  ///< cudaProfilerStop / cuProfilerStop
  Duration = 3,      ///< --duration elapsed
  ProcessEnd = 4,    ///< the process ended (or kprof stopped collecting) with the window open
  Steps = 5,         ///< kprof capture --steps N: the pop that ended the N-th step
};

/// GraphLaunch.flags bit 0: the graph was launched from the device, by a kernel of graph `c`.
inline constexpr uint8_t kGraphLaunchFromDevice = 1u;
/// GraphEvent(ExecCreated).c bit: instantiated for launch from the device
/// (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH).
inline constexpr uint32_t kInstantiateDeviceLaunch = 4u;

/// Kernel.flags bit 1: the launch was replayed for its hardware counters (--metrics replay);
/// CUPTI gave the kernel no times: its duration is the replay's, ending when its launch call
/// returned (docs/counters.md).
inline constexpr uint8_t kKernelReplayed = 2u;

/// MemAllocFailed.flags: the call was the driver API's (else the runtime's).
inline constexpr uint8_t kAllocFailedDriver = 1u;

/// DriverApi.flags: a virtual-memory call (cuMemCreate, cuMemMap) made outside the runtime
/// allocation calls kprof watches, written by kprof's own callback (format 1.6): e = the shared
/// object that called it (string id; 0 = not found), or "[thread] NAME" when no frame of its
/// stack said; bytes = its size; for cuMemMap c, d = the address mapped, low and high 32 bits
/// (docs/format.md, docs/memory.md "Who made it").
inline constexpr uint8_t kApiMemoryCaller = 1u;

/// Memcpy/memset flag bit in Record::flags' high bits is never used; copy flags go in `c`.
inline constexpr uint32_t kCopyAsync = 1u;  ///< Memcpy.c bit 0: the copy was asynchronous

/// One fixed-size, 64-byte record. Field meaning depends on `kind`; see docs/format.md.
///
/// Common fields:
///   start_ns/end_ns  integer nanoseconds on the CPU clock the agent recorded (CUPTI timestamps,
///                    CLOCK_REALTIME by default); end_ns == start_ns for instants.
///   name             string-table id (0 = no name).
///   tid              CPU records: thread id as CUPTI reports it; GPU records: stream id.
///   device           GPU records: device ordinal; CPU records: kNoDevice.
///   correlation      CUPTI correlation id linking API call -> GPU work; 0 when none.
///
/// Kind-specific fields (a..f):
///   Kernel     a,b,c = grid x,y,z; d = block x | block y << 16; e = block z | regs << 16;
///              f = shared memory bytes (static + dynamic); bytes = 0; flags bit0 = graph launch,
///              bit1 = kKernelReplayed
///   Memcpy     flags = CopyKind; a = src MemKind; b = dst MemKind; c = kCopyAsync bits;
///              d = src device, e = dst device (PtoP); bytes = size
///   Memset     a = value; b = MemKind; bytes = size
///   Sync       flags = SyncKind; a = stream id (0 if none); tid = 0 (use correlation)
///   Runtime/DriverApi  a = CUPTI callback id; b = return code; flags = kApiMemoryCaller for a
///              virtual-memory driver call, with its caller in e, its size in bytes and, for
///              cuMemMap, the address in c, d
///   Marker*    a = marker id; b = domain string id (0 = default domain)
///   MemAlloc/MemFree   a,b = address low/high 32 bits; c = MemKind; bytes = size;
///              start_ns = end_ns = timestamp; tid = stream; name = the shared object or program
///              that asked for it (CUPTI's allocation source; 0 = not known, and on every
///              MemFree); d = 1 for a
///              stream-ordered (async) one; e = the variable's name for static memory (0 = none)
///   MemAllocFailed  CPU instant on the calling thread (device = kNoDevice); d = the call's
///              device (kNoDevice = not known); bytes = the size asked for; a = CUPTI callback id;
///              b = the call's return code; c = MemKind asked for; flags = kAllocFailedDriver for a
///              driver API call; name = the call's name (cudaMalloc, cuMemCreate, ...)
///   Overhead   a = OverheadKind; name = its description
///   Range      b = domain string id (e.g. "cpu_op", "user_annotation"); tid = thread; c = nesting
///              hint (depth + 1, 0 unknown); d = autograd's sequence number + 1 (0 none); from
///              kprof's op observer (kprof/op_abi.h), flags = its KprofOpKind
///   GpuRange   b = domain string id; tid = stream
///   GraphLaunch  GPU record (tid = stream, device = device of its first node); a = graph id as
///              CUPTI reports it; b = device of its last node; correlation = the launch call's.
///              flags bit0 (kGraphLaunchFromDevice): launched by a kernel of another graph, c =
///              that graph's id, d = CUPTI's device launch mode; correlation = 0 (no API call)
///   GraphNode  CPU instant (start_ns = end_ns) on the thread that made the node; bytes = node
///              id; a = graph id; flags = GraphNodeOrigin; e = node type (CUDA's CUgraphNodeType);
///              Cloned: b = original graph id, c/d = original node id low/high 32 bits;
///              name = kernel name when the agent could read it (graph mode), else 0
///   GraphEvent CPU instant on the calling thread; flags = GraphEventKind; a = graph id (the
///              executable graph's id for Exec*); b = source graph id (ExecCreated, GraphCloned);
///              ExecCreated: c = the instantiation flags (CUDA's CUgraphInstantiate_flags; bit 2
///              = kInstantiateDeviceLaunch), d = 1 when they could not be read
///   CounterSample  GPU record (device; tid = 0): start_ns/end_ns = the sample's interval; name =
///              metric name (Nsight Compute's); bytes = the value, an IEEE-754 double's bits
///              (MetricValue); a = the sample's index in its device's sequence
///   KernelMetric  device = the kernel's; correlation = the kernel launch's; start_ns = end_ns =
///              when it was measured; name = metric name; bytes = the value (MetricValue);
///              a = passes the replay took; tid = the launching thread
///   CaptureWindow  CPU interval on the thread that opened it (device = kNoDevice): start_ns/end_ns
///              = when kprof began and stopped recording; a = the window's index (from 0);
///              flags = CaptureTrigger; c = CaptureEnd; b = 0 (the default NVTX domain, for the
///              range an NVTX window stands for); name = what opened it (the range's name,
///              "cudaProfilerStart", "delay"). Outside its windows a process has no records.
///   Per-node records of graph launches (node mode): Kernel bytes = graph node id; Memset c/d =
///   node id low/high; Memcpy f = node id low 32 bits, c bits 1..31 = its high bits (CUPTI puts
///   the graph id there). 0 = not launched from a graph.
struct Record {
  uint8_t kind = 0;  ///< RecordKind
  uint8_t flags = 0;
  uint16_t device = 0;
  uint32_t correlation = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t name = 0;
  uint32_t tid = 0;
  uint64_t bytes = 0;
  uint32_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;

  RecordKind Kind() const { return static_cast<RecordKind>(kind); }
  uint64_t DurationNs() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};
static_assert(sizeof(Record) == 64, "Record is part of the file format: 64 bytes");

inline constexpr uint16_t kNoDevice = 0xFFFF;

/// Helpers for the packed kernel launch configuration.
struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};
inline Dim3 KernelGrid(const Record& r) { return {r.a, r.b, r.c}; }
inline Dim3 KernelBlock(const Record& r) { return {r.d & 0xFFFFu, r.d >> 16, r.e & 0xFFFFu}; }
inline uint32_t KernelRegisters(const Record& r) { return r.e >> 16; }
inline uint32_t KernelSharedMem(const Record& r) { return r.f; }
inline void SetKernelLaunch(Record& r, Dim3 grid, Dim3 block, uint32_t regs, uint32_t smem) {
  r.a = grid.x;
  r.b = grid.y;
  r.c = grid.z;
  r.d = (block.x & 0xFFFFu) | (block.y << 16);
  r.e = (block.z & 0xFFFFu) | (regs << 16);
  r.f = smem;
}
/// The value of a CounterSample or KernelMetric record (a double stored in `bytes`).
inline double MetricValue(const Record& r) {
  double v;
  static_assert(sizeof(v) == sizeof(r.bytes));
  __builtin_memcpy(&v, &r.bytes, sizeof(v));
  return v;
}
inline void SetMetricValue(Record& r, double v) { __builtin_memcpy(&r.bytes, &v, sizeof(v)); }

/// GPU work the agent records: kernels, copies and memsets (not foreign GpuRange annotations).
inline bool IsGpuActivity(RecordKind k) {
  return k == RecordKind::Kernel || k == RecordKind::Memcpy || k == RecordKind::Memset ||
         k == RecordKind::GraphLaunch;
}
/// Records on a GPU track: GPU work and annotations projected onto streams.
inline bool IsGpuKind(RecordKind k) {
  return k == RecordKind::Kernel || k == RecordKind::Memcpy || k == RecordKind::Memset ||
         k == RecordKind::GraphLaunch || k == RecordKind::GpuRange;
}
/// The graph node id of a per-node GPU record (0: not launched from a graph).
inline uint64_t GraphNodeOf(const Record& r) {
  switch (r.kind) {
    case static_cast<uint8_t>(RecordKind::Kernel):
      return r.bytes;
    case static_cast<uint8_t>(RecordKind::Memset):
      return r.c | (static_cast<uint64_t>(r.d) << 32);
    case static_cast<uint8_t>(RecordKind::Memcpy):
      return r.f | (static_cast<uint64_t>(r.c >> 1) << 32);
    default:
      return 0;
  }
}

/// Counters the agent keeps about its own collection; written in a Stats block.
/// Serialized field by field as little-endian u64 in this order; new fields are appended.
struct CollectionStats {
  uint64_t records_written = 0;     ///< records converted and queued for the file
  uint64_t dropped_records = 0;     ///< CUPTI's cuptiActivityGetNumDroppedRecords total
  uint64_t missing_timestamps = 0;  ///< records whose start or end was 0 (not written)
  uint64_t unknown_records = 0;     ///< CUPTI records of kinds kprof does not convert
  uint64_t buffers_completed = 0;   ///< CUPTI buffers returned to the agent
  uint64_t buffer_bytes = 0;        ///< total bytes of CUPTI buffers handed out
  uint64_t flushes = 0;             ///< forced flushes (exit, signal, context destroy)
  uint64_t foreign_buffers = 0;     ///< buffers CUPTI returned that kprof did not hand out
  uint64_t write_errors = 0;        ///< failed writes to the run file
};
inline constexpr size_t kCollectionStatsFields = 9;

}  // namespace kprof
