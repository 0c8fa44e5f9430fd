// hint_profiler_data_loss [KERNELS] [WAIT_MS]: planted bottleneck for `profiler-data-loss`.
// Launches KERNELS memory-bound kernels over 64 MiB (about 50 us each on an H100, queued back to
// back, so nothing else stands out), waits WAIT_MS (longer than the agent's 1 s flush period, so
// the records reach the file), then kills itself with SIGKILL, which no profiler can intercept: the
// process never writes its End block, and the kernels it launched after the last flush are lost.
// Expected top hint: profiler-data-loss (the process did not finish writing). Exits by SIGKILL
// (status 137 under kprof run).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common.h"

__global__ void step_kernel(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 0.5f + 1.0f;
}

int main(int argc, char** argv) {
  const long kernels = ArgOr(argc, argv, 1, 200);
  const long wait_ms = ArgOr(argc, argv, 2, 2500);
  const int n = 1 << 24;
  float* p;
  CHECK(cudaMalloc(&p, n * sizeof(float)));
  for (long i = 0; i < kernels; ++i) step_kernel<<<n / 256, 256>>>(p, n);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  // More work that the agent will not get to write.
  for (long i = 0; i < kernels; ++i) step_kernel<<<n / 256, 256>>>(p, n);
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_profiler_data_loss: %ld kernels flushed, %ld more, now SIGKILL\n", kernels,
              kernels);
  std::fflush(stdout);
  kill(getpid(), SIGKILL);
  return 0;
}
