// hint_no_overlap [ITERS] [MIB] [ROUNDS] [--fixed]: planted bottleneck for
// `no-copy-compute-overlap`. Each iteration uploads a MIB MiB chunk from pinned memory, runs a
// compute-heavy kernel on it and downloads the result, all asynchronously but on one stream: the
// copy engines and the SMs take turns although chunk i+1 could be uploaded while chunk i is
// computed. One host wait at the end. Expected top hint: no-copy-compute-overlap.
// --fixed: the hint's fix. Chunk i goes to stream i % 3 with its own device buffer and output
// buffer (triple buffering), so the upload of one chunk, the kernel of another and the download
// of a third run at the same time. One iteration before the timed part in both modes.
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
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long iters = ArgOr(argc, argv, 1, 300);
  const size_t bytes = size_t(ArgOr(argc, argv, 2, 32)) << 20;
  const int rounds = static_cast<int>(ArgOr(argc, argv, 3, 2000));
  const size_t n = bytes / sizeof(float);
  constexpr int kLanes = 3;
  const int lanes = fixed ? kLanes : 1;
  float* in;
  float* out[kLanes];
  float* dev[kLanes];
  cudaStream_t s[kLanes];
  CHECK(cudaMallocHost(&in, bytes));
  for (size_t i = 0; i < n; ++i) in[i] = 1.0f;
  for (int l = 0; l < lanes; ++l) {
    CHECK(cudaMallocHost(&out[l], bytes));
    CHECK(cudaMalloc(&dev[l], bytes));
    CHECK(cudaStreamCreate(&s[l]));
  }
  const auto chunk = [&](long i) {
    const int l = static_cast<int>(i % lanes);
    CHECK(cudaMemcpyAsync(dev[l], in, bytes, cudaMemcpyHostToDevice, s[l]));
    compute_chunk<<<1056, 256, 0, s[l]>>>(dev[l], n, rounds);
    CHECK_LAUNCH();
    CHECK(cudaMemcpyAsync(out[l], dev[l], bytes, cudaMemcpyDeviceToHost, s[l]));
  };
  chunk(0);
  CHECK(cudaDeviceSynchronize());
  const double t0 = NowSeconds();
  for (long i = 0; i < iters; ++i) chunk(i);
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_no_overlap: iters=%ld fixed=%d out0=%g wall_s=%.6f\n", iters, fixed ? 1 : 0,
              out[0][0], NowSeconds() - t0);
  for (int l = 0; l < lanes; ++l) {
    CHECK(cudaStreamDestroy(s[l]));
    CHECK(cudaFree(dev[l]));
    CHECK(cudaFreeHost(out[l]));
  }
  CHECK(cudaFreeHost(in));
  return 0;
}
