// hint_sync_readback [STEPS] [--fixed]: planted bottleneck for `sync-readback` (issue 33's loop).
// Each step launches one tiny kernel that adds to a device counter and reads the 4-byte counter
// back with a synchronous cudaMemcpy, as a loop that checks a flag or logs `.item()` every step
// does. The GPU's queue is empty after every read-back, so each next launch starts from idle.
// Expected top hint: sync-readback (not launch-bound: a CUDA graph cannot hold the copy).
// --fixed: the hint's fix. The counter is read back once, after the loop; the kernels queue back
// to back. One step before the timed part in both modes.
#include "common.h"

__global__ void bump(unsigned* counter) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *counter += 1;
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long steps = ArgOr(argc, argv, 1, 20000);
  unsigned* counter;
  CHECK(cudaMalloc(&counter, sizeof(unsigned)));
  CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
  unsigned host = 0;
  bump<<<1, 32>>>(counter);
  CHECK_LAUNCH();
  CHECK(cudaMemcpy(&host, counter, sizeof(unsigned), cudaMemcpyDeviceToHost));
  const double t0 = NowSeconds();
  for (long i = 0; i < steps; ++i) {
    bump<<<1, 32>>>(counter);
    if (!fixed) CHECK(cudaMemcpy(&host, counter, sizeof(unsigned), cudaMemcpyDeviceToHost));
  }
  CHECK_LAUNCH();
  if (fixed) CHECK(cudaMemcpy(&host, counter, sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::printf("hint_sync_readback: steps=%ld fixed=%d counter=%u wall_s=%.6f\n", steps,
              fixed ? 1 : 0, host, NowSeconds() - t0);
  if (host != static_cast<unsigned>(steps + 1)) {
    std::fprintf(stderr, "hint_sync_readback: counter %u, expected %ld\n", host, steps + 1);
    return 1;
  }
  CHECK(cudaFree(counter));
  return 0;
}
