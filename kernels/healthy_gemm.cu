// healthy_gemm [ITERS] [N]: the healthy reference for the hints: ITERS large BF16 N x N x N GEMMs
// (cublasGemmEx, BF16 inputs and output, FP32 accumulation, tensor cores) queued back to back on
// one stream, with a single host wait at the end. Buffers are allocated and initialised once,
// before the loop. kprof must raise no hint of warning severity or above for it (at most
// dominant-kernel, which is informational). Links cuBLAS.
#include <cuda_bf16.h>

#include "cublas_check.h"

__global__ void fill_bf16(__nv_bfloat16* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x[i] = __float2bfloat16(static_cast<float>(h & 0xffff) / 65536.0f - 0.5f);
  }
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 400);
  const int n = static_cast<int>(ArgOr(argc, argv, 2, 8192));
  const size_t elems = size_t(n) * n;
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK_CUBLAS(cublasSetStream(h, s));
  __nv_bfloat16 *a, *b, *c;
  CHECK(cudaMalloc(&a, elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&b, elems * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&c, elems * sizeof(__nv_bfloat16)));
  fill_bf16<<<1024, 256, 0, s>>>(a, elems, 1);
  fill_bf16<<<1024, 256, 0, s>>>(b, elems, 2);
  CHECK_LAUNCH();
  const float alpha = 1.0f, beta = 0.0f;
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i)
    CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b,
                              CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  CHECK(cudaStreamSynchronize(s));
  const double sec = NowSeconds() - t0;
  std::printf("healthy_gemm: iters=%ld n=%d tflops=%.1f wall_s=%.3f\n", iters, n,
              2.0 * n * double(n) * n * iters / sec / 1e12, sec);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  CHECK(cudaStreamDestroy(s));
  CHECK_CUBLAS(cublasDestroy(h));
  return 0;
}
