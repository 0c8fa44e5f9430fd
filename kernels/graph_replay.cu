// graph_replay [NODES=1000] [LAUNCHES=1000] [MODE=steady] [EAGER=0]: the CUDA-graph workload of
// issue 10. Captures NODES tiny kernels into one graph, split over ten NVTX ranges "layer0" ..
// "layer9" (NODES/10 kernels each, the rest in "layer9") inside the range "capture", then
// launches the graph LAUNCHES times inside the range "replay". Each launch is timed on the host
// (the cudaGraphLaunch call alone) and on the GPU (a pair of events around it), then synchronized.
// MODE=recapture captures and instantiates the graph again before every launch (the steady-state
// recapture that graph-recapture catches); MODE=steady captures once. EAGER kernels are launched
// one by one in the range "eager" after the replays (an eager part for launch-bound).
// Exact: LAUNCHES graph launches; NODES * LAUNCHES graph kernels (graph_node), each captured
// inside "layerK" with K = min(i / (NODES/10), 9) for node i; EAGER eager kernels (eager_step).
// Prints the medians: graph_replay: ... host_launch_us=H gpu_launch_us=G, and the replay loop's
// time, recaptures included (wall_s=): steady is recapture's fixed twin (docs/hints.md).
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common.h"

__global__ void graph_node(float* p, int i) {
  if (threadIdx.x == 0) p[i & 1023] += 1.0f;
}

__global__ void eager_step(float* p, int i) {
  if (threadIdx.x == 0) p[i & 1023] *= 0.5f;
}

namespace {

cudaGraphExec_t Capture(cudaStream_t s, float* d, int nodes) {
  const int per_layer = std::max(1, nodes / 10);
  cudaGraph_t graph;
  nvtxRangePushA("capture");
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  int layer = -1;
  for (int i = 0; i < nodes; ++i) {
    const int want = std::min(i / per_layer, 9);
    if (want != layer) {
      if (layer >= 0) nvtxRangePop();
      layer = want;
      nvtxRangePushA(("layer" + std::to_string(layer)).c_str());
    }
    graph_node<<<1, 32, 0, s>>>(d, i);
    CHECK_LAUNCH();
  }
  if (layer >= 0) nvtxRangePop();
  CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));  // as PyTorch does: the executable graph outlives its template
  nvtxRangePop();
  return exec;
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = static_cast<int>(ArgOr(argc, argv, 1, 1000));
  const int launches = static_cast<int>(ArgOr(argc, argv, 2, 1000));
  const std::string mode = argc > 3 ? argv[3] : "steady";
  const int eager = static_cast<int>(ArgOr(argc, argv, 4, 0));
  if (nodes < 1 || launches < 1 || (mode != "steady" && mode != "recapture")) {
    std::fprintf(stderr, "usage: graph_replay [NODES] [LAUNCHES] [steady|recapture] [EAGER]\n");
    return 2;
  }
  float* d = ZeroedFloats(1024);
  cudaStream_t s = NonBlockingStream();
  cudaEvent_t before, after;
  CHECK(cudaEventCreate(&before));
  CHECK(cudaEventCreate(&after));
  cudaGraphExec_t exec = Capture(s, d, nodes);
  std::vector<double> host_us, gpu_us;
  host_us.reserve(static_cast<size_t>(launches));
  gpu_us.reserve(static_cast<size_t>(launches));
  nvtxRangePushA("replay");
  const double replay_t0 = NowSeconds();  // the replay loop, recaptures included: wall_s
  for (int i = 0; i < launches; ++i) {
    if (mode == "recapture" && i > 0) {
      CHECK(cudaGraphExecDestroy(exec));
      exec = Capture(s, d, nodes);
    }
    CHECK(cudaEventRecord(before, s));
    const double t0 = NowSeconds();
    CHECK(cudaGraphLaunch(exec, s));
    const double t1 = NowSeconds();
    CHECK(cudaEventRecord(after, s));
    CHECK(cudaEventSynchronize(after));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, before, after));
    host_us.push_back((t1 - t0) * 1e6);
    gpu_us.push_back(static_cast<double>(ms) * 1e3);
  }
  const double replay_s = NowSeconds() - replay_t0;
  nvtxRangePop();
  nvtxRangePushA("eager");
  for (int i = 0; i < eager; ++i) {
    eager_step<<<1, 32, 0, s>>>(d, i);
    CHECK_LAUNCH();
  }
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaEventDestroy(before));
  CHECK(cudaEventDestroy(after));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  std::printf(
      "graph_replay: nodes=%d launches=%d mode=%s eager=%d graph_kernels=%lld host_launch_us=%.2f "
      "gpu_launch_us=%.2f wall_s=%.6f\n",
      nodes, launches, mode.c_str(), eager, static_cast<long long>(nodes) * launches,
      Median(host_us), Median(gpu_us), replay_s);
  return 0;
}
