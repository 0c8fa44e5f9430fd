// Allocation calls that failed (agent.h "memory_calls.cpp"; docs/memory.md): CUPTI's MEMORY2
// records say what was allocated, never what was asked for and refused. The exits of the
// allocation calls come to this callback; one that did not succeed becomes a MemAllocFailed
// record with the size asked for, so that a run that ends in "out of memory" says what failed
// and what held the memory then. Every failure is written (out of memory is code 2; after a
// fault a sticky error fails them too). Only failures write anything; a successful cudaMalloc
// costs four callbacks (entry and exit of the runtime call and of the driver call inside it).
// The calls' parameter structs are CUDA's (generated_*_meta.h, through cupti.h), not CUPTI's
// versioned records, which only convert.cpp names.
//
// The virtual-memory calls (cuMemCreate, cuMemMap) made outside any runtime call are written
// too, when they succeed: CUPTI names no library for such memory (NCCL's buffers, made on its
// proxy thread), so the callback keeps the calling thread's stack, the writer names the shared
// object that called from it, and the report gives the memory that owner (docs/memory.md "Who
// made it"). They are rare: a few
// dozen per process, each costing the driver far more than the stack walk.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <execinfo.h>
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent.h"
#include "agent/cupti_setup.h"

namespace kprof::agent {
namespace {

// An allocation call: its callback id, and how to read the size it asked for and the memory kind.
struct AllocCall {
  CUpti_CallbackId cbid;
  MemKind kind;
  uint64_t (*size)(const void* params);
};

template <typename P>
uint64_t Size(const void* p) {
  return static_cast<const P*>(p)->size;
}
template <typename P>
uint64_t ByteSize(const void* p) {
  return static_cast<const P*>(p)->bytesize;
}
uint64_t RuntimePitch(const void* p) {
  const auto* q = static_cast<const cudaMallocPitch_v3020_params*>(p);
  return static_cast<uint64_t>(q->width) * q->height;
}
uint64_t Runtime3D(const void* p) {
  const auto* q = static_cast<const cudaMalloc3D_v3020_params*>(p);
  return static_cast<uint64_t>(q->extent.width) * q->extent.height * q->extent.depth;
}
uint64_t DriverPitch(const void* p) {
  const auto* q = static_cast<const cuMemAllocPitch_v2_params*>(p);
  return static_cast<uint64_t>(q->WidthInBytes) * q->Height;
}

constexpr AllocCall kRuntimeCalls[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, MemKind::Device, Size<cudaMalloc_v3020_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020, MemKind::Device, RuntimePitch},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020, MemKind::Device, Runtime3D},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000, MemKind::Managed,
     Size<cudaMallocManaged_v6000_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, MemKind::Device,
     Size<cudaMallocAsync_v11020_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020, MemKind::Device,
     Size<cudaMallocAsync_ptsz_v11020_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020, MemKind::Device,
     Size<cudaMallocFromPoolAsync_v11020_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020, MemKind::Device,
     Size<cudaMallocFromPoolAsync_ptsz_v11020_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, MemKind::Pinned,
     Size<cudaMallocHost_v3020_params>},
    {CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, MemKind::Pinned,
     Size<cudaHostAlloc_v3020_params>},
};
constexpr AllocCall kDriverCalls[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, MemKind::Device, ByteSize<cuMemAlloc_v2_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, MemKind::Device, DriverPitch},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, MemKind::Managed,
     ByteSize<cuMemAllocManaged_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, MemKind::Device, ByteSize<cuMemAllocAsync_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, MemKind::Device,
     ByteSize<cuMemAllocAsync_ptsz_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, MemKind::Device,
     ByteSize<cuMemAllocFromPoolAsync_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, MemKind::Device,
     ByteSize<cuMemAllocFromPoolAsync_ptsz_params>},
    // The virtual memory API (PyTorch's expandable segments): the physical memory is made here.
    {CUPTI_DRIVER_TRACE_CBID_cuMemCreate, MemKind::Device, Size<cuMemCreate_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, MemKind::Pinned,
     ByteSize<cuMemAllocHost_v2_params>},
    {CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, MemKind::Pinned, ByteSize<cuMemHostAlloc_params>},
};

// A runtime allocation under way on this thread: the driver calls it makes are its own.
thread_local int t_runtime_depth = 0;
// When this thread's virtual-memory call began (its record's start).
thread_local uint64_t t_memory_call_ns = 0;

bool IsMemoryCall(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate || cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap;
}

// A virtual-memory call that succeeded outside the runtime becomes a DriverApi record naming its
// caller (record.h kApiMemoryCaller).
void WriteMemoryCall(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  Agent& a = A();
  if (!a.active.load(std::memory_order_relaxed) || d->functionParams == nullptr) return;
  Record r;
  r.kind = static_cast<uint8_t>(RecordKind::DriverApi);
  r.flags = kApiMemoryCaller;
  uint64_t end = 0;
  if (cuptiGetTimestamp(&end) != CUPTI_SUCCESS) return;  // an unplaced call says nothing
  r.start_ns = t_memory_call_ns != 0 && t_memory_call_ns <= end ? t_memory_call_ns : end;
  r.end_ns = end;
  r.tid = CuptiThreadId();
  r.correlation = d->correlationId;
  r.device = kNoDevice;
  r.a = cbid;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap) {
    const auto* p = static_cast<const cuMemMap_params*>(d->functionParams);
    r.bytes = p->size;
    r.c = static_cast<uint32_t>(p->ptr & 0xFFFFFFFFu);
    r.d = static_cast<uint32_t>(static_cast<uint64_t>(p->ptr) >> 32);
  } else {
    r.bytes = static_cast<const cuMemCreate_params*>(d->functionParams)->size;
  }
  // The stack's return addresses only: they are named (dladdr, which takes the loader's lock)
  // on the writer thread, not inside the driver's call.
  constexpr int kFrames = 48;
  std::vector<void*> frames(kFrames);
  frames.resize(static_cast<size_t>(std::max(0, backtrace(frames.data(), kFrames))));
  char thread[64] = {};
  if (pthread_getname_np(pthread_self(), thread, sizeof(thread)) != 0) thread[0] = '\0';
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side.push_back(
      {r, d->functionName != nullptr ? d->functionName : "", thread, std::move(frames)});
}

template <size_t N>
const AllocCall* Find(const AllocCall (&calls)[N], CUpti_CallbackId cbid) {
  for (const AllocCall& c : calls)
    if (c.cbid == cbid) return &c;
  return nullptr;
}

}  // namespace

bool EnableAllocationCallbacks(CUpti_SubscriberHandle subscriber) {
  // The unwinder loads itself on its first use: here, before any driver call is watched.
  void* frame[1];
  backtrace(frame, 1);
  constexpr const char* kDoing = "watch allocation calls (a failed one will not be reported)";
  bool ok = true;
  for (const AllocCall& c : kRuntimeCalls)
    ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, c.cbid),
                      kDoing);
  for (const AllocCall& c : kDriverCalls)
    ok &=
        KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, c.cbid), kDoing);
  ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                        CUPTI_DRIVER_TRACE_CBID_cuMemMap),
                    "watch cuMemMap (memory mapped by a library will have no owner)");
  return ok;
}

bool OnAllocationCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  const bool memory_call = !runtime && IsMemoryCall(cbid);
  const AllocCall* call = runtime ? Find(kRuntimeCalls, cbid) : Find(kDriverCalls, cbid);
  if (call == nullptr && !memory_call) return false;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (runtime) {
    if (d->callbackSite == CUPTI_API_ENTER) {
      ++t_runtime_depth;
      return true;
    }
    if (t_runtime_depth > 0) --t_runtime_depth;
  } else if (t_runtime_depth > 0) {
    return true;
  } else if (d->callbackSite == CUPTI_API_ENTER) {
    if (memory_call && cuptiGetTimestamp(&t_memory_call_ns) != CUPTI_SUCCESS) t_memory_call_ns = 0;
    return true;
  }
  if (d->functionReturnValue == nullptr || d->functionParams == nullptr) return true;
  const int rc = runtime
                     ? static_cast<int>(*static_cast<const cudaError_t*>(d->functionReturnValue))
                     : static_cast<int>(*static_cast<const CUresult*>(d->functionReturnValue));
  if (rc == 0) {
    if (memory_call) WriteMemoryCall(cbid, d);
    return true;
  }
  if (call == nullptr) return true;  // a failed cuMemMap: no memory was asked for

  Record r;
  r.kind = static_cast<uint8_t>(RecordKind::MemAllocFailed);
  r.flags = runtime ? 0 : kAllocFailedDriver;
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);  // a failure leaves 0: the reader keeps the record unplaced
  r.start_ns = r.end_ns = ts;
  r.tid = CuptiThreadId();
  r.correlation = d->correlationId;
  r.bytes = call->size(d->functionParams);
  r.a = cbid;
  r.b = static_cast<uint32_t>(rc);
  r.c = static_cast<uint32_t>(call->kind);
  r.device = kNoDevice;  // a CPU record: the call's device is in d
  uint32_t device = 0;
  r.d = d->context != nullptr && cuptiGetDeviceId(d->context, &device) == CUPTI_SUCCESS ? device
                                                                                        : kNoDevice;
  // cuMemCreate names its device itself (the current context's may be another GPU's).
  if (!runtime && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate) {
    const CUmemAllocationProp* prop =
        static_cast<const cuMemCreate_params*>(d->functionParams)->prop;
    r.d = prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE
              ? static_cast<uint32_t>(prop->location.id)
              : kNoDevice;
  }
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side.push_back({r, d->functionName != nullptr ? d->functionName : "", {}, {}});
  return true;
}

}  // namespace kprof::agent
