// vector_add [N]: 2 HtoD copies, 1 kernel, 1 DtoH copy, 1 cudaDeviceSynchronize.
// Exact counts: kernels 1 (vector_add), memcpy HtoD 2 x N*4 bytes, DtoH 1 x N*4 bytes (pageable).
#include <vector>

#include "common.h"

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char** argv) {
  const int n = static_cast<int>(ArgOr(argc, argv, 1, 1 << 20));
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 2.0f * static_cast<float>(i);
  }
  float *da, *db, *dc;
  const size_t bytes = sizeof(float) * n;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    if (c[i] != 3.0f * static_cast<float>(i)) {
      std::fprintf(stderr, "wrong result at %d: %f\n", i, c[i]);
      return 1;
    }
  }
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  std::printf("vector_add: n=%d kernels=1 htod=2 dtoh=1 bytes_each=%zu ok\n", n, bytes);
  return 0;
}
