// graph_launch [REPLAYS]: captures 4 kernels (graph_k0..graph_k3) into a CUDA graph inside the NVTX
// range "capture", then launches the graph REPLAYS times (default 5) inside the range "replay".
// Exact: graph kernels executed 4 * REPLAYS, all attributed to "replay" (the launch), 1
// cudaGraphLaunch per replay.
#include <nvtx3/nvToolsExt.h>

#include "common.h"

template <int K>
__global__ void graph_k(float* p) {
  p[threadIdx.x] = p[threadIdx.x] * 0.5f + K;
}

int main(int argc, char** argv) {
  const int replays = static_cast<int>(ArgOr(argc, argv, 1, 5));
  float* d = ZeroedFloats(32);
  cudaStream_t s = NonBlockingStream();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  nvtxRangePushA("capture");
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  graph_k<0><<<1, 32, 0, s>>>(d);
  graph_k<1><<<1, 32, 0, s>>>(d);
  graph_k<2><<<1, 32, 0, s>>>(d);
  graph_k<3><<<1, 32, 0, s>>>(d);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  nvtxRangePop();
  nvtxRangePushA("replay");
  for (int i = 0; i < replays; ++i) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  std::printf("graph_launch: replays=%d kernels=%d\n", replays, 4 * replays);
  return 0;
}
