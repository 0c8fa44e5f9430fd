// train_step [STEPS] [SLOW_PCT]: a model-shaped loop for the CI regression checks (kprof diff).
// Each step, inside NVTX ranges step > forward/backward/optimizer, runs four kernels of fixed
// arithmetic work on 132 x 256 threads: matmul_like, attention_like, norm_like (forward),
// matmul_like_bwd (backward) and sgd_update (optimizer), then one cudaStreamSynchronize at the
// end of the step (a loss read-back). SLOW_PCT (default 0) makes attention_like do SLOW_PCT %
// more work, planting a regression in one kernel. Exact per run: 5 * STEPS kernels, STEPS syncs.
#include <nvtx3/nvToolsExt.h>

#include "common.h"

__device__ __forceinline__ float Spin(float v, int iters) {
  for (int i = 0; i < iters; ++i) v = fmaf(v, 1.0000001f, 0.5f);
  return v;
}

__global__ void matmul_like(float* p, int iters) {
  p[blockIdx.x * blockDim.x + threadIdx.x] = Spin(p[blockIdx.x * blockDim.x + threadIdx.x], iters);
}
__global__ void attention_like(float* p, int iters) {
  p[blockIdx.x * blockDim.x + threadIdx.x] = Spin(p[blockIdx.x * blockDim.x + threadIdx.x], iters);
}
__global__ void norm_like(float* p, int iters) {
  p[blockIdx.x * blockDim.x + threadIdx.x] = Spin(p[blockIdx.x * blockDim.x + threadIdx.x], iters);
}
__global__ void matmul_like_bwd(float* p, int iters) {
  p[blockIdx.x * blockDim.x + threadIdx.x] = Spin(p[blockIdx.x * blockDim.x + threadIdx.x], iters);
}
__global__ void sgd_update(float* p, int iters) {
  p[blockIdx.x * blockDim.x + threadIdx.x] = Spin(p[blockIdx.x * blockDim.x + threadIdx.x], iters);
}

int main(int argc, char** argv) {
  const long steps = ArgOr(argc, argv, 1, 50);
  const long slow_pct = ArgOr(argc, argv, 2, 0);
  const int blocks = 132, threads = 256;
  const int base = 20000;  // roughly 100 us of FMA chain per kernel on an H100
  const int attention_iters = static_cast<int>(base + base * slow_pct / 100);
  float* p;
  CHECK(cudaMalloc(&p, sizeof(float) * blocks * threads));
  CHECK(cudaMemset(p, 0, sizeof(float) * blocks * threads));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (long i = 0; i < steps; ++i) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    matmul_like<<<blocks, threads, 0, s>>>(p, base);
    attention_like<<<blocks, threads, 0, s>>>(p, attention_iters);
    norm_like<<<blocks, threads, 0, s>>>(p, base / 4);
    nvtxRangePop();
    nvtxRangePushA("backward");
    matmul_like_bwd<<<blocks, threads, 0, s>>>(p, base * 2);
    nvtxRangePop();
    nvtxRangePushA("optimizer");
    sgd_update<<<blocks, threads, 0, s>>>(p, base / 4);
    nvtxRangePop();
    CHECK_LAUNCH();
    CHECK(cudaStreamSynchronize(s));
    nvtxRangePop();
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(p));
  std::printf("train_step: steps=%ld slow_pct=%ld kernels=%ld\n", steps, slow_pct, 5 * steps);
  return 0;
}
