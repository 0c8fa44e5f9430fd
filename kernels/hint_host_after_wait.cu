// hint_host_after_wait [ITERS] [KERNEL_US] [HOST_US] [--fixed]: planted bottleneck for
// `host-work-after-sync` (issue 15: host work after a wait is not a slow launch rate).
// Each iteration runs a kernel of KERNEL_US (default 50) that leaves its result in pinned host
// memory, waits for it with cudaEventSynchronize, then processes the result on the host for
// HOST_US (default 150, NVTX range process_result) before it launches the next kernel. The GPU
// idles while the host works; the launches themselves are quick, so CUDA graphs would not help.
// Expected top hint: host-work-after-sync.
// --fixed: the hint's fix. The result is handed to a pool of worker threads that process it, and
// the main thread launches the next kernel at once: the host work leaves the GPU's critical path.
// The workers finish inside the timed part. One iteration before the timed part in both modes.
#include <nvtx3/nvToolsExt.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common.h"

__global__ void step_kernel(float* out, float* result, unsigned long long ns) {
  const unsigned long long t0 = GlobalTimerNs();
  float v = threadIdx.x;
  while (GlobalTimerNs() - t0 < ns) v = v * 0.9999f + 1.0f;
  if (threadIdx.x == 0) out[blockIdx.x] = v;
  if (blockIdx.x == 0 && threadIdx.x == 0) *result = v;
}

namespace {

// Results waiting for a worker; Close() lets the workers drain the queue and stop.
class WorkQueue {
 public:
  void Push(float v) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(v);
    }
    cv_.notify_one();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool Pop(float& v) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return false;
    v = items_.front();
    items_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<float> items_;
  bool closed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 2000);
  const long kernel_us = ArgOr(argc, argv, 2, 50);
  const long host_us = ArgOr(argc, argv, 3, 150);
  const int blocks = 1024;
  float* out;
  float* result;  // mapped pinned memory: the kernel writes the result straight to the host
  float* result_dev;
  CHECK(cudaMalloc(&out, blocks * sizeof(float)));
  CHECK(cudaHostAlloc(&result, sizeof(float), cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer(&result_dev, result, 0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  double checksum = 0;  // what processing the results computes
  std::mutex checksum_mu;
  const auto process = [&](float v) {
    nvtxRangePushA("process_result");
    HostWorkSeconds(static_cast<double>(host_us) * 1e-6);
    nvtxRangePop();
    std::lock_guard<std::mutex> lock(checksum_mu);
    checksum += v;
  };
  // Launches one step and waits for its result.
  const auto step = [&]() -> float {
    step_kernel<<<blocks, 128, 0, s>>>(out, result_dev, 1000ull * kernel_us);
    CHECK_LAUNCH();
    CHECK(cudaEventRecord(done, s));
    CHECK(cudaEventSynchronize(done));
    return *result;
  };
  process(step());
  const double t0 = NowSeconds();
  if (!fixed) {
    for (long i = 0; i < iters; ++i) process(step());
  } else {
    // Enough workers that processing keeps up with one result per kernel, plus one.
    const long workers = host_us / std::max(1L, kernel_us) + 2;
    WorkQueue queue;
    std::vector<std::thread> pool;
    for (long w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (float v; queue.Pop(v);) process(v);
      });
    for (long i = 0; i < iters; ++i) queue.Push(step());
    queue.Close();
    for (std::thread& t : pool) t.join();
  }
  std::printf("hint_host_after_wait: iters=%ld fixed=%d checksum=%g wall_s=%.6f\n", iters,
              fixed ? 1 : 0, checksum, NowSeconds() - t0);
  CHECK(cudaEventDestroy(done));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(result));
  CHECK(cudaFree(out));
  return 0;
}
