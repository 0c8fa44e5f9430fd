// hint_gpu_idle_gaps [ITERS] [HOST_MS] [--fixed]: planted bottleneck for `gpu-idle-gaps`.
// Each iteration "loads a batch" on the main thread for HOST_MS (host work inside the NVTX range
// load_batch), then queues about 2 ms of kernels (NVTX range train_step) and goes straight back
// to loading: no host waits, but the GPU finishes its work long before the next batch is ready
// and sits idle for several milliseconds each time. Expected top hint: gpu-idle-gaps.
// --fixed: the hint's fix. Batches are loaded by a pool of worker threads (a DataLoader with
// workers), enough of them that loading keeps ahead of the GPU; the main thread takes each batch
// when it is ready and queues its kernels. One iteration before the timed part in both modes.
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common.h"

__global__ void train_kernel(float* out, unsigned long long ns) {
  const unsigned long long t0 = GlobalTimerNs();
  float v = threadIdx.x;
  while (GlobalTimerNs() - t0 < ns) v = v * 0.9999f + 1.0f;
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 60);
  const double host_ms = static_cast<double>(ArgOr(argc, argv, 2, 8));
  const int blocks = 1024;
  constexpr unsigned long long kKernelNs = 200'000;  // 10 a step: 2 ms of GPU work
  float* out;
  CHECK(cudaMalloc(&out, blocks * sizeof(float)));
  const auto load = [&] {
    nvtxRangePushA("load_batch");
    HostWorkSeconds(host_ms * 1e-3);
    nvtxRangePop();
  };
  const auto train = [&] {
    nvtxRangePushA("train_step");
    for (int k = 0; k < 10; ++k) train_kernel<<<blocks, 128>>>(out, kKernelNs);
    CHECK_LAUNCH();
    nvtxRangePop();
  };
  load();
  train();
  CHECK(cudaDeviceSynchronize());
  const double t0 = NowSeconds();
  if (!fixed) {
    for (long i = 0; i < iters; ++i) {
      load();
      train();
    }
  } else {
    // Workers: enough that HOST_MS of loading per batch keeps up with 2 ms of GPU work, plus one.
    const int workers = static_cast<int>(std::min(16.0, host_ms / (10 * kKernelNs * 1e-6) + 1.5));
    std::unique_ptr<std::atomic<bool>[]> ready(new std::atomic<bool>[iters]);
    for (long i = 0; i < iters; ++i) ready[i] = false;
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w)
      pool.emplace_back([&, w] {
        for (long i = w; i < iters; i += workers) {
          load();
          ready[i].store(true, std::memory_order_release);
        }
      });
    for (long i = 0; i < iters; ++i) {
      while (!ready[i].load(std::memory_order_acquire)) std::this_thread::yield();
      train();
    }
    for (std::thread& t : pool) t.join();
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_gpu_idle_gaps: iters=%ld fixed=%d wall_s=%.6f\n", iters, fixed ? 1 : 0,
              NowSeconds() - t0);
  CHECK(cudaFree(out));
  return 0;
}
