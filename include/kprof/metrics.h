// The hardware metrics kprof records (docs/counters.md): the names the agent asks
// CUPTI for and what each measures. The vocabulary agent and analysis share, as record.h is for
// records: the agent reads the lists (what to ask for), the analysis the roles (what a recorded
// name means). No CUDA or CUPTI header.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

namespace kprof {

/// What a metric measures, for the views and the rules. Metric names are Nsight Compute's, so
/// that a value can be checked against `ncu --metrics NAME` on the same kernel.
enum class CounterRole : uint8_t {
  SmPct,         ///< SM throughput, % of peak (Speed Of Light "Compute (SM) Throughput")
  MemPct,        ///< memory throughput, % of peak (Speed Of Light "Memory Throughput")
  DramPct,       ///< DRAM throughput, % of peak
  L2Pct,         ///< L2 throughput, % of peak
  TensorPct,     ///< tensor pipes active, % of peak
  OccupancyPct,  ///< achieved occupancy: active warps, % of the SM's maximum
  Flops,         ///< floating-point operations (a term of the sum; see CounterMetric::weight)
  DramBytes,     ///< bytes read and written in DRAM
  PeakFlops,     ///< a factor of the FP32 peak (FLOP per cycle per SM-sum, or cycles per second)
  PeakDramBw,    ///< a factor of the DRAM bandwidth peak (bytes per cycle, or cycles per second)
  DurationNs,    ///< the kernel's duration as the replay measured it
};

/// A metric's value that was not measured (the chip does not offer it, or no sample fell in).
inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
inline bool Measured(double v) { return !std::isnan(v); }

/// The replay's measure of a kernel's duration (its record has none: see docs/counters.md).
inline constexpr std::string_view kKernelDurationMetric = "gpu__time_duration.sum";

/// One metric kprof asks for, its role and, for sums, its weight (2 for a fused multiply-add).
struct CounterMetric {
  std::string_view name;
  CounterRole role;
  double weight = 1;
};

/// What `--metrics replay` measures for each selected kernel launch: Nsight Compute's Speed Of
/// Light section, achieved occupancy, the tensor pipes, and the FP32 roofline's FLOPs, DRAM
/// bytes and peaks (its SpeedOfLightRooflineChart section).
const std::vector<CounterMetric>& ReplayMetrics();
/// What `--metrics sampled` asks PM sampling for (GPU-wide, no replay).
const std::vector<CounterMetric>& SampledMetrics();
/// The role of a metric name kprof asks for; false for any other name.
bool RoleOf(std::string_view metric, CounterRole* role, double* weight);
/// A short label of what a metric measures, with its unit ("SM throughput %"), for tracks and
/// charts; the metric name itself for a name kprof does not ask for.
std::string_view MetricLabel(std::string_view metric);

}  // namespace kprof
