// hint_launch_bound [LAUNCHES] [HOST_US]: planted bottleneck for the `launch-bound` hint.
// LAUNCHES launches of one tiny kernel (about a microsecond of GPU work each) with HOST_US of
// host work before each launch, like an eager framework's per-op overhead. The GPU finishes each
// kernel long before the next one arrives, so it idles between them; one cudaDeviceSynchronize at
// the end. Expected top hint: launch-bound.
#include "common.h"

__global__ void tiny_step(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.999f + 0.001f;
}

int main(int argc, char** argv) {
  const long launches = ArgOr(argc, argv, 1, 100000);
  const double host_us = static_cast<double>(ArgOr(argc, argv, 2, 3));
  const int n = 4096;
  float* x;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  const double t0 = NowSeconds();
  for (long i = 0; i < launches; ++i) {
    HostWorkSeconds(host_us * 1e-6);
    tiny_step<<<n / 256, 256>>>(x, n);
  }
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_launch_bound: launches=%ld wall_s=%.3f\n", launches, NowSeconds() - t0);
  CHECK(cudaFree(x));
  return 0;
}
