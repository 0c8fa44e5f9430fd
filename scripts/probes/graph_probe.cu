// graph_probe MODE [--names]: what CUPTI 13.0 reports for CUDA graphs (issue 10). A research tool,
// not part of kprof: it subscribes itself, prints every graph resource callback with its ids and
// thread, builds graphs by stream capture and by the graph API, instantiates, clones, updates and
// launches them, then dumps the kernel/memcpy/memset/graph-trace records with their graph ids.
// MODE: graph (GRAPH_TRACE on) | node (per-node records) | hw (node + cuptiActivityEnableHWTrace).
// --names: call cuGraphKernelNodeGetParams + cuFuncGetName/cuKernelGetName inside the callbacks.
// Build: nvcc -std=c++17 -o graph_probe graph_probe.cu -lcupti -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

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

static bool g_names = false;
static int g_callbacks = 0;

__global__ void k_small(float* p, int i) {
  if (threadIdx.x == 0) p[i & 1023] += 1.0f;
}

static uint32_t GraphId(CUgraph g) {
  uint32_t id = 0;
  if (g != nullptr) CK(cuptiGetGraphId(g, &id));
  return id;
}
static uint64_t NodeId(CUgraphNode n) {
  uint64_t id = 0;
  if (n != nullptr) CK(cuptiGetGraphNodeId(n, &id));
  return id;
}
static uint32_t ExecId(CUgraphExec e) {
  uint32_t id = 0;
  if (e != nullptr) CK(cuptiGetGraphExecId(e, &id));
  return id;
}

static void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* rd = static_cast<const CUpti_ResourceData*>(data);
  const auto* g = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  ++g_callbacks;
  if (g_callbacks > 60 && (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED ||
                           cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED))
    return;  // the 1000-node capture: printed counts only
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);
  std::printf(
      "CB cbid=%u tid=%ld pthread=%u ts=%llu graph=%u origGraph=%u node=%llu origNode=%llu "
      "type=%d exec=%u\n",
      (unsigned)cbid, (long)syscall(SYS_gettid), (unsigned)(uint32_t)pthread_self(),
      (unsigned long long)ts, GraphId(g->graph), GraphId(g->originalGraph),
      (unsigned long long)NodeId(g->node), (unsigned long long)NodeId(g->originalNode),
      (int)g->nodeType, ExecId(g->graphExec));
  if (g_names && g->node != nullptr && g->nodeType == CU_GRAPH_NODE_TYPE_KERNEL) {
    CUDA_KERNEL_NODE_PARAMS p{};
    CUresult r = cuGraphKernelNodeGetParams(g->node, &p);
    const char* name = nullptr;
    CUresult rn = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && p.func != nullptr)
      rn = cuFuncGetName(&name, p.func);
    else if (r == CUDA_SUCCESS && p.kern != nullptr)
      rn = cuKernelGetName(&name, p.kern);
    std::printf("   NAME getParams=%d func=%p kern=%p name_rc=%d name=%s grid=%u block=%u\n",
                (int)r, (void*)p.func, (void*)p.kern, (int)rn, name ? name : "-", p.gridDimX,
                p.blockDimX);
  }
}

static std::vector<uint8_t*> g_bufs;
static void CUPTIAPI BufReq(uint8_t** b, size_t* s, size_t* m) {
  *s = 8 << 20;
  *b = static_cast<uint8_t*>(aligned_alloc(8, *s));
  *m = 0;
}
struct Counts {
  std::map<uint32_t, int> kernels_by_graph, graph_traces_by_graph;
  int memcpy_graph = 0, memset_graph = 0, eager_kernels = 0;
  std::map<uint64_t, int> node_ids;
  int printed = 0;
} g_c;
static void CUPTIAPI BufDone(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    bool print = g_c.printed < 80;
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = (CUpti_ActivityKernel10*)r;
      if (k->graphId == 0)
        ++g_c.eager_kernels;
      else
        ++g_c.kernels_by_graph[k->graphId];
      if (k->graphNodeId) ++g_c.node_ids[k->graphNodeId];
      if (print && k->graphId)
        std::printf("REC kernel corr=%u graph=%u node=%llu name=%.40s start=%llu dur=%llu\n",
                    k->correlationId, k->graphId, (unsigned long long)k->graphNodeId, k->name,
                    (unsigned long long)k->start, (unsigned long long)(k->end - k->start));
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = (CUpti_ActivityMemcpy6*)r;
      if (m->graphId) ++g_c.memcpy_graph;
      if (print && m->graphId)
        std::printf("REC memcpy corr=%u graph=%u node=%llu\n", m->correlationId, m->graphId,
                    (unsigned long long)m->graphNodeId);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = (CUpti_ActivityMemset4*)r;
      if (m->graphId) ++g_c.memset_graph;
      if (print && m->graphId)
        std::printf("REC memset corr=%u graph=%u node=%llu\n", m->correlationId, m->graphId,
                    (unsigned long long)m->graphNodeId);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
      auto* t = (CUpti_ActivityGraphTrace2*)r;
      ++g_c.graph_traces_by_graph[t->graphId];
      if (print)
        std::printf("REC graphtrace corr=%u graph=%u dev=%u enddev=%u stream=%u dur=%llu\n",
                    t->correlationId, t->graphId, t->deviceId, t->endDeviceId, t->streamId,
                    (unsigned long long)(t->end - t->start));
    } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      auto* a = (CUpti_ActivityAPI*)r;
      const char* n = nullptr;
      cuptiGetCallbackName(r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                  : CUPTI_CB_DOMAIN_DRIVER_API,
                           a->cbid, &n);
      if (print)
        std::printf("REC api %s corr=%u tid=%u\n", n ? n : "?", a->correlationId, a->threadId);
    } else {
      continue;
    }
    if (print) ++g_c.printed;
  }
  free(b);
}

static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "graph";
  for (int i = 2; i < argc; ++i) g_names |= std::strcmp(argv[i], "--names") == 0;
  const bool none = std::strcmp(mode, "none") == 0;
  // PROBE_KINDS (comma list of kernel,memcpy,memset,graph; default: all, graph only in graph
  // mode) and PROBE_CB=0 (no resource callbacks) isolate what a graph launch pays for.
  const char* kinds_env = std::getenv("PROBE_KINDS");
  std::string kinds = kinds_env ? kinds_env
                                : (std::strcmp(mode, "graph") == 0 ? "kernel,memcpy,memset,graph"
                                                                   : "kernel,memcpy,memset");
  const bool callbacks =
      !(std::getenv("PROBE_CB") && std::strcmp(std::getenv("PROBE_CB"), "0") == 0);
  if (!none) {
    std::printf("kinds=%s callbacks=%d\n", kinds.c_str(), (int)callbacks);
    if (callbacks) {
      CUpti_SubscriberHandle sub;
      CK(cuptiSubscribe(&sub, OnCallback, nullptr));
      for (CUpti_CallbackId id :
           {CUPTI_CBID_RESOURCE_GRAPH_CREATED, CUPTI_CBID_RESOURCE_GRAPH_CLONED,
            CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
            CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED,
            CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS,
            CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING})
        CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, id));
    }
    CK(cuptiActivityRegisterCallbacks(BufReq, BufDone));
    if (kinds.find("graph") != std::string::npos)
      CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
    if (kinds.find("kernel") != std::string::npos)
      CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (kinds.find("memcpy") != std::string::npos)
      CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    if (kinds.find("memset") != std::string::npos)
      CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CK(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 1));
    CK(cuptiActivityEnableDriverApi(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 1));
    if (std::strcmp(mode, "hw") == 0)
      std::printf("cuptiActivityEnableHWTrace(1) = %d\n", (int)cuptiActivityEnableHWTrace(1));
  }
  float* d;
  CK(cudaMalloc(&d, 4096 * sizeof(float)));
  float* d2;
  CK(cudaMalloc(&d2, 4096 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("== phase 1 eager x3\n");
  for (int i = 0; i < 3; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  CK(cudaStreamSynchronize(s));
  std::printf("== phase 2 capture (3 kernels opA, memset+memcpy opB, 5 kernels opC) tid=%ld\n",
              (long)syscall(SYS_gettid));
  cudaGraph_t tmpl;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  nvtxRangePushA("opA");
  for (int i = 0; i < 3; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  nvtxRangePop();
  nvtxRangePushA("opB");
  CK(cudaMemsetAsync(d2, 0, 4096, s));
  CK(cudaMemcpyAsync(d2, d, 4096, cudaMemcpyDeviceToDevice, s));
  nvtxRangePop();
  nvtxRangePushA("opC");
  for (int i = 0; i < 5; ++i) k_small<<<2, 64, 0, s>>>(d, i);
  nvtxRangePop();
  CK(cudaStreamEndCapture(s, &tmpl));
  std::printf("== phase 3 explicit graph + clone\n");
  cudaGraph_t ex, ex_clone;
  CK(cudaGraphCreate(&ex, 0));
  cudaKernelNodeParams kp{};
  int arg_i = 7;
  void* args[] = {&d, &arg_i};
  kp.func = (void*)k_small;
  kp.gridDim = dim3(3);
  kp.blockDim = dim3(96);
  kp.kernelParams = args;
  cudaGraphNode_t n1, n2;
  CK(cudaGraphAddKernelNode(&n1, ex, nullptr, 0, &kp));
  CK(cudaGraphAddKernelNode(&n2, ex, &n1, 1, &kp));
  CK(cudaGraphClone(&ex_clone, ex));
  std::printf("== phase 4 instantiate tmpl twice, destroy tmpl, instantiate explicit\n");
  cudaGraphExec_t e1, e2, e3;
  CK(cudaGraphInstantiate(&e1, tmpl, 0));
  CK(cudaGraphInstantiate(&e2, tmpl, 0));
  CK(cudaGraphDestroy(tmpl));
  CK(cudaGraphInstantiate(&e3, ex_clone, 0));
  std::printf("== phase 5 launch e1 x5, e2 x1, e3 x1\n");
  for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(e1, s));
  CK(cudaGraphLaunch(e2, s));
  CK(cudaGraphLaunch(e3, s));
  CK(cudaStreamSynchronize(s));
  std::printf("== phase 6 recapture + cudaGraphExecUpdate(e1), launch e1\n");
  cudaGraph_t tmpl2;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 3; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  CK(cudaMemsetAsync(d2, 0, 4096, s));
  CK(cudaMemcpyAsync(d2, d, 4096, cudaMemcpyDeviceToDevice, s));
  for (int i = 0; i < 5; ++i) k_small<<<2, 64, 0, s>>>(d, i);
  CK(cudaStreamEndCapture(s, &tmpl2));
  cudaGraphExecUpdateResultInfo info{};
  CK(cudaGraphExecUpdate(e1, tmpl2, &info));
  CK(cudaGraphLaunch(e1, s));
  CK(cudaStreamSynchronize(s));
  std::printf("== phase 7 1000-node graph timing (100 launches)\n");
  cudaGraph_t big;
  cudaGraphExec_t ebig;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 1000; ++i) k_small<<<1, 32, 0, s>>>(d, i);
  CK(cudaStreamEndCapture(s, &big));
  CK(cudaGraphInstantiate(&ebig, big, 0));
  CK(cudaGraphLaunch(ebig, s));
  CK(cudaStreamSynchronize(s));
  std::vector<double> host_us, total_us;
  for (int i = 0; i < 100; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CK(cudaGraphLaunch(ebig, s));
    auto t1 = std::chrono::steady_clock::now();
    CK(cudaStreamSynchronize(s));
    auto t2 = std::chrono::steady_clock::now();
    host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    total_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
  }
  std::printf("TIMING mode=%s launch_host_us_median=%.1f launch_to_sync_us_median=%.1f\n", mode,
              Median(host_us), Median(total_us));
  if (!none) {
    CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    if (std::strcmp(mode, "graph") == 0) {
      std::printf("== phase 8 disable GRAPH_TRACE, launch e3 once\n");
      int before = 0;
      for (auto& kv : g_c.kernels_by_graph) before += kv.second;
      CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
      CK(cudaGraphLaunch(e3, s));
      CK(cudaStreamSynchronize(s));
      CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      int after = 0;
      for (auto& kv : g_c.kernels_by_graph) after += kv.second;
      std::printf("graph kernels before=%d after=%d\n", before, after);
    }
    std::printf(
        "SUMMARY callbacks=%d eager_kernels=%d memcpy_graph=%d memset_graph=%d "
        "distinct_node_ids=%zu\n",
        g_callbacks, g_c.eager_kernels, g_c.memcpy_graph, g_c.memset_graph, g_c.node_ids.size());
    for (auto& kv : g_c.kernels_by_graph)
      std::printf("  kernels graph=%u n=%d\n", kv.first, kv.second);
    for (auto& kv : g_c.graph_traces_by_graph)
      std::printf("  graphtrace graph=%u n=%d\n", kv.first, kv.second);
    std::printf("  e1=%u e2=%u e3=%u ebig=%u\n", ExecId(e1), ExecId(e2), ExecId(e3), ExecId(ebig));
  }
  return 0;
}
