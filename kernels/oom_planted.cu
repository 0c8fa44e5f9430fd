// A planted out-of-memory failure (tests/gpu/memory_test.cpp, docs/memory.md): known owners hold
// known bytes, then one cudaMalloc asks for more than the device has left and fails.
//   oom_planted exit|abort
// Under NVTX range "weights": 3 x 256 MiB, one of them freed again; under "activations":
// 4 x 512 MiB; then cuBLAS runs a GEMM (its own allocations, if any, are cuBLAS's); then, under
// "grow", cudaMalloc of the free memory plus 1 GiB. Prints "asked=BYTES" and "touch=N" (the
// kernels launched before the failure), then exits 3 or aborts.
#include <nvtx3/nvToolsExt.h>

#include "cublas_check.h"

__global__ void touch(float* p, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "exit";
  constexpr size_t kMiB = 1u << 20;
  std::vector<float*> weights(3), acts(4);
  CHECK(cudaFree(nullptr));  // CUDA first: kprof is injected then, and sees the ranges after
  nvtxRangePushA("weights");
  for (auto& w : weights) CHECK(cudaMalloc(&w, 256 * kMiB));
  CHECK(cudaFree(weights[2]));
  nvtxRangePop();
  nvtxRangePushA("activations");
  for (auto& a : acts) CHECK(cudaMalloc(&a, 512 * kMiB));
  nvtxRangePop();
  int touches = 0;
  for (float* a : acts) {
    const size_t n = 512 * kMiB / sizeof(float);
    touch<<<static_cast<unsigned>((n + 255) / 256), 256>>>(a, n);
    CHECK_LAUNCH();
    ++touches;
  }
  cublasHandle_t h = nullptr;
  CHECK_CUBLAS(cublasCreate(&h));
  const int m = 1024;
  const float one = 1.0f, zero = 0.0f;
  CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, acts[0], m, acts[1], m,
                           &zero, acts[2], m));
  CHECK(cudaDeviceSynchronize());
  size_t free_bytes = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total));
  const size_t asked = free_bytes + 1024 * kMiB;
  std::printf("asked=%zu\ntouch=%d\n", asked, touches);
  std::fflush(stdout);
  float* big = nullptr;
  nvtxRangePushA("grow");
  const cudaError_t err = cudaMalloc(&big, asked);
  nvtxRangePop();
  if (err == cudaSuccess) {
    std::fprintf(stderr, "oom_planted: cudaMalloc(%zu) succeeded; nothing planted\n", asked);
    return 1;
  }
  std::fprintf(stderr, "oom_planted: cudaMalloc(%zu) failed: %s\n", asked, cudaGetErrorString(err));
  if (mode == "abort") std::abort();
  return 3;
}
