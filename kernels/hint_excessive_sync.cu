// hint_excessive_sync [ITERS] [KERNEL_US] [HOST_US] [--fixed]: planted bottleneck for
// `excessive-sync`. Each iteration runs a kernel of KERNEL_US, waits for it with
// cudaStreamSynchronize, does HOST_US of host work, runs a second kernel and reads one flag back
// with a synchronous 4-byte cudaMemcpy (the `.item()` pattern), then HOST_US of host work again.
// The host waits out every kernel and the GPU idles while the host works. Expected top hint:
// excessive-sync.
// --fixed: the hint's fix. No synchronize in the loop: the flag is copied with cudaMemcpyAsync into
// pinned memory and read a step later, after an event of that step (by then the GPU is a step
// ahead, so the wait costs it nothing). One iteration before the timed part in both modes.
#include "common.h"

// Busy for about `ns` nanoseconds on every SM, then writes one value per block.
__global__ void step_kernel(float* out, unsigned long long ns) {
  const unsigned long long t0 = GlobalTimerNs();
  float v = threadIdx.x;
  while (GlobalTimerNs() - t0 < ns) v = v * 0.9999f + 1.0f;
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 2000);
  const unsigned long long kernel_ns = 1000ull * ArgOr(argc, argv, 2, 100);
  const double host_us = static_cast<double>(ArgOr(argc, argv, 3, 50));
  const int blocks = 1024;
  float* out;
  CHECK(cudaMalloc(&out, blocks * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float flag = 0;
  float* pinned;  // --fixed: one flag per step parity
  CHECK(cudaMallocHost(&pinned, 2 * sizeof(float)));
  cudaEvent_t done[2];
  for (cudaEvent_t& e : done) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const auto planted_step = [&] {
    step_kernel<<<blocks, 128, 0, s>>>(out, kernel_ns);
    CHECK(cudaStreamSynchronize(s));
    HostWorkSeconds(host_us * 1e-6);
    step_kernel<<<blocks, 128, 0, s>>>(out, kernel_ns);
    // What .item() does: a synchronous copy (the legacy default stream waits for `s`).
    CHECK(cudaMemcpy(&flag, out, sizeof(float), cudaMemcpyDeviceToHost));
    HostWorkSeconds(host_us * 1e-6);
  };
  const auto fixed_step = [&](long i) {
    step_kernel<<<blocks, 128, 0, s>>>(out, kernel_ns);
    HostWorkSeconds(host_us * 1e-6);
    step_kernel<<<blocks, 128, 0, s>>>(out, kernel_ns);
    CHECK(cudaMemcpyAsync(&pinned[i & 1], out, sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(cudaEventRecord(done[i & 1], s));
    if (i > 0) {  // the previous step's flag
      CHECK(cudaEventSynchronize(done[(i - 1) & 1]));
      flag = pinned[(i - 1) & 1];
    }
    HostWorkSeconds(host_us * 1e-6);
  };
  if (fixed) {
    fixed_step(0);
    CHECK(cudaStreamSynchronize(s));
  } else {
    planted_step();
  }
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    if (fixed) {
      fixed_step(i);
    } else {
      planted_step();
    }
  }
  CHECK_LAUNCH();
  if (fixed) {
    CHECK(cudaStreamSynchronize(s));
    flag = pinned[(iters - 1) & 1];
  }
  std::printf("hint_excessive_sync: iters=%ld fixed=%d flag=%g wall_s=%.6f\n", iters, fixed ? 1 : 0,
              flag, NowSeconds() - t0);
  for (cudaEvent_t e : done) CHECK(cudaEventDestroy(e));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(out));
  return 0;
}
