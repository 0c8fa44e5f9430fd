// The exported schema. Tables named like Nsight Systems' have its column names, meanings and
// units (docs/sqlite.md lists which columns kprof fills); kprof's own tables are KPROF_*.
#include <cstdint>

#include "output/sqlite_internal.h"

namespace kprof::sqlite {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE StringIds (
  id INTEGER NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
  launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
  blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER, dynamicSharedMemory INTEGER, localMemoryPerThread INTEGER,
  localMemoryTotal INTEGER, gridId INTEGER, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER,
  kprofSharedMemory INTEGER NOT NULL, kprofGraphLaunch INTEGER NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER,
  dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER,
  dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER,
  kprofAsync INTEGER NOT NULL
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  graphId INTEGER NOT NULL, endDeviceId INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
  start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
  callchainId INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER,
  greenContextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER
);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
  start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER, address INTEGER NOT NULL, pc INTEGER, bytes INTEGER NOT NULL,
  memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
  correlationId INTEGER, streamId INTEGER
);
CREATE TABLE NVTX_EVENTS (
  start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
  textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL,
  uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT
);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ANALYSIS_DETAILS (
  globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,
  stopTime INTEGER NOT NULL
);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (
  vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, totalMemory INTEGER, smCount INTEGER,
  computeMajor INTEGER, computeMinor INTEGER
);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);

CREATE TABLE KPROF_META (key TEXT NOT NULL PRIMARY KEY, value TEXT);
CREATE TABLE KPROF_PROCESSES (
  id INTEGER NOT NULL PRIMARY KEY, pid INTEGER NOT NULL, globalPid INTEGER NOT NULL,
  rank INTEGER, source TEXT NOT NULL, complete INTEGER NOT NULL, records INTEGER NOT NULL,
  wall_ns INTEGER NOT NULL, gpu_busy_ns INTEGER NOT NULL, kernels INTEGER NOT NULL,
  kernel_ns INTEGER NOT NULL, dropped_records INTEGER NOT NULL
);
CREATE TABLE KPROF_KERNELS (
  id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, nameId INTEGER NOT NULL,
  count INTEGER NOT NULL, total_ns INTEGER NOT NULL, mean_ns INTEGER NOT NULL,
  min_ns INTEGER NOT NULL, median_ns INTEGER NOT NULL, p95_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL, share REAL NOT NULL, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER, registers INTEGER, shared_mem INTEGER,
  max_blocks INTEGER
);
CREATE TABLE KPROF_OPS (
  id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, calls INTEGER NOT NULL,
  gpu_ns INTEGER NOT NULL, gpu_projected_ns INTEGER NOT NULL, cpu_ns INTEGER NOT NULL,
  kernels INTEGER NOT NULL, memcpys INTEGER NOT NULL, memsets INTEGER NOT NULL,
  bytes INTEGER NOT NULL, share REAL NOT NULL, mem_delta_bytes INTEGER NOT NULL
);
CREATE TABLE KPROF_OP_KERNELS (
  op_id INTEGER NOT NULL, name TEXT NOT NULL, count INTEGER NOT NULL, total_ns INTEGER NOT NULL,
  mean_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL, median_ns INTEGER NOT NULL,
  p95_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL, share REAL NOT NULL
);
CREATE TABLE KPROF_RANGES (
  id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, domain TEXT NOT NULL,
  calls INTEGER NOT NULL, total_ns INTEGER NOT NULL, mean_ns INTEGER NOT NULL,
  min_ns INTEGER NOT NULL, median_ns INTEGER NOT NULL, p95_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL, max_depth INTEGER NOT NULL
);
CREATE TABLE KPROF_HINTS (
  id INTEGER NOT NULL PRIMARY KEY, rule TEXT NOT NULL, severity TEXT NOT NULL,
  title TEXT NOT NULL, est_saving_ns INTEGER NOT NULL, est_saving_pct REAL NOT NULL,
  evidence TEXT NOT NULL, assumption TEXT NOT NULL, fix_cuda TEXT NOT NULL,
  fix_pytorch TEXT NOT NULL
);
CREATE TABLE KPROF_GAPS (
  globalPid INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
  kind TEXT NOT NULL, wait_ns INTEGER NOT NULL, host_ns INTEGER NOT NULL,
  rest_ns INTEGER NOT NULL
);
CREATE TABLE KPROF_STREAMS (
  deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, busy_ns INTEGER NOT NULL,
  activities INTEGER NOT NULL
);
CREATE TABLE KPROF_MEMORY_STATES (
  id INTEGER NOT NULL PRIMARY KEY, globalPid INTEGER NOT NULL, pid INTEGER NOT NULL,
  rank INTEGER, deviceId INTEGER, moment TEXT NOT NULL, timestamp INTEGER NOT NULL,
  liveBytes INTEGER, capacityBytes INTEGER, range TEXT, torchMoment TEXT,
  torchMatched INTEGER NOT NULL, partial INTEGER NOT NULL, failedCall TEXT,
  requestedBytes INTEGER, errorCode INTEGER, torchId INTEGER, torchMomentPosition INTEGER
);
CREATE TABLE KPROF_MEMORY_OWNERS (
  stateId INTEGER NOT NULL, view TEXT NOT NULL, name TEXT NOT NULL, liveBytes INTEGER NOT NULL,
  liveAllocations INTEGER NOT NULL, madeAllocations INTEGER NOT NULL, position INTEGER NOT NULL
);
CREATE TABLE KPROF_MEMORY_LIVE (
  stateId INTEGER NOT NULL, bytes INTEGER NOT NULL, address INTEGER NOT NULL,
  timestamp INTEGER NOT NULL, owner TEXT NOT NULL, range TEXT, variable TEXT
);
CREATE TABLE KPROF_PYTORCH_MEMORY (
  id INTEGER NOT NULL PRIMARY KEY, globalPid INTEGER NOT NULL, pid INTEGER NOT NULL,
  rank INTEGER, deviceId INTEGER NOT NULL, whenWritten TEXT NOT NULL, timestamp INTEGER NOT NULL,
  maxAllocated INTEGER NOT NULL, maxReserved INTEGER NOT NULL, allocated INTEGER NOT NULL,
  reserved INTEGER NOT NULL, inactiveSplit INTEGER NOT NULL, requested INTEGER NOT NULL,
  replayedMaxAllocated INTEGER NOT NULL, replayedMaxReserved INTEGER NOT NULL,
  expandableMaxReserved INTEGER,
  complete INTEGER NOT NULL, entries INTEGER NOT NULL, windows INTEGER NOT NULL,
  unrecordedSteps INTEGER NOT NULL, optimizerSteps INTEGER NOT NULL,
  backwardPasses INTEGER NOT NULL, allocConf TEXT
);
CREATE TABLE KPROF_PYTORCH_MEMORY_MOMENTS (
  torchId INTEGER NOT NULL, position INTEGER NOT NULL, kind TEXT NOT NULL, timestamp INTEGER NOT NULL,
  allocated INTEGER NOT NULL, reserved INTEGER NOT NULL, parameters INTEGER NOT NULL,
  gradients INTEGER NOT NULL, optimizerState INTEGER NOT NULL, activations INTEGER NOT NULL,
  other INTEGER NOT NULL
);
)sql";

struct EnumRow {
  int64_t id;
  const char* name;
  const char* label;
};

// Nsight Systems' values and names (docs/sqlite.md cites the sources). Copy kinds are CUPTI's
// CUpti_ActivityMemcpyKind; memory kinds are nsys's ENUM_CUDA_MEM_KIND, whose numbering differs
// from CUPTI's CUpti_ActivityMemoryKind (nsys: 0 pageable ... 7 unknown).
constexpr EnumRow kMemcpyOper[] = {
    {0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"},
    {1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"},
    {2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"},
    {3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"},
    {4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"},
    {5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"},
    {6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"},
    {7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"},
    {8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"},
    {9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"},
    {10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"},
    {11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"},
    {12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"},
    {13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"},
};
constexpr EnumRow kMemKind[] = {
    {0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"},
    {1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"},
    {2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"},
    {3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"},
    {4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"},
    {5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"},
    {6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"},
    {7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"},
};
constexpr EnumRow kDevMemOper[] = {
    {0, "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION", "Allocation"},
    {1, "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION", "Deallocation"},
};
constexpr EnumRow kSyncType[] = {
    {0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"},
    {1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"},
    {2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"},
    {3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"},
    {4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"},
};
constexpr EnumRow kEventType[] = {
    {34, "NvtxMark", "NvtxMark"},
    {59, "NvtxPushPopRange", "NvtxPushPopRange"},
    {60, "NvtxStartEndRange", "NvtxStartEndRange"},
    {75, "NvtxDomainCreate", "NvtxDomainCreate"},
};
constexpr EnumRow kEventClass[] = {
    {0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"},
    {1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"},
};

template <size_t N>
void WriteEnum(Db& db, const char* table, const EnumRow (&rows)[N]) {
  Stmt st(db, InsertSql(table, "id, name, label"));
  for (const EnumRow& r : rows) st.Insert(r.id, r.name, r.label);
}

}  // namespace

void CreateSchema(Db& db) { db.Exec(kSchema); }

void WriteEnums(Db& db) {
  WriteEnum(db, "ENUM_CUDA_MEMCPY_OPER", kMemcpyOper);
  WriteEnum(db, "ENUM_CUDA_MEM_KIND", kMemKind);
  WriteEnum(db, "ENUM_CUDA_DEV_MEM_EVENT_OPER", kDevMemOper);
  WriteEnum(db, "ENUM_CUPTI_SYNC_TYPE", kSyncType);
  WriteEnum(db, "ENUM_NSYS_EVENT_TYPE", kEventType);
  WriteEnum(db, "ENUM_NSYS_EVENT_CLASS", kEventClass);
}

void CreateIndexes(Db& db) {
  // Launch-to-kernel joins on correlationId (nsys's "correlate CUDA kernel launches" recipe):
  // SQLite would otherwise build a transient index for every such statement.
  db.Exec(
      "CREATE INDEX KPROF_IX_RUNTIME_CORRELATION ON CUPTI_ACTIVITY_KIND_RUNTIME "
      "(correlationId);");
}

}  // namespace kprof::sqlite
