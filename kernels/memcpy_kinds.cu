// memcpy_kinds [BYTES]: one copy of BYTES in each direction from pageable and pinned host memory.
// Exact: HtoD pageable 1 (sync), HtoD pinned 1 (async), DtoH pageable 1 (sync), DtoH pinned 1
// (async), DtoD 1 (async); 5 copies of BYTES each; 2 cudaStreamSynchronize.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t bytes = static_cast<size_t>(ArgOr(argc, argv, 1, 8 << 20));
  std::vector<char> pageable(bytes, 1);
  char* pinned;
  CHECK(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 2, bytes);
  char *d1, *d2;
  CHECK(cudaMalloc(&d1, bytes));
  CHECK(cudaMalloc(&d2, bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaMemcpy(d1, pageable.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpyAsync(d2, pinned, bytes, cudaMemcpyHostToDevice, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(pageable.data(), d2, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpyAsync(pinned, d1, bytes, cudaMemcpyDeviceToHost, s));
  CHECK(cudaMemcpyAsync(d2, d1, bytes, cudaMemcpyDeviceToDevice, s));
  CHECK(cudaStreamSynchronize(s));
  if (pageable[0] != 2 || pinned[bytes - 1] != 1) {
    std::fprintf(stderr, "copies produced wrong data\n");
    return 1;
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d1));
  CHECK(cudaFree(d2));
  CHECK(cudaFreeHost(pinned));
  std::printf(
      "memcpy_kinds: bytes=%zu htod_pageable=1 htod_pinned=1 dtoh_pageable=1 dtoh_pinned=1 "
      "dtod=1\n",
      bytes);
  return 0;
}
