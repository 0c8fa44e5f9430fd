// capture_window [BEFORE] [INSIDE] [AFTER]: BEFORE launches of outside_kernel, then
// cudaProfilerStart, INSIDE launches of inside_kernel inside an NVTX range "window", then
// cudaProfilerStop, then AFTER launches of outside_kernel; a stream synchronization after each
// part. Exact per run: BEFORE + AFTER outside_kernel, INSIDE inside_kernel, 3 syncs. For the
// capture windows of `kprof run --capture cuda-profiler-api` and `--capture nvtx:window`
// (docs/capture.md): only the inside kernels may be recorded.
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include "common.h"

__global__ void outside_kernel(int* p) { p[threadIdx.x] += 1; }
__global__ void inside_kernel(int* p) { p[threadIdx.x] += 2; }

int main(int argc, char** argv) {
  const long before = ArgOr(argc, argv, 1, 1000);
  const long inside = ArgOr(argc, argv, 2, 100);
  const long after = ArgOr(argc, argv, 3, 1000);
  int* p;
  CHECK(cudaMalloc(&p, sizeof(int) * 32));
  CHECK(cudaMemset(p, 0, sizeof(int) * 32));
  for (long i = 0; i < before; ++i) outside_kernel<<<1, 32>>>(p);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaProfilerStart());
  nvtxRangePushA("window");
  for (long i = 0; i < inside; ++i) inside_kernel<<<1, 32>>>(p);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  nvtxRangePop();
  CHECK(cudaProfilerStop());
  for (long i = 0; i < after; ++i) outside_kernel<<<1, 32>>>(p);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(p));
  std::printf("capture_window: before=%ld inside=%ld after=%ld\n", before, inside, after);
  return 0;
}
