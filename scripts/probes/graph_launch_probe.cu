// graph_launch_probe VARIANT: the second CUDA-graph probe of issue 10. A research tool, not part
// of kprof. It asks CUPTI 13.0 on the GPU at hand:
//  1. what a 1000-node graph launch costs (host time of cudaGraphLaunch, launch-to-sync time, and
//     the GPU time between two events) under each way of setting CUPTI up, VARIANT:
//       none      no CUPTI at all
//       node      CONCURRENT_KERNEL + MEMCPY + MEMSET (per-node records)
//       graph     GRAPH_TRACE + the three kinds (kprof's graph mode)
//       gtonly    GRAPH_TRACE alone
//       quiet     the three kinds, disabled while the graph is instantiated, enabled again after
//       quietgt   graph + the three kinds, all disabled while the graph is instantiated
//       apionly   only the cudaGraphLaunch API record (the cost floor of any tracing)
//       registered  cuptiActivityRegisterCallbacks only, nothing enabled
//       cbonly    a callback-API subscriber for cudaGraphLaunch, no activity at all
//       eager     the three kinds, but the graph is instantiated and launched before CUPTI is
//                 set up (CUPTI attached after the graph exists)
//       hw        cuInit, then cuptiActivityEnableHWTrace(1), then the three kinds
//       devgraph  cuptiActivityEnableDeviceGraph(1) before CUDA init, then graph
//     With PROBE_EVENTS=1 each launch is bracketed by two cuEventRecord calls (what an agent that
//     timed launches itself would add), and their host time is counted in the launch.
//  2. what it records for a graph launched with the driver's cuGraphLaunch, for a graph launched
//     from the device (cudaGraphInstantiateFlagDeviceLaunch, fire-and-forget from a kernel node)
//     and for a conditional WHILE node that runs its body five times.
// Build: nvcc -std=c++17 -rdc=true -arch=sm_90 -o graph_launch_probe graph_launch_probe.cu \
//          -lcupti -lcuda -lcudadevrt
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    auto e_ = (x);                                                               \
    if (e_ != 0) std::printf("FAIL %s = %d (line %d)\n", #x, (int)e_, __LINE__); \
  } while (0)

__global__ void k_small(float* p, int i) {
  if (threadIdx.x == 0) p[i & 1023] += 1.0f;
}
__global__ void k_launch_device_graph(cudaGraphExec_t g) {
  if (threadIdx.x == 0) cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
}
__global__ void k_set_counter(int* c, int n) {
  if (threadIdx.x == 0) *c = n;
}
__global__ void k_body(int* c, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0 && --*c <= 0) cudaGraphSetConditional(h, 0);
}

struct Counts {
  std::map<std::string, int> by_key;  // "kind graph=G dev=D" -> n
  int printed = 0;
} g_c;
static std::string g_phase = "setup";

static void CUPTIAPI BufReq(uint8_t** b, size_t* s, size_t* m) {
  *s = 8 << 20;
  *b = static_cast<uint8_t*>(aligned_alloc(8, *s));
  *m = 0;
}
static void CUPTIAPI BufDone(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    char key[160];
    bool print = g_c.printed < 60;
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = (CUpti_ActivityKernel10*)r;
      std::snprintf(key, sizeof key, "kernel %.24s graph=%u devlaunched=%u", k->name, k->graphId,
                    (unsigned)k->isDeviceLaunched);
      print = print && std::strncmp(k->name, "_Z7k_small", 10) != 0;
      if (print)
        std::printf("REC kernel %s corr=%u graph=%u node=%llu devlaunched=%u dur=%llu\n", k->name,
                    k->correlationId, k->graphId, (unsigned long long)k->graphNodeId,
                    (unsigned)k->isDeviceLaunched, (unsigned long long)(k->end - k->start));
    } else if (r->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
      auto* t = (CUpti_ActivityGraphTrace2*)r;
      std::snprintf(key, sizeof key, "graphtrace graph=%u", t->graphId);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE) {
      auto* t = (CUpti_ActivityDeviceGraphTrace*)r;
      std::snprintf(key, sizeof key, "devicegraphtrace graph=%u launcher=%u mode=%u", t->graphId,
                    t->launcherGraphId, t->deviceLaunchMode);
      if (print)
        std::printf("REC devicegraph graph=%u launcher=%u mode=%u stream=%llu dur=%llu\n",
                    t->graphId, t->launcherGraphId, t->deviceLaunchMode,
                    (unsigned long long)t->streamId, (unsigned long long)(t->end - t->start));
    } else if (r->kind == CUPTI_ACTIVITY_KIND_DRIVER || r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      auto* a = (CUpti_ActivityAPI*)r;
      const char* n = nullptr;
      cuptiGetCallbackName(r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                  : CUPTI_CB_DOMAIN_DRIVER_API,
                           a->cbid, &n);
      std::snprintf(key, sizeof key, "api %s", n ? n : "?");
      print = false;
    } else {
      std::snprintf(key, sizeof key, "kind%d", (int)r->kind);
      print = false;
    }
    ++g_c.by_key[key];
    if (print) ++g_c.printed;
  }
  free(b);
}

static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

static void SetKinds(bool on, bool graph_trace) {
  auto f = on ? cuptiActivityEnable : cuptiActivityDisable;
  if (graph_trace) CK(f(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  CK(f(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CK(f(CUPTI_ACTIVITY_KIND_MEMCPY));
  CK(f(CUPTI_ACTIVITY_KIND_MEMSET));
}

static void Flush(const char* phase) {
  CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::printf("== records after %s\n", phase);
  for (auto& kv : g_c.by_key) std::printf("  %-70s %d\n", kv.first.c_str(), kv.second);
  g_c.by_key.clear();
}

int main(int argc, char** argv) {
  const std::string v = argc > 1 ? argv[1] : "none";
  const bool events =
      std::getenv("PROBE_EVENTS") && std::strcmp(std::getenv("PROBE_EVENTS"), "1") == 0;
  const bool cupti = v != "none";
  const bool gt = v == "graph" || v == "gtonly" || v == "quietgt" || v == "devgraph";
  const bool kinds =
      v == "node" || v == "graph" || v == "quiet" || v == "quietgt" || v == "hw" || v == "devgraph";
  const bool quiet = v == "quiet" || v == "quietgt";
  const bool late = v == "eager";
  if (v == "cbonly") {
    CUpti_SubscriberHandle sub;
    CK(cuptiSubscribe(
        &sub, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr));
    CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                           CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
  } else if (v == "registered") {
    CK(cuptiActivityRegisterCallbacks(BufReq, BufDone));
  } else if (cupti && !late) {
    CK(cuptiActivityRegisterCallbacks(BufReq, BufDone));
    if (v == "devgraph")
      std::printf("EnableDeviceGraph(1) = %d\n", (int)cuptiActivityEnableDeviceGraph(1));
    if (v == "hw") {
      CK(cuInit(0));
      std::printf("cuptiActivityEnableHWTrace(1) after cuInit = %d\n",
                  (int)cuptiActivityEnableHWTrace(1));
    }
    if (gt && !kinds) CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
    if (kinds) SetKinds(true, gt);
    CK(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 1));
    CK(cuptiActivityEnableDriverApi(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 1));
  }
  float* d;
  CK(cudaMalloc(&d, 4096 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // 1. the 1000-node graph
  cudaGraph_t big;
  cudaGraphExec_t ebig;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 1000; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  CK(cudaStreamEndCapture(s, &big));
  if (cupti && quiet) SetKinds(false, gt);
  CK(cudaGraphInstantiate(&ebig, big, 0));
  if (cupti && quiet) SetKinds(true, gt);
  CK(cudaGraphLaunch(ebig, s));
  CK(cudaStreamSynchronize(s));
  if (late) {
    CK(cuptiActivityRegisterCallbacks(BufReq, BufDone));
    SetKinds(true, false);
    CK(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 1));
  }
  CUevent e0, e1;
  CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  cudaEvent_t m0, m1;  // the measuring events, outside the timed host interval
  CK(cudaEventCreate(&m0));
  CK(cudaEventCreate(&m1));
  std::vector<double> host_us, sync_us, gpu_us, ev_us;
  for (int i = 0; i < 300; ++i) {
    CK(cudaEventRecord(m0, s));
    auto t0 = std::chrono::steady_clock::now();
    if (events) CK(cuEventRecord(e0, s));
    CK(cudaGraphLaunch(ebig, s));
    if (events) CK(cuEventRecord(e1, s));
    auto t1 = std::chrono::steady_clock::now();
    CK(cudaEventRecord(m1, s));
    CK(cudaEventSynchronize(m1));
    auto t2 = std::chrono::steady_clock::now();
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, m0, m1));
    host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    sync_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
    gpu_us.push_back(ms * 1e3);
    if (events) {
      float ems = 0;
      CK(cuEventElapsedTime(&ems, e0, e1));
      ev_us.push_back(ems * 1e3);
    }
  }
  std::printf(
      "TIMING variant=%s events=%d host_us=%.2f launch_to_sync_us=%.1f gpu_us=%.1f "
      "event_pair_us=%.1f\n",
      v.c_str(), (int)events, Median(host_us), Median(sync_us), Median(gpu_us), Median(ev_us));
  if (cupti && v != "cbonly" && v != "registered") Flush("1000-node graph, 301 launches");

  // 2. driver-API launch of a 3-node graph, twice
  cudaGraph_t g3;
  cudaGraphExec_t e3;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 3; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  CK(cudaStreamEndCapture(s, &g3));
  CK(cudaGraphInstantiate(&e3, g3, 0));
  for (int i = 0; i < 2; ++i) CK(cuGraphLaunch((CUgraphExec)e3, (CUstream)s));
  CK(cudaStreamSynchronize(s));
  if (cupti && v != "cbonly" && v != "registered") Flush("cuGraphLaunch x2 of a 3-node graph");

  // 3. device graph launch: a 2-node device graph, fired from a kernel node of a host graph
  cudaGraph_t gdev, glaunch;
  cudaGraphExec_t edev, elaunch;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 2; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  CK(cudaStreamEndCapture(s, &gdev));
  CK(cudaGraphInstantiate(&edev, gdev, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(edev, s));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  k_launch_device_graph<<<1, 1, 0, s>>>(edev);
  CK(cudaStreamEndCapture(s, &glaunch));
  CK(cudaGraphInstantiate(&elaunch, glaunch, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(elaunch, s));
  CK(cudaStreamSynchronize(s));
  std::printf("device graph launch: sync=%d\n", (int)cudaGetLastError());
  if (cupti && v != "cbonly" && v != "registered")
    Flush("device graph: 3 host launches of a launcher that fires a 2-node device graph");

  // 4. conditional WHILE node, body runs 5 times per launch
  cudaGraph_t gc;
  CK(cudaGraphCreate(&gc, 0));
  int* counter;
  CK(cudaMalloc(&counter, sizeof(int)));
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, gc, 1, cudaGraphCondAssignDefault));
  cudaKernelNodeParams kp{};
  int five = 5;
  void* set_args[] = {&counter, &five};
  kp.func = (void*)k_set_counter;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(32);
  kp.kernelParams = set_args;
  cudaGraphNode_t nset;
  CK(cudaGraphAddKernelNode(&nset, gc, nullptr, 0, &kp));
  cudaGraphNodeParams cp{};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphNode_t ncond;
  CK(cudaGraphAddNode(&ncond, gc, &nset, nullptr, 1, &cp));
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  void* body_args[] = {&counter, &h};
  kp.func = (void*)k_body;
  kp.kernelParams = body_args;
  cudaGraphNode_t nbody;
  CK(cudaGraphAddKernelNode(&nbody, body, nullptr, 0, &kp));
  cudaGraphExec_t ec;
  CK(cudaGraphInstantiate(&ec, gc, 0));
  for (int i = 0; i < 2; ++i) CK(cudaGraphLaunch(ec, s));
  CK(cudaStreamSynchronize(s));
  std::printf("conditional: sync=%d\n", (int)cudaGetLastError());
  if (cupti && v != "cbonly" && v != "registered") {
    Flush("conditional WHILE: 2 launches, body 5x each (expect 2 set + 10 body kernels)");
    uint32_t id = 0;
    cuptiGetGraphExecId((CUgraphExec)ec, &id);
    uint32_t bid = 0;
    cuptiGetGraphId((CUgraph)body, &bid);
    std::printf("  ids: conditional exec=%u body template=%u devexec=%u\n", id, bid, [&] {
      uint32_t x = 0;
      cuptiGetGraphExecId((CUgraphExec)edev, &x);
      return x;
    }());
  }
  return 0;
}
