// hint_small_transfers [STEPS] [COPIES] [BYTES] [--fixed]: planted bottleneck for
// `small-transfers`. Each step uploads COPIES separate BYTES-sized parameter blocks with one
// cudaMemcpy each (the per-tensor upload pattern), then runs one kernel that consumes them all.
// Every copy pays the fixed cost of a transfer for a few hundred bytes. Expected top hint:
// small-transfers.
// --fixed: the hint's fix. Each step packs the blocks into a pinned staging buffer (two, used in
// turn, each reused only once the copy out of it has finished) and uploads them with one
// cudaMemcpyAsync. One step before the timed part in both modes.
#include <vector>

#include "common.h"

__global__ void consume(const float* params, int n, float* out) {
  float acc = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += params[i];
  atomicAdd(out, acc);
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long steps = ArgOr(argc, argv, 1, 1000);
  const int copies = static_cast<int>(ArgOr(argc, argv, 2, 64));
  const size_t bytes = static_cast<size_t>(ArgOr(argc, argv, 3, 256));
  const size_t per = bytes / sizeof(float);
  const size_t total = per * copies;
  std::vector<float> host(total, 0.5f);  // pageable, like most framework tensors
  float* params;
  float* out;
  CHECK(cudaMalloc(&params, total * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemset(out, 0, sizeof(float)));
  float* staging[2];
  cudaEvent_t copied[2];
  for (int k = 0; k < 2; ++k) {
    CHECK(cudaMallocHost(&staging[k], total * sizeof(float)));
    CHECK(cudaEventCreateWithFlags(&copied[k], cudaEventDisableTiming));
    CHECK(cudaEventRecord(copied[k], cudaStreamLegacy));
  }
  const auto step = [&](long s) {
    if (fixed) {
      float* st = staging[s & 1];
      CHECK(cudaEventSynchronize(copied[s & 1]));  // the copy out of it two steps ago is done
      for (int c = 0; c < copies; ++c) std::memcpy(st + c * per, host.data() + c * per, bytes);
      CHECK(cudaMemcpyAsync(params, st, total * sizeof(float), cudaMemcpyHostToDevice,
                            cudaStreamLegacy));
      CHECK(cudaEventRecord(copied[s & 1], cudaStreamLegacy));
    } else {
      for (int c = 0; c < copies; ++c)
        CHECK(cudaMemcpy(params + c * per, host.data() + c * per, bytes, cudaMemcpyHostToDevice));
    }
    consume<<<1, 256>>>(params, static_cast<int>(total), out);
    CHECK_LAUNCH();
  };
  step(0);
  CHECK(cudaDeviceSynchronize());
  const double t0 = NowSeconds();
  for (long s = 0; s < steps; ++s) step(s);
  float result = 0;
  CHECK(cudaMemcpy(&result, out, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("hint_small_transfers: steps=%ld fixed=%d copies=%ld result=%g wall_s=%.6f\n", steps,
              fixed ? 1 : 0, fixed ? steps : steps * copies, result, NowSeconds() - t0);
  for (int k = 0; k < 2; ++k) {
    CHECK(cudaEventDestroy(copied[k]));
    CHECK(cudaFreeHost(staging[k]));
  }
  CHECK(cudaFree(params));
  CHECK(cudaFree(out));
  return 0;
}
