// hint_memory_bound_chain [ITERS] [ROWS] [COLS] [--fixed]: planted bottleneck for
// `memory-bound-chain`.
// An unfused transformer-style block: a short compute kernel (matmul_tile) followed by five
// memory-bound kernels over a ROWS x COLS activation (bias_add, gelu, dropout, residual
// element-wise add, layer_norm), each reading and writing the whole tensor. Fused, the chain
// would make one trip through memory instead of five. Launches are queued back to back; one host
// wait at the end. Expected top hint: memory-bound-chain.
// --fixed: the hint's fix. The five kernels are one (fused_block_kernel, a block per row): it
// reads the activation, the residual and the bias once, keeps the row in registers, writes the
// residual stream and the normalised output, with the same arithmetic. COLS must be at most
// 16 x 256. One iteration before the timed part in both modes.
#include "common.h"

#define GRID_STRIDE(i, n)                                                 \
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += size_t{gridDim.x} * blockDim.x)

// Stand-in for a GEMM: compute-bound on a small tile (not a memory-bound family name).
__global__ void matmul_tile(float* y, int rounds) {
  float v = threadIdx.x * 1e-3f;
  for (int r = 0; r < rounds; ++r) v = fmaf(v, 0.999f, 0.001f);
  y[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
__global__ void bias_add_kernel(float* x, const float* bias, size_t n, int cols) {
  GRID_STRIDE(i, n) x[i] += bias[i % cols];
}
__global__ void gelu_kernel(float* x, size_t n) {
  GRID_STRIDE(i, n) {
    float v = x[i];
    x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}
__global__ void dropout_kernel(float* x, size_t n, unsigned seed) {
  GRID_STRIDE(i, n) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x[i] = (h & 7) ? x[i] * (1.0f / 0.875f) : 0.0f;
  }
}
__global__ void elementwise_residual_add(float* x, const float* residual, size_t n) {
  GRID_STRIDE(i, n) x[i] += residual[i];
}
// One block per row.
__global__ void layer_norm_kernel(const float* x, float* y, int cols) {
  const float* row = x + size_t(blockIdx.x) * cols;
  float s = 0, s2 = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    s += row[c];
    s2 += row[c] * row[c];
  }
  __shared__ float sh[2][32];
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, o);
    s2 += __shfl_down_sync(0xffffffffu, s2, o);
  }
  if ((threadIdx.x & 31) == 0) sh[0][threadIdx.x / 32] = s, sh[1][threadIdx.x / 32] = s2;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w) sh[0][0] += sh[0][w], sh[1][0] += sh[1][w];
  }
  __syncthreads();
  const float mean = sh[0][0] / cols;
  const float inv = rsqrtf(sh[1][0] / cols - mean * mean + 1e-5f);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[size_t(blockIdx.x) * cols + c] = (row[c] - mean) * inv;
}

// The chain fused: one block of kThreads per row, kMaxPerThread values of the row per thread.
constexpr int kThreads = 256, kMaxPerThread = 16;
__global__ void fused_block_kernel(float* x, const float* bias, const float* residual, float* y,
                                   int cols, unsigned seed) {
  const size_t base = size_t(blockIdx.x) * cols;
  float v[kMaxPerThread];
  float s = 0, s2 = 0;
#pragma unroll
  for (int j = 0; j < kMaxPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c >= cols) break;
    const size_t i = base + c;
    float t = x[i] + bias[c];
    t = 0.5f * t * (1.0f + tanhf(0.7978845608f * (t + 0.044715f * t * t * t)));
    const unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    t = (h & 7) ? t * (1.0f / 0.875f) : 0.0f;
    t += residual[i];
    x[i] = t;
    v[j] = t;
    s += t;
    s2 += t * t;
  }
  __shared__ float sh[2][32];
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_down_sync(0xffffffffu, s, o);
    s2 += __shfl_down_sync(0xffffffffu, s2, o);
  }
  if ((threadIdx.x & 31) == 0) sh[0][threadIdx.x / 32] = s, sh[1][threadIdx.x / 32] = s2;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) sh[0][0] += sh[0][w], sh[1][0] += sh[1][w];
  }
  __syncthreads();
  const float mean = sh[0][0] / cols;
  const float inv = rsqrtf(sh[1][0] / cols - mean * mean + 1e-5f);
#pragma unroll
  for (int j = 0; j < kMaxPerThread; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c >= cols) break;
    y[base + c] = (v[j] - mean) * inv;
  }
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 2000);
  const int rows = static_cast<int>(ArgOr(argc, argv, 2, 4096));
  const int cols = static_cast<int>(ArgOr(argc, argv, 3, 4096));
  const size_t n = size_t(rows) * cols;
  float *x, *y, *residual, *bias, *tile;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&residual, n * sizeof(float)));
  CHECK(cudaMalloc(&bias, cols * sizeof(float)));
  CHECK(cudaMalloc(&tile, 264 * 256 * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaMemset(residual, 0, n * sizeof(float)));
  CHECK(cudaMemset(bias, 0, cols * sizeof(float)));
  if (fixed && cols > kThreads * kMaxPerThread) {
    std::fprintf(stderr, "hint_memory_bound_chain --fixed: COLS must be at most %d\n",
                 kThreads * kMaxPerThread);
    return 2;
  }
  const auto block = [&](long i) {
    matmul_tile<<<264, 256>>>(tile, 20000);
    if (fixed) {
      fused_block_kernel<<<rows, kThreads>>>(x, bias, residual, y, cols, static_cast<unsigned>(i));
    } else {
      bias_add_kernel<<<1056, 256>>>(x, bias, n, cols);
      gelu_kernel<<<1056, 256>>>(x, n);
      dropout_kernel<<<1056, 256>>>(x, n, static_cast<unsigned>(i));
      elementwise_residual_add<<<1056, 256>>>(x, residual, n);
      layer_norm_kernel<<<rows, 256>>>(x, y, cols);
    }
  };
  block(0);
  CHECK(cudaDeviceSynchronize());
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) block(i);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_memory_bound_chain: iters=%ld fixed=%d wall_s=%.6f\n", iters, fixed ? 1 : 0,
              NowSeconds() - t0);
  for (float* p : {x, y, residual, bias, tile}) CHECK(cudaFree(p));
  return 0;
}
