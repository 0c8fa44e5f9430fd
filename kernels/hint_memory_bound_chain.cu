// hint_memory_bound_chain [ITERS] [ROWS] [COLS]: planted bottleneck for `memory-bound-chain`.
// An unfused transformer-style block: a short compute kernel (matmul_tile) followed by five
// memory-bound kernels over a ROWS x COLS activation (bias_add, gelu, dropout, residual
// element-wise add, layer_norm), each reading and writing the whole tensor. Fused, the chain
// would make one trip through memory instead of five. Launches are queued back to back; one host
// wait at the end. Expected top hint: memory-bound-chain.
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

int main(int argc, char** argv) {
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
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    matmul_tile<<<264, 256>>>(tile, 20000);
    bias_add_kernel<<<1056, 256>>>(x, bias, n, cols);
    gelu_kernel<<<1056, 256>>>(x, n);
    dropout_kernel<<<1056, 256>>>(x, n, static_cast<unsigned>(i));
    elementwise_residual_add<<<1056, 256>>>(x, residual, n);
    layer_norm_kernel<<<rows, 256>>>(x, y, cols);
  }
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_memory_bound_chain: iters=%ld wall_s=%.3f\n", iters, NowSeconds() - t0);
  for (float* p : {x, y, residual, bias, tile}) CHECK(cudaFree(p));
  return 0;
}
