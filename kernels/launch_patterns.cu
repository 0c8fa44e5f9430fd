// Launch patterns that counters must measure whatever their shape (issue 32): programs that
// queue every launch before the GPU has run the first, short kernels, many kernel names, and a
// kernel that runs only inside a CUDA graph.
//
//   launch_patterns sgemm   [N=40]     N cuBLAS SGEMMs (4096^3) back to back, one sync at the end
//   launch_patterns bf16    [N=60]     N cublasGemmEx BF16 GEMMs (8192^3, FP32 accumulation)
//   launch_patterns small   [N=50]     N launches of one small custom kernel (a 1M-float axpy)
//   launch_patterns names   [N=24]     N distinct kernel names, 20 launches each, queued; the
//                                      name with most GPU time comes last
//   launch_patterns medium  [N=180]    N launches of a ~145 us streaming kernel
//   launch_patterns tiny    [N=20000]  N launches of a ~1-2 us kernel, 3 names interleaved
//   launch_patterns graph   [N=200]    one kernel launched on a stream N times, another only as a
//                                      node of a CUDA graph launched N times
// Prints "launch_patterns: MODE N done". Exit 2 on any CUDA or cuBLAS error.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstring>

#include "common.h"
#include "cublas_check.h"

namespace {

__global__ void axpy(const float* x, float* y, float a, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

// Streaming kernels of different names and weights: `rounds` passes over n floats.
template <int K>
__global__ void named_stream(float* y, size_t n, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
      y[i] = y[i] * 0.999f + static_cast<float>(K);
}

__global__ void tiny_a(float* y) { y[threadIdx.x] += 1.0f; }
__global__ void tiny_b(float* y) { y[threadIdx.x] *= 0.5f; }
__global__ void tiny_c(float* y) { y[threadIdx.x] -= 0.25f; }

__global__ void graph_only(float* y, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = y[i] * 1.0001f + 1.0f;
}

float* DeviceFloats(size_t n) {
  float* p = nullptr;
  CHECK(cudaMalloc(&p, n * sizeof(float)));
  CHECK(cudaMemset(p, 0, n * sizeof(float)));
  return p;
}

void Gemm(long n, bool bf16) {
  const int dim = bf16 ? 8192 : 4096;
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  const size_t elems = static_cast<size_t>(dim) * dim;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t in_bytes = elems * (bf16 ? sizeof(__nv_bfloat16) : sizeof(float));
  CHECK(cudaMalloc(&a, in_bytes));
  CHECK(cudaMalloc(&b, in_bytes));
  CHECK(cudaMalloc(&c, elems * (bf16 ? sizeof(__nv_bfloat16) : sizeof(float))));
  CHECK(cudaMemset(a, 0, in_bytes));
  CHECK(cudaMemset(b, 0, in_bytes));
  const float alpha = 1.0f, beta = 0.0f;
  for (long i = 0; i < n; ++i) {
    if (bf16) {
      CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, a, CUDA_R_16BF,
                                dim, b, CUDA_R_16BF, dim, &beta, c, CUDA_R_16BF, dim,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha,
                               static_cast<float*>(a), dim, static_cast<float*>(b), dim, &beta,
                               static_cast<float*>(c), dim));
    }
  }
  CHECK(cudaDeviceSynchronize());
  CHECK_CUBLAS(cublasDestroy(h));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
}

template <int K>
void LaunchNamed(float* y, size_t n, int rounds) {
  named_stream<K><<<264, 256>>>(y, n, rounds);
  CHECK_LAUNCH();
}

// 24 names: the first 23 one pass each, the last (launched last) 8 passes.
void Names(long n) {
  constexpr size_t kN = 1 << 22;
  float* y = DeviceFloats(kN);
  using Fn = void (*)(float*, size_t, int);
  const Fn fns[] = {LaunchNamed<0>,  LaunchNamed<1>,  LaunchNamed<2>,  LaunchNamed<3>,
                    LaunchNamed<4>,  LaunchNamed<5>,  LaunchNamed<6>,  LaunchNamed<7>,
                    LaunchNamed<8>,  LaunchNamed<9>,  LaunchNamed<10>, LaunchNamed<11>,
                    LaunchNamed<12>, LaunchNamed<13>, LaunchNamed<14>, LaunchNamed<15>,
                    LaunchNamed<16>, LaunchNamed<17>, LaunchNamed<18>, LaunchNamed<19>,
                    LaunchNamed<20>, LaunchNamed<21>, LaunchNamed<22>, LaunchNamed<23>};
  const long names = std::min<long>(n, 24);
  for (long k = 0; k < names; ++k)
    for (int i = 0; i < 20; ++i) fns[k](y, kN, k == names - 1 ? 8 : 1);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(y));
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "sgemm";
  long n = 0;
  if (std::strcmp(mode, "sgemm") == 0) {
    n = ArgOr(argc, argv, 2, 40);
    Gemm(n, false);
  } else if (std::strcmp(mode, "bf16") == 0) {
    n = ArgOr(argc, argv, 2, 60);
    Gemm(n, true);
  } else if (std::strcmp(mode, "small") == 0) {
    n = ArgOr(argc, argv, 2, 50);
    constexpr size_t kN = 1 << 20;
    float* x = DeviceFloats(kN);
    float* y = DeviceFloats(kN);
    for (long i = 0; i < n; ++i) {
      axpy<<<256, 256>>>(x, y, 2.0f, kN);
      CHECK_LAUNCH();
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  } else if (std::strcmp(mode, "names") == 0) {
    n = ArgOr(argc, argv, 2, 24);
    Names(n);
  } else if (std::strcmp(mode, "medium") == 0) {
    n = ArgOr(argc, argv, 2, 180);
    // 22M floats (85 MB) read and written by 264 blocks: about 150 us (448 us for 64M floats on
    // an H200), shorter than the default sampling interval.
    constexpr size_t kN = (size_t{1} << 26) / 3;
    float* y = DeviceFloats(kN);
    for (long i = 0; i < n; ++i) LaunchNamed<100>(y, kN, 1);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(y));
  } else if (std::strcmp(mode, "tiny") == 0) {
    n = ArgOr(argc, argv, 2, 20000);
    float* y = DeviceFloats(1024);
    for (long i = 0; i < n; ++i) {
      switch (i % 3) {
        case 0:
          tiny_a<<<1, 256>>>(y);
          break;
        case 1:
          tiny_b<<<1, 256>>>(y);
          break;
        default:
          tiny_c<<<1, 256>>>(y);
          break;
      }
      CHECK_LAUNCH();
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(y));
  } else if (std::strcmp(mode, "graph") == 0) {
    n = ArgOr(argc, argv, 2, 200);
    constexpr size_t kN = 1 << 24;
    float* x = DeviceFloats(kN);
    float* y = DeviceFloats(kN);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < 4; ++k) {
      graph_only<<<264, 256, 0, s>>>(y, kN);
      CHECK_LAUNCH();
    }
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    for (long i = 0; i < n; ++i) {
      axpy<<<264, 256, 0, s>>>(x, y, 0.5f, kN);
      CHECK_LAUNCH();
      CHECK(cudaGraphLaunch(exec, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  } else {
    std::fprintf(stderr, "launch_patterns: unknown mode %s\n", mode);
    return 2;
  }
  std::printf("launch_patterns: %s %ld done\n", mode, n);
  return 0;
}
