// cupti_graph_detach MODE DETACH: what makes a CUDA graph's next launch fault after CUPTI is
// detached (docs/capture.md "On demand": issue 35), and what a graph launch costs afterwards.
// Not a kprof workload: a standalone CUPTI client, built and run by
// tests/gpu/probes/run_graph_detach.sh on a GPU machine.
//   MODE: what is enabled while attached, features joined by '+': none, api (runtime records and
//         graph-launch callbacks), kernel, graphtrace, resource (the resource domain), memcpy,
//         memset, sync, marker, memory2, overhead, device, devbuf (a 4 MB device buffer),
//         zeroed (zeroed buffers), kprof (what a kprof window enables); all (api+kernel+resource);
//         and how: inst (the graph instantiated while attached), busy (the detaching
//         synchronization is of another stream, the graph still running), drv (cuptiFinalize
//         at the exit of the driver's cuStreamSynchronize, inside the runtime's), flushbusy (a
//         forced flush while a graph runs), disablebusy (the kinds switched off while a graph
//         runs), after (graph launches after the kinds are off, before cuptiFinalize),
//         reenable / relaunch / reenable_stay (then the kernels' records on again: see below)
//   DETACH: finalize (cuptiFinalize at a synchronization's exit) | soft (activities off,
//           callbacks off, unsubscribed: CUPTI stays initialised) | finalize_upload (finalize,
//           then cudaGraphUpload of the exec before its next launch)
// Prints one line: MODE DETACH plain_us attached_us after_us ok|FAULT(reason)
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#define CK(call)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::printf("%s %s FAULT(%s: %s)\n", g_mode, g_detach, #call, cudaGetErrorString(e_)); \
      std::exit(3);                                                                          \
    }                                                                                        \
  } while (0)
#define CU(call)                                                     \
  do {                                                               \
    CUptiResult r_ = (call);                                         \
    if (r_ != CUPTI_SUCCESS) {                                       \
      const char* s_ = nullptr;                                      \
      cuptiGetResultString(r_, &s_);                                 \
      std::fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?"); \
      std::exit(4);                                                  \
    }                                                                \
  } while (0)

static const char* g_mode = "";
static const char* g_detach = "";
static std::atomic<bool> g_finalize{false};
static std::atomic<bool> g_finalized{false};
static std::atomic<long> g_records{0};
static int g_extra = 0;  // graph launches outside LaunchUs

__global__ void node(float* p) { p[threadIdx.x] += 1.0f; }

static void CUPTIAPI Requested(uint8_t** buf, size_t* size, size_t* max) {
  *size = 8 << 20;
  *buf = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max = 0;
}
static void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) g_records++;
  free(buf);
}
static bool g_driver_sync = false;  // finalize at cuStreamSynchronize's exit (inside the runtime's)
static void CUPTIAPI Callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void* data) {
  if (g_driver_sync ? (domain != CUPTI_CB_DOMAIN_DRIVER_API ||
                       cbid != CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize)
                    : (domain != CUPTI_CB_DOMAIN_RUNTIME_API ||
                       cbid != CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020))
    return;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d->callbackSite != CUPTI_API_EXIT || !g_finalize.exchange(false)) return;
  if (cuptiFinalize() == CUPTI_SUCCESS) g_finalized = true;
}

static double LaunchUs(cudaGraphExec_t exec, cudaStream_t s, int n) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    auto a = std::chrono::steady_clock::now();
    CK(cudaGraphLaunch(exec, s));
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
    CK(cudaStreamSynchronize(s));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_mode = argv[1];
  g_detach = argv[2];
  const std::string mode = g_mode, detach = g_detach;
  float* d = nullptr;
  CK(cudaMalloc(&d, 1024 * sizeof(float)));
  CK(cudaMemset(d, 0, 1024 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 1000; ++i) node<<<1, 32, 0, s>>>(d);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  const double plain = LaunchUs(exec, s, 30);

  CUpti_SubscriberHandle sub;
  CU(cuptiSubscribe(&sub, Callback, nullptr));
  CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020));
  CU(cuptiActivityRegisterCallbacks(Requested, Completed));
  const auto has = [&](const char* f) {
    const std::string m = "+" + mode + "+";
    return m.find(std::string("+") + f + "+") != std::string::npos;
  };
  const bool kp = has("kprof");
  g_driver_sync = has("drv");
  if (g_driver_sync)
    CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                           CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize));
  const bool all = has("all");
  if (has("devbuf") || kp) {
    size_t v = size_t{4} << 20, sz = sizeof(v);
    CU(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v));
  }
  if (has("zeroed")) {
    uint8_t z = 1;
    size_t sz = sizeof(z);
    CU(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &z));
  }
  const std::pair<const char*, CUpti_ActivityKind> kinds[] = {
      {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},        {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
      {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}, {"marker", CUPTI_ACTIVITY_KIND_MARKER},
      {"memory2", CUPTI_ACTIVITY_KIND_MEMORY2},      {"overhead", CUPTI_ACTIVITY_KIND_OVERHEAD},
      {"device", CUPTI_ACTIVITY_KIND_DEVICE}};
  for (const auto& [name, kind] : kinds)
    if (has(name) || kp) CU(cuptiActivityEnable(kind));
  if (has("inst")) {
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphInstantiate(&exec, graph, 0));
  }
  if (has("api") || all || kp) {
    CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                           CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
    CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                           CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  }
  if (has("kernel") || all || kp) CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  if (has("graphtrace")) CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  if (has("resource") || all || kp) CU(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE));
  const double attached = LaunchUs(exec, s, 10);

  if (has("flushbusy")) {
    // A forced flush while a graph runs (kprof flushes so before detaching), then idle.
    CK(cudaGraphLaunch(exec, s));
    CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    CK(cudaStreamSynchronize(s));
    ++g_extra;
  }
  if (has("disablebusy")) {
    // The kinds switched off while a graph runs (a window closing mid-graph), then idle.
    CK(cudaGraphLaunch(exec, s));
    ++g_extra;
  }
  CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (has("api") || all || kp) CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
  if (has("kernel") || all || kp) CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  if (has("graphtrace")) CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
  for (const auto& [name, kind] : kinds)
    if (has(name) || kp) CU(cuptiActivityDisable(kind));
  if (has("disablebusy")) CK(cudaStreamSynchronize(s));
  if (has("after")) {
    // Launched after the kinds are off and before cuptiFinalize (kprof's steps between a
    // window's end and the detachment).
    for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    g_extra += 3;
  }
  // Then the kernels' records switched on again before cuptiFinalize: and off at once (reenable),
  // off after one more launch (relaunch), or left on (reenable_stay).
  if (has("reenable") || has("relaunch") || has("reenable_stay"))
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  if (has("relaunch")) {
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    ++g_extra;
  }
  if (has("reenable") || has("relaunch"))
    CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (detach == "soft") {
    CU(cuptiEnableAllDomains(0, sub));
    CU(cuptiUnsubscribe(sub));
  } else {
    if (has("busy")) {
      // The graph still running on s when the detaching synchronization (of another stream) exits.
      cudaStream_t other;
      CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
      CK(cudaGraphLaunch(exec, s));
      g_finalize = true;
      CK(cudaStreamSynchronize(other));
      CK(cudaStreamSynchronize(s));
      ++g_extra;
    } else {
      g_finalize = true;
      CK(cudaStreamSynchronize(s));
    }
    if (!g_finalized) {
      std::printf("%s %s FAULT(cuptiFinalize did not succeed)\n", g_mode, g_detach);
      return 5;
    }
    if (detach == "finalize_upload") CK(cudaGraphUpload(exec, s));
  }
  const double after = LaunchUs(exec, s, 100);
  std::vector<float> h(32);
  CK(cudaMemcpy(h.data(), d, 32 * sizeof(float), cudaMemcpyDeviceToHost));
  const float want = 1000.0f * (30 + 10 + 100 + g_extra);
  std::printf("%s %s plain_us=%.2f attached_us=%.2f after_us=%.2f records=%ld %s\n", g_mode,
              g_detach, plain, attached, after, g_records.load(),
              h[0] == want ? "ok" : "WRONG_RESULT");
  return 0;
}
