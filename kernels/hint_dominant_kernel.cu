// hint_dominant_kernel [ITERS] [N]: planted bottleneck for `dominant-kernel`.
// Each iteration runs a short input-preparation kernel, a naive N x N transpose that reads
// coalesced but writes with a stride of N floats (every store touches a different cache line),
// and a short finalisation kernel. The transpose takes almost all of the GPU time; launches are
// queued back to back and the host waits once at the end. Expected top (and only) hint:
// dominant-kernel.
#include "common.h"

__global__ void prepare_input(float* x, size_t n, float a) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    x[i] = x[i] * a + 1.0f;
}
__global__ void transpose_naive(const float* in, float* out, int n) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y;
  if (col < n) out[size_t(col) * n + row] = in[size_t(row) * n + col];
}
__global__ void finalize_output(float* out, int n, float* checksum) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *checksum += out[0] + out[size_t(n) * n - 1];
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 300);
  const int n = static_cast<int>(ArgOr(argc, argv, 2, 8192));
  const size_t elems = size_t(n) * n;
  float *in, *out, *checksum;
  CHECK(cudaMalloc(&in, elems * sizeof(float)));
  CHECK(cudaMalloc(&out, elems * sizeof(float)));
  CHECK(cudaMalloc(&checksum, sizeof(float)));
  CHECK(cudaMemset(in, 0, elems * sizeof(float)));
  CHECK(cudaMemset(checksum, 0, sizeof(float)));
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    prepare_input<<<264, 256>>>(in, size_t(n) * 64, 0.5f);  // touches the first 64 rows only
    transpose_naive<<<dim3((n + 255) / 256, n), 256>>>(in, out, n);
    finalize_output<<<1, 32>>>(out, n, checksum);
  }
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_dominant_kernel: iters=%ld n=%d wall_s=%.3f\n", iters, n, NowSeconds() - t0);
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  CHECK(cudaFree(checksum));
  return 0;
}
