// A library that makes device memory with CUDA's virtual-memory calls on a thread of its own, as
// NCCL makes its buffers (kernels/vmm_owner.cu, docs/memory.md "Who made it"): CUPTI names no
// library for such memory; kprof names this one from the calling thread's stack.
#include <cuda.h>
#include <pthread.h>

#include <cstddef>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

bool Ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* s = nullptr;
  cuGetErrorString(r, &s);
  std::fprintf(stderr, "vmm_pool: %s failed: %s\n", what, s != nullptr ? s : "?");
  return false;
}

// One buffer of `bytes` (a multiple of the granularity) on `device`: made, mapped, readable.
// On failure nothing is left behind.
bool Make(int device, size_t bytes, CUdeviceptr* out) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  CUmemGenericAllocationHandle h = 0;
  if (!Ok(cuMemCreate(&h, bytes, &prop, 0), "cuMemCreate")) return false;
  if (!Ok(cuMemAddressReserve(out, bytes, 0, 0, 0), "cuMemAddressReserve")) {
    cuMemRelease(h);
    return false;
  }
  if (!Ok(cuMemMap(*out, bytes, 0, h, 0), "cuMemMap")) {
    cuMemRelease(h);
    cuMemAddressFree(*out, bytes);
    return false;
  }
  cuMemRelease(h);  // the mapping keeps the memory until it is unmapped
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (Ok(cuMemSetAccess(*out, bytes, &access, 1), "cuMemSetAccess")) return true;
  cuMemUnmap(*out, bytes);
  cuMemAddressFree(*out, bytes);
  return false;
}

bool Free(CUdeviceptr p, size_t bytes) {
  const bool unmapped = Ok(cuMemUnmap(p, bytes), "cuMemUnmap");
  return Ok(cuMemAddressFree(p, bytes), "cuMemAddressFree") && unmapped;
}

}  // namespace

extern "C" {

// The allocation granularity of `device` (the smallest buffer), 0 on failure.
size_t vmm_pool_granularity(int device) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t g = 0;
  return Ok(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity")
             ? g
             : 0;
}

// Makes `count` buffers of `bytes` on a thread named "vmm pool" (the current context's, made
// current there); their addresses in `out`. 0 on success.
int vmm_pool_make(size_t bytes, int count, CUdeviceptr* out) {
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  if (!Ok(cuCtxGetCurrent(&ctx), "cuCtxGetCurrent") || ctx == nullptr) return 1;
  if (!Ok(cuCtxGetDevice(&dev), "cuCtxGetDevice")) return 1;
  int failed = 0;
  std::thread worker([&] {
    pthread_setname_np(pthread_self(), "vmm pool");
    if (!Ok(cuCtxSetCurrent(ctx), "cuCtxSetCurrent")) {
      failed = 1;
      return;
    }
    int made = 0;
    for (; made < count; ++made)
      if (!Make(static_cast<int>(dev), bytes, &out[made])) break;
    if (made < count) {  // what was made goes again
      failed = 1;
      for (int i = 0; i < made; ++i) Free(out[i], bytes);
    }
  });
  worker.join();
  return failed;
}

// One buffer made and freed again `rounds` times on the calling thread. 0 on success.
int vmm_pool_churn(size_t bytes, int rounds) {
  CUdevice dev = 0;
  if (!Ok(cuCtxGetDevice(&dev), "cuCtxGetDevice")) return 1;
  for (int i = 0; i < rounds; ++i) {
    CUdeviceptr p = 0;
    if (!Make(static_cast<int>(dev), bytes, &p) || !Free(p, bytes)) return 1;
  }
  return 0;
}

int vmm_pool_free(size_t bytes, int count, const CUdeviceptr* ptrs) {
  for (int i = 0; i < count; ++i)
    if (!Free(ptrs[i], bytes)) return 1;
  return 0;
}

}  // extern "C"
