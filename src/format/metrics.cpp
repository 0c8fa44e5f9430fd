// The metric catalogue: see kprof/metrics.h.
#include "kprof/metrics.h"

namespace kprof {

const std::vector<CounterMetric>& ReplayMetrics() {
  static const std::vector<CounterMetric> m = {
      {kKernelDurationMetric, CounterRole::DurationNs},
      {"sm__throughput.avg.pct_of_peak_sustained_elapsed", CounterRole::SmPct},
      {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", CounterRole::MemPct},
      {"dram__throughput.avg.pct_of_peak_sustained_elapsed", CounterRole::DramPct},
      {"lts__throughput.avg.pct_of_peak_sustained_elapsed", CounterRole::L2Pct},
      // The tensor pipes: HMMA (mma.sync) and all of them (Hopper's warpgroup GMMA too).
      {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
       CounterRole::TensorPct},
      {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", CounterRole::TensorPct},
      {"sm__warps_active.avg.pct_of_peak_sustained_active", CounterRole::OccupancyPct},
      {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", CounterRole::Flops, 2},
      {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", CounterRole::Flops, 1},
      {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", CounterRole::Flops, 1},
      {"dram__bytes.sum", CounterRole::DramBytes},
      {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", CounterRole::PeakFlops,
       2},
      {"sm__cycles_elapsed.avg.per_second", CounterRole::PeakFlops},
      {"dram__bytes.sum.peak_sustained", CounterRole::PeakDramBw},
      {"dram__cycles_elapsed.avg.per_second", CounterRole::PeakDramBw},
  };
  return m;
}

// Single-pass metrics only (PM sampling cannot take more): Speed Of Light's two throughputs are
// not among them on Hopper; the SM's instruction issue rate stands for the SM throughput and
// DRAM's and L2's for the memory's (docs/counters.md). L2 is its sector throughput
// (`lts__throughput`, the largest of L2's sub-unit throughputs, takes four passes on the GH100)
// and occupancy the realtime warp count (`sm__warps_active` takes two). The agent drops, and
// says so, a metric a chip cannot sample in the one pass: the first ones are kept.
const std::vector<CounterMetric>& SampledMetrics() {
  static const std::vector<CounterMetric> m = {
      {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed", CounterRole::SmPct},
      {"dram__throughput.avg.pct_of_peak_sustained_elapsed", CounterRole::DramPct},
      {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
       CounterRole::TensorPct},
      {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", CounterRole::L2Pct},
      {"sm__warps_active_realtime.avg.pct_of_peak_sustained_active", CounterRole::OccupancyPct},
  };
  return m;
}

bool RoleOf(std::string_view metric, CounterRole* role, double* weight) {
  for (const auto* list : {&ReplayMetrics(), &SampledMetrics()})
    for (const CounterMetric& m : *list)
      if (m.name == metric) {
        *role = m.role;
        *weight = m.weight;
        return true;
      }
  return false;
}

std::string_view MetricLabel(std::string_view metric) {
  CounterRole role{};
  double weight = 0;
  if (!RoleOf(metric, &role, &weight)) return metric;
  switch (role) {
    case CounterRole::SmPct:
      return "SM throughput %";
    case CounterRole::MemPct:
      return "memory throughput %";
    case CounterRole::DramPct:
      return "DRAM throughput %";
    case CounterRole::L2Pct:
      return "L2 throughput %";
    case CounterRole::TensorPct:
      return "tensor pipes active %";
    case CounterRole::OccupancyPct:
      return "achieved occupancy %";
    default:
      return metric;
  }
}

}  // namespace kprof
