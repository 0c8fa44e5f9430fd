// graph_kinds [LAUNCHES=3] [BODY=5]: CUDA graphs launched the three ways that do not go through
// cudaGraphLaunch of a plain graph (issue 10), each in its own NVTX ranges:
//  - driver: 3 kernels (driver_node) captured in "capture_driver", launched LAUNCHES times with
//    the driver's cuGraphLaunch in "replay_driver";
//  - device: 2 kernels (device_node) captured in "capture_device" and instantiated for device
//    launch; a host graph of one kernel (fire_device_graph, captured in "capture_launcher")
//    fires it from the GPU; the host graph is launched LAUNCHES times in "replay_device";
//  - conditional: made with the graph API in "build_conditional": set_counter, then a WHILE node
//    whose body (cond_body) runs BODY times per launch; launched LAUNCHES times in
//    "replay_conditional".
// Exact, per-node (--graph-trace node): driver_node 3*LAUNCHES, fire_device_graph LAUNCHES,
// set_counter LAUNCHES, cond_body BODY*LAUNCHES; device_node none (CUPTI 13.0 records no nodes
// of graphs launched from the device). Graph level (--graph-trace graph): LAUNCHES launches of
// each of the four graphs, those of the device graph from the GPU.
// Build: relocatable device code and the device runtime (kernels/CMakeLists.txt).
#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#include "common.h"

__global__ void driver_node(float* p, int i) {
  if (threadIdx.x == 0) p[i & 1023] += 1.0f;
}
__global__ void device_node(float* p, int i) {
  if (threadIdx.x == 0) p[(i + 512) & 1023] += 1.0f;
}
__global__ void fire_device_graph(cudaGraphExec_t g) {
  if (threadIdx.x == 0) cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
}
__global__ void set_counter(int* c, int n) {
  if (threadIdx.x == 0) *c = n;
}
__global__ void cond_body(int* c, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0 && --*c <= 0) cudaGraphSetConditional(h, 0);
}

namespace {

#define CHECK_CU(call)                                                                    \
  do {                                                                                    \
    CUresult r_ = (call);                                                                 \
    if (r_ != CUDA_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_); \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

cudaGraph_t Capture(cudaStream_t s, const char* range, void (*kernel)(float*, int), float* d,
                    int n) {
  cudaGraph_t g;
  nvtxRangePushA(range);
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) {
    kernel<<<1, 32, 0, s>>>(d, i);
    CHECK_LAUNCH();
  }
  CHECK(cudaStreamEndCapture(s, &g));
  nvtxRangePop();
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = static_cast<int>(ArgOr(argc, argv, 1, 3));
  const int body = static_cast<int>(ArgOr(argc, argv, 2, 5));
  if (launches < 1 || body < 1) {
    std::fprintf(stderr, "usage: graph_kinds [LAUNCHES] [BODY]\n");
    return 2;
  }
  float* d = ZeroedFloats(1024);
  cudaStream_t s = NonBlockingStream();

  // Driver API launch.
  cudaGraph_t g_driver = Capture(s, "capture_driver", driver_node, d, 3);
  cudaGraphExec_t e_driver;
  CHECK(cudaGraphInstantiate(&e_driver, g_driver, 0));
  nvtxRangePushA("replay_driver");
  for (int i = 0; i < launches; ++i)
    CHECK_CU(cuGraphLaunch(reinterpret_cast<CUgraphExec>(e_driver), reinterpret_cast<CUstream>(s)));
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();

  // Device launch.
  cudaGraph_t g_device = Capture(s, "capture_device", device_node, d, 2);
  cudaGraphExec_t e_device;
  CHECK(cudaGraphInstantiate(&e_device, g_device, cudaGraphInstantiateFlagDeviceLaunch));
  CHECK(cudaGraphUpload(e_device, s));
  cudaGraph_t g_launcher;
  nvtxRangePushA("capture_launcher");
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  fire_device_graph<<<1, 1, 0, s>>>(e_device);
  CHECK_LAUNCH();
  CHECK(cudaStreamEndCapture(s, &g_launcher));
  nvtxRangePop();
  cudaGraphExec_t e_launcher;
  CHECK(cudaGraphInstantiate(&e_launcher, g_launcher, 0));
  nvtxRangePushA("replay_device");
  for (int i = 0; i < launches; ++i) CHECK(cudaGraphLaunch(e_launcher, s));
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();

  // Conditional WHILE node.
  nvtxRangePushA("build_conditional");
  cudaGraph_t g_cond;
  CHECK(cudaGraphCreate(&g_cond, 0));
  int* counter;
  CHECK(cudaMalloc(&counter, sizeof(int)));
  cudaGraphConditionalHandle handle;
  CHECK(cudaGraphConditionalHandleCreate(&handle, g_cond, 1, cudaGraphCondAssignDefault));
  cudaKernelNodeParams kp{};
  void* set_args[] = {&counter, const_cast<int*>(&body)};
  kp.func = reinterpret_cast<void*>(set_counter);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(32);
  kp.kernelParams = set_args;
  cudaGraphNode_t n_set;
  CHECK(cudaGraphAddKernelNode(&n_set, g_cond, nullptr, 0, &kp));
  cudaGraphNodeParams cp{};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = handle;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphNode_t n_cond;
  CHECK(cudaGraphAddNode(&n_cond, g_cond, &n_set, nullptr, 1, &cp));
  void* body_args[] = {&counter, &handle};
  kp.func = reinterpret_cast<void*>(cond_body);
  kp.kernelParams = body_args;
  cudaGraphNode_t n_body;
  CHECK(cudaGraphAddKernelNode(&n_body, cp.conditional.phGraph_out[0], nullptr, 0, &kp));
  nvtxRangePop();
  cudaGraphExec_t e_cond;
  CHECK(cudaGraphInstantiate(&e_cond, g_cond, 0));
  nvtxRangePushA("replay_conditional");
  for (int i = 0; i < launches; ++i) CHECK(cudaGraphLaunch(e_cond, s));
  CHECK(cudaStreamSynchronize(s));
  nvtxRangePop();
  int left = -1;
  CHECK(cudaMemcpy(&left, counter, sizeof(int), cudaMemcpyDeviceToHost));

  for (cudaGraphExec_t e : {e_driver, e_device, e_launcher, e_cond}) CHECK(cudaGraphExecDestroy(e));
  for (cudaGraph_t g : {g_driver, g_device, g_launcher, g_cond}) CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(counter));
  CHECK(cudaFree(d));
  CHECK(cudaStreamDestroy(s));
  std::printf(
      "graph_kinds: launches=%d body=%d driver_node=%d fire_device_graph=%d set_counter=%d "
      "cond_body=%d counter_left=%d\n",
      launches, body, 3 * launches, launches, launches, body * launches, left);
  return left == 0 ? 0 : 1;
}
