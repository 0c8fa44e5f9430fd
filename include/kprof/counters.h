// Hardware counters in the analysis (docs/counters.md): the values per kernel derived
// from a run's CounterSample and KernelMetric records (the metrics are in kprof/metrics.h), and
// the classification of a kernel as compute-, memory- or latency-bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/metrics.h"

namespace kprof {

/// What limits a kernel, from its Speed Of Light throughputs (docs/counters.md,
/// "Classification", after Nsight Compute's SOL bottleneck rule).
/// Mixed: a group (an op) whose measured kernels differ, none with most of its GPU time.
enum class Bound : uint8_t { Unknown, Compute, Memory, Latency, Mixed };
const char* BoundName(Bound b);  ///< "compute", "memory", "latency", "mixed", "" (Unknown)

/// Below this % of peak, neither unit bounds the kernel (Nsight Compute's latency threshold).
inline constexpr double kHighThroughputPct = 60.0;
/// SM and memory throughputs closer than this (points) are balanced (Nsight Compute's).
inline constexpr double kBalancedPct = 10.0;

/// Counter values of one kernel launch, or averaged over several (by duration).
struct CounterValues {
  double sm_pct = kNotMeasured, mem_pct = kNotMeasured, dram_pct = kNotMeasured,
         l2_pct = kNotMeasured, tensor_pct = kNotMeasured, occupancy_pct = kNotMeasured;
  double flops = kNotMeasured, dram_bytes = kNotMeasured;  ///< per launch
  /// The peaks of the roofline: FP32 FLOP/s and DRAM bytes/s (from the peak metrics).
  double peak_flops_per_s = kNotMeasured, peak_dram_bytes_per_s = kNotMeasured;
  double duration_ns = kNotMeasured;  ///< replay: the kernel's duration under the profiler
};

/// The memory side of the Speed Of Light: the memory throughput, or where it was not measured
/// (PM sampling) the higher of DRAM's and L2's, as Nsight Compute's memory throughput is the
/// highest of its units'.
inline double MemoryPct(const CounterValues& v) {
  if (Measured(v.mem_pct)) return v.mem_pct;
  if (!Measured(v.l2_pct)) return v.dram_pct;
  return Measured(v.dram_pct) ? std::max(v.dram_pct, v.l2_pct) : v.l2_pct;
}

/// Classifies by the Speed Of Light throughputs, as Nsight Compute's SOL rule judges them, the
/// SM side being the SM throughput or the tensor pipes' where higher: latency-bound when both
/// sides are below kHighThroughputPct; else bound by the higher one when they are kBalancedPct
/// or more apart; when balanced, compute-bound if the SM side is at least as busy as DRAM and
/// L2, else memory-bound. Unknown when either was not measured. Without the memory throughput
/// (PM sampling), the higher of DRAM's and L2's stands for it.
Bound Classify(const CounterValues& v);

/// Where counter values of a kernel came from.
enum class CounterSource : uint8_t { None, Replay, Sampled };
const char* CounterSourceName(CounterSource s);  ///< "replay", "sampled", ""

/// Counters of one kernel name over the launches that were measured.
struct KernelCounters {
  std::string name;  ///< kernel display name, as the kernel view shows it
  CounterSource source = CounterSource::None;
  uint64_t launches = 0;  ///< launches measured (replayed, or with PM samples inside)
  uint64_t gpu_ns = 0;    ///< their GPU time (the kernels' own durations)
  CounterValues values;   ///< averaged over those launches, weighted by duration
  Bound bound = Bound::Unknown;
  /// Roofline point: FLOP per DRAM byte and achieved FLOP/s (NaN when not measured).
  double Intensity() const;
  double FlopsPerSecond() const;
};

/// A GPU-wide counter track (PM sampling) of one device and metric, for the trace and charts.
struct CounterTrack {
  uint32_t pid = 0;
  uint16_t device = 0;
  std::string metric;
  std::vector<uint64_t> t_ns;  ///< sample starts
  std::vector<uint64_t> end_ns;
  std::vector<double> value;
};

struct ProcessTrace;
/// The PM sampling tracks of one process, one per (device, metric), each in time order: built
/// from its CounterSample records for the analysis and the trace writers alike.
std::vector<CounterTrack> CounterTracks(const ProcessTrace& p);

/// The counters of a run: what was asked for, what it cost, and the values per kernel name.
/// A kernel name with at least kUnmeasuredMinShare of all kernels' GPU time (with replay alone,
/// among the kUnmeasuredTop names with most of it, the ones replay chooses) that no counter
/// measured, and why (docs/counters.md, "Kernels not measured").
struct UnmeasuredKernel {
  std::string name;  ///< display name, as the kernel view shows it
  uint64_t gpu_ns = 0;
  double share = 0;  ///< of all kernels' GPU time
  uint64_t launches = 0;
  uint64_t median_ns = 0;  ///< median duration of its launches
  /// "graph" (ran only inside CUDA graphs, which replay does not reach), "queued" (no launch
  /// came while it was chosen), "busy" (another thread was replaying each time), "failed" (its
  /// replay failed), "not_selected" (--metrics-kernels/--metrics-from left it out), "not_seen"
  /// (the agent saw no launch call of it), "communication" (an NCCL kernel: never replayed,
  /// it waits on the other ranks), "unmatched" (replayed, but no counters matched), "short" (too
  /// little of it in the samples, or samples that cannot tell it from its neighbours), "no_samples"
  /// (no samples on its device), "unknown" (recorded without the agent's account).
  std::string reason;
  std::string why;  ///< the reason in a sentence, with what to do
};
inline constexpr size_t kUnmeasuredTop = 10;
inline constexpr double kUnmeasuredMinShare = 0.01;

struct CounterSummary {
  std::string mode;     ///< "replay", "sampled", "replay,sampled"; "" when none was asked for
  std::string problem;  ///< why counters are missing or partial (the agent's words), "" if none
  uint64_t replayed_launches = 0;
  uint64_t replay_ns = 0;  ///< host time kprof spent replaying kernels (the cost of replay)
  uint64_t setup_ns = 0;   ///< host time the program waited for PM sampling's set-up
  uint32_t max_passes = 0;
  uint64_t samples = 0;                      ///< PM samples over all devices
  uint64_t sample_interval_ns = 0;           ///< as asked for
  std::vector<KernelCounters> kernels;       ///< measured kernel names, most GPU time first
  std::vector<UnmeasuredKernel> unmeasured;  ///< top kernel names not measured, and why
  std::vector<CounterTrack> tracks;          ///< PM sampling tracks (empty without sampling)
  bool Any() const { return !kernels.empty() || !tracks.empty(); }
  const KernelCounters* Find(std::string_view kernel) const;
};

/// A short line per bound class: "compute 3 kernels (62% of measured GPU time), ...".
std::string FormatRoofline(const CounterSummary& c);

}  // namespace kprof
