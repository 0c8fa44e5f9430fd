// hint_alloc_churn [ITERS] [MIB] [--fixed]: planted bottleneck for `alloc-churn`.
// Each iteration allocates a MIB MiB scratch buffer and an output buffer with cudaMalloc, runs a
// kernel over them and releases both with cudaFree (which also synchronizes the device): the
// allocator's work is paid in every step instead of once. Expected top hint: alloc-churn.
// --fixed: the hint's fix. Both buffers are allocated once (inside the timed part) and reused;
// they are freed after it. One iteration before the timed part in both modes.
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
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 1500);
  const size_t bytes = size_t(ArgOr(argc, argv, 2, 32)) << 20;
  const int blocks = 512;
  const auto churn = [&] {
    float* scratch;
    float* out;
    CHECK(cudaMalloc(&scratch, bytes));
    CHECK(cudaMalloc(&out, blocks * sizeof(float)));
    fill_scratch<<<blocks, 256>>>(scratch, bytes / sizeof(float), out);
    CHECK_LAUNCH();
    CHECK(cudaFree(scratch));
    CHECK(cudaFree(out));
  };
  churn();
  CHECK(cudaDeviceSynchronize());
  float* scratch = nullptr;
  float* out = nullptr;
  const double t0 = NowSeconds();
  if (fixed) {
    CHECK(cudaMalloc(&scratch, bytes));
    CHECK(cudaMalloc(&out, blocks * sizeof(float)));
  }
  for (long i = 0; i < iters; ++i) {
    if (fixed) {
      fill_scratch<<<blocks, 256>>>(scratch, bytes / sizeof(float), out);
      CHECK_LAUNCH();
    } else {
      churn();
    }
  }
  CHECK(cudaDeviceSynchronize());
  const double loop_s = NowSeconds() - t0;
  std::printf("hint_alloc_churn: iters=%ld fixed=%d wall_s=%.6f loop_s=%.6f\n", iters,
              fixed ? 1 : 0, loop_s, loop_s);
  if (fixed) {
    CHECK(cudaFree(scratch));
    CHECK(cudaFree(out));
  }
  return 0;
}
