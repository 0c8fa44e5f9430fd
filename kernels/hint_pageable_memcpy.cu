// hint_pageable_memcpy [ITERS] [MIB] [--fixed]: planted bottleneck for `pageable-memcpy`.
// Each iteration copies MIB MiB from a malloc'd (pageable) host buffer to the device, scales it
// with a short kernel and copies it back into pageable memory. Three pinned copies each way at the
// start give kprof the link's pinned bandwidth to compare with. Expected top hint:
// pageable-memcpy.
// --fixed: the hint's fix. The host buffer is pinned (cudaMallocHost, allocated and filled before
// the timed part, as data produced in pinned memory would be) and the copies are cudaMemcpyAsync
// on a stream; the host still waits for each iteration's result before the next.
#include <vector>

#include "common.h"

__global__ void scale(float* x, size_t n, float a) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    x[i] *= a;
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 40);
  const size_t bytes = size_t(ArgOr(argc, argv, 2, 64)) << 20;
  const size_t n = bytes / sizeof(float);
  std::vector<float> pageable(fixed ? 0 : n, 1.0f);
  float* pinned;
  float* dev;
  CHECK(cudaMallocHost(&pinned, bytes));
  for (size_t i = 0; i < n; ++i) pinned[i] = 1.0f;
  CHECK(cudaMalloc(&dev, bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Reference: the same size from pinned memory (the first copy of a buffer can be slower).
  for (int r = 0; r < 3; ++r) {
    CHECK(cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost));
  }
  float* host = fixed ? pinned : pageable.data();
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    if (fixed) {
      CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
      scale<<<1024, 256, 0, s>>>(dev, n, 1.0001f);
      CHECK_LAUNCH();
      CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
      CHECK(cudaStreamSynchronize(s));
    } else {
      CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
      scale<<<1024, 256>>>(dev, n, 1.0001f);
      CHECK_LAUNCH();
      CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
    }
  }
  std::printf("hint_pageable_memcpy: iters=%ld fixed=%d bytes=%zu x0=%g wall_s=%.6f\n", iters,
              fixed ? 1 : 0, bytes, host[0], NowSeconds() - t0);
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(pinned));
  return 0;
}
