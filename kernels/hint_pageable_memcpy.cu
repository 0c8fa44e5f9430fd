// hint_pageable_memcpy [ITERS] [MIB]: planted bottleneck for `pageable-memcpy`.
// Each iteration copies MIB MiB from a malloc'd (pageable) host buffer to the device, scales it
// with a short kernel and copies it back into pageable memory. One pinned copy each way at the
// start gives kprof the link's pinned bandwidth to compare with. Expected top hint:
// pageable-memcpy.
#include <vector>

#include "common.h"

__global__ void scale(float* x, size_t n, float a) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    x[i] *= a;
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 40);
  const size_t bytes = size_t(ArgOr(argc, argv, 2, 64)) << 20;
  const size_t n = bytes / sizeof(float);
  std::vector<float> host(n, 1.0f);  // pageable
  float* pinned;
  float* dev;
  CHECK(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 0, bytes);
  CHECK(cudaMalloc(&dev, bytes));
  const double t0 = NowSeconds();
  // Reference: the same size from pinned memory.
  CHECK(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost));
  for (long i = 0; i < iters; ++i) {
    CHECK(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice));
    scale<<<1024, 256>>>(dev, n, 1.0001f);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(host.data(), dev, bytes, cudaMemcpyDeviceToHost));
  }
  std::printf("hint_pageable_memcpy: iters=%ld bytes=%zu x0=%g wall_s=%.3f\n", iters, bytes,
              host[0], NowSeconds() - t0);
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(pinned));
  return 0;
}
