// on_demand_steps [STEPS=600] [KERNELS=7] [NODES=1000] [STEP_MS=5]: the planted workload of
// on-demand capture (kprof run --on-demand, kprof capture; docs/capture.md). Each step is an NVTX
// range "step" holding a range "idx N" (N = the step's number from 0), KERNELS launches of
// step_kernel, one launch of a NODES-node CUDA graph (captured once at start, graph_node), and a
// stream synchronization; the host then waits until the step has lasted STEP_MS. Exact per step:
// KERNELS step_kernel, NODES graph_node kernels (one graph launch), 1 sync.
// The host time of each graph launch (the cudaGraphLaunch call alone) and of the step's KERNELS
// launches together is written, one line per step "N GRAPH_US KERNELS_US", to the file named by
// ON_DEMAND_TIMES (if set): what kprof costs a graph launch
// before, inside and after its windows. Prints the median at the end, and the host time of an
// NVTX push and pop ("nvtx_ns=", 1M pairs of a range "pair") timed before the first step and
// after the last (nvtx_after_ns=), when ON_DEMAND_NVTX is set. ON_DEMAND_NO_NVTX: no NVTX call at
// all (what a graph launch costs a process that never reaches NVTX). ON_DEMAND_PAUSE=capture or
// instantiate (with ON_DEMAND_PAUSE_MS, default 1000): the program sleeps half-way through its
// graph's stream capture, or between the capture and the instantiation, so that a window asked
// for then lands there (the start-up cases of docs/capture.md). ON_DEMAND_NO_GRAPH: no graph
// launch in the steps (a program without CUDA graphs). ON_DEMAND_OUTER=K: steps K to K+2 inside
// one more range, "three" (a --capture nvtx:three window of the three steps).
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

__global__ void step_kernel(float* p, int i) {
  if (threadIdx.x == 0) p[i & 1023] += 1.0f;
}
__global__ void graph_node(float* p, int i) {
  if (threadIdx.x == 0) p[(i + 512) & 1023] *= 0.5f;
}

namespace {

// Sleeps when ON_DEMAND_PAUSE names `where`.
void PauseAt(const char* where) {
  const char* at = std::getenv("ON_DEMAND_PAUSE");
  if (at == nullptr || std::strcmp(at, where) != 0) return;
  const char* ms = std::getenv("ON_DEMAND_PAUSE_MS");
  std::fprintf(stderr, "on_demand_steps: paused at %s\n", where);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms != nullptr ? std::atol(ms) : 1000));
}

double NvtxPairNs() {
  constexpr int kPairs = 1'000'000;
  const double t0 = NowSeconds();
  for (int i = 0; i < kPairs; ++i) {
    nvtxRangePushA("pair");
    nvtxRangePop();
  }
  return (NowSeconds() - t0) * 1e9 / kPairs;
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = ArgOr(argc, argv, 1, 600);
  const long kernels = ArgOr(argc, argv, 2, 7);
  const long nodes = ArgOr(argc, argv, 3, 1000);
  const double step_s = static_cast<double>(ArgOr(argc, argv, 4, 5)) / 1e3;
  if (steps < 1 || kernels < 0 || nodes < 1) {
    std::fprintf(stderr, "usage: on_demand_steps [STEPS] [KERNELS] [NODES] [STEP_MS]\n");
    return 2;
  }
  float* d = ZeroedFloats(1024);
  cudaStream_t s = NonBlockingStream();
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (long i = 0; i < nodes; ++i) {
    if (i == nodes / 2) PauseAt("capture");
    graph_node<<<1, 32, 0, s>>>(d, static_cast<int>(i));
    CHECK_LAUNCH();
  }
  CHECK(cudaStreamEndCapture(s, &graph));
  PauseAt("instantiate");
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const bool nvtx = std::getenv("ON_DEMAND_NVTX") != nullptr;
  const double nvtx_before = nvtx ? NvtxPairNs() : 0;
  std::vector<double> launch_us, kernels_us;
  launch_us.reserve(static_cast<size_t>(steps));
  kernels_us.reserve(static_cast<size_t>(steps));
  const bool ranges = std::getenv("ON_DEMAND_NO_NVTX") == nullptr;
  const bool graphs = std::getenv("ON_DEMAND_NO_GRAPH") == nullptr;
  const char* outer_env = std::getenv("ON_DEMAND_OUTER");
  const long outer = outer_env != nullptr ? std::atol(outer_env) : -1;
  for (long step = 0; step < steps; ++step) {
    const double begin = NowSeconds();
    if (outer >= 0 && step == outer) nvtxRangePushA("three");
    if (ranges) {
      nvtxRangePushA("step");
      nvtxRangePushA(("idx " + std::to_string(step)).c_str());
    }
    const double k0 = NowSeconds();
    for (long k = 0; k < kernels; ++k) {
      step_kernel<<<1, 32, 0, s>>>(d, static_cast<int>(k));
      CHECK_LAUNCH();
    }
    kernels_us.push_back((NowSeconds() - k0) * 1e6);
    const double t0 = NowSeconds();
    if (graphs) CHECK(cudaGraphLaunch(exec, s));
    launch_us.push_back((NowSeconds() - t0) * 1e6);
    CHECK(cudaStreamSynchronize(s));
    if (ranges) nvtxRangePop();
    while (NowSeconds() - begin < step_s) {
    }
    if (ranges) nvtxRangePop();
    if (outer >= 0 && step == outer + 2) nvtxRangePop();
  }
  const double nvtx_after = nvtx ? NvtxPairNs() : 0;
  if (const char* path = std::getenv("ON_DEMAND_TIMES")) {
    if (FILE* f = std::fopen(path, "w")) {
      for (size_t i = 0; i < launch_us.size(); ++i)
        std::fprintf(f, "%zu %.2f %.2f\n", i, launch_us[i], kernels_us[i]);
      std::fclose(f);
    }
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  std::printf(
      "on_demand_steps: steps=%ld kernels=%ld nodes=%ld host_launch_us=%.2f host_kernels_us=%.2f "
      "nvtx_ns=%.2f nvtx_after_ns=%.2f\n",
      steps, kernels, nodes, Median(launch_us), Median(kernels_us), nvtx_before, nvtx_after);
  return 0;
}
