// hint_underfilled_grid [ITERS] [BLOCKS] [--fixed]: planted bottleneck for `underfilled-grid`.
// A reduction over 256 MiB launched with BLOCKS (default 8) blocks: each launch keeps 8 SMs busy
// for about a millisecond while the other SMs of the GPU (132 on an H100 SXM) have nothing to do.
// Launches are queued back to back; one host wait at the end. Expected top hint:
// underfilled-grid.
// --fixed: the hint's fix. The same reduction launched with two blocks per SM (the grid-stride
// loop spreads the same elements over them). One launch before the timed part in both modes.
#include "common.h"

__global__ void block_sum(const float* x, size_t n, float* out) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    acc += x[i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

__global__ void fill(float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    x[i] = 1.0f;
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 400);
  int blocks = static_cast<int>(ArgOr(argc, argv, 2, 8));
  if (fixed) {
    int dev = 0, sms = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    blocks = 2 * sms;
  }
  const size_t n = (size_t{256} << 20) / sizeof(float);
  float *x, *out;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemset(out, 0, sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  block_sum<<<blocks, 1024>>>(x, n, out);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) block_sum<<<blocks, 1024>>>(x, n, out);
  CHECK_LAUNCH();
  float sum = 0;
  CHECK(cudaMemcpy(&sum, out, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("hint_underfilled_grid: iters=%ld fixed=%d blocks=%d sum=%g wall_s=%.6f\n", iters,
              fixed ? 1 : 0, blocks, sum, NowSeconds() - t0);
  CHECK(cudaFree(x));
  CHECK(cudaFree(out));
  return 0;
}
