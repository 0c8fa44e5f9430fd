// hint_gpu_idle_gaps [ITERS] [HOST_MS]: planted bottleneck for `gpu-idle-gaps`.
// Each iteration "loads a batch" on the main thread for HOST_MS (host work inside the NVTX range
// load_batch), then queues about 2 ms of kernels (NVTX range train_step) and goes straight back
// to loading: no host waits, but the GPU finishes its work long before the next batch is ready
// and sits idle for several milliseconds each time. Expected top hint: gpu-idle-gaps.
#include <nvtx3/nvToolsExt.h>

#include "common.h"

__global__ void train_kernel(float* out, unsigned long long ns) {
  const unsigned long long t0 = GlobalTimerNs();
  float v = threadIdx.x;
  while (GlobalTimerNs() - t0 < ns) v = v * 0.9999f + 1.0f;
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 60);
  const double host_ms = static_cast<double>(ArgOr(argc, argv, 2, 8));
  const int blocks = 1024;
  float* out;
  CHECK(cudaMalloc(&out, blocks * sizeof(float)));
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    nvtxRangePushA("load_batch");
    HostWorkSeconds(host_ms * 1e-3);
    nvtxRangePop();
    nvtxRangePushA("train_step");
    for (int k = 0; k < 10; ++k) train_kernel<<<blocks, 128>>>(out, 200'000);
    CHECK_LAUNCH();
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_gpu_idle_gaps: iters=%ld wall_s=%.3f\n", iters, NowSeconds() - t0);
  CHECK(cudaFree(out));
  return 0;
}
