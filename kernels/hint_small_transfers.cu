// hint_small_transfers [STEPS] [COPIES] [BYTES]: planted bottleneck for `small-transfers`.
// Each step uploads COPIES separate BYTES-sized parameter blocks with one cudaMemcpy each (the
// per-tensor upload pattern), then runs one kernel that consumes them all. Every copy pays the
// fixed cost of a transfer for a few hundred bytes. Expected top hint: small-transfers.
#include <vector>

#include "common.h"

__global__ void consume(const float* params, int n, float* out) {
  float acc = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += params[i];
  atomicAdd(out, acc);
}

int main(int argc, char** argv) {
  const long steps = ArgOr(argc, argv, 1, 1000);
  const int copies = static_cast<int>(ArgOr(argc, argv, 2, 64));
  const size_t bytes = static_cast<size_t>(ArgOr(argc, argv, 3, 256));
  const size_t per = bytes / sizeof(float);
  std::vector<float> host(per * copies, 0.5f);  // pageable, like most framework tensors
  float* params;
  float* out;
  CHECK(cudaMalloc(&params, per * copies * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemset(out, 0, sizeof(float)));
  const double t0 = NowSeconds();
  for (long s = 0; s < steps; ++s) {
    for (int c = 0; c < copies; ++c)
      CHECK(cudaMemcpy(params + c * per, host.data() + c * per, bytes, cudaMemcpyHostToDevice));
    consume<<<1, 256>>>(params, static_cast<int>(per * copies), out);
    CHECK_LAUNCH();
  }
  float result = 0;
  CHECK(cudaMemcpy(&result, out, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("hint_small_transfers: steps=%ld copies=%ld result=%g wall_s=%.3f\n", steps,
              steps * copies, result, NowSeconds() - t0);
  CHECK(cudaFree(params));
  CHECK(cudaFree(out));
  return 0;
}
