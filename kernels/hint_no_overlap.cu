// hint_no_overlap [ITERS] [MIB]: planted bottleneck for `no-copy-compute-overlap`.
// Each iteration uploads a MIB MiB chunk from pinned memory, runs a compute-heavy kernel on it and
// downloads the result, all asynchronously but on one stream: the copy engines and the SMs take
// turns although chunk i+1 could be uploaded while chunk i is computed. One host wait at the end.
// Expected top hint: no-copy-compute-overlap.
#include "common.h"

__global__ void compute_chunk(float* x, size_t n, int rounds) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    float v = x[i];
    for (int r = 0; r < rounds; ++r) v = fmaf(v, 0.9999f, 0.0001f);
    x[i] = v;
  }
}

int main(int argc, char** argv) {
  const long iters = ArgOr(argc, argv, 1, 300);
  const size_t bytes = size_t(ArgOr(argc, argv, 2, 32)) << 20;
  const int rounds = static_cast<int>(ArgOr(argc, argv, 3, 2000));
  const size_t n = bytes / sizeof(float);
  float *in, *out, *dev;
  CHECK(cudaMallocHost(&in, bytes));
  CHECK(cudaMallocHost(&out, bytes));
  for (size_t i = 0; i < n; ++i) in[i] = 1.0f;
  CHECK(cudaMalloc(&dev, bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) {
    CHECK(cudaMemcpyAsync(dev, in, bytes, cudaMemcpyHostToDevice, s));
    compute_chunk<<<1056, 256, 0, s>>>(dev, n, rounds);
    CHECK_LAUNCH();
    CHECK(cudaMemcpyAsync(out, dev, bytes, cudaMemcpyDeviceToHost, s));
  }
  CHECK(cudaStreamSynchronize(s));
  std::printf("hint_no_overlap: iters=%ld out0=%g wall_s=%.3f\n", iters, out[0], NowSeconds() - t0);
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(in));
  CHECK(cudaFreeHost(out));
  return 0;
}
