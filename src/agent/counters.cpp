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
#include <unistd.h>

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
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "agent/agent.h"
#include "agent/capture.h"
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
  uint64_t launches = 1;  // per kernel name
  bool use_regex = false;
  std::regex regex;
  std::unordered_set<std::string> named;  // from an earlier run (mangled or display names)
};
Settings g_set;
// KPROF_COUNTERS_DEBUG=1: each PM sampling decode is described on stderr (docs/counters.md).
bool g_debug = false;
// KPROF_REPLAY_KEEP_ENABLED=1: the range profiler stays enabled between replays (for testing).
bool g_keep_enabled = false;
// Knobs for measuring and testing PM sampling (docs/counters.md), read once with the settings:
// KPROF_COUNTERS_EVALUATE=0: decode but evaluate no sample (no samples are kept);
// KPROF_PM_PREPARE=0: no preparation thread (everything in the first context; g_prepare);
// KPROF_PM_AVAILABILITY=1: configure with the device's counter availability from the start;
// KPROF_PM_REFUSE_CHIP_CONFIG=1: the device refuses a configuration made from the chip's name,
// so that the retry with its availability runs on a device that accepts it.
bool g_evaluate = true;
bool g_availability = false;
bool g_refuse_chip_config = false;
uint64_t g_counters_started_ns = 0;  // when the agent started the counters (debug timings)

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

// Time the program's thread spent in kprof's counters (set-up, replay): kprof's, not the
// program's own.
void EmitOverhead(OverheadKind kind, const char* name, uint64_t start_ns, uint64_t end_ns,
                  uint32_t correlation = 0) {
  Record over;
  over.kind = static_cast<uint8_t>(RecordKind::Overhead);
  over.device = kNoDevice;
  over.start_ns = start_ns;
  over.end_ns = end_ns;
  over.a = static_cast<uint32_t>(kind);
  over.correlation = correlation;
  Emit(over, name);
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
  p.pCounterAvailabilityImage = avail.empty() ? nullptr : avail.data();
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
  // Each host object costs a set-up: the whole list first, one metric at a time only when the
  // chip refuses it.
  {
    CUpti_Profiler_Host_Object* h = NewHost(type, chip, avail);
    if (h == nullptr) return false;
    std::vector<std::string> all;
    std::vector<const char*> ptrs;
    for (const CounterMetric& m : wanted) all.emplace_back(m.name);
    for (const std::string& n : all) ptrs.push_back(n.c_str());
    size_t passes = 0;
    if (AddMetrics(h, ptrs) && ImageOf(h, out.image, &passes) && (!single_pass || passes == 1)) {
      out.host = h;
      out.names = std::move(all);
      for (const std::string& n : out.names) out.ptrs.push_back(n.c_str());
      out.passes = passes;
      return true;
    }
    FreeHost(h);
    out.image.clear();
  }
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
  std::vector<uint8_t> data, blank;  // the counter data image and a freshly initialised copy,
                                     // made on the sampling thread (MakeImage)
  uint64_t started_ns = 0;
  uint32_t next_index = 0;
  uint64_t last_end_ns = 0;  // of the last sample kept
  uint64_t lost_ns = 0;      // holes between samples: time not sampled
  uint64_t holes = 0, longest_hole_ns = 0, longest_hole_at_ns = 0;  // (at: its start)
  bool running = false;
};

constexpr size_t kHardwareBufferBytes = size_t{64} << 20;
constexpr int kDecodePeriodMs = 50;

// The counter data image holds what a decode period brings, four times over: samples that do
// not fit wait for the next round, and on the H100 a decode that filled the image lost the
// samples of the next 15-17 ms (at 500 samples per image and a 100 us interval).
size_t SamplesPerDecode(uint64_t interval_ns) {
  const uint64_t per_period = uint64_t{kDecodePeriodMs} * 1'000'000 / interval_ns;
  return static_cast<size_t>(std::clamp<uint64_t>(4 * per_period, 1000, 5000));
}

// Samplers are started on the program's thread, in the callback of a device's first context
// (the program waits for it, once per device, and cannot exit meanwhile: a set-up on a thread
// of its own was still inside CUPTI's host library when a short program exited, and crashed
// it); a thread of the agent's own decodes every kDecodePeriodMs; the last decode and the stop
// run in an exit handler registered once the first sampler runs, so before the exit handlers
// of CUPTI's host library and of the CUDA runtime (which ran before the agent's own and tore
// down what the stop needs).
struct SamplingState {
  std::mutex start_mu;  // starting samplers (context callbacks)
  std::unordered_set<uint32_t> devices_tried;
  bool exit_handler = false;
  std::mutex samplers_mu;  // held while decoding, adding or stopping samplers
  std::vector<std::unique_ptr<Sampler>> samplers;
  std::mutex mu;  // the thread's state
  std::condition_variable cv;
  std::thread thread;
  // The process the thread runs in (a forked child has none), read before `mu` is taken: a
  // child's copy of `mu` may be held by the thread it does not have.
  std::atomic<pid_t> thread_pid{0};
  bool stop = false, stopped = false;
  // A sampler was started: the thread wakes at once to make its counter data image (MakeImage,
  // 35-110 ms on the H100s) and decode what came meanwhile. Made by a first decode a period
  // after the start, the image held 1604 of its 2000 samples at 100 us on two H100s (a first
  // decode at +161 ms, its image made in 107 ms), and an image that fills loses the samples of
  // the next 15-17 ms.
  bool image_due = false;
  bool context_gone = false;  // a context was destroyed: no more CUPTI calls for sampling
  bool finished = false;      // stopped and the last samples decoded (or given up)
};
SamplingState& Sampling() {
  static auto* s = new SamplingState();  // leaked, as the agent's state
  return *s;
}

// KPROF_COUNTERS_DEBUG: how long each step of a set-up took.
void Step(const char* what, uint64_t& t) {
  if (!g_debug) return;
  const uint64_t now = Now();
  std::fprintf(stderr, "kprof agent: counters: %s: %.1f ms\n", what, (now - t) * 1e-6);
  t = now;
}

// What a device's sampling needs before it can be enabled: the chip, whether it supports PM
// sampling and the host configuration. Done by the preparation thread while the program makes
// its first context (see Preparation), else on the program's thread.
struct DevicePrep {
  bool ok = false;
  bool with_availability = false;  // configured with the device's counter availability
  HostConfig config;
};

// The configuration is made from the chip's name alone unless `availability` (or
// KPROF_PM_AVAILABILITY=1): the device's counter availability query took 0.18-0.21 s on the
// H100, and run beside the program's first context it delayed that context by as much. A
// configuration the device refuses is made again with it (RunSampler).
bool PrepareDevice(uint32_t device, DevicePrep& p, bool availability) {
  uint64_t t = Now();
  const std::string chip = ChipName(device);
  if (chip.empty()) return false;
  Step("chip name", t);
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
  Step("device supported", t);
  std::vector<uint8_t> avail;
  p.with_availability = availability || g_availability;
  if (p.with_availability) {
    KPROF_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params, ca);
    ca.deviceIndex = device;
    if (!Ok(cuptiPmSamplingGetCounterAvailability(&ca), "cuptiPmSamplingGetCounterAvailability"))
      return false;
    avail.resize(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = avail.data();
    if (!Ok(cuptiPmSamplingGetCounterAvailability(&ca), "cuptiPmSamplingGetCounterAvailability"))
      return false;
    Step("counter availability", t);
  }
  if (!Configure(CUPTI_PROFILER_TYPE_PM_SAMPLING, chip, avail, SampledMetrics(), true, p.config))
    return false;
  Step("host configuration", t);
  p.ok = true;
  return true;
}

// The part of a set-up that needs the device's context: on the program's thread, in the
// context's callback, so that sampling runs from the program's first kernel. With `refused`,
// a configuration the device refuses is not reported but said there.
bool EnableSampler(uint32_t device, Sampler& s, bool* refused = nullptr) {
  uint64_t t = Now();
  s.device = device;
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
  Step("enable", t);
  const CUptiResult configured = refused != nullptr && g_refuse_chip_config
                                     ? CUPTI_ERROR_INVALID_PARAMETER
                                     : cuptiPmSamplingSetConfig(&sc);
  if (configured != CUPTI_SUCCESS && refused != nullptr) {
    *refused = true;
    return false;
  }
  if (!Ok(configured, "cuptiPmSamplingSetConfig")) return false;
  Step("set config", t);
  s.started_ns = Now();
  KPROF_PARAMS(CUpti_PmSampling_Start_Params, st);
  st.pPmSamplingObject = s.obj;
  if (!Ok(cuptiPmSamplingStart(&st), "cuptiPmSamplingStart")) return false;
  Step("start", t);
  s.running = true;
  return true;
}

// The counter data image, made once, by the sampling thread's first decode, which comes as soon
// as the sampler runs (SamplingState::image_due): the program's thread does not wait for it (94 ms
// of a 0.38 s set-up on the H100 with five metrics), and the samples wait in the hardware buffer
// meanwhile.
bool MakeImage(Sampler& s) {
  if (!s.data.empty()) return true;
  uint64_t t = Now();
  KPROF_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, cs);
  cs.pPmSamplingObject = s.obj;
  cs.pMetricNames = s.config.ptrs.data();
  cs.numMetrics = s.config.ptrs.size();
  cs.maxSamples = SamplesPerDecode(g_set.interval_ns);
  if (!Ok(cuptiPmSamplingGetCounterDataSize(&cs), "cuptiPmSamplingGetCounterDataSize"))
    return false;
  std::vector<uint8_t> image(cs.counterDataSize, 0);
  KPROF_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, ci);
  ci.pPmSamplingObject = s.obj;
  ci.counterDataSize = image.size();
  ci.pCounterData = image.data();
  if (!Ok(cuptiPmSamplingCounterDataImageInitialize(&ci),
          "cuptiPmSamplingCounterDataImageInitialize"))
    return false;
  s.blank = image;
  s.data = std::move(image);
  Step("counter data image (sampling thread)", t);
  return true;
}

// Decodes what the hardware holds into records; returns false when decoding failed.
bool Decode(Sampler& s, bool until_empty) {
  if (!MakeImage(s)) return false;
  const uint64_t decode_start_ns = Now();
  uint64_t decode_ns = 0, evaluate_ns = 0;  // KPROF_COUNTERS_DEBUG's split
  if (g_debug)
    std::fprintf(stderr, "kprof agent: counters: decode device %u at %+.3f s begins\n", s.device,
                 (decode_start_ns - s.started_ns) * 1e-9);
  for (int round = 0; round < 1000; ++round) {
    KPROF_PARAMS(CUpti_PmSampling_DecodeData_Params, dd);
    dd.pPmSamplingObject = s.obj;
    dd.pCounterDataImage = s.data.data();
    dd.counterDataImageSize = s.data.size();
    const uint64_t decode_call_ns = Now();
    const CUptiResult decoded = cuptiPmSamplingDecodeData(&dd);
    decode_ns += Now() - decode_call_ns;
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
    size_t kept = 0, early = 0;
    uint64_t first_ns = 0, last_ns = 0;
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
      if (si.startTimestamp < s.started_ns || si.endTimestamp <= si.startTimestamp) {
        ++early;
        continue;
      }
      if (kept++ == 0) first_ns = si.startTimestamp;
      last_ns = si.endTimestamp;
      const uint64_t len = si.endTimestamp - si.startTimestamp;
      if (s.last_end_ns != 0 && si.startTimestamp > s.last_end_ns + len / 2) {
        const uint64_t hole = si.startTimestamp - s.last_end_ns;
        s.lost_ns += hole;
        ++s.holes;
        if (hole > s.longest_hole_ns) {
          s.longest_hole_ns = hole;
          s.longest_hole_at_ns = s.last_end_ns;
        }
        if (g_debug)
          std::fprintf(stderr, "kprof agent: counters: device %u: no samples %.3f..%.3f s\n",
                       s.device, (s.last_end_ns - s.started_ns) * 1e-9,
                       (si.startTimestamp - s.started_ns) * 1e-9);
      }
      s.last_end_ns = std::max(s.last_end_ns, si.endTimestamp);
      if (!g_evaluate) continue;
      const uint64_t evaluate_call_ns = Now();
      if (!Evaluate(s.config, s.data, i, values)) return false;
      evaluate_ns += Now() - evaluate_call_ns;
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
    if (g_debug)
      std::fprintf(stderr,
                   "kprof agent: counters: decode device %u at %+.3f s: stop reason %d, overflow "
                   "%d, %zu populated, %zu completed, %zu kept (%.3f..%.3f s), %zu before start, "
                   "%.1f ms (DecodeData %.1f ms, evaluation %.1f ms)\n",
                   s.device, (Now() - s.started_ns) * 1e-9, static_cast<int>(dd.decodeStopReason),
                   static_cast<int>(dd.overflow), gi.numPopulatedSamples, gi.numCompletedSamples,
                   kept, kept ? (first_ns - s.started_ns) * 1e-9 : 0.0,
                   kept ? (last_ns - s.started_ns) * 1e-9 : 0.0, early,
                   (Now() - decode_start_ns) * 1e-6, decode_ns * 1e-6, evaluate_ns * 1e-6);
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
  if (s.obj != nullptr) {
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
  }
  FreeHost(s.config.host);
  s.config.host = nullptr;
}

void SamplingLoop() {
  BlockSignalsInThisThread();
  SamplingState& st = Sampling();
  std::unique_lock<std::mutex> lock(st.mu);
  while (true) {
    st.cv.wait_for(lock, std::chrono::milliseconds(kDecodePeriodMs),
                   [&] { return st.stop || st.image_due; });
    if (st.stop) break;
    st.image_due = false;
    lock.unlock();
    {
      std::lock_guard<std::mutex> guard(st.samplers_mu);
      for (auto& sp : st.samplers)
        if (sp->running && !Decode(*sp, false)) StopSampler(*sp);
    }
    lock.lock();
  }
  st.stopped = true;
  st.cv.notify_all();
}

// Stops the decoding thread; with `last`, then decodes what is left and stops the samplers
// (CUDA must still be up). Without, returns at once: it is called in a context's destruction,
// where a decode waited on the driver until the agent's exit timeout.
void StopSampling(bool last) {
  SamplingState& st = Sampling();
  if (st.thread_pid != getpid()) return;
  bool done = false;
  {
    std::unique_lock<std::mutex> lock(st.mu);
    if (st.finished || !st.thread.joinable()) return;
    st.stop = true;
    st.cv.notify_all();
    if (!last) {
      st.context_gone = true;
      return;
    }
    done = st.cv.wait_for(lock, std::chrono::milliseconds(kExitFlushTimeoutMs),
                          [&] { return st.stopped; });
    st.finished = true;
  }
  if (!done) {
    st.thread.detach();
    Problem("PM sampling did not stop in time: the last samples are missing");
    return;
  }
  st.thread.join();
  std::lock_guard<std::mutex> guard(st.samplers_mu);
  if (!st.context_gone)
    for (auto& sp : st.samplers) StopSampler(*sp);
  for (auto& sp : st.samplers)
    if (sp->lost_ns > 0) {
      char what[240];
      std::snprintf(what, sizeof what,
                    "PM sampling on device %u lost %.2f ms between samples in %llu hole%s, the "
                    "longest %.2f ms at +%.3f s (decoding fell behind; a longer "
                    "--metrics-interval keeps up)",
                    sp->device, sp->lost_ns * 1e-6, static_cast<unsigned long long>(sp->holes),
                    sp->holes == 1 ? "" : "s", sp->longest_hole_ns * 1e-6,
                    (sp->longest_hole_at_ns - sp->started_ns) * 1e-9);
      Problem(what);
    }
}

void StopSamplingAtExit() { StopSampling(true); }

// The preparation thread (`--metrics sampled`): when the program calls into the driver to make
// a device's context (cuDevicePrimaryCtxRetain, cuCtxCreate: the callbacks' API entry), that
// device is queued, and a thread of the agent's own prepares it (cuptiProfilerInitialize, which
// loads CUPTI's profiler libraries, and PrepareDevice: about 90 ms on the H100) while the driver
// makes the context. In the context's callback the program's thread takes the preparation
// (it was ready in every run on the H100), and enables and starts sampling itself (SetConfig,
// 0.13-0.15 s).
//
// Why then and not from the agent's start: the program's thread is inside the driver while the
// preparation runs, so the program cannot end under it. Started with the agent (inside cuInit),
// a program that exited 0-60 ms later crashed inside CUPTI (SIGSEGV, or std::out_of_range from
// CUPTI's host library) while the preparation ran, whatever exit handler waited for it: the
// objects CUPTI makes as it goes register their destructors after any handler of ours.
// PrepExitGuard (an exit handler, registered again after each step) still stops the preparation
// between steps and waits for the step under way, for a program's other thread that exits.
struct Preparation {
  std::mutex mu;
  std::condition_variable cv;
  // The process the thread runs in, read before `mu` is taken: a forked child has no thread,
  // and its copy of `mu` may be held by the thread it does not have.
  std::atomic<pid_t> pid{0};
  bool running = false;                    // the thread has not finished
  bool abort = false;                      // the process is exiting: stop between steps
  std::vector<uint32_t> queue;             // devices to prepare, in the order asked
  std::set<uint32_t> asked;                // every device ever queued (or started without)
  std::map<uint32_t, DevicePrep> devices;  // prepared (ok or not), not yet taken
};
Preparation& Prep() {
  static auto* p = new Preparation();  // leaked, as the agent's state
  return *p;
}

void PrepExitGuard() {
  Preparation& p = Prep();
  if (p.pid != getpid()) return;
  std::unique_lock<std::mutex> lock(p.mu);
  if (!p.running || p.abort) return;  // done, or an earlier copy of the guard waited already
  p.abort = true;
  p.cv.wait_for(lock, std::chrono::milliseconds(kExitFlushTimeoutMs), [&] { return !p.running; });
}

void PrepLoop() {
  BlockSignalsInThisThread();
  Preparation& p = Prep();
  // After each step: the guard again (after what the step registered), and whether to go on.
  const auto step_done = [&] {
    std::atexit(PrepExitGuard);
    std::lock_guard<std::mutex> lock(p.mu);
    return !p.abort;
  };
  try {
    while (true) {
      uint32_t d = 0;
      {
        std::lock_guard<std::mutex> lock(p.mu);
        if (p.queue.empty() || p.abort) break;
        d = p.queue.front();
        p.queue.erase(p.queue.begin());
      }
      uint64_t t = Now();
      DevicePrep prepared;
      if (InitProfiler()) {
        Step("cuptiProfilerInitialize (preparation thread)", t);
        if (step_done()) PrepareDevice(d, prepared, false);
      }
      step_done();
      std::lock_guard<std::mutex> lock(p.mu);
      p.devices.emplace(d, std::move(prepared));
      p.cv.notify_all();
    }
  } catch (...) {  // no exception leaves an agent's thread: the devices left are prepared in
                   // their contexts' callbacks
    Problem("an error in PM sampling's preparation");
  }
  std::lock_guard<std::mutex> lock(p.mu);
  p.queue.clear();
  p.running = false;
  p.cv.notify_all();
}

// A context-creating call's entry for `device`: queues its preparation (once per device and
// process), starting the thread if it is not running.
void AskPreparation(int device) {
  Preparation& p = Prep();
  const pid_t self = getpid();
  pid_t none = 0;
  if (device < 0) return;
  if (p.pid != self && !p.pid.compare_exchange_strong(none, self)) return;  // a forked child
  std::lock_guard<std::mutex> lock(p.mu);
  int count = 0;  // a call that will fail for a device that does not exist: nothing to prepare
  if (p.abort || p.asked.count(static_cast<uint32_t>(device)) != 0 ||
      cuDeviceGetCount(&count) != CUDA_SUCCESS || device >= count)
    return;
  p.asked.insert(static_cast<uint32_t>(device));
  p.queue.push_back(static_cast<uint32_t>(device));
  if (p.running) return;
  if (std::atexit(PrepExitGuard) != 0) {
    p.queue.clear();  // no guard, no thread: the context's callback prepares it
    return;
  }
  p.running = true;
  try {
    std::thread(PrepLoop).detach();  // it ends by itself; PrepExitGuard waits for it at exit
  } catch (...) {
    p.running = false;
    p.queue.clear();
  }
}

// How long a device's first context waits for its preparation (about 90 ms, ready before the
// context in every run on the H100): bounded, in case the preparation's CUPTI calls wait for
// the driver while the program's thread is inside the context's callback. Past it the device
// is not sampled, and the report says why.
constexpr int kPrepWaitMs = 1000;

enum class Taken : uint8_t {
  Here,      // `out` holds the device's preparation (ok or not): start the sampler here
  TimedOut,  // not ready in time: no sampling on this device
  None,      // no preparation was asked for it here (a forked child, a context made
             // otherwise): prepare it here
};

Taken TakePrepared(uint32_t device, DevicePrep& out) {
  Preparation& p = Prep();
  if (p.pid != getpid()) return Taken::None;
  std::unique_lock<std::mutex> lock(p.mu);
  const bool asked = !p.asked.insert(device).second;
  // Asked here, so the thread has it queued or under way, or it finished.
  const auto settled = [&] { return p.devices.count(device) != 0 || !p.running; };
  if (!asked) return Taken::None;
  if (!p.cv.wait_for(lock, std::chrono::milliseconds(kPrepWaitMs), settled)) return Taken::TimedOut;
  auto it = p.devices.find(device);
  if (it == p.devices.end()) return Taken::None;
  out = std::move(it->second);
  p.devices.erase(it);
  return Taken::Here;
}

// Enables and starts `device`'s sampler from its preparation and hands it to the sampling
// thread, on the program's thread in the device's first context. `t0`: when the program's
// thread began to wait for kprof there (an Overhead record).
void RunSampler(uint32_t device, DevicePrep& prepared, uint64_t t0) {
  SamplingState& st = Sampling();
  {
    std::lock_guard<std::mutex> state(st.mu);
    if (st.stop) {
      FreeHost(prepared.config.host);
      return;
    }
  }
  auto sp = std::make_unique<Sampler>();
  sp->config = std::move(prepared.config);
  bool refused = false;
  bool ok =
      prepared.ok && EnableSampler(device, *sp, prepared.with_availability ? nullptr : &refused);
  if (refused) {
    // Made from the chip's name, refused by the device (its counters differ from its chip's):
    // again with its counter availability, which leaves out the metrics it cannot give.
    if (g_debug)
      std::fprintf(stderr,
                   "kprof agent: counters: device %u refused the configuration made from its "
                   "chip's name; again with its counter availability\n",
                   device);
    StopSampler(*sp);
    sp = std::make_unique<Sampler>();
    DevicePrep again;
    ok = PrepareDevice(device, again, true);
    sp->config = std::move(again.config);
    ok = ok && EnableSampler(device, *sp);
  }
  if (!ok) StopSampler(*sp);
  const uint64_t end = Now();
  EmitOverhead(OverheadKind::CounterSetup, "Counter Setup", t0, end);
  if (g_debug)
    std::fprintf(stderr,
                 "kprof agent: counters: PM sampling set up on device %u; the program's thread "
                 "waited %.1f ms%s\n",
                 device, (end - t0) * 1e-6, ok ? "" : " (failed)");
  if (!ok) return;
  {
    std::lock_guard<std::mutex> guard(st.samplers_mu);
    st.samplers.push_back(std::move(sp));
  }
  std::lock_guard<std::mutex> state(st.mu);
  st.image_due = true;  // the image at once, and the first decode right after it
  st.cv.notify_all();
  if (!st.thread.joinable()) {
    st.thread_pid = getpid();
    st.thread = std::thread(SamplingLoop);
  }
  if (!st.exit_handler) st.exit_handler = std::atexit(StopSamplingAtExit) == 0;
}

// A device's first context (on the program's thread, which waits: see SamplingState): takes its
// preparation (Preparation) and starts its sampler.
void StartSampling(uint32_t device) {
  SamplingState& st = Sampling();
  std::lock_guard<std::mutex> lock(st.start_mu);
  if (!st.devices_tried.insert(device).second) return;
  {
    std::lock_guard<std::mutex> state(st.mu);
    if (st.stop) return;
  }
  const uint64_t t0 = Now();
  if (g_debug)
    std::fprintf(stderr,
                 "kprof agent: counters: device %u's first context %.1f ms after the agent "
                 "started\n",
                 device, (t0 - g_counters_started_ns) * 1e-6);
  DevicePrep prepared;
  uint64_t t = t0;
  switch (TakePrepared(device, prepared)) {
    case Taken::Here:
      Step("waiting for the preparation thread", t);
      break;
    case Taken::TimedOut:
      Step("waiting for the preparation thread, in vain", t);
      Problem("PM sampling on device " + std::to_string(device) + ": its preparation took over " +
              std::to_string(kPrepWaitMs) + " ms; the device is not sampled");
      EmitOverhead(OverheadKind::CounterSetup, "Counter Setup", t0, Now());
      return;
    case Taken::None:
      if (!InitProfiler()) return;
      Step("cuptiProfilerInitialize", t);
      PrepareDevice(device, prepared, false);
      break;
  }
  RunSampler(device, prepared, t0);
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

// Locks: `mu` guards the selection and is never held across a CUPTI call; `replay_mu` is held
// from a replayed launch's enter callback to its exit and only ever tried (a launch on another
// thread meanwhile runs unreplayed: a thread that waited inside its launch callback could hold
// what the replay needs). The range profilers are disabled in an exit handler registered once
// the first is set up, so before the CUDA runtime tears the contexts down.
struct ReplayState {
  std::mutex mu;
  bool closed = false;  // the exit handler ran: no more replays
  bool exit_handler = false;
  std::timed_mutex replay_mu;
  std::unordered_map<CUcontext, ReplayContext> contexts;  // under replay_mu
  std::unordered_map<std::string, uint64_t> profiled;     // launches replayed per kernel name
  std::unordered_map<std::string, bool> matches;          // regex / named list, per kernel name
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

ReplayContext* SetUpReplay(ReplayContext& c, CUcontext ctx);
ReplayContext* EnableReplay(ReplayContext& c, CUcontext ctx);

ReplayContext* ContextFor(ReplayState& rs, CUcontext ctx) {
  auto [it, fresh] = rs.contexts.try_emplace(ctx);
  ReplayContext& c = it->second;
  if (!fresh) {
    if (!c.ok) return nullptr;
    if (c.obj != nullptr) return &c;
    c.ok = false;
    return EnableReplay(c, ctx);  // disabled after its last replay
  }
  const uint64_t t0 = Now();
  ReplayContext* out = SetUpReplay(c, ctx);
  if (g_debug)
    std::fprintf(stderr, "kprof agent: counters: replay set up in %.1f ms%s\n", (Now() - t0) * 1e-6,
                 out != nullptr ? "" : " (failed)");
  return out;
}

ReplayContext* SetUpReplay(ReplayContext& c, CUcontext ctx) {
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
  return EnableReplay(c, ctx);
}

// The target half of a set-up: the range profiler enabled on the context and configured.
ReplayContext* EnableReplay(ReplayContext& c, CUcontext ctx) {
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

void DisableReplay(ReplayContext& c) {
  if (c.obj == nullptr) return;
  KPROF_PARAMS(CUpti_RangeProfiler_Disable_Params, di);
  di.pRangeProfilerObject = c.obj;
  Ok(cuptiRangeProfilerDisable(&di), "cuptiRangeProfilerDisable");
  c.obj = nullptr;
}

void StopReplayAtExit() {
  ReplayState& rs = Replay();
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    rs.closed = true;
  }
  // A replay still running on another thread ends within its launch.
  if (!rs.replay_mu.try_lock_for(std::chrono::milliseconds(kExitFlushTimeoutMs))) return;
  for (auto& [ctx, c] : rs.contexts) {
    DisableReplay(c);
    FreeHost(c.config.host);
    c.config.host = nullptr;
    c.ok = false;
  }
  rs.replay_mu.unlock();
}

void OnLaunchEnter(const CUpti_CallbackData& cb) {
  if (cb.symbolName == nullptr || cb.context == nullptr) return;
  if (OutsideWindow()) return;  // --capture: replays only inside the windows
  ReplayState& rs = Replay();
  const std::string name = cb.symbolName;
  const uint64_t enter_ns = Now();  // kprof's cost includes setting the profiler up
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    if (rs.closed || !Selected(rs, name)) return;
  }
  if (!rs.replay_mu.try_lock()) return;  // another thread is replaying
  bool still = false;                    // (checked again: it may have been replayed meanwhile)
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    still = !rs.closed && Selected(rs, name);
  }
  ReplayContext* c = still ? ContextFor(rs, cb.context) : nullptr;  // under replay_mu
  if (c == nullptr) {
    rs.replay_mu.unlock();
    return;
  }
  KPROF_PARAMS(CUpti_RangeProfiler_Start_Params, st);
  st.pRangeProfilerObject = c->obj;
  if (!Ok(cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart")) {
    c->ok = false;  // this context replays no more
    rs.replay_mu.unlock();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(rs.mu);
    ++rs.profiled[name];
    if (!rs.exit_handler) rs.exit_handler = std::atexit(StopReplayAtExit) == 0;
  }
  {
    // Pending until the exit callback: a (forced) flush can hand the kernel's record to the
    // writer before then, which then keeps it back.
    std::lock_guard<std::mutex> lock(rs.times_mu);
    rs.times[cb.correlationId] = {0, 0};
  }
  t_replaying = true;
  t_ctx = cb.context;
  t_enter_ns = enter_ns;
  // replay_mu stays locked until this launch's exit callback, on this thread.
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
  if (g_debug)
    std::fprintf(stderr, "kprof agent: counters: replay of %s: %.1f ms\n",
                 cb.symbolName != nullptr ? cb.symbolName : "?", (exit_ns - t_enter_ns) * 1e-6);
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
    std::lock_guard<std::mutex> lock(rs.times_mu);
    if (duration > 0) {
      rs.times[cb.correlationId] = {exit_ns, duration};
    } else {
      rs.times.erase(cb.correlationId);
    }
  } else {
    if (ok) Problem("a kernel replay measured no range");
    std::lock_guard<std::mutex> lock(rs.times_mu);
    rs.times.erase(cb.correlationId);
  }
  EmitOverhead(OverheadKind::CounterReplay, "Counter Replay", t_enter_ns, exit_ns,
               cb.correlationId);
  c.data = c.blank;  // in place: CUPTI writes into the image SetConfig was given
  if (!g_keep_enabled) {
    // Not left enabled between replays: on the H100 a program hung in a later launch within
    // seconds of the last replay while the profiler stayed enabled (CUPTI 13.0).
    DisableReplay(c);
  }
  rs.replay_mu.unlock();
}

std::atomic<bool> g_started{false};
bool g_prepare = false;  // PM sampling's preparation thread (Preparation)

// The driver calls that make a device's context: their entry queues the device's preparation.
constexpr CUpti_CallbackId kContextCreatingCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4};

int ContextCallDevice(CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
  CUdevice dev = 0;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain:
      dev = static_cast<const cuDevicePrimaryCtxRetain_params*>(cb.functionParams)->dev;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2:
      dev = static_cast<const cuCtxCreate_v2_params*>(cb.functionParams)->dev;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3:
      dev = static_cast<const cuCtxCreate_v3_params*>(cb.functionParams)->dev;
      break;
    default:
      dev = static_cast<const cuCtxCreate_v4_params*>(cb.functionParams)->dev;
      break;
  }
  return static_cast<int>(dev);
}

}  // namespace

bool ConfigureCounters(const AgentConfig& cfg, const std::vector<ConfigProblem>& problems) {
  bool asked = cfg.replay || cfg.sampled;
  for (const ConfigProblem& p : problems) {
    if (p.area != "metrics") continue;
    Problem(p.message);
    asked = true;
  }
  if (!asked) return false;
  g_set.sampled = cfg.sampled;
  g_set.replay = cfg.replay;
  const DiagnosticKnobs& k = Knobs();
  g_debug = k.counters_debug;
  g_keep_enabled = k.replay_keep_enabled;
  g_evaluate = k.counters_evaluate;
  g_prepare = g_set.sampled && k.pm_prepare;
  g_availability = k.pm_availability;
  g_refuse_chip_config = k.pm_refuse_chip_config;
  g_set.interval_ns = cfg.metrics_interval_us * 1000;
  g_set.top = cfg.metrics_top;
  g_set.launches = cfg.metrics_launches;
  if (!cfg.metrics_kernels.empty()) {
    try {
      g_set.regex = std::regex(cfg.metrics_kernels, std::regex::ECMAScript | std::regex::optimize);
      g_set.use_regex = true;
    } catch (const std::regex_error&) {
      Problem("KPROF_METRICS_KERNELS is not a regular expression: " + cfg.metrics_kernels);
    }
  }
  if (!cfg.metrics_names.empty()) {
    std::ifstream f(cfg.metrics_names);
    std::string line;
    while (std::getline(f, line))
      if (!line.empty()) g_set.named.insert(line);
    if (g_set.named.empty()) Problem("no kernel names in " + cfg.metrics_names);
  }
  return g_set.sampled || g_set.replay;
}

void StartCounters(CUpti_SubscriberHandle subscriber,
                   std::vector<std::pair<std::string, std::string>>& meta) {
  g_counters_started_ns = Now();
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
                                            CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                        "watch CUDA contexts being made (no GPU will be sampled)");
  if (g_prepare)
    for (CUpti_CallbackId id : kContextCreatingCalls)
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                        "watch context creation (sampling's set-up will start later)");
  if (g_set.replay) {
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz})
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                        "watch kernel launches (no kernel will be replayed)");
  }
  if (!ok) Problem("enabling the counters' callbacks failed");
  Agent& a = A();
  a.counters_top_from_trace = g_set.replay && !g_set.use_regex && g_set.named.empty();
  // The top N comes from the kernels written so far: flush often enough for it to be current
  // (unless KPROF_FLUSH_MS says otherwise).
  if (a.counters_top_from_trace && Knobs().flush_ms == 0) a.flush_period_ms = 100;
  g_started = true;
}

bool OnCounterCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_started) return false;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      const auto* rd = static_cast<const CUpti_ResourceData*>(data);
      uint32_t device = 0;
      if (g_set.sampled && rd->context != nullptr &&
          cuptiGetDeviceId(rd->context, &device) == CUPTI_SUCCESS)
        StartSampling(device);
      return false;  // the agent's own context handling runs too
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && g_prepare &&
        std::find(std::begin(kContextCreatingCalls), std::end(kContextCreatingCalls), cbid) !=
            std::end(kContextCreatingCalls)) {
      const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
      if (cb.callbackSite == CUPTI_API_ENTER) AskPreparation(ContextCallDevice(cbid, cb));
      return false;
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

ReplayTimes ReplayedKernelTimes(uint32_t correlation, uint64_t* start_ns, uint64_t* end_ns) {
  if (!g_set.replay) return ReplayTimes::Unknown;
  ReplayState& rs = Replay();
  std::lock_guard<std::mutex> lock(rs.times_mu);
  auto it = rs.times.find(correlation);
  if (it == rs.times.end()) return ReplayTimes::Unknown;
  if (it->second.first == 0) return ReplayTimes::Pending;
  *end_ns = it->second.first;
  *start_ns = it->second.first - std::min(it->second.first, it->second.second);
  rs.times.erase(it);
  return ReplayTimes::Known;
}

void StopCounters(bool at_exit) {
  if (!g_set.sampled && !g_set.replay) return;
  if (g_set.sampled) StopSampling(at_exit);
  g_started = false;  // replay ends with the first context to go
  static std::atomic<bool> meta_written{false};
  if (!at_exit || meta_written.exchange(true)) return;
  std::lock_guard<std::mutex> lock(g_problem_mu);
  Agent& a = A();
  std::lock_guard<std::mutex> side(a.side_mu);
  if (!g_problems.empty()) a.side_meta.emplace_back("counters_problem", g_problems);
  if (!g_unavailable.empty()) a.side_meta.emplace_back("counters_unavailable", g_unavailable);
}

}  // namespace kprof::agent
