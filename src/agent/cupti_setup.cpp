#include "agent/cupti_setup.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace kprof::agent {
namespace {

struct KindName {
  const char* name;
  uint32_t bit;
};
constexpr KindName kKindNames[] = {
    {"kernel", kKindKernel}, {"memcpy", kKindMemcpy},   {"memset", kKindMemset},
    {"sync", kKindSync},     {"runtime", kKindRuntime}, {"driver", kKindDriver},
    {"nvtx", kKindNvtx},     {"memory", kKindMemory},   {"overhead", kKindOverhead},
};

// API families kprof records. Matched as prefixes of the callback name, so that the _v2,
// _ptsz/_ptds and Async variants are included. Polling calls (cudaEventQuery,
// cudaStreamQuery) and the many bookkeeping calls frameworks make (cudaGetDevice,
// cudaStreamIsCapturing, ...) stay out: they would cost time on the hot path and say little.
constexpr std::string_view kTracedPrefixes[] = {
    // runtime
    "cudaLaunch",
    "cudaMemcpy",
    "cudaMemset",
    "cudaMalloc",
    "cudaFree",
    "cudaHostAlloc",
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaEventRecord",
    "cudaStreamWaitEvent",
    "cudaGraphLaunch",
    "cudaGraphInstantiate",
    "cudaStreamBeginCapture",
    "cudaStreamEndCapture",
    "cudaDeviceReset",
    "cudaThreadSynchronize",
    // driver
    "cuLaunch",
    "cuMemcpy",
    "cuMemset",
    "cuMemAlloc",
    "cuMemFree",
    "cuMemHostAlloc",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuEventRecord",
    "cuStreamWaitEvent",
    "cuGraphLaunch",
    "cuGraphInstantiate",
    "cuStreamBeginCapture",
    "cuStreamEndCapture",
};

// Call sites already logged (each failure is printed once). Leaked on purpose: CUPTI callbacks
// can log after static destructors have run at exit.
std::mutex& LogMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::set<std::pair<const char*, int>>& Logged() {
  static auto* logged = new std::set<std::pair<const char*, int>>();
  return *logged;
}

}  // namespace

uint32_t ParseKinds(const char* list, std::string* unknown) {
  if (list == nullptr || *list == '\0') return kKindAll;
  uint32_t bits = 0;
  std::string_view rest(list);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view word = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (word.empty()) continue;
    if (word == "all") {
      bits |= kKindAll;
      continue;
    }
    bool found = false;
    for (const auto& k : kKindNames) {
      if (word == k.name) {
        bits |= k.bit;
        found = true;
      }
    }
    if (!found && unknown != nullptr) {
      if (!unknown->empty()) unknown->push_back(',');
      unknown->append(word);
    }
  }
  return bits;
}

std::string KindsToString(uint32_t kinds) {
  std::string out;
  for (const auto& k : kKindNames) {
    if ((kinds & k.bit) == 0) continue;
    if (!out.empty()) out.push_back(',');
    out += k.name;
  }
  return out;
}

void LogFailureOnce(const char* call, const char* doing, const char* message, int code,
                    const char* file, int line) {
  std::lock_guard<std::mutex> lock(LogMutex());
  if (!Logged().insert({file, line}).second) return;
  // The function's name, without its arguments.
  const std::string_view text(call != nullptr ? call : "");
  const std::string_view fn = text.substr(0, text.find('('));
  std::fprintf(stderr, "kprof agent: could not %s: %.*s returned %s (%d)\n", doing,
               static_cast<int>(fn.size()), fn.data(), message, code);
}

bool CheckCupti(CUptiResult r, const char* call, const char* doing, const char* file, int line) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  if (cuptiGetResultString(r, &msg) != CUPTI_SUCCESS || msg == nullptr) msg = "unknown error";
  LogFailureOnce(call, doing, msg, static_cast<int>(r), file, line);
  return false;
}

bool ConfigureActivityAttributes(bool zeroed_buffers, uint64_t device_buffer_mb) {
  bool ok = true;
  // A larger device buffer than the 3.2 MB default: bursts of short kernels otherwise fill it
  // before CUPTI's worker drains it, and records lose their timestamps.
  size_t device_buffer =
      device_buffer_mb != 0 ? static_cast<size_t>(device_buffer_mb) << 20 : size_t{4} << 20;
  size_t sz = sizeof(device_buffer);
  ok &= KPROF_CUPTI(
      cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &device_buffer),
      "set the size of CUPTI's device buffers (short kernels may lose their timestamps)");
  if (zeroed_buffers) {
    // We hand CUPTI zero-filled buffers (zeroed on kprof's writer thread), so CUPTI need not
    // zero them on the application thread.
    uint8_t zeroed = 1;
    size_t zsz = sizeof(zeroed);
    ok &= KPROF_CUPTI(
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zsz, &zeroed),
        "tell CUPTI that kprof's buffers arrive zeroed (CUPTI will zero them itself)");
  }
  return ok;
}

bool IsTracedApiName(const char* name) {
  if (name == nullptr) return false;
  std::string_view n(name);
  for (std::string_view p : kTracedPrefixes) {
    if (n.substr(0, p.size()) == p) return true;
  }
  return false;
}

namespace {

// The runtime and driver callback ids kprof records, found once by name (the domains hold about
// 1,500 ids: a capture window enables and disables these, not the search).
struct TracedIds {
  std::vector<CUpti_CallbackId> runtime, driver;
  std::vector<CUpti_CallbackId> other_runtime, other_driver;  // every other named id
};
const TracedIds& Traced() {
  static const TracedIds ids = [] {
    TracedIds t;
    const auto find = [](CUpti_CallbackDomain domain, uint32_t size,
                         std::vector<CUpti_CallbackId>& out, std::vector<CUpti_CallbackId>& other) {
      for (uint32_t cbid = 1; cbid < size; ++cbid) {
        const char* name = nullptr;
        if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS) continue;
        (IsTracedApiName(name) ? out : other).push_back(cbid);
      }
    };
    find(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, t.runtime, t.other_runtime);
    find(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, t.driver, t.other_driver);
    return t;
  }();
  return ids;
}

// Switches the API records of `ids` on or off. An id the loaded CUPTI does not know is skipped
// (INVALID_PARAMETER); any other failure is reported once, naming the call.
int SetApiRecords(const std::vector<CUpti_CallbackId>& ids, bool runtime, uint8_t on) {
  int done = 0;
  for (CUpti_CallbackId cbid : ids) {
    CUptiResult r =
        runtime ? cuptiActivityEnableRuntimeApi(cbid, on) : cuptiActivityEnableDriverApi(cbid, on);
    if (r == CUPTI_SUCCESS) {
      ++done;
    } else if (r != CUPTI_ERROR_INVALID_PARAMETER) {
      const char* name = nullptr;
      if (cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
                               cbid, &name) != CUPTI_SUCCESS ||
          name == nullptr)
        name = "a CUDA API call";
      const std::string doing =
          std::string(on ? "start" : "stop") + " recording calls to " + name +
          (on ? " (such calls are missing from the run)" : " (they go on being recorded)");
      // One message per call site: the first id that failed in each direction and domain.
      const char* fn = runtime ? "cuptiActivityEnableRuntimeApi" : "cuptiActivityEnableDriverApi";
      if (on && runtime) CheckCupti(r, fn, doing.c_str(), __FILE__, __LINE__);
      if (on && !runtime) CheckCupti(r, fn, doing.c_str(), __FILE__, __LINE__);
      if (!on && runtime) CheckCupti(r, fn, doing.c_str(), __FILE__, __LINE__);
      if (!on && !runtime) CheckCupti(r, fn, doing.c_str(), __FILE__, __LINE__);
    }
  }
  return done;
}

}  // namespace

size_t PrepareApiRecords() { return Traced().runtime.size() + Traced().driver.size(); }

// The API records of `kinds`, on or off, by callback id; with ApiRecords::Kind, also the whole
// API kind, every other id switched off after it (a kind overrides earlier per-id settings, and
// per-id settings made after it win). Once CUDA runs, neither way alone is enough: on the H100
// per-id enabling recorded nothing from an NVTX callback or another thread, the kind nothing
// from inside a runtime API callback (cudaProfilerStart); together they record the same calls
// as at start (docs/capture.md).
int SetApis(uint32_t kinds, uint8_t on, ApiRecords how) {
  const TracedIds& t = Traced();
  // On: the kind, then every other id off, then kprof's ids on. Off: kprof's ids off while the
  // kind is still on (per-id settings of a disabled kind are refused), then the kind.
  const auto kind_on = [&](CUpti_ActivityKind k, const std::vector<CUpti_CallbackId>& other,
                           bool runtime) {
    if (how != ApiRecords::Kind) return;
    KPROF_CUPTI(cuptiActivityEnable(k), runtime
                                            ? "start recording CUDA runtime calls in this window"
                                            : "start recording CUDA driver calls in this window");
    SetApiRecords(other, runtime, 0);
  };
  const auto kind_off = [&](CUpti_ActivityKind k, bool runtime) {
    if (how != ApiRecords::Kind) return;
    KPROF_CUPTI(cuptiActivityDisable(k),
                runtime ? "stop recording CUDA runtime calls when the window closed"
                        : "stop recording CUDA driver calls when the window closed");
  };
  int apis = 0;
  if (kinds & kKindRuntime) {
    if (on) kind_on(CUPTI_ACTIVITY_KIND_RUNTIME, t.other_runtime, true);
    apis += SetApiRecords(t.runtime, true, on);
    if (!on) kind_off(CUPTI_ACTIVITY_KIND_RUNTIME, true);
  }
  if (kinds & kKindDriver) {
    if (on) kind_on(CUPTI_ACTIVITY_KIND_DRIVER, t.other_driver, false);
    apis += SetApiRecords(t.driver, false, on);
    if (!on) kind_off(CUPTI_ACTIVITY_KIND_DRIVER, false);
  }
  return apis;
}

namespace {

// The activity kinds a capture window switches, with what each records (for messages).
struct Switched {
  uint32_t bit;
  CUpti_ActivityKind kind;
  const char* on;
  const char* off;
};
constexpr Switched kSwitched[] = {
    // CONCURRENT_KERNEL, never KERNEL: KERNEL serializes every kernel launch.
    {kKindKernel, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "start recording kernels",
     "stop recording kernels"},
    {kKindMemcpy, CUPTI_ACTIVITY_KIND_MEMCPY, "start recording memory copies",
     "stop recording memory copies"},
    {kKindMemset, CUPTI_ACTIVITY_KIND_MEMSET, "start recording memsets", "stop recording memsets"},
    {kKindSync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "start recording synchronizations",
     "stop recording synchronizations"},
    {kKindNvtx, CUPTI_ACTIVITY_KIND_MARKER, "start recording NVTX ranges",
     "stop recording NVTX ranges"},
    {kKindMemory, CUPTI_ACTIVITY_KIND_MEMORY2, "start recording device memory allocations",
     "stop recording device memory allocations"},
    {kKindOverhead, CUPTI_ACTIVITY_KIND_OVERHEAD, "start recording CUPTI's own overhead",
     "stop recording CUPTI's own overhead"},
};

bool g_alloc_source = true;

}  // namespace

void SetAllocationSource(bool on) { g_alloc_source = on; }

bool EnableGraphTrace(uint32_t kinds) {
  if ((kinds & (kKindKernel | kKindMemcpy | kKindMemset)) == 0) return true;
  return KPROF_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE),
                     "turn on graph-level tracing (CUDA graph launches will not be recorded)");
}

bool EnableActivityKinds(uint32_t kinds, int* enabled_api, ApiRecords how) {
  // The calls first, the work they launch after (and off in the other order): a kernel recorded
  // while a capture window switches always has its launch's call.
  // Only the calls kprof needs, per callback id: enabling whole domains costs far more.
  const int apis = SetApis(kinds, 1, how);
  if (enabled_api != nullptr) *enabled_api = apis;
  bool ok = true;
  for (const Switched& k : kSwitched) {
    if ((kinds & k.bit) == 0) continue;
    ok &= KPROF_CUPTI(cuptiActivityEnable(k.kind), k.on);
    // The library that asked for each allocation (MemAlloc.name): CUPTI finds it per call,
    // which costs allocations, not kernels (docs/benchmarks.md, "Memory").
    if (k.bit == kKindMemory && g_alloc_source)
      KPROF_CUPTI(cuptiActivityEnableAllocationSource(1),
                  "record which library asked for each allocation (memory will have no owner)");
    // No records for event/stream queries that found work unfinished: polling loops flood.
    if (k.bit == kKindSync)
      KPROF_CUPTI(cuptiActivityEnableAllSyncRecords(0),
                  "leave out synchronization records of queries that found work unfinished");
  }
  // Device records carry the properties kprof writes into the file's meta block.
  KPROF_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE),
              "record the devices' properties (the run's meta will lack them)");
  return ok;
}

void DisableActivityKinds(uint32_t kinds, ApiRecords how) {
  for (const Switched& k : kSwitched)
    if (kinds & k.bit) KPROF_CUPTI(cuptiActivityDisable(k.kind), k.off);
  SetApis(kinds, 0, how);
}

}  // namespace kprof::agent
