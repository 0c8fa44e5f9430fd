// hint_launch_bound [LAUNCHES] [HOST_US] [--readback] [--fixed]: planted bottleneck for the
// `launch-bound` hint. LAUNCHES launches of one tiny kernel (about a microsecond of GPU work each)
// with HOST_US of host work before each launch, like an eager framework's per-op overhead. The GPU
// finishes each kernel long before the next one arrives, so it idles between them; one
// cudaDeviceSynchronize at the end. Expected top hint: launch-bound.
// --readback: each kernel's result (4 bytes) is read back with a synchronous cudaMemcpy after
// its launch, the `.item()` habit: launch-bound and small-transfers then price the same idle time
// (issue 15's case for the joint figure, docs/hints.md).
// --fixed: the hint's fix. The same kernels are captured once into a CUDA graph of 100 launches
// (the capture and instantiation are timed too) and the graph is replayed; the per-launch host
// work, which stands for the framework's per-op overhead, is what the graph removes. With
// --readback each kernel leaves its result in a slot of a device array and the graph ends with
// one copy of the 100 slots to pinned memory, read once the graph is done (both fixes at once).
// One launch before the timed part loads the module in both modes.
#include "common.h"

__global__ void tiny_step(float* x, int n, float* slots, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.999f + 0.001f;
  if (slots != nullptr && i == 0) slots[k] = x[0];
}

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const bool readback = TakeFlag(argc, argv, "--readback");
  const long launches = ArgOr(argc, argv, 1, 100000);
  const double host_us = static_cast<double>(ArgOr(argc, argv, 2, 3));
  const int n = 4096;
  constexpr int kPerGraph = 100;
  float* x;
  float* slots;
  float* pinned;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaMalloc(&slots, kPerGraph * sizeof(float)));
  CHECK(cudaMallocHost(&pinned, kPerGraph * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  tiny_step<<<n / 256, 256, 0, s>>>(x, n, nullptr, 0);
  CHECK_LAUNCH();
  CHECK(cudaStreamSynchronize(s));
  double sum = 0;  // of the values read back
  const double t0 = NowSeconds();
  if (!fixed) {
    for (long i = 0; i < launches; ++i) {
      HostWorkSeconds(host_us * 1e-6);
      tiny_step<<<n / 256, 256>>>(x, n, nullptr, 0);  // the legacy default stream
      if (readback) {
        float v = 0;
        CHECK(cudaMemcpy(&v, x, sizeof(float), cudaMemcpyDeviceToHost));
        sum += v;
      }
    }
  } else {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < kPerGraph; ++k)
      tiny_step<<<n / 256, 256, 0, s>>>(x, n, readback ? slots : nullptr, k);
    if (readback)
      CHECK(cudaMemcpyAsync(pinned, slots, kPerGraph * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    long i = 0;
    for (; i + kPerGraph <= launches; i += kPerGraph) {
      CHECK(cudaGraphLaunch(exec, s));
      if (readback) {
        CHECK(cudaStreamSynchronize(s));
        for (int k = 0; k < kPerGraph; ++k) sum += pinned[k];
      }
    }
    for (; i < launches; ++i) {  // the remainder
      tiny_step<<<n / 256, 256, 0, s>>>(x, n, nullptr, 0);
      if (readback) {
        float v = 0;
        CHECK(cudaMemcpyAsync(&v, x, sizeof(float), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        sum += v;
      }
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
  }
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_launch_bound: launches=%ld readback=%d fixed=%d sum=%g wall_s=%.6f\n", launches,
              readback ? 1 : 0, fixed ? 1 : 0, sum, NowSeconds() - t0);
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(slots));
  CHECK(cudaFree(x));
  return 0;
}
