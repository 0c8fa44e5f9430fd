// Internal to the agent's hardware counters (counters.h): what their parts share. The parts:
// counters.cpp, the front (the configuration, the callbacks, the end); counters_common.cpp,
// problems, records and the profiler host configuration (the counters' metrics as CUPTI's
// config images, and their evaluation); counters_sampling.cpp, PM sampling (a Sampler per
// device, decoded on the sampling thread); counters_prep.cpp, sampling's preparation thread
// and its start in a context's callback; counters_replay.cpp, the range profiler's kernel
// replay from the launch callbacks.
//
// Threads and locks (each part says more where its state is):
// - the settings and knobs below are written once by ConfigureCounters, before any callback,
//   and only read after;
// - problems and unavailable metrics: g_problem_mu;
// - PM sampling: PmSampling (below) owns the samplers and the thread that decodes them; the
//   program's thread starts one per device in a context's callback, the exit handler stops
//   them;
// - the preparation thread: Preparation::mu (counters_prep.cpp);
// - replay: ReplayState::mu guards the selection and is never held across a CUPTI call;
//   ReplayState::replay_mu is held from a replayed launch's enter callback to its exit and only
//   ever tried (counters_replay.cpp).
#pragma once

#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/agent.h"
#include "agent/periodic_thread.h"
#include "kprof/metrics.h"

namespace kprof::agent::counters {

#define KPROF_PARAMS(Type, var) \
  Type var{};                   \
  var.structSize = Type##_STRUCT_SIZE

// What the user asked for (set once, before any callback).
struct Settings {
  bool sampled = false, replay = false;
  uint64_t interval_ns = 100'000;
  size_t top = 10;
  uint64_t launches = 1;  // per kernel name
  bool use_regex = false;
  std::regex regex;
  std::unordered_set<std::string> named;  // from an earlier run (mangled or display names)
};
extern Settings g_set;
// KPROF_COUNTERS_DEBUG: each PM sampling decode is described on stderr (docs/counters.md).
extern bool g_debug;
// KPROF_REPLAY_KEEP_ENABLED: the range profiler stays enabled between replays (for testing).
extern bool g_keep_enabled;
// Knobs for measuring and testing PM sampling (kprof/agent_config.h, DiagnosticKnobs):
// evaluate (decode but evaluate no sample when off), availability (configure with the device's
// counter availability from the start), refuse_chip_config (the device refuses a configuration
// made from the chip's name, so that the retry with its availability runs on a device that
// accepts it).
extern bool g_evaluate;
extern bool g_availability;
extern bool g_refuse_chip_config;
extern uint64_t g_counters_started_ns;  // when the agent started the counters (debug timings)
// Problems, said once each, and metrics the chip does not offer: kept for the meta written at
// the end.
extern std::mutex g_problem_mu;
extern std::string g_problems;
extern std::string g_unavailable;

// ---- counters_common.cpp: problems, records, time.
std::string ResultString(CUptiResult r);
void Problem(const std::string& what);
bool Ok(CUptiResult r, const char* what);
void Unavailable(const std::string& name);
uint64_t Now();
/// Hands records to the writer (the graph callbacks' side channel), with their metric names.
void Emit(Record r, std::string name);
/// Time the program's thread spent in kprof's counters (set-up, replay): kprof's, not the
/// program's own.
void EmitOverhead(OverheadKind kind, const char* name, uint64_t start_ns, uint64_t end_ns,
                  uint32_t correlation = 0);

// ---- counters_common.cpp: the profiler host configuration.
// A host object with `metrics` configured: the config image, the metrics kept (those the chip
// knows; each rejected one is said once) and the passes they take.
struct HostConfig {
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> image;
  std::vector<std::string> names;
  std::vector<const char*> ptrs;
  size_t passes = 0;
};
/// cuptiProfilerInitialize once per process (it is not reference-counted).
bool InitProfiler();
std::string ChipName(uint32_t device);
void FreeHost(CUpti_Profiler_Host_Object* h);
bool Configure(CUpti_ProfilerType type, const std::string& chip, const std::vector<uint8_t>& avail,
               const std::vector<CounterMetric>& wanted, bool single_pass, HostConfig& out);
bool Evaluate(HostConfig& c, std::vector<uint8_t>& data, size_t index, std::vector<double>& values);

// ---- counters_sampling.cpp: PM sampling, one Sampler per device.
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

// PM sampling: the samplers and the thread that decodes them.
//
// Samplers are started on the program's thread, in the callback of a device's first context
// (the program waits for it, once per device, and cannot exit meanwhile: a set-up on a thread
// of its own was still inside CUPTI's host library when a short program exited, and crashed
// it); the decoding thread (a PeriodicThread) decodes every kDecodePeriodMs; the last decode
// and the stop run in an exit handler registered once the first sampler runs, so before the
// exit handlers of CUPTI's host library and of the CUDA runtime (which ran before the agent's
// own and tore down what the stop needs).
//
// Thread contract: Add runs on the program's threads (context callbacks, serialised by
// `start_mu`); decoding runs on the decoding thread; Stop(false) runs in a context's
// destruction, Stop(true) in the exit handler. `samplers_mu_` is held while a sampler is
// decoded, added or stopped, and never while waiting for the thread.
class PmSampling {
 public:
  PmSampling();
  // Starting samplers (StartSampling, counters_prep.cpp): held for a whole start, so a device
  // is set up once.
  std::mutex start_mu;
  std::unordered_set<uint32_t> devices_tried;  // under start_mu

  /// Hands a running sampler to the decoding thread, which makes its counter data image at
  /// once (MakeImage, 35-110 ms on the H100s) and decodes what came meanwhile. Made by a first
  /// decode a period after the start, the image held 1604 of its 2000 samples at 100 us on two
  /// H100s (a first decode at +161 ms, its image made in 107 ms), and an image that fills loses
  /// the samples of the next 15-17 ms.
  void Add(std::unique_ptr<Sampler> sampler);
  /// Stop was asked: no sampler is to be started.
  bool Stopping() { return thread_.Stopping(); }
  /// Stops the decoding thread; with `last`, then decodes what is left and stops the samplers
  /// (CUDA must still be up). Without, returns at once: it is called in a context's
  /// destruction, where a decode waited on the driver until the agent's exit timeout, and no
  /// CUPTI call for sampling is made after it.
  void Stop(bool last);

 private:
  void Round();  // on the decoding thread

  std::mutex samplers_mu_;
  std::vector<std::unique_ptr<Sampler>> samplers_;  // under samplers_mu_
  std::atomic<bool> context_gone_{false};           // Stop(false) ran
  std::atomic<bool> exit_handler_{false};
  PeriodicThread thread_;
};

// What a device's sampling needs before it can be enabled: the chip, whether it supports PM
// sampling and the host configuration. Done by the preparation thread while the program makes
// its first context (see Preparation), else on the program's thread.
struct DevicePrep {
  bool ok = false;
  bool with_availability = false;  // configured with the device's counter availability
  HostConfig config;
};
PmSampling& Sampling();
/// A debug timing step (KPROF_COUNTERS_DEBUG).
void Step(const char* what, uint64_t& t);
bool PrepareDevice(uint32_t device, DevicePrep& p, bool availability);
bool EnableSampler(uint32_t device, Sampler& s, bool* refused = nullptr);
void StopSampler(Sampler& s);

// ---- counters_prep.cpp: the preparation thread, and sampling's start in a context's callback.
void AskPreparation(int device);
void RunSampler(uint32_t device, DevicePrep& prepared, uint64_t t0);
void StartSampling(uint32_t device);

// ---- counters_replay.cpp: the range profiler, from the launch callbacks.
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
  // Every kernel name launched (inside the windows) and what became of its launches: the
  // report's reasons for a top kernel left unmeasured (meta counters_replay_account).
  struct Seen {
    uint64_t launches = 0;  // launch calls seen
    uint64_t selected = 0;  // of which chosen for a replay
    uint64_t busy = 0;      // chosen, but another thread was replaying
    uint64_t failed = 0;    // chosen, and the replay failed
    uint64_t captured = 0;  // chosen, but captured into a CUDA graph (nothing to replay)
  };
  std::unordered_map<std::string, Seen> seen;
  // The trace so far: GPU time per kernel name, and the current top N.
  std::mutex tally_mu;
  std::unordered_map<std::string, uint64_t> tally;
  std::unordered_set<std::string> top;
  // Replayed launches' times for their kernel records, by correlation id.
  std::mutex times_mu;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> times;  // (end, duration)
};
ReplayState& Replay();
bool IsLaunch(CUpti_CallbackId cbid);
void OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData& cb);
void OnLaunchExit(const CUpti_CallbackData& cb);
void StopReplayAtExit();
/// What became of each kernel name's launches, most GPU time in the tally first (at most
/// kMaxAccountNames), a line each:
/// "replayed<TAB>launches<TAB>selected<TAB>busy<TAB>failed<TAB>captured<TAB>in_top<TAB>name"
/// (captured: chosen launches made into a stream capture, not replayed; in_top: the
/// tally ranked it in the top N at the end): the meta counters_replay_account, from which the
/// report says why a top kernel was not measured. "" when replay is off.
inline constexpr size_t kMaxAccountNames = 2000;
std::string ReplayAccount();

}  // namespace kprof::agent::counters
