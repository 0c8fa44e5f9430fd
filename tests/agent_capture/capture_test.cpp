// Capture windows in the agent (src/agent/capture.cpp) without a GPU: the NVTX and profiler-API
// callbacks CUPTI would make are made here, on the test's threads, and the windows checked by
// what the agent enabled and disabled and by the CaptureWindow records it left for the writer.
// CUPTI's calls are fakes defined here (CUPTI's headers only: no libcupti).
#include "agent/capture.h"

#include <cuda.h>
#include <cupti.h>
#include <generated_nvtx_meta.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/capture_graphs.h"
#include "agent/capture_internal.h"
#include "agent/nvtx_shim.h"
#include "gtest/gtest.h"
#include "kprof/on_demand.h"

namespace {

std::atomic<uint64_t> g_clock{1000};  // the fake cuptiGetTimestamp: advances on each call
std::mutex g_mu;
int g_enables = 0, g_disables = 0;  // EnableActivityKinds / DisableActivityKinds calls
uint32_t g_enabled_mask = 0, g_disabled_mask = 0;  // the kinds of the last of each
int g_flushes_before_disable = 0;  // cuptiActivityFlushAll calls made before a disable
int g_flushes = 0;
std::vector<CUpti_CallbackId> g_nvtx_callbacks, g_api_callbacks, g_resource_callbacks;
int g_attaches = 0, g_detaches = 0;     // AttachCupti (when detached) / DetachCupti calls
std::atomic<bool> g_no_context{false};  // cuCtxGetCurrent answers none (no context made yet)

}  // namespace

namespace kprof::agent {

Agent& A() {
  static Agent* a = new Agent();
  return *a;
}
bool CheckCupti(CUptiResult r, const char*, const char*, const char*, int) {
  return r == CUPTI_SUCCESS;
}
void BlockSignalsInThisThread() {}
bool EnableActivityKinds(uint32_t kinds, int* enabled_api, ApiRecords) {
  g_enabled_mask = kinds;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_enables;
  if (enabled_api != nullptr) *enabled_api = 0;
  return true;
}
size_t PrepareApiRecords() { return 0; }
// CUPTI attached and detached (attach.cpp): what the windows see of it, NVTX handed to CUPTI
// (a CUPTI whose NVTX initialisation takes nothing) and taken back.
int FakeCuptiNvtxInit(NvtxGetExportTableFunc_t) { return 1; }
void WakeControl() {}
bool AttachCupti(std::string*) {
  if (A().attached) return true;
  ++g_attaches;
  A().attached = true;
  nvtx_shim::HandToCupti(&FakeCuptiNvtxInit);
  CaptureAttached(reinterpret_cast<CUpti_SubscriberHandle>(0x1));
  return true;
}
bool DetachCupti(int, const std::atomic<bool>&) {
  ++g_detaches;
  A().attached = false;
  nvtx_shim::TakeBack(true);
  CaptureDetached();
  return true;
}
void DisableActivityKinds(uint32_t kinds, ApiRecords) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_disables;
  g_disabled_mask = kinds;
  if (g_flushes > 0) ++g_flushes_before_disable;
  g_flushes = 0;
}

}  // namespace kprof::agent

extern "C" {
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_flushes;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = g_clock.fetch_add(10);
  return CUPTI_SUCCESS;
}
// No device has an active context (on demand, a window then waits for the first one).
CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice*, int) { return CUDA_ERROR_INVALID_DEVICE; }
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice, unsigned int*, int*) {
  return CUDA_ERROR_INVALID_DEVICE;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext*, CUdevice) {
  return CUDA_ERROR_INVALID_DEVICE;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_ERROR_INVALID_DEVICE; }
// The calling thread's context: one, unless g_no_context says none was made yet.
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = g_no_context ? nullptr : reinterpret_cast<CUcontext>(0x1);
  return CUDA_SUCCESS;
}
CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (enable)
    (domain == CUPTI_CB_DOMAIN_NVTX       ? g_nvtx_callbacks
     : domain == CUPTI_CB_DOMAIN_RESOURCE ? g_resource_callbacks
                                          : g_api_callbacks)
        .push_back(cbid);
  return CUPTI_SUCCESS;
}
}

// Each test runs in a child process: the agent's capture state is set once per process, as in
// a profiled program. The child's failures print as usual; its exit status says whether any.
void InChild(const std::function<void()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    body();
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed: " << status;
}

using namespace kprof;
using namespace kprof::agent;

namespace {

auto* const kSubscriber = reinterpret_cast<CUpti_SubscriberHandle>(0x1);

void Setenv(const char* name, const char* value) { setenv(name, value, 1); }

// The windows' settings from the environment, as the agent reads them (kprof/agent_config.h).
bool Configure(std::vector<std::pair<std::string, std::string>>& meta) {
  std::vector<ConfigProblem> problems;
  const AgentConfig cfg = ReadAgentConfig(std::getenv, problems);
  return ConfigureCapture(cfg, problems, meta);
}

// Starts the windows from the environment; false if they were not configured.
bool Start() {
  std::vector<std::pair<std::string, std::string>> meta;
  if (!Configure(meta)) return false;
  return StartCapture(kSubscriber, 0x1ff);
}

void Push(const char* name) {
  nvtxRangePushA_params p{name};
  CUpti_NvtxData d{"nvtxRangePushA", &p, nullptr};
  OnCaptureCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA, &d);
}
void Pop() {
  nvtxRangePop_params p{};
  CUpti_NvtxData d{"nvtxRangePop", &p, nullptr};
  OnCaptureCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePop, &d);
}
// On demand the windows get NVTX events from kprof's own handlers (nvtx_shim.h, tested in
// NvtxShim.*), not from CUPTI's callbacks: here decoded as a callback's would be.
void OnDemandPush(const char* name) {
  nvtxRangePushA_params p{name};
  CUpti_NvtxData d{"nvtxRangePushA", &p, nullptr};
  capture::OnDemandNvtx(capture::DecodeNvtx(CUPTI_CBID_NVTX_nvtxRangePushA, d));
}
void OnDemandPop() {
  nvtxRangePop_params p{};
  CUpti_NvtxData d{"nvtxRangePop", &p, nullptr};
  capture::OnDemandNvtx(capture::DecodeNvtx(CUPTI_CBID_NVTX_nvtxRangePop, d));
}
// A dormant --capture nvtx:NAME run: the events kprof's NVTX handlers give its sink, as
// nvtx_shim.cpp makes them (tested in NvtxShim.*): not forwarding to CUPTI, pushes at depth 0 and
// no pop; forwarding, depths from the last hand-over, a push that made one the first.
thread_local int t_dormant_depth = 0;
thread_local uint64_t t_dormant_generation = 0;
void DormantPush(const char* name) {
  capture::NvtxEvent e;
  e.kind = capture::NvtxEvent::Kind::Push;
  e.message = name;
  const uint64_t generation = nvtx_shim::Generation();
  if (generation != t_dormant_generation) t_dormant_depth = 0, t_dormant_generation = generation;
  e.depth = nvtx_shim::Forwarding() ? t_dormant_depth++ : 0;
  e.generation = generation;
  capture::DormantNvtx(e);
  if (nvtx_shim::Generation() != generation) {  // handed over in this push
    t_dormant_depth = 1;
    t_dormant_generation = nvtx_shim::Generation();
  }
}
void DormantPop() {
  if (!nvtx_shim::Forwarding()) return;
  if (nvtx_shim::Generation() != t_dormant_generation)
    t_dormant_depth = 0, t_dormant_generation = nvtx_shim::Generation();
  capture::NvtxEvent e;
  e.kind = capture::NvtxEvent::Kind::Pop;
  if (t_dormant_depth > 0) --t_dormant_depth;
  e.depth = t_dormant_depth;
  capture::DormantNvtx(e);
}
void ProfilerApi(bool start, CUpti_ApiCallbackSite site) {
  CUpti_CallbackData cb{};
  cb.callbackSite = site;
  OnCaptureCallback(CUPTI_CB_DOMAIN_RUNTIME_API,
                    start ? CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000
                          : CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000,
                    &cb);
}

// CUDA making its first context (the resource callback), and a context-making driver call
// beginning or returning.
void ContextMade() {
  CUpti_ResourceData rd{};
  OnCaptureCallback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &rd);
}
void ContextCall(CUpti_ApiCallbackSite site) {
  CUpti_CallbackData cb{};
  cb.callbackSite = site;
  OnCaptureCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain,
                    &cb);
}
// A cuGraphLaunch with this correlation id (its entry and its exit).
void GraphLaunch(uint32_t correlation) {
  for (CUpti_ApiCallbackSite site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
    CUpti_CallbackData cb{};
    cb.callbackSite = site;
    cb.correlationId = correlation;
    OnCaptureCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &cb);
  }
}
// The record graph-level tracing makes of a launch.
Record LaunchRecord(uint32_t correlation, uint64_t start_ns, bool from_device = false) {
  Record r;
  r.kind = static_cast<uint8_t>(RecordKind::GraphLaunch);
  r.correlation = correlation;
  r.start_ns = start_ns;
  r.end_ns = start_ns + 5;
  if (from_device) r.flags = kGraphLaunchFromDevice;
  return r;
}

// The CaptureWindow records left for the writer, with their names.
std::vector<Agent::SideRecord> Windows() {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  return a.side;
}
std::string Meta(const std::string& key) {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  for (const auto& [k, v] : a.side_meta)
    if (k == key) return v;
  return "";
}

}  // namespace

// nvtx:step with a count of 2: the windows are the 2nd and 3rd "step" ranges' pushes to their pops
// (after the first, the count is what is left), ranges nested inside do not close them, other
// threads' pops do not either, and the fourth step is not recorded.
TEST(CaptureWindows, NvtxRangeOpensAndItsPopCloses) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "2");
    ASSERT_TRUE(Start());
    ContextMade();
    EXPECT_EQ(g_nvtx_callbacks.size(), 11u);  // pushes, pops, starts and ends of every kind
    EXPECT_TRUE(OutsideWindow());
    Push("warmup");
    EXPECT_TRUE(OutsideWindow());
    Pop();
    Push("outer");  // the window opens below another range of the thread
    Push("step");
    EXPECT_FALSE(OutsideWindow());
    EXPECT_EQ(g_enables, 1);
    Push("forward");
    Pop();  // the nested range's pop
    EXPECT_FALSE(OutsideWindow());
    std::thread([] { Pop(); }).join();  // another thread's pop
    EXPECT_FALSE(OutsideWindow());
    Pop();  // step's pop
    EXPECT_TRUE(OutsideWindow());
    EXPECT_EQ(g_disables, 1);
    Pop();  // outer
    Push("step");
    Push("step");  // nested step: inside the window, no second window
    Pop();
    EXPECT_FALSE(OutsideWindow());
    Pop();
    EXPECT_TRUE(OutsideWindow());
    Push("step");  // the count is reached
    EXPECT_TRUE(OutsideWindow());
    Pop();
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 2u);
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(w[i].rec.Kind(), RecordKind::CaptureWindow);
      EXPECT_EQ(w[i].rec.a, i);
      EXPECT_EQ(w[i].name, "step");
      EXPECT_EQ(static_cast<CaptureTrigger>(w[i].rec.flags), CaptureTrigger::Nvtx);
      EXPECT_EQ(static_cast<CaptureEnd>(w[i].rec.c), CaptureEnd::RangeEnded);
      EXPECT_LT(w[i].rec.start_ns, w[i].rec.end_ns);
      EXPECT_EQ(w[i].rec.device, kNoDevice);
    }
    EXPECT_LT(w[0].rec.end_ns, w[1].rec.start_ns);
    EXPECT_EQ(Meta("capture_windows"), "2");
    EXPECT_EQ(Meta("capture_range_seen"), "4");  // the step pushes, the nested one included
    EXPECT_EQ(Meta("capture_nvtx_ranges"), "7");
    EXPECT_EQ(g_enables, 2);
    EXPECT_EQ(g_disables, 2);
  });
}

// A window still open when the process ends is recorded as ended with it.
TEST(CaptureWindows, OpenWindowEndsWithTheProcess) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    ASSERT_TRUE(Start());
    Push("step");
    EXPECT_FALSE(OutsideWindow());
    EndCapture();
    EndCapture();  // idempotent
    const auto w = Windows();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(static_cast<CaptureEnd>(w[0].rec.c), CaptureEnd::ProcessEnd);
    EXPECT_EQ(g_disables, 0);  // collection ends anyway: nothing to disable
  });
}

// cudaProfilerStart opens on entry, cudaProfilerStop closes on entry; a stop without a start and
// a second start inside the window do nothing; the default count is one window.
TEST(CaptureWindows, ProfilerApiBracketsTheWindow) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "cuda-profiler-api");
    ASSERT_TRUE(Start());
    ContextMade();
    // cudaProfilerStart/Stop, cuProfilerStart/Stop; four context-making calls; the graph
    // launches of the driver and the runtime, each with its per-thread-stream twin.
    EXPECT_EQ(g_api_callbacks.size(), 12u);
    for (CUpti_CallbackId id : std::vector<CUpti_CallbackId>{
             CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000,
             CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000,
             CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop,
             CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch})
      EXPECT_NE(std::find(g_api_callbacks.begin(), g_api_callbacks.end(), id),
                g_api_callbacks.end())
          << id;
    ProfilerApi(false, CUPTI_API_ENTER);
    EXPECT_TRUE(OutsideWindow());
    ProfilerApi(true, CUPTI_API_EXIT);  // the exit of a start does not open
    EXPECT_TRUE(OutsideWindow());
    ProfilerApi(true, CUPTI_API_ENTER);
    EXPECT_FALSE(OutsideWindow());
    ProfilerApi(true, CUPTI_API_ENTER);
    ProfilerApi(false, CUPTI_API_ENTER);
    EXPECT_TRUE(OutsideWindow());
    ProfilerApi(true, CUPTI_API_ENTER);  // count 1: done
    EXPECT_TRUE(OutsideWindow());
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].name, "cudaProfilerStart");
    EXPECT_EQ(static_cast<CaptureEnd>(w[0].rec.c), CaptureEnd::ProfilerStop);
    EXPECT_EQ(g_enables, 1);
  });
}

// --delay then --duration: the window opens on the timer after the delay and closes after the
// duration, on its own.
TEST(CaptureWindows, DelayAndDuration) {
  InChild([] {
    Setenv("KPROF_DELAY_MS", "50");
    Setenv("KPROF_DURATION_MS", "100");
    ASSERT_TRUE(Start());
    EXPECT_TRUE(OutsideWindow());
    ContextMade();  // both count from the first context
    const auto t0 = std::chrono::steady_clock::now();
    while (OutsideWindow() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto opened = std::chrono::steady_clock::now();
    EXPECT_GE(opened - t0, std::chrono::milliseconds(40));
    EXPECT_FALSE(OutsideWindow());
    while (!OutsideWindow() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_GE(std::chrono::steady_clock::now() - opened, std::chrono::milliseconds(90));
    EXPECT_TRUE(OutsideWindow());
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(static_cast<CaptureTrigger>(w[0].rec.flags), CaptureTrigger::Time);
    EXPECT_EQ(static_cast<CaptureEnd>(w[0].rec.c), CaptureEnd::Duration);
  });
}

// --duration with a trigger caps each window: the range is still open when it closes, and the
// next push of the range opens the next one.
TEST(CaptureWindows, DurationCapsEachWindow) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "2");
    Setenv("KPROF_DURATION_MS", "20");
    ASSERT_TRUE(Start());
    ContextMade();
    Push("step");
    EXPECT_FALSE(OutsideWindow());
    const auto t0 = std::chrono::steady_clock::now();
    while (!OutsideWindow() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(OutsideWindow());
    Pop();  // its range ends after the window did: nothing happens
    Push("step");
    EXPECT_FALSE(OutsideWindow());
    Pop();
    EXPECT_TRUE(OutsideWindow());
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(static_cast<CaptureEnd>(w[0].rec.c), CaptureEnd::Duration);
    EXPECT_EQ(static_cast<CaptureEnd>(w[1].rec.c), CaptureEnd::RangeEnded);
  });
}

// Bad settings leave the windows off (the whole process is recorded) and say why.
TEST(CaptureWindows, BadSettingsRecordEverything) {
  InChild([] {
    std::vector<std::pair<std::string, std::string>> meta;
    Setenv("KPROF_CAPTURE", "nvtx:");
    EXPECT_FALSE(Configure(meta));
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "0");
    EXPECT_FALSE(Configure(meta));
    Setenv("KPROF_CAPTURE_COUNT", "1");
    Setenv("KPROF_DELAY_MS", "1s");
    EXPECT_FALSE(Configure(meta));
    ASSERT_EQ(meta.size(), 3u);
    EXPECT_EQ(meta[0].first, "capture_problem");
    EXPECT_NE(meta[2].second.find("KPROF_DELAY_MS=1s"), std::string::npos);
    unsetenv("KPROF_CAPTURE");
    unsetenv("KPROF_DELAY_MS");
    unsetenv("KPROF_CAPTURE_COUNT");
    EXPECT_FALSE(Configure(meta));  // nothing asked for
    EXPECT_EQ(meta.size(), 3u);
    // No subscriber: an NVTX trigger cannot work.
    Setenv("KPROF_CAPTURE", "nvtx:step");
    ASSERT_TRUE(Configure(meta));
    EXPECT_FALSE(StartCapture(nullptr, 0x1ff));
    EXPECT_FALSE(OutsideWindow());
  });
}

// --duration counts from the first context, not from CUDA's initialisation: a window open since
// the start stays open however long the context takes, then closes the duration after it.
TEST(CaptureWindows, DurationCountsFromTheFirstContext) {
  InChild([] {
    Setenv("KPROF_DURATION_MS", "30");
    ASSERT_TRUE(Start());
    EXPECT_FALSE(OutsideWindow());  // open from the start, before any context
    EXPECT_EQ(g_enables, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    EXPECT_FALSE(OutsideWindow());  // four durations later: no context yet, still open
    const auto made = std::chrono::steady_clock::now();
    ContextMade();
    while (!OutsideWindow() && std::chrono::steady_clock::now() - made < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(OutsideWindow());
    EXPECT_GE(std::chrono::steady_clock::now() - made, std::chrono::milliseconds(25));
    EXPECT_EQ(g_disables, 1);
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(static_cast<CaptureEnd>(w[0].rec.c), CaptureEnd::Duration);
    EXPECT_NE(Meta("first_context_ns"), "");
  });
}

// CUPTI's kinds are never switched off before the first context exists, and never switched while
// a context is being made: the switch is made when the context exists or the call returns.
TEST(CaptureWindows, SwitchesWaitForContexts) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "3");
    ASSERT_TRUE(Start());
    Push("step");  // after cuInit, before any context: on at once, as at a whole run's start
    EXPECT_EQ(g_enables, 1);
    Pop();  // closed before any context: the kinds stay on until one exists
    EXPECT_TRUE(OutsideWindow());
    EXPECT_EQ(g_disables, 0);
    ContextMade();
    EXPECT_EQ(g_disables, 1);
    ContextCall(CUPTI_API_ENTER);  // another context is being made
    Push("step");
    EXPECT_FALSE(OutsideWindow());  // the window is open for the program...
    EXPECT_EQ(g_enables, 1);        // ...and CUPTI switches when the call returns
    ContextCall(CUPTI_API_EXIT);
    EXPECT_EQ(g_enables, 2);
    ContextCall(CUPTI_API_ENTER);
    Pop();
    EXPECT_EQ(g_disables, 1);
    ContextCall(CUPTI_API_ENTER);  // two calls in flight: the last to return switches
    ContextCall(CUPTI_API_EXIT);
    EXPECT_EQ(g_disables, 1);
    ContextCall(CUPTI_API_EXIT);
    EXPECT_EQ(g_disables, 2);
    // A window opened and closed while a call runs leaves CUPTI as it was.
    ContextCall(CUPTI_API_ENTER);
    Push("step");
    Pop();
    ContextCall(CUPTI_API_EXIT);
    EXPECT_EQ(g_enables, 2);
    EXPECT_EQ(g_disables, 2);
    EndCapture();
    EXPECT_EQ(Windows().size(), 3u);
    EXPECT_EQ(Meta("capture_switches_deferred"), "3");
  });
}

// Dormant, a graph launched while CUPTI is attached and no window is open is launched with the
// GPU work's kinds on, from its call's entry to its exit (with them all off, its next launch after
// cuptiFinalize faults: attach.cpp): switched on by the first launch under way, off by the last,
// not at all inside a window, and left on by a window that closes while a launch is under way.
TEST(CaptureWindows, GraphLaunchesOutsideWindowsHaveTheGpuKindsOn) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "3");
    ASSERT_TRUE(Start());
    ContextMade();
    const uint32_t gpu = kKindKernel | kKindMemcpy | kKindMemset;
    GraphLaunchOutsideWindows(true);  // CUPTI not attached: nothing
    GraphLaunchOutsideWindows(false);
    EXPECT_EQ(g_enables, 0);
    A().attached = true;
    GraphLaunchOutsideWindows(true);
    EXPECT_EQ(g_enables, 1);
    EXPECT_EQ(g_enabled_mask, gpu);
    std::thread([] { GraphLaunchOutsideWindows(true); }).join();  // a second one under way
    EXPECT_EQ(g_enables, 1);
    GraphLaunchOutsideWindows(false);  // this thread's returns: the other's still under way
    EXPECT_EQ(g_disables, 0);
    std::thread([] { GraphLaunchOutsideWindows(false); }).join();  // not that thread's launch
    EXPECT_EQ(g_disables, 0);
    GraphLaunchOutsideWindows(false);  // nothing of this thread's under way
    EXPECT_EQ(g_disables, 0);
    EXPECT_EQ(GraphLaunchesOutsideWindows().first, 2u);
    // (The other thread's launch never returned: still counted under way, so a third thread's
    // launch switches nothing either way.)
    std::thread t([] {
      GraphLaunchOutsideWindows(true);
      GraphLaunchOutsideWindows(false);
    });
    t.join();
    EXPECT_EQ(g_disables, 0);  // one still under way: nothing switched either way
    EXPECT_EQ(g_enables, 1);
    Push("step");  // a window: everything on
    EXPECT_EQ(g_enables, 2);
    GraphLaunchOutsideWindows(true);  // inside a window: nothing switched
    GraphLaunchOutsideWindows(false);
    EXPECT_EQ(g_enables, 2);
    Pop();  // closes while a launch is under way: the GPU kinds stay on
    EXPECT_EQ(g_disables, 1);
    EXPECT_EQ(g_disabled_mask & gpu, 0u);
    // A detachment counts every launch out (their exits will not come), and a launch then
    // switches nothing; attached again, the next one outside the windows switches the kinds on,
    // and off when it returns.
    CaptureDetached();
    EXPECT_FALSE(A().attached);
    GraphLaunchOutsideWindows(true);
    GraphLaunchOutsideWindows(false);
    EXPECT_EQ(g_enables, 2);
    A().attached = true;
    GraphLaunchOutsideWindows(true);
    EXPECT_EQ(g_enables, 3);
    EXPECT_EQ(g_enabled_mask, gpu);
    GraphLaunchOutsideWindows(false);
    EXPECT_EQ(g_disables, 2);
    EXPECT_EQ(g_disabled_mask, gpu);
    EXPECT_EQ(GraphLaunchesOutsideWindows().first, 4u);
    EXPECT_EQ(GraphLaunchesOutsideWindows().second, 0u);
    EndCapture();
  });
}

// A graph's work is kept when its launch was made inside a window (its correlation id falls in
// the window's), whatever its record (the launch in graph mode, each node's kernel in node mode)
// and however late it ran; a launch from the GPU when it started inside a window; work of no
// graph always.
TEST(CaptureWindows, GraphWorkOfTheWindowsOnly) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "2");
    ASSERT_TRUE(Start());
    ContextMade();
    GraphLaunch(5);
    Push("step");
    GraphLaunch(7);
    GraphLaunch(6);  // another thread's launch, its callback late
    Pop();
    GraphLaunch(8);
    Push("step");
    GraphLaunch(10);
    Pop();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 2u);
    const uint64_t open = w[0].rec.start_ns, close = w[0].rec.end_ns;
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(5, open + 1)));    // made before the window
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(7, close + 100)));  // ran after it: still its own
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(6, open + 1)));
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(8, close + 1)));  // between the windows
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(9, close + 1)));
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(10, w[1].rec.start_ns + 1)));
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(11, w[1].rec.end_ns + 1)));
    // Node mode: every node's kernel of a launch inside, none of one outside; a kernel of no
    // graph is not asked about.
    Record node;
    node.kind = static_cast<uint8_t>(RecordKind::Kernel);
    node.bytes = 42;  // its graph node id
    for (uint32_t corr : {6u, 6u, 7u}) {
      node.correlation = corr;
      EXPECT_TRUE(AdmitGraphWork(node));
    }
    node.correlation = 8;
    EXPECT_FALSE(AdmitGraphWork(node));
    node.bytes = 0;
    EXPECT_TRUE(AdmitGraphWork(node));
    // The launches' calls: kept with their work, not counted.
    Record call;
    call.kind = static_cast<uint8_t>(RecordKind::RuntimeApi);
    call.a = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
    call.correlation = 6;
    EXPECT_TRUE(AdmitGraphWork(call));
    call.correlation = 8;
    EXPECT_FALSE(AdmitGraphWork(call));
    call.kind = static_cast<uint8_t>(RecordKind::DriverApi);
    call.a = CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
    EXPECT_FALSE(AdmitGraphWork(call));
    call.correlation = 10;
    EXPECT_TRUE(AdmitGraphWork(call));
    call.a = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;  // another call: not asked about
    call.correlation = 8;
    EXPECT_TRUE(AdmitGraphWork(call));
    // Launches from the GPU: by when they started.
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(0, open + 1, true)));
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(0, open - 1, true)));
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(0, close + 1, true)));
    EndCapture();
    EXPECT_EQ(Meta("capture_graph_records_kept"), "7");
    EXPECT_EQ(Meta("capture_graph_records_outside"), "7");
    EXPECT_EQ(Meta("capture_graph_match"), "correlation");
  });
}

// A launch call that straddles a window's close (entered inside, returned after) is not the
// window's: the switch may lose its call's record while its work is recorded. A runtime launch
// and the driver call it makes go together, decided by the runtime call.
TEST(CaptureWindows, GraphLaunchStraddlingTheCloseIsLeftOut) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "2");
    ASSERT_TRUE(Start());
    ContextMade();
    const auto call = [](CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         CUpti_ApiCallbackSite site, uint32_t correlation) {
      CUpti_CallbackData cb{};
      cb.callbackSite = site;
      cb.correlationId = correlation;
      OnCaptureCallback(domain, cbid, &cb);
    };
    const auto runtime = [&](CUpti_ApiCallbackSite site, uint32_t id) {
      call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, site, id);
    };
    const auto driver = [&](CUpti_ApiCallbackSite site, uint32_t id) {
      call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, site, id);
    };
    Push("step");
    GraphLaunch(20);  // whole inside
    runtime(CUPTI_API_ENTER, 21);
    driver(CUPTI_API_ENTER, 22);
    driver(CUPTI_API_EXIT, 22);
    Pop();  // closes while the runtime call runs
    runtime(CUPTI_API_EXIT, 21);
    runtime(CUPTI_API_ENTER, 30);  // entered between the windows, returns inside the next
    Push("step");
    driver(CUPTI_API_ENTER, 31);
    driver(CUPTI_API_EXIT, 31);
    runtime(CUPTI_API_EXIT, 30);
    GraphLaunch(32);
    driver(CUPTI_API_ENTER, 33);  // entered inside the second window, returns after it
    Pop();
    driver(CUPTI_API_EXIT, 33);
    ASSERT_EQ(Windows().size(), 2u);
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(20, 1)));
    for (uint32_t id : {21u, 22u, 30u, 31u, 33u})
      EXPECT_FALSE(AdmitGraphWork(LaunchRecord(id, 1))) << id;
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(32, 1)));
    EndCapture();
  });
}

// Callbacks without correlation ids: a graph's work is kept by when it ran.
TEST(CaptureWindows, GraphWorkByTimeWithoutIds) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    ASSERT_TRUE(Start());
    ContextMade();
    Push("step");
    GraphLaunch(0);
    Pop();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(9, w[0].rec.start_ns + 1)));
    EXPECT_FALSE(AdmitGraphWork(LaunchRecord(9, w[0].rec.end_ns + 100)));
    EndCapture();
    EXPECT_EQ(Meta("capture_graph_match"), "time");
  });
}

// Without windows every record is kept.
TEST(CaptureWindows, EveryRecordWithoutWindows) {
  InChild([] {
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(3, 100)));
    GraphLaunch(3);
    EXPECT_TRUE(AdmitGraphWork(LaunchRecord(4, 100)));
  });
}

// On demand (kprof run --on-demand): nothing of CUPTI is touched before the control thread
// attaches it; a duration window opens and closes for that thread; a step window opens at the
// first push of the step range at or after the chosen moment and closes at the end of the N-th
// step, ranges nested inside it and other threads not counting.
TEST(CaptureWindows, OnDemandWindowsOpenForTheControlThreadAndCountSteps) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "on-demand");
    A().dormant = true;
    ASSERT_TRUE(Start());
    EXPECT_TRUE(g_nvtx_callbacks.empty());  // dormant: no callback enabled at start
    EXPECT_TRUE(g_api_callbacks.empty());
    OnDemandPush("step");  // (dormant, kprof's handlers would not be there; harmless if they are)
    OnDemandPop();
    CaptureAttached(kSubscriber);
    // Attached, still no NVTX callback: kprof's own NVTX handlers give the windows their pushes
    // and pops (OnDemandPush, OnDemandPop).
    EXPECT_TRUE(g_nvtx_callbacks.empty());
    ContextMade();
    // A duration window: the control thread opens and closes it.
    ASSERT_TRUE(OpenOnDemand());
    EXPECT_FALSE(OpenOnDemand());  // one at a time
    EXPECT_EQ(g_enables, 1);
    CloseOnDemand(CaptureEnd::Duration);
    EXPECT_EQ(g_disables, 1);
    EXPECT_EQ(g_flushes_before_disable, 1);  // the window's records completed, kinds still on
    // A step window of 2 steps, armed for a moment far ahead: pushes before it do not open it.
    WatchSteps("step");
    OnDemandPush("step");
    OnDemandPop();
    ASSERT_EQ(StepBegins().size(), 1u);
    ArmSteps(2, ondemand::WallNs() + 3'600'000'000'000ull);
    OnDemandPush("step");
    EXPECT_TRUE(OutsideWindow());
    OnDemandPop();
    EXPECT_EQ(StepBegins().size(), 2u);
    ArmSteps(2, 0);  // now
    EXPECT_TRUE(CaptureStatus().armed);
    OnDemandPush("load");  // another range: not a step
    OnDemandPop();
    EXPECT_TRUE(OutsideWindow());
    OnDemandPush("step");  // step 1 opens the window
    EXPECT_FALSE(OutsideWindow());
    EXPECT_EQ(g_enables, 2);
    OnDemandPush("forward");
    OnDemandPop();                              // nested: not a step's end
    std::thread([] { OnDemandPop(); }).join();  // another thread's pop
    EXPECT_EQ(CaptureStatus().steps_done, 0u);
    OnDemandPop();  // the end of step 1
    EXPECT_FALSE(OutsideWindow());
    OnDemandPush("step");
    OnDemandPop();  // the end of step 2: closes
    EXPECT_TRUE(OutsideWindow());
    EXPECT_EQ(g_disables, 2);
    const WindowStatus st = CaptureStatus();
    EXPECT_EQ(st.windows, 2u);
    EXPECT_EQ(st.steps_done, 2u);
    EXPECT_FALSE(st.armed);
    EXPECT_GE(st.closed_wall_ns, st.opened_wall_ns);
    OnDemandPush("step");  // not armed again: nothing opens
    EXPECT_TRUE(OutsideWindow());
    OnDemandPop();
    WatchSteps("");
    CaptureDetached();
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(static_cast<CaptureTrigger>(w[0].rec.flags), CaptureTrigger::OnDemand);
    EXPECT_EQ(static_cast<CaptureEnd>(w[0].rec.c), CaptureEnd::Duration);
    EXPECT_EQ(w[0].name, "kprof capture");
    EXPECT_EQ(static_cast<CaptureTrigger>(w[1].rec.flags), CaptureTrigger::OnDemandSteps);
    EXPECT_EQ(static_cast<CaptureEnd>(w[1].rec.c), CaptureEnd::Steps);
    EXPECT_EQ(w[1].name, "step");
    EXPECT_EQ(w[1].rec.a, 1u);
    EXPECT_EQ(Meta("capture_windows"), "2");
  });
}

// A dormant --capture nvtx:step run with a count of 2: no CUPTI callback and no attachment until
// the range is pushed; the push attaches CUPTI and opens the window, nested ranges and other
// threads' pops leave it open, the pop closes it; CUPTI is detached after it, attached again for
// the second window, and nothing opens or attaches after the last.
TEST(CaptureWindows, DormantNvtxTriggerAttachesAtThePushAndDetachesAfter) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    Setenv("KPROF_CAPTURE_COUNT", "2");
    A().dormant = true;
    ASSERT_TRUE(Start());
    DormantReady();
    EXPECT_TRUE(g_nvtx_callbacks.empty());
    EXPECT_TRUE(g_api_callbacks.empty());
    EXPECT_TRUE(g_resource_callbacks.empty());
    DormantPush("load");
    DormantPop();
    EXPECT_EQ(g_attaches, 0);
    EXPECT_TRUE(OutsideWindow());
    DormantPush("step");  // attaches, opens
    EXPECT_EQ(g_attaches, 1);
    EXPECT_FALSE(OutsideWindow());
    EXPECT_TRUE(g_nvtx_callbacks.empty());  // NVTX still from kprof's own handlers
    const std::atomic<bool> stop{false};
    EXPECT_FALSE(DetachAfterWindow(stop));  // not while a window is open
    EXPECT_EQ(g_detaches, 0);
    DormantPush("forward");
    DormantPop();  // nested
    std::thread([] { DormantPop(); }).join();
    EXPECT_FALSE(OutsideWindow());
    DormantPop();  // the step's end
    EXPECT_TRUE(OutsideWindow());
    EXPECT_TRUE(DetachAfterWindow(stop));
    EXPECT_EQ(g_detaches, 1);
    DormantPush("step");  // attaches again
    EXPECT_EQ(g_attaches, 2);
    EXPECT_FALSE(OutsideWindow());
    DormantPop();
    EXPECT_TRUE(DetachAfterWindow(stop));
    EXPECT_TRUE(CaptureStatus().ended);
    DormantPush("step");  // all recorded: neither attaches nor opens
    DormantPop();
    EXPECT_EQ(g_attaches, 2);
    EXPECT_TRUE(OutsideWindow());
    EndCapture();
    const auto w = Windows();
    ASSERT_EQ(w.size(), 2u);
    for (const auto& win : w) {
      EXPECT_EQ(static_cast<CaptureTrigger>(win.rec.flags), CaptureTrigger::Nvtx);
      EXPECT_EQ(static_cast<CaptureEnd>(win.rec.c), CaptureEnd::RangeEnded);
      EXPECT_EQ(win.name, "step");
    }
    EXPECT_EQ(Meta("capture_range_seen"), "3");
    EXPECT_EQ(Meta("cupti_attachments"), "2");
    EXPECT_EQ(Meta("capture_nvtx_ranges"), "5");  // every push: load, step, forward, step, step
  });
}

// Before the agent has started (DormantReady, the end of its initialisation inside cuInit), and
// before a context is made, a push of the range opens no window and attaches nothing (attached
// then, processes hung or crashed); the next push after both does.
TEST(CaptureWindows, DormantNvtxOpensNothingBeforeTheAgentHasStarted) {
  InChild([] {
    Setenv("KPROF_CAPTURE", "nvtx:step");
    A().dormant = true;
    ASSERT_TRUE(Start());
    DormantPush("step");
    EXPECT_EQ(g_attaches, 0);
    EXPECT_TRUE(OutsideWindow());
    DormantPop();
    DormantReady();
    g_no_context = true;  // cuInit has returned, no context is made yet: still nothing
    DormantPush("step");
    EXPECT_EQ(g_attaches, 0);
    EXPECT_TRUE(OutsideWindow());
    DormantPop();
    g_no_context = false;
    DormantPush("step");
    EXPECT_EQ(g_attaches, 1);
    EXPECT_FALSE(OutsideWindow());
    DormantPush("inner");
    DormantPop();
    EXPECT_FALSE(OutsideWindow());
    DormantPop();
    EXPECT_TRUE(OutsideWindow());
    EndCapture();
    ASSERT_EQ(Windows().size(), 1u);
    EXPECT_EQ(static_cast<CaptureEnd>(Windows()[0].rec.c), CaptureEnd::RangeEnded);
    EXPECT_EQ(Meta("capture_range_seen"), "3");
    EXPECT_EQ(Meta("capture_range_before_context"), "1");
  });
}
