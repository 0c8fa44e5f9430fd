// Device memory a library makes with the virtual-memory calls on a thread of its own
// (kernels/lib/vmm_pool.cpp, as NCCL makes its buffers; docs/memory.md "Who made it";
// tests/gpu/memory_test.cpp):
//   vmm_owner [BUFFERS=16] [ROUNDS=500]
// libkprof_vmm_pool.so makes BUFFERS buffers of the device's granularity (2 MiB on an H100 or
// H200) on its thread "vmm pool"; a kernel writes them; then one buffer is made and freed again
// ROUNDS times on the main thread, timed. Prints "pool_bytes=", "buffer_bytes=" and
// "round_us=" (the median round of 5 blocks of ROUNDS/5).
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "common.h"

extern "C" {
size_t vmm_pool_granularity(int device);
int vmm_pool_make(size_t bytes, int count, CUdeviceptr* out);
int vmm_pool_churn(size_t bytes, int rounds);
int vmm_pool_free(size_t bytes, int count, const CUdeviceptr* ptrs);
}

__global__ void fill(unsigned* p, size_t n, unsigned v) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = v;
}

int main(int argc, char** argv) {
  const int buffers = argc > 1 ? std::atoi(argv[1]) : 16;
  const int rounds = std::max(5, argc > 2 ? std::atoi(argv[2]) : 500);
  CHECK(cudaFree(nullptr));  // the runtime's primary context, current on this thread
  const size_t bytes = vmm_pool_granularity(0);
  if (bytes == 0 || buffers <= 0) return 1;
  std::vector<CUdeviceptr> ptrs(static_cast<size_t>(buffers));
  if (vmm_pool_make(bytes, buffers, ptrs.data()) != 0) return 1;
  const size_t n = bytes / sizeof(unsigned);
  for (CUdeviceptr p : ptrs) {
    fill<<<static_cast<unsigned>((n + 255) / 256), 256>>>(reinterpret_cast<unsigned*>(p), n, 7);
    CHECK_LAUNCH();
  }
  CHECK(cudaDeviceSynchronize());
  std::vector<double> blocks;
  for (int b = 0; b < 5; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    if (vmm_pool_churn(bytes, rounds / 5) != 0) return 1;
    const auto t1 = std::chrono::steady_clock::now();
    blocks.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / (rounds / 5));
  }
  std::sort(blocks.begin(), blocks.end());
  std::printf("pool_bytes=%zu buffer_bytes=%zu round_us=%.2f\n", bytes * ptrs.size(), bytes,
              blocks[2]);
  if (vmm_pool_free(bytes, buffers, ptrs.data()) != 0) return 1;
  return 0;
}
