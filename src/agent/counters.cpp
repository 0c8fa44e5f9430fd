// Hardware counters in the agent: see counters.h. Call sequences follow CUPTI 13.0's headers
// (cupti_pmsampling.h, cupti_range_profiler.h, cupti_profiler_host.h) and NVIDIA's samples
// (pm_sampling, callback_profiling); docs/counters.md says what was checked on the H100.
//
// Rules of the agent hold here too: no exception escapes, every CUPTI call is checked, and a
// failure turns the counters off with one line saying why (stderr and the file's meta), while
// tracing goes on.
#include "agent/counters.h"

#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "agent/agent.h"
#include "kprof/counters.h"
#include "kprof/metrics.h"

namespace kprof::agent {
namespace {

#define KPROF_PARAMS(Type, var) \
  Type var{};                   \
  var.structSize = Type##_STRUCT_SIZE

std::string ResultString(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return std::string(s != nullptr ? s : "unknown CUPTI error") + " (" +
         std::to_string(static_cast<int>(r)) + ")";
}

// What the user asked for (set once, before any callback).
struct Settings {
  bool sampled = false, replay = false;
  uint64_t interval_ns = 200'000;
  size_t top = 10;
  uint64_t launches = 2;  // per kernel name
  bool use_regex = false;
  std::regex regex;
  std::unordered_set<std::string> named;  // from an earlier run (mangled or display names)
};
Settings g_set;

// Problems, said once each, kept for the meta written at the end.
std::mutex g_problem_mu;
std::string g_problems;
void Problem(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_problem_mu);
  if (g_problems.find(what) != std::string::npos) return;
  std::fprintf(stderr, "kprof agent: counters: %s\n", what.c_str());
  g_problems += (g_problems.empty() ? "" : "; ") + what;
}
bool Ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  Problem(std::string(what) + " failed: " + ResultString(r));
  return false;
}

// Metrics the chip does not offer (or not in one pass, for sampling): noted in the meta.
std::string g_unavailable;
void Unavailable(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_problem_mu);
  if (g_unavailable.find(name) == std::string::npos)
    g_unavailable += (g_unavailable.empty() ? "" : ",") + name;
}

uint64_t Now() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

// Hands records to the writer (the graph callbacks' side channel), with their metric names.
void Emit(Record r, std::string name) {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.side_mu);
  a.side.push_back({r, std::move(name)});
}

// cuptiProfilerInitialize once per process (it is not reference-counted).
std::once_flag g_profiler_once;
bool g_profiler_ok = false;
bool InitProfiler() {
  std::call_once(g_profiler_once, [] {
    KPROF_PARAMS(CUpti_Profiler_Initialize_Params, p);
    g_profiler_ok = Ok(cuptiProfilerInitialize(&p), "cuptiProfilerInitialize");
  });
  return g_profiler_ok;
}

std::string ChipName(uint32_t device) {
  KPROF_PARAMS(CUpti_Device_GetChipName_Params, p);
  p.deviceIndex = device;
  if (!Ok(cuptiDeviceGetChipName(&p), "cuptiDeviceGetChipName") || p.pChipName == nullptr)
    return "";
  return p.pChipName;
}

// A host object with `metrics` configured: the config image, the metrics kept (those the chip
// knows; each rejected one is said once) and the passes they take.
struct HostConfig {
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> image;
  std::vector<std::string> names;
  std::vector<const char*> ptrs;
  size_t passes = 0;
};

CUpti_Profiler_Host_Object* NewHost(CUpti_ProfilerType type, const std::string& chip,
                                    const std::vector<uint8_t>& avail) {
  KPROF_PARAMS(CUpti_Profiler_Host_Initialize_Params, p);
  p.profilerType = type;
  p.pChipName = chip.c_str();
  p.pCounterAvailabilityImage = avail.data();
  if (!Ok(cuptiProfilerHostInitialize(&p), "cuptiProfilerHostInitialize")) return nullptr;
  return p.pHostObject;
}
void FreeHost(CUpti_Profiler_Host_Object* h) {
  if (h == nullptr) return;
  KPROF_PARAMS(CUpti_Profiler_Host_Deinitialize_Params, p);
  p.pHostObject = h;
  cuptiProfilerHostDeinitialize(&p);
}
bool AddMetrics(CUpti_Profiler_Host_Object* h, const std::vector<const char*>& names) {
  KPROF_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, p);
  p.pHostObject = h;
  p.ppMetricNames = const_cast<const char**>(names.data());
  p.numMetrics = names.size();
  return cuptiProfilerHostConfigAddMetrics(&p) == CUPTI_SUCCESS;
}
bool ImageOf(CUpti_Profiler_Host_Object* h, std::vector<uint8_t>& image, size_t* passes) {
  KPROF_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, s);
  s.pHostObject = h;
  if (!Ok(cuptiProfilerHostGetConfigImageSize(&s), "cuptiProfilerHostGetConfigImageSize"))
    return false;
  image.assign(s.configImageSize, 0);
  KPROF_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, g);
  g.pHostObject = h;
  g.configImageSize = image.size();
  g.pConfigImage = image.data();
  if (!Ok(cuptiProfilerHostGetConfigImage(&g), "cuptiProfilerHostGetConfigImage")) return false;
  KPROF_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, n);
  n.configImageSize = image.size();
  n.pConfigImage = image.data();
  if (!Ok(cuptiProfilerHostGetNumOfPasses(&n), "cuptiProfilerHostGetNumOfPasses")) return false;
  *passes = n.numOfPasses;
  return true;
}

// Builds the configuration for `wanted`, keeping the metrics the chip accepts; with
// `single_pass`, also leaving out those that would need a second pass (PM sampling).
bool Configure(CUpti_ProfilerType type, const std::string& chip, const std::vector<uint8_t>& avail,
               const std::vector<CounterMetric>& wanted, bool single_pass, HostConfig& out) {
  for (const CounterMetric& m : wanted) {
    const std::string name(m.name);
    if (std::find(out.names.begin(), out.names.end(), name) != out.names.end()) continue;
    // Try the set with this metric on a fresh host object (adding is cumulative).
    CUpti_Profiler_Host_Object* h = NewHost(type, chip, avail);
    if (h == nullptr) return false;
    std::vector<const char*> trial;
    for (const std::string& n : out.names) trial.push_back(n.c_str());
    trial.push_back(name.c_str());
    std::vector<uint8_t> image;
    size_t passes = 0;
    const bool accepted = AddMetrics(h, trial) && ImageOf(h, image, &passes);
    FreeHost(h);
    if (!accepted || (single_pass && passes > 1)) {
      Unavailable(name);
    } else {
      out.names.push_back(name);
    }
  }
  if (out.names.empty()) {
    Problem("no metric available on " + chip);
    return false;
  }
  for (const std::string& n : out.names) out.ptrs.push_back(n.c_str());
  out.host = NewHost(type, chip, avail);
  return out.host != nullptr && AddMetrics(out.host, out.ptrs) &&
         ImageOf(out.host, out.image, &out.passes);
}

// Evaluates range/sample `index` of a counter data image into `values`.
bool Evaluate(HostConfig& c, std::vector<uint8_t>& data, size_t index,
              std::vector<double>& values) {
  values.assign(c.ptrs.size(), kNotMeasured);
  KPROF_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, e);
  e.pHostObject = c.host;
  e.pCounterDataImage = data.data();
  e.counterDataImageSize = data.size();
  e.rangeIndex = index;
  e.ppMetricNames = c.ptrs.data();
  e.numMetrics = c.ptrs.size();
  e.pMetricValues = values.data();
  return Ok(cuptiProfilerHostEvaluateToGpuValues(&e), "cuptiProfilerHostEvaluateToGpuValues");
}

// ---------------------------------------------------------------------------------------------
// PM sampling: one object per device, all driven by the sampling thread.

struct Sampler {
  uint32_t device = 0;
  CUpti_PmSampling_Object* obj = nullptr;
  HostConfig config;                 // kept alive until Disable (CUPTI keeps pointers into it)
  std::vector<uint8_t> data, blank;  // the counter data image and a freshly initialised copy
  uint64_t started_ns = 0;
  uint32_t next_index = 0;
  bool running = false;
};

constexpr size_t kSamplesPerDecode = 2000;
constexpr size_t kHardwareBufferBytes = size_t{64} << 20;
constexpr int kDecodePeriodMs = 50;

struct SamplingState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint32_t> devices_seen;  // contexts created on these devices (callback)
  bool stop = false;
  bool stopped = false;
  std::thread thread;
  std::vector<Sampler> samplers;  // sampling thread only
};
SamplingState& Sampling() {
  static auto* s = new SamplingState();  // leaked, as the agent's state
  return *s;
}

bool StartSampler(uint32_t device, Sampler& s) {
  s.device = device;
  const std::string chip = ChipName(device);
  if (chip.empty()) return false;
  KPROF_PARAMS(CUpti_Profiler_DeviceSupported_Params, ds);
  CUdevice cu_dev = 0;
  if (cuDeviceGet(&cu_dev, static_cast<int>(device)) != CUDA_SUCCESS) return false;
  ds.cuDevice = cu_dev;
  ds.api = CUPTI_PROFILER_PM_SAMPLING;
  if (!Ok(cuptiProfilerDeviceSupported(&ds), "cuptiProfilerDeviceSupported")) return false;
  if (ds.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    Problem("PM sampling is not supported on device " + std::to_string(device) + " (" + chip +
            (ds.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED ? ": architecture"
             : ds.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED       ? ": virtual GPU"
             : ds.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED
                 ? ": confidential computing"
                 : "") +
            ")");
    return false;
  }
  KPROF_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params, ca);
  ca.deviceIndex = device;
  if (!Ok(cuptiPmSamplingGetCounterAvailability(&ca), "cuptiPmSamplingGetCounterAvailability"))
    return false;
  std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
  ca.pCounterAvailabilityImage = avail.data();
  if (!Ok(cuptiPmSamplingGetCounterAvailability(&ca), "cuptiPmSamplingGetCounterAvailability"))
    return false;
  if (!Configure(CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, avail, SampledMetrics(), true, s.config))
    return false;
  KPROF_PARAMS(CUpti_PmSampling_Enable_Params, en);
  en.deviceIndex = device;
  if (!Ok(cuptiPmSamplingEnable(&en), "cuptiPmSamplingEnable")) return false;
  s.obj = en.pPmSamplingObject;
  KPROF_PARAMS(CUpti_PmSampling_SetConfig_Params, sc);
  sc.pPmSamplingObject = s.obj;
  sc.configSize = s.config.image.size();
  sc.pConfig = s.config.image.data();
  sc.hardwareBufferSize = kHardwareBufferBytes;
  sc.samplingInterval = g_set.interval_ns;
  sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  if (!Ok(cuptiPmSamplingSetConfig(&sc), "cuptiPmSamplingSetConfig")) return false;
  KPROF_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, cs);
  cs.pPmSamplingObject = s.obj;
  cs.pMetricNames = s.config.ptrs.data();
  cs.numMetrics = s.config.ptrs.size();
  cs.maxSamples = kSamplesPerDecode;
  if (!Ok(cuptiPmSamplingGetCounterDataSize(&cs), "cuptiPmSamplingGetCounterDataSize"))
    return false;
  s.data.assign(cs.counterDataSize, 0);
  KPROF_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, ci);
  ci.pPmSamplingObject = s.obj;
  ci.counterDataSize = s.data.size();
  ci.pCounterData = s.data.data();
  if (!Ok(cuptiPmSamplingCounterDataImageInitialize(&ci),
          "cuptiPmSamplingCounterDataImageInitialize"))
    return false;
  s.blank = s.data;
  s.started_ns = Now();
  KPROF_PARAMS(CUpti_PmSampling_Start_Params, st);
  st.pPmSamplingObject = s.obj;
  if (!Ok(cuptiPmSamplingStart(&st), "cuptiPmSamplingStart")) return false;
  s.running = true;
  return true;
}

// Decodes what the hardware holds into records; returns false when decoding failed.
bool Decode(Sampler& s, bool until_empty) {
  for (int round = 0; round < 1000; ++round) {
    KPROF_PARAMS(CUpti_PmSampling_DecodeData_Params, dd);
    dd.pPmSamplingObject = s.obj;
    dd.pCounterDataImage = s.data.data();
    dd.counterDataImageSize = s.data.size();
    const CUptiResult decoded = cuptiPmSamplingDecodeData(&dd);
    if (dd.overflow != 0)
      Problem(
          "PM sampling: the hardware buffer overflowed (samples lost; a longer "
          "--metrics-interval keeps up)");
    if (decoded != CUPTI_SUCCESS && decoded != CUPTI_ERROR_OUT_OF_MEMORY)
      return Ok(decoded, "cuptiPmSamplingDecodeData");
    KPROF_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, gi);
    gi.pCounterDataImage = s.data.data();
    gi.counterDataImageSize = s.data.size();
    if (!Ok(cuptiPmSamplingGetCounterDataInfo(&gi), "cuptiPmSamplingGetCounterDataInfo"))
      return false;
    std::vector<double> values;
    for (size_t i = 0; i < gi.numCompletedSamples; ++i) {
      KPROF_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, si);
      si.pPmSamplingObject = s.obj;
      si.pCounterDataImage = s.data.data();
      si.counterDataImageSize = s.data.size();
      si.sampleIndex = i;
      if (!Ok(cuptiPmSamplingCounterDataGetSampleInfo(&si),
              "cuptiPmSamplingCounterDataGetSampleInfo"))
        return false;
      // The first sample runs from the configuration to the first trigger: not a sample.
      if (si.startTimestamp < s.started_ns || si.endTimestamp <= si.startTimestamp) continue;
      if (!Evaluate(s.config, s.data, i, values)) return false;
      for (size_t m = 0; m < values.size(); ++m) {
        if (!std::isfinite(values[m])) continue;
        Record r;
        r.kind = static_cast<uint8_t>(RecordKind::CounterSample);
        r.device = static_cast<uint16_t>(s.device);
        r.start_ns = si.startTimestamp;
        r.end_ns = si.endTimestamp;
        r.a = s.next_index;
        SetMetricValue(r, values[m]);
        Emit(r, s.config.names[m]);
      }
      ++s.next_index;
    }
    s.data = s.blank;  // the image, initialised again (a copy is faster than initialising)
    if (dd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS) return true;
    if (gi.numPopulatedSamples == 0) return true;  // nothing more is coming
    if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL &&
        !until_empty)
      return true;
  }
  return true;
}

void StopSampler(Sampler& s) {
  if (s.obj == nullptr) return;
  if (s.running) {
    KPROF_PARAMS(CUpti_PmSampling_Stop_Params, sp);
    sp.pPmSamplingObject = s.obj;
    Ok(cuptiPmSamplingStop(&sp), "cuptiPmSamplingStop");
    Decode(s, true);
    s.running = false;
  }
  KPROF_PARAMS(CUpti_PmSampling_Disable_Params, di);
  di.pPmSamplingObject = s.obj;
  Ok(cuptiPmSamplingDisable(&di), "cuptiPmSamplingDisable");
  s.obj = nullptr;
  FreeHost(s.config.host);
  s.config.host = nullptr;
}

void SamplingLoop() {
  BlockSignalsInThisThread();
  SamplingState& st = Sampling();
  std::unordered_set<uint32_t> started;
  std::unique_lock<std::mutex> lock(st.mu);
  while (true) {
    st.cv.wait_for(lock, std::chrono::milliseconds(kDecodePeriodMs));
    std::vector<uint32_t> fresh;
    fresh.swap(st.devices_seen);
    const bool stop = st.stop;
    lock.unlock();
    for (uint32_t dev : fresh) {
      if (!started.insert(dev).second) continue;
      if (!InitProfiler()) break;
      st.samplers.emplace_back();
      if (!StartSampler(dev, st.samplers.back())) {
        StopSampler(st.samplers.back());
        st.samplers.pop_back();
      }
    }
    for (Sampler& s : st.samplers)
      if (s.running && !Decode(s, false)) StopSampler(s);
    if (stop) {
      // Not stopped through CUPTI: at exit, cuptiPmSamplingStop and what follows crashed the
      // process on the H100 (CUDA tears down first); the samples of the last period are lost.
      // StopSampler is for a sampler that fails while the program runs.
      lock.lock();
      st.stopped = true;
      st.cv.notify_all();
      return;
    }
    lock.lock();
  }
}

// ---------------------------------------------------------------------------------------------
// Replay: the range profiler, started in a launch's enter callback and stopped in its exit.

struct ReplayContext {
  CUpti_RangeProfiler_Object* obj = nullptr;
  HostConfig config;
  std::vector<uint8_t> data, blank;
  uint32_t device = 0;
  bool ok = false;
};

struct ReplayState {
  std::mutex mu;  // held from a selected launch's enter to its exit: replays run one at a time
  std::unordered_map<CUcontext, ReplayContext> contexts;
  std::unordered_map<std::string, uint64_t> profiled;  // launches replayed per kernel name
  std::unordered_map<std::string, bool> matches;       // regex / named list, per kernel name
  // The trace so far: GPU time per kernel name, and the current top N.
  std::mutex tally_mu;
  std::unordered_map<std::string, uint64_t> tally;
  std::unordered_set<std::string> top;
  // Replayed launches' times for their kernel records, by correlation id.
  std::mutex times_mu;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> times;  // (end, duration)
};
ReplayState& Replay() {
  static auto* s = new ReplayState();
  return *s;
}
thread_local bool t_replaying = false;
thread_local uint64_t t_enter_ns = 0;
thread_local CUcontext t_ctx = nullptr;

std::string Demangled(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : name;
  std::free(d);
  return out;
}

// Whether this launch of `name` is one to replay (caller holds Replay().mu).
bool Selected(ReplayState& rs, const std::string& name) {
  auto it = rs.profiled.find(name);
  if (it != rs.profiled.end() && it->second >= g_set.launches) return false;
  if (g_set.use_regex || !g_set.named.empty()) {
    auto m = rs.matches.find(name);
    if (m == rs.matches.end()) {
      const std::string shown = Demangled(name.c_str());
      bool yes = g_set.named.count(name) > 0 || g_set.named.count(shown) > 0;
      if (g_set.use_regex) yes = yes || std::regex_search(shown, g_set.regex);
      m = rs.matches.emplace(name, yes).first;
    }
    return m->second;
  }
  std::lock_guard<std::mutex> lock(rs.tally_mu);
  return rs.top.count(name) > 0;
}

ReplayContext* ContextFor(ReplayState& rs, CUcontext ctx) {
  auto [it, fresh] = rs.contexts.try_emplace(ctx);
  ReplayContext& c = it->second;
  if (!fresh) return c.ok ? &c : nullptr;
  if (!InitProfiler()) return nullptr;
  uint32_t device = 0;
  if (!Ok(cuptiGetDeviceId(ctx, &device), "cuptiGetDeviceId")) return nullptr;
  c.device = device;
  const std::string chip = ChipName(device);
  if (chip.empty()) return nullptr;
  KPROF_PARAMS(CUpti_Profiler_GetCounterAvailability_Params, ca);
  ca.ctx = ctx;
  if (!Ok(cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability"))
    return nullptr;
  std::vector<uint8_t> avail(ca.counterAvailabilityImageSize);
  ca.pCounterAvailabilityImage = avail.data();
  if (!Ok(cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability"))
    return nullptr;
  if (!Configure(CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, avail, ReplayMetrics(), false, c.config))
    return nullptr;
  KPROF_PARAMS(CUpti_RangeProfiler_Enable_Params, en);
  en.ctx = ctx;
  if (!Ok(cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable")) return nullptr;
  c.obj = en.pRangeProfilerObject;
  KPROF_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params, cs);
  cs.pRangeProfilerObject = c.obj;
  cs.pMetricNames = c.config.ptrs.data();
  cs.numMetrics = c.config.ptrs.size();
  cs.maxNumOfRanges = 1;
  cs.maxNumRangeTreeNodes = 1;
  if (!Ok(cuptiRangeProfilerGetCounterDataSize(&cs), "cuptiRangeProfilerGetCounterDataSize"))
    return nullptr;
  c.data.assign(cs.counterDataSize, 0);
  KPROF_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, ci);
  ci.pRangeProfilerObject = c.obj;
  ci.counterDataSize = c.data.size();
  ci.pCounterData = c.data.data();
  if (!Ok(cuptiRangeProfilerCounterDataImageInitialize(&ci),
          "cuptiRangeProfilerCounterDataImageInitialize"))
    return nullptr;
  c.blank = c.data;
  KPROF_PARAMS(CUpti_RangeProfiler_SetConfig_Params, sc);
  sc.pRangeProfilerObject = c.obj;
  sc.configSize = c.config.image.size();
  sc.pConfig = c.config.image.data();
  sc.counterDataImageSize = c.data.size();
  sc.pCounterDataImage = c.data.data();
  sc.range = CUPTI_AutoRange;
  sc.replayMode = CUPTI_KernelReplay;
  sc.maxRangesPerPass = 1;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  if (!Ok(cuptiRangeProfilerSetConfig(&sc), "cuptiRangeProfilerSetConfig")) return nullptr;
  c.ok = true;
  return &c;
}

bool IsLaunch(CUpti_CallbackId cbid) {
  return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
         cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
}

void OnLaunchEnter(const CUpti_CallbackData& cb) {
  if (cb.symbolName == nullptr || cb.context == nullptr) return;
  ReplayState& rs = Replay();
  const std::string name = cb.symbolName;
  const uint64_t enter_ns = Now();  // kprof's cost includes setting the profiler up
  rs.mu.lock();
  ReplayContext* c = Selected(rs, name) ? ContextFor(rs, cb.context) : nullptr;
  if (c == nullptr) {
    rs.mu.unlock();
    return;
  }
  KPROF_PARAMS(CUpti_RangeProfiler_Start_Params, st);
  st.pRangeProfilerObject = c->obj;
  if (!Ok(cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart")) {
    c->ok = false;  // this context replays no more
    rs.mu.unlock();
    return;
  }
  ++rs.profiled[name];
  t_replaying = true;
  t_ctx = cb.context;
  t_enter_ns = enter_ns;
  // rs.mu stays locked until this launch's exit callback, on this thread.
}

void OnLaunchExit(const CUpti_CallbackData& cb) {
  if (!t_replaying) return;
  t_replaying = false;
  ReplayState& rs = Replay();
  ReplayContext& c = rs.contexts[t_ctx];
  KPROF_PARAMS(CUpti_RangeProfiler_Stop_Params, sp);
  sp.pRangeProfilerObject = c.obj;
  bool ok = Ok(cuptiRangeProfilerStop(&sp), "cuptiRangeProfilerStop");
  KPROF_PARAMS(CUpti_RangeProfiler_DecodeData_Params, dd);
  dd.pRangeProfilerObject = c.obj;
  ok = ok && Ok(cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData");
  KPROF_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, gi);
  gi.pCounterDataImage = c.data.data();
  gi.counterDataImageSize = c.data.size();
  ok = ok && Ok(cuptiRangeProfilerGetCounterDataInfo(&gi), "cuptiRangeProfilerGetCounterDataInfo");
  const uint64_t exit_ns = Now();
  std::vector<double> values;
  if (ok && gi.numTotalRanges >= 1 && Evaluate(c.config, c.data, 0, values)) {
    if (sp.isAllPassSubmitted == 0) Problem("a kernel replay did not submit all its passes");
    uint64_t duration = 0;
    for (size_t m = 0; m < values.size(); ++m) {
      if (!std::isfinite(values[m])) continue;
      Record r;
      r.kind = static_cast<uint8_t>(RecordKind::KernelMetric);
      r.device = static_cast<uint16_t>(c.device);
      r.correlation = cb.correlationId;
      r.start_ns = r.end_ns = exit_ns;
      r.a = static_cast<uint32_t>(c.config.passes);
      SetMetricValue(r, values[m]);
      Emit(r, c.config.names[m]);
      if (c.config.names[m] == kKernelDurationMetric)
        duration = static_cast<uint64_t>(std::max(0.0, values[m]));
    }
    if (duration > 0) {
      std::lock_guard<std::mutex> lock(rs.times_mu);
      rs.times[cb.correlationId] = {exit_ns, duration};
    }
  } else if (ok) {
    Problem("a kernel replay measured no range");
  }
  Record over;
  over.kind = static_cast<uint8_t>(RecordKind::Overhead);
  over.device = kNoDevice;
  over.start_ns = t_enter_ns;
  over.end_ns = exit_ns;
  over.a = static_cast<uint32_t>(OverheadKind::CounterReplay);
  over.correlation = cb.correlationId;
  Emit(over, "Counter Replay");
  c.data = c.blank;  // in place: CUPTI writes into the image SetConfig was given
  rs.mu.unlock();
}

std::atomic<bool> g_started{false};

}  // namespace

bool ConfigureCounters() {
  const char* m = std::getenv("KPROF_METRICS");
  if (m == nullptr || *m == 0) return false;
  std::string list = m;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string word = list.substr(at, comma - at);
    if (word == "sampled") {
      g_set.sampled = true;
    } else if (word == "replay") {
      g_set.replay = true;
    } else if (!word.empty()) {
      Problem("unknown KPROF_METRICS entry '" + word + "' (sampled, replay)");
    }
    at = comma + 1;
  }
  const auto number = [](const char* env, uint64_t lo, uint64_t hi, uint64_t fallback) {
    const char* v = std::getenv(env);
    if (v == nullptr || *v == 0) return fallback;
    const unsigned long long n = std::strtoull(v, nullptr, 10);
    return n >= lo && n <= hi ? static_cast<uint64_t>(n) : fallback;
  };
  g_set.interval_ns = number("KPROF_METRICS_INTERVAL_US", 10, 1'000'000, 200) * 1000;
  g_set.top = number("KPROF_METRICS_TOP", 1, 1000, 10);
  g_set.launches = number("KPROF_METRICS_LAUNCHES", 1, 1000, 2);
  if (const char* re = std::getenv("KPROF_METRICS_KERNELS"); re != nullptr && *re != 0) {
    try {
      g_set.regex = std::regex(re, std::regex::ECMAScript | std::regex::optimize);
      g_set.use_regex = true;
    } catch (const std::regex_error&) {
      Problem(std::string("KPROF_METRICS_KERNELS is not a regular expression: ") + re);
    }
  }
  if (const char* path = std::getenv("KPROF_METRICS_NAMES"); path != nullptr && *path != 0) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line))
      if (!line.empty()) g_set.named.insert(line);
    if (g_set.named.empty()) Problem(std::string("no kernel names in ") + path);
  }
  return g_set.sampled || g_set.replay;
}

void StartCounters(CUpti_SubscriberHandle subscriber,
                   std::vector<std::pair<std::string, std::string>>& meta) {
  std::string mode = g_set.replay ? "replay" : "";
  if (g_set.sampled) mode += mode.empty() ? "sampled" : ",sampled";
  meta.emplace_back("counters", mode);
  if (g_set.sampled) meta.emplace_back("counters_interval_ns", std::to_string(g_set.interval_ns));
  if (g_set.replay) {
    meta.emplace_back("counters_launches_per_kernel", std::to_string(g_set.launches));
    if (!g_set.use_regex && g_set.named.empty())
      meta.emplace_back("counters_top", std::to_string(g_set.top));
  }
  if (subscriber == nullptr) {
    Problem("no CUPTI callback subscriber (another tool holds it): no counters");
    return;
  }
  bool ok = KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                            CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  if (g_set.replay) {
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz})
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id));
  }
  if (!ok) Problem("enabling the counters' callbacks failed");
  Agent& a = A();
  a.counters_top_from_trace = g_set.replay && !g_set.use_regex && g_set.named.empty();
  // The top N comes from the kernels written so far: flush often enough for it to be current
  // (unless KPROF_FLUSH_MS says otherwise).
  if (a.counters_top_from_trace && std::getenv("KPROF_FLUSH_MS") == nullptr)
    a.flush_period_ms = 100;
  if (g_set.sampled) Sampling().thread = std::thread(SamplingLoop);
  g_started = true;
}

bool OnCounterCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_started) return false;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      const auto* rd = static_cast<const CUpti_ResourceData*>(data);
      uint32_t device = 0;
      if (g_set.sampled && rd->context != nullptr &&
          cuptiGetDeviceId(rd->context, &device) == CUPTI_SUCCESS) {
        SamplingState& st = Sampling();
        std::lock_guard<std::mutex> lock(st.mu);
        st.devices_seen.push_back(device);
        st.cv.notify_all();
      }
      return false;  // the agent's own context handling runs too
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !IsLaunch(cbid) || !g_set.replay) return false;
    const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
    if (cb.callbackSite == CUPTI_API_ENTER) {
      OnLaunchEnter(cb);
    } else {
      OnLaunchExit(cb);
    }
  } catch (...) {
    Problem("an error in the counters' callback; counters stop");
    g_started = false;
  }
  return true;
}

void NoteKernelTimes(std::vector<std::pair<std::string, uint64_t>>& batch) {
  if (!g_set.replay || g_set.use_regex || !g_set.named.empty() || batch.empty()) return;
  ReplayState& rs = Replay();
  std::lock_guard<std::mutex> lock(rs.tally_mu);
  for (auto& [name, ns] : batch) rs.tally[name] += ns;
  std::vector<std::pair<uint64_t, const std::string*>> order;
  order.reserve(rs.tally.size());
  for (const auto& [name, ns] : rs.tally) order.emplace_back(ns, &name);
  const size_t n = std::min(g_set.top, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [](const auto& x, const auto& y) { return x.first > y.first; });
  rs.top.clear();
  for (size_t i = 0; i < n; ++i) rs.top.insert(*order[i].second);
}

bool ReplayedKernelTimes(uint32_t correlation, uint64_t* start_ns, uint64_t* end_ns) {
  if (!g_set.replay) return false;
  ReplayState& rs = Replay();
  std::lock_guard<std::mutex> lock(rs.times_mu);
  auto it = rs.times.find(correlation);
  if (it == rs.times.end()) return false;
  *end_ns = it->second.first;
  *start_ns = it->second.first - std::min(it->second.first, it->second.second);
  rs.times.erase(it);
  return true;
}

void StopCounters() {
  if (!g_started) return;
  if (g_set.sampled) {
    SamplingState& st = Sampling();
    std::unique_lock<std::mutex> lock(st.mu);
    st.stop = true;
    st.cv.notify_all();
    const bool done = st.cv.wait_for(lock, std::chrono::milliseconds(kExitFlushTimeoutMs),
                                     [&] { return st.stopped; });
    lock.unlock();
    if (st.thread.joinable()) {
      if (done) {
        st.thread.join();
      } else {
        st.thread.detach();
        Problem("PM sampling did not stop in time: the last samples are missing");
      }
    }
  }
  g_started = false;
  std::lock_guard<std::mutex> lock(g_problem_mu);
  Agent& a = A();
  std::lock_guard<std::mutex> side(a.side_mu);
  if (!g_problems.empty()) a.side_meta.emplace_back("counters_problem", g_problems);
  if (!g_unavailable.empty()) a.side_meta.emplace_back("counters_unavailable", g_unavailable);
}

}  // namespace kprof::agent
