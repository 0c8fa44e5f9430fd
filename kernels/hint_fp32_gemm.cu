// hint_fp32_gemm [ITERS] [N] [--fixed]: planted bottleneck for `fp32-gemm`.
// ITERS single-precision N x N x N GEMMs (cublasSgemm) back to back with cuBLAS's default math
// mode, which does not use tensor cores for FP32: the GEMMs run on the FP32 FMA pipes at a small
// fraction of what TF32 or BF16 tensor cores deliver. One host wait at the end. Expected top hint:
// fp32-gemm. Links cuBLAS.
// --fixed: the hint's fix. The matrices are stored in BF16 (made so before the timed part) and
// multiplied with cublasGemmEx, FP32 accumulation, on the tensor cores. One GEMM before the timed
// part in both modes (cuBLAS's first call loads its kernels).
#include <cuda_bf16.h>

#include "cublas_check.h"

template <typename T>
__global__ void fill_uniform(T* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x[i] = static_cast<T>(static_cast<float>(h & 0xffff) / 65536.0f - 0.5f);
  }
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 150);
  const int n = static_cast<int>(ArgOr(argc, argv, 2, 4096));
  const size_t elems = size_t(n) * n;
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32 stays FP32 (no TF32)
  const size_t elem_bytes = fixed ? sizeof(__nv_bfloat16) : sizeof(float);
  void *a, *b, *c;
  CHECK(cudaMalloc(&a, elems * elem_bytes));
  CHECK(cudaMalloc(&b, elems * elem_bytes));
  CHECK(cudaMalloc(&c, elems * elem_bytes));
  if (fixed) {
    fill_uniform<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a), elems, 1);
    fill_uniform<<<1024, 256>>>(static_cast<__nv_bfloat16*>(b), elems, 2);
  } else {
    fill_uniform<<<1024, 256>>>(static_cast<float*>(a), elems, 1);
    fill_uniform<<<1024, 256>>>(static_cast<float*>(b), elems, 2);
  }
  CHECK_LAUNCH();
  const float alpha = 1.0f, beta = 0.0f;
  const auto gemm = [&] {
    if (fixed) {
      CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b,
                                CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    } else {
      CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, static_cast<float*>(a),
                               n, static_cast<float*>(b), n, &beta, static_cast<float*>(c), n));
    }
  };
  gemm();
  CHECK(cudaDeviceSynchronize());
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) gemm();
  CHECK(cudaDeviceSynchronize());
  const double s = NowSeconds() - t0;
  std::printf("hint_fp32_gemm: iters=%ld fixed=%d n=%d tflops=%.1f wall_s=%.6f\n", iters,
              fixed ? 1 : 0, n, 2.0 * n * double(n) * n * iters / s / 1e12, s);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  CHECK_CUBLAS(cublasDestroy(h));
  return 0;
}
