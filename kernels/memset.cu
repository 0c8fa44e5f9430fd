// memset: 3 cudaMemset (1 MiB, 2 MiB, 3 MiB) and 2 cudaMemsetAsync (4 MiB each) on a stream.
// Exact: 5 memsets, 14 MiB in total, 1 cudaStreamSynchronize, 1 cudaDeviceSynchronize.
#include "common.h"

int main() {
  const size_t mib = 1 << 20;
  char* d;
  CHECK(cudaMalloc(&d, 8 * mib));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int i = 1; i <= 3; ++i) CHECK(cudaMemset(d, i, i * mib));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemsetAsync(d, 7, 4 * mib, s));
  CHECK(cudaMemsetAsync(d + 4 * mib, 9, 4 * mib, s));
  CHECK(cudaStreamSynchronize(s));
  char check[2];
  CHECK(cudaMemcpy(check, d, 1, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(check + 1, d + 4 * mib, 1, cudaMemcpyDeviceToHost));
  if (check[0] != 7 || check[1] != 9) {
    std::fprintf(stderr, "memset produced wrong data\n");
    return 1;
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  std::printf("memset: memsets=5 bytes=%zu\n", 14 * mib);
  return 0;
}
