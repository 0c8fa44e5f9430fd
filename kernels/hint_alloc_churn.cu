// hint_alloc_churn [ITERS] [MIB]: planted bottleneck for `alloc-churn`.
// Each iteration allocates a MIB MiB scratch buffer and an output buffer with cudaMalloc, runs a
// kernel over them and releases both with cudaFree (which also synchronizes the device): the
// allocator's work is paid in every step instead of once. Expected top hint: alloc-churn.
#include "common.h"

__global__ void fill_scratch(float* scratch, size_t n, float* out) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    scratch[i] = static_cast<float>(i & 1023) * 0.5f;
    acc += scratch[i];
  }
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 1500);
  const size_t bytes = size_t(ArgOr(argc, argv, 2, 32)) << 20;
  const int blocks = 512;
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    float* scratch;
    float* out;
    CHECK(cudaMalloc(&scratch, bytes));
    CHECK(cudaMalloc(&out, blocks * sizeof(float)));
    fill_scratch<<<blocks, 256>>>(scratch, bytes / sizeof(float), out);
    CHECK_LAUNCH();
    CHECK(cudaFree(scratch));
    CHECK(cudaFree(out));
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_alloc_churn: iters=%ld wall_s=%.3f\n", iters, NowSeconds() - t0);
  return 0;
}
