// counter_characters [ITERS] [WHICH]: kernels of known character for the hardware counters
// (issue 12, docs/counters.md). Each of ITERS rounds runs, in an NVTX range named after it:
//   bf16_gemm      an 8192^3 BF16 GEMM on the tensor cores (cublasGemmEx)     compute-bound
//   stream_axpy    y = a*x + y over two 1 GiB float arrays (float4 loads)     memory-bound
//   fp32_gemm      a 4096^3 FP32 GEMM on the FMA pipes (cublasSgemm, no TF32) compute-bound,
//                  tensor pipe idle
//   latency_chase  2 blocks of 32 threads chasing pointers through 64 MiB     latency-bound
//   elementwise    scale, add, relu over 64M floats (three kernels, float4)   memory-bound
// WHICH (optional) runs one of them only. One host wait per round; buffers are made and filled
// before the first round. Links cuBLAS.
#include <cuda_bf16.h>
#include <nvtx3/nvToolsExt.h>

#include <string>

#include "cublas_check.h"

#define GRID_STRIDE(i, n)                                                 \
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < (n); \
       i += size_t{gridDim.x} * blockDim.x)

template <typename T>
__global__ void fill_uniform(T* x, size_t n, unsigned seed) {
  GRID_STRIDE(i, n) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x[i] = static_cast<T>(static_cast<float>(h & 0xffff) / 65536.0f - 0.5f);
  }
}

__global__ void stream_axpy(const float4* x, float4* y, float a, size_t n4) {
  GRID_STRIDE(i, n4) {
    const float4 u = x[i];
    float4 v = y[i];
    v.x = fmaf(a, u.x, v.x);
    v.y = fmaf(a, u.y, v.y);
    v.z = fmaf(a, u.z, v.z);
    v.w = fmaf(a, u.w, v.w);
    y[i] = v;
  }
}

// next[i]: a pseudo-random index; every load of the chase depends on the one before.
__global__ void make_chain(unsigned* next, size_t n) {
  GRID_STRIDE(i, n) next[i] = static_cast<unsigned>((i * 2654435761ull + 12345) % n);
}
__global__ void latency_chase(const unsigned* next, unsigned* out, int hops) {
  unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
  for (int h = 0; h < hops; ++h) p = next[p];
  out[blockIdx.x * blockDim.x + threadIdx.x] = p;
}

// Element-wise kernels as frameworks write them: a thread per 4 elements (float4), a grid that
// covers the tensor, so that enough loads are in flight to keep DRAM busy.
__global__ void scale_kernel(float4* x, float s, size_t n4) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  v.x *= s;
  v.y *= s;
  v.z *= s;
  v.w *= s;
  x[i] = v;
}
__global__ void add_kernel(const float4* a, float4* b, size_t n4) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i >= n4) return;
  const float4 u = a[i];
  float4 v = b[i];
  v.x += u.x;
  v.y += u.y;
  v.z += u.z;
  v.w += u.w;
  b[i] = v;
}
__global__ void relu_kernel(float4* x, size_t n4) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  v.x = fmaxf(v.x, 0.0f);
  v.y = fmaxf(v.y, 0.0f);
  v.z = fmaxf(v.z, 0.0f);
  v.w = fmaxf(v.w, 0.0f);
  x[i] = v;
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 5);
  const std::string which = argc > 2 ? argv[2] : "";
  const auto wanted = [&](const char* name) { return which.empty() || which == name; };
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const unsigned grid = 4u * static_cast<unsigned>(sms);
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32 stays FP32 (no TF32)

  const int gn = 8192, sn = 4096;
  __nv_bfloat16 *ga, *gb, *gc;
  CHECK(cudaMalloc(&ga, size_t(gn) * gn * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&gb, size_t(gn) * gn * sizeof(__nv_bfloat16)));
  CHECK(cudaMalloc(&gc, size_t(gn) * gn * sizeof(__nv_bfloat16)));
  fill_uniform<<<grid, 256>>>(ga, size_t(gn) * gn, 1);
  fill_uniform<<<grid, 256>>>(gb, size_t(gn) * gn, 2);
  float *sa, *sb, *sc;
  CHECK(cudaMalloc(&sa, size_t(sn) * sn * sizeof(float)));
  CHECK(cudaMalloc(&sb, size_t(sn) * sn * sizeof(float)));
  CHECK(cudaMalloc(&sc, size_t(sn) * sn * sizeof(float)));
  fill_uniform<<<grid, 256>>>(sa, size_t(sn) * sn, 3);
  fill_uniform<<<grid, 256>>>(sb, size_t(sn) * sn, 4);
  const size_t axpy_n = (size_t{1} << 30) / sizeof(float);  // 1 GiB per array
  float *ax, *ay;
  CHECK(cudaMalloc(&ax, axpy_n * sizeof(float)));
  CHECK(cudaMalloc(&ay, axpy_n * sizeof(float)));
  fill_uniform<<<grid, 256>>>(ax, axpy_n, 5);
  fill_uniform<<<grid, 256>>>(ay, axpy_n, 6);
  const size_t chain_n = (size_t{64} << 20) / sizeof(unsigned);
  unsigned *chain, *chased;
  CHECK(cudaMalloc(&chain, chain_n * sizeof(unsigned)));
  CHECK(cudaMalloc(&chased, 64 * sizeof(unsigned)));
  make_chain<<<grid, 256>>>(chain, chain_n);
  const size_t ew_n = size_t{64} << 20;
  float *ea, *eb;
  CHECK(cudaMalloc(&ea, ew_n * sizeof(float)));
  CHECK(cudaMalloc(&eb, ew_n * sizeof(float)));
  fill_uniform<<<grid, 256>>>(ea, ew_n, 7);
  fill_uniform<<<grid, 256>>>(eb, ew_n, 8);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());

  const float alpha = 1.0f, beta = 0.0f;
  const double t0 = NowSeconds();
  for (long it = 0; it < iters; ++it) {
    if (wanted("bf16_gemm")) {
      nvtxRangePushA("bf16_gemm");
      CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, gn, gn, gn, &alpha, ga, CUDA_R_16BF,
                                gn, gb, CUDA_R_16BF, gn, &beta, gc, CUDA_R_16BF, gn,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      nvtxRangePop();
    }
    if (wanted("stream_axpy")) {
      nvtxRangePushA("stream_axpy");
      stream_axpy<<<grid, 256>>>(reinterpret_cast<const float4*>(ax), reinterpret_cast<float4*>(ay),
                                 0.5f, axpy_n / 4);
      CHECK_LAUNCH();
      nvtxRangePop();
    }
    if (wanted("fp32_gemm")) {
      nvtxRangePushA("fp32_gemm");
      CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, sn, sn, sn, &alpha, sa, sn, sb, sn,
                               &beta, sc, sn));
      nvtxRangePop();
    }
    if (wanted("latency_chase")) {
      nvtxRangePushA("latency_chase");
      latency_chase<<<2, 32>>>(chain, chased, 2000);
      CHECK_LAUNCH();
      nvtxRangePop();
    }
    if (wanted("elementwise")) {
      nvtxRangePushA("elementwise");
      const size_t n4 = ew_n / 4;
      const auto blocks = static_cast<unsigned>((n4 + 255) / 256);
      scale_kernel<<<blocks, 256>>>(reinterpret_cast<float4*>(ea), 0.999f, n4);
      add_kernel<<<blocks, 256>>>(reinterpret_cast<const float4*>(ea),
                                  reinterpret_cast<float4*>(eb), n4);
      relu_kernel<<<blocks, 256>>>(reinterpret_cast<float4*>(eb), n4);
      CHECK_LAUNCH();
      nvtxRangePop();
    }
    CHECK(cudaDeviceSynchronize());
  }
  std::printf("counter_characters: iters=%ld which=%s wall_s=%.6f\n", iters,
              which.empty() ? "all" : which.c_str(), NowSeconds() - t0);
  for (void* p : {static_cast<void*>(ga), static_cast<void*>(gb), static_cast<void*>(gc),
                  static_cast<void*>(sa), static_cast<void*>(sb), static_cast<void*>(sc),
                  static_cast<void*>(ax), static_cast<void*>(ay), static_cast<void*>(chain),
                  static_cast<void*>(chased), static_cast<void*>(ea), static_cast<void*>(eb)})
    CHECK(cudaFree(p));
  CHECK_CUBLAS(cublasDestroy(h));
  return 0;
}
