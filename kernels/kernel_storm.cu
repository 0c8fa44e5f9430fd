// kernel_storm [COUNT] [SPIN_ITERS]: COUNT launches of one tiny kernel (1 block of 32 threads) on
// the default stream, then one cudaDeviceSynchronize. Prints its own wall time and peak RSS so
// that the overhead benchmark can compare runs with and without a profiler.
#include <cstdlib>

#include "common.h"

__global__ void tiny_kernel(int* out, int spin) {
  int v = threadIdx.x;
  for (int i = 0; i < spin; ++i) v = v * 1664525 + 1013904223;
  if (threadIdx.x == 0 && v == 42) out[0] = v;  // keeps the loop; practically never true
}

static double g_start = 0;
static void Report() {
  std::printf("kernel_storm: wall_s=%.6f peak_rss_kb=%ld\n", NowSeconds() - g_start, PeakRssKb());
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  g_start = NowSeconds();
  std::atexit(Report);  // registered before CUDA starts: runs after a profiler's exit flush
  const long count = ArgOr(argc, argv, 1, 100000);
  const int spin = static_cast<int>(ArgOr(argc, argv, 2, 0));
  int* out;
  CHECK(cudaMalloc(&out, sizeof(int)));
  for (long i = 0; i < count; ++i) {
    tiny_kernel<<<1, 32>>>(out, spin);
  }
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(out));
  std::printf("kernel_storm: kernels=%ld\n", count);
  return 0;
}
