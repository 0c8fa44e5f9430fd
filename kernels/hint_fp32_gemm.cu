// hint_fp32_gemm [ITERS] [N]: planted bottleneck for `fp32-gemm`.
// ITERS single-precision N x N x N GEMMs (cublasSgemm) back to back with cuBLAS's default math
// mode, which does not use tensor cores for FP32: the GEMMs run on the FP32 FMA pipes at a small
// fraction of what TF32 or BF16 tensor cores deliver. One host wait at the end. Expected top hint:
// fp32-gemm. Links cuBLAS.

#include "cublas_check.h"

__global__ void fill_uniform(float* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x[i] = static_cast<float>(h & 0xffff) / 65536.0f - 0.5f;
  }
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 150);
  const int n = static_cast<int>(ArgOr(argc, argv, 2, 4096));
  const size_t elems = size_t(n) * n;
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32 stays FP32 (no TF32)
  float *a, *b, *c;
  CHECK(cudaMalloc(&a, elems * sizeof(float)));
  CHECK(cudaMalloc(&b, elems * sizeof(float)));
  CHECK(cudaMalloc(&c, elems * sizeof(float)));
  fill_uniform<<<1024, 256>>>(a, elems, 1);
  fill_uniform<<<1024, 256>>>(b, elems, 2);
  CHECK_LAUNCH();
  const float alpha = 1.0f, beta = 0.0f;
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i)
    CHECK_CUBLAS(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n));
  CHECK(cudaDeviceSynchronize());
  const double s = NowSeconds() - t0;
  std::printf("hint_fp32_gemm: iters=%ld n=%d tflops=%.1f wall_s=%.3f\n", iters, n,
              2.0 * n * double(n) * n * iters / s / 1e12, s);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  CHECK_CUBLAS(cublasDestroy(h));
  return 0;
}
