// PM sampling: see counters_internal.h and docs/counters.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/counters_internal.h"
#include "kprof/agent_config.h"

namespace kprof::agent::counters {

// ---------------------------------------------------------------------------------------------
// PM sampling: one object per device, all driven by the sampling thread.

constexpr size_t kHardwareBufferBytes = size_t{64} << 20;
constexpr int kDecodePeriodMs = 50;

// The counter data image holds what a decode period brings, four times over: samples that do
// not fit wait for the next round, and on the H100 a decode that filled the image lost the
// samples of the next 15-17 ms (at 500 samples per image and a 100 us interval). Ten periods
// (5000 samples at 100 us) made it worse: on an H200 the hardware buffer overflowed in 5 of 10
// zoo workloads, where four periods lost 1-3% of the samples in holes and never overflowed.
size_t SamplesPerDecode(uint64_t interval_ns) {
  const uint64_t per_period = uint64_t{kDecodePeriodMs} * 1'000'000 / interval_ns;
  return static_cast<size_t>(std::clamp<uint64_t>(4 * per_period, 1000, 5000));
}

PmSampling& Sampling() {
  static auto* s = new PmSampling();  // leaked, as the agent's state (its thread may outlive it)
  return *s;
}

// KPROF_COUNTERS_DEBUG: how long each step of a set-up took.
void Step(const char* what, uint64_t& t) {
  if (!g_debug) return;
  const uint64_t now = Now();
  std::fprintf(stderr, "kprof agent: counters: %s: %.1f ms\n", what, (now - t) * 1e-6);
  t = now;
}

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
bool EnableSampler(uint32_t device, Sampler& s, bool* refused) {
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
// as the sampler runs (PmSampling::Add): the program's thread does not wait for it (94 ms
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

PmSampling::PmSampling()
    : thread_(std::chrono::milliseconds(kDecodePeriodMs), [this] { Round(); }) {}

void StopSamplingAtExit() { Sampling().Stop(true); }

void PmSampling::Add(std::unique_ptr<Sampler> sampler) {
  {
    std::lock_guard<std::mutex> guard(samplers_mu_);
    samplers_.push_back(std::move(sampler));
  }
  thread_.Wake();  // the image at once, and the first decode right after it
  if (!exit_handler_.exchange(true) && std::atexit(StopSamplingAtExit) != 0) exit_handler_ = false;
}

void PmSampling::Round() {
  std::lock_guard<std::mutex> guard(samplers_mu_);
  for (auto& sp : samplers_)
    if (sp->running && !Decode(*sp, false)) StopSampler(*sp);
}

void PmSampling::Stop(bool last) {
  switch (thread_.Stop(last, std::chrono::milliseconds(kExitFlushTimeoutMs))) {
    case PeriodicThread::Stopped::NotRunning:
      return;
    case PeriodicThread::Stopped::Asked:
      context_gone_ = true;
      return;
    case PeriodicThread::Stopped::TimedOut:
      Problem("PM sampling did not stop in time: the last samples are missing");
      return;
    case PeriodicThread::Stopped::Joined:
      break;
  }
  std::lock_guard<std::mutex> guard(samplers_mu_);
  if (!context_gone_)
    for (auto& sp : samplers_) StopSampler(*sp);
  for (auto& sp : samplers_)
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

}  // namespace kprof::agent::counters
