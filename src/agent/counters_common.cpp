// The counters' problems, records and time, and the profiler host configuration: see
// counters_internal.h.
#include <cstdio>

#include "agent/counters_internal.h"

namespace kprof::agent::counters {

std::string ResultString(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return std::string(s != nullptr ? s : "unknown CUPTI error") + " (" +
         std::to_string(static_cast<int>(r)) + ")";
}

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
  a.side.push_back({r, std::move(name), {}, {}});
}

// Time the program's thread spent in kprof's counters (set-up, replay): kprof's, not the
// program's own.
void EmitOverhead(OverheadKind kind, const char* name, uint64_t start_ns, uint64_t end_ns,
                  uint32_t correlation) {
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
}  // namespace kprof::agent::counters
