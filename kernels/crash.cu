// crash [abort|segv] [KERNELS]: launches KERNELS kernels (default 50), synchronizes, waits longer
// than the agent's flush period (so the work reaches the file), then dies by abort() or by a
// segmentation fault. Exit status: 134 (SIGABRT) or 139 (SIGSEGV) as a shell reports it.
#include <unistd.h>

#include "common.h"

__global__ void before_crash(int* p) { p[threadIdx.x] = threadIdx.x; }

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "abort";
  const long kernels = ArgOr(argc, argv, 2, 50);
  int* d;
  CHECK(cudaMalloc(&d, 32 * sizeof(int)));
  for (long i = 0; i < kernels; ++i) before_crash<<<1, 32>>>(d);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::printf("crash: launched %ld kernels, now crashing by %s\n", kernels, how.c_str());
  std::fflush(stdout);
  usleep(1500 * 1000);
  if (how == "segv") {
    volatile int* bad = nullptr;
    *bad = 1;
  }
  std::abort();
}
