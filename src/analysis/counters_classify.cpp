// Hardware counters: what a kernel's values say (its class, by Nsight Compute's Speed Of Light
// rule), and the names of classes and sources. See kprof/counters.h and docs/counters.md.
#include <algorithm>
#include <cmath>

#include "analysis/counters.h"

namespace kprof {

const char* BoundName(Bound b) {
  switch (b) {
    case Bound::Compute:
      return "compute";
    case Bound::Memory:
      return "memory";
    case Bound::Latency:
      return "latency";
    case Bound::Mixed:
      return "mixed";
    case Bound::Unknown:
      break;
  }
  return "";
}

const char* CounterSourceName(CounterSource s) {
  switch (s) {
    case CounterSource::Replay:
      return "replay";
    case CounterSource::Sampled:
      return "sampled";
    case CounterSource::None:
      break;
  }
  return "";
}

Bound Classify(const CounterValues& v) {
  const double mem = MemoryPct(v);
  if (!Measured(v.sm_pct) || !Measured(mem)) return Bound::Unknown;
  // The SM side: its throughput, or its tensor pipes' where higher (PM sampling's SM figure
  // counts instructions issued, of which a tensor-core GEMM issues few; replay's SM throughput
  // already takes the pipes into account).
  const double compute = Measured(v.tensor_pct) ? std::max(v.sm_pct, v.tensor_pct) : v.sm_pct;
  // Nsight Compute's SOL rule: both below 60% of peak is a latency issue; 10 points or more
  // apart, the higher one bounds the kernel.
  if (compute < kHighThroughputPct && mem < kHighThroughputPct) return Bound::Latency;
  if (std::abs(compute - mem) >= kBalancedPct)
    return compute > mem ? Bound::Compute : Bound::Memory;
  // Balanced: the SM's busiest pipe against the memory system outside the SM (DRAM, L2). The
  // memory throughput counts L1 and shared memory too, which a tensor-core GEMM keeps as busy
  // as its tensor pipes.
  double outside = kNotMeasured;
  for (double x : {v.dram_pct, v.l2_pct})
    if (Measured(x)) outside = Measured(outside) ? std::max(outside, x) : x;
  if (!Measured(outside)) outside = mem;
  return compute >= outside ? Bound::Compute : Bound::Memory;
}

double KernelCounters::Intensity() const {
  return Measured(values.flops) && Measured(values.dram_bytes) && values.dram_bytes > 0
             ? values.flops / values.dram_bytes
             : kNotMeasured;
}

double KernelCounters::FlopsPerSecond() const {
  return Measured(values.flops) && launches > 0 && gpu_ns > 0
             ? values.flops * static_cast<double>(launches) / (static_cast<double>(gpu_ns) * 1e-9)
             : kNotMeasured;
}

const KernelCounters* CounterSummary::Find(std::string_view kernel) const {
  for (const KernelCounters& k : kernels)
    if (k.name == kernel) return &k;
  return nullptr;
}

}  // namespace kprof
