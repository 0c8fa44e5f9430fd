// Hint rule latency-bound: kernels the hardware counters place far from both roofs (neither the
// SMs nor memory near their peak), with the causes their launch configuration points to (not
// priced). Only with counters (`kprof run --metrics replay|sampled`). Catalogue entry:
// docs/hints.md#latency-bound.
#include <algorithm>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

/// Kernels shorter than this (mean) are launch-bound's business.
constexpr uint64_t kLatencyMinMeanNs = 20'000;

/// What bounds the resident warps of an SM, per compute capability (CUDA C++ Programming Guide,
/// "Technical Specifications per Compute Capability").
struct SmLimits {
  uint32_t warps = 64, blocks = 32, registers = 65536, shared = 228 << 10;
};
SmLimits LimitsOf(const std::string& cc) {
  SmLimits l;
  if (cc == "8.0") l.shared = 164 << 10;
  if (cc == "8.6" || cc == "8.7" || cc == "8.9") {
    l.warps = 48;
    l.blocks = 16;
    l.shared = 100 << 10;
  }
  if (cc == "7.5") {
    l.warps = 32;
    l.blocks = 16;
    l.shared = 64 << 10;
  }
  return l;
}

/// The causes the launch configuration points to, most limiting first.
std::vector<std::string> Causes(const KernelRow& k, uint32_t sms, const SmLimits& l,
                                double achieved_pct) {
  std::vector<std::string> out;
  const uint64_t threads = uint64_t{k.block.x} * k.block.y * k.block.z;
  if (threads == 0 || sms == 0) return out;
  const uint64_t warps = (threads + 31) / 32;
  struct Limit {
    uint64_t blocks;
    std::string why;
  };
  std::vector<Limit> limits;
  limits.push_back({l.warps / warps, fmt::format("{} threads per block", threads)});
  limits.push_back({l.blocks, "the SM's block slots"});
  if (k.registers > 0)
    limits.push_back({l.registers / (uint64_t{k.registers} * warps * 32),
                      fmt::format("{} registers per thread", k.registers)});
  if (k.shared_mem > 0)
    limits.push_back({l.shared / k.shared_mem,
                      fmt::format("{} of shared memory per block", FormatBytes(k.shared_mem))});
  const uint64_t grid = std::max<uint64_t>(k.max_blocks, 1);
  limits.push_back(
      {(grid + sms - 1) / sms, fmt::format("the grid ({} blocks for {} SMs)", grid, sms)});
  std::stable_sort(limits.begin(), limits.end(),
                   [](const Limit& a, const Limit& b) { return a.blocks < b.blocks; });
  const uint64_t resident = limits.front().blocks;
  const double theoretical =
      100.0 * static_cast<double>(std::min<uint64_t>(resident * warps, l.warps)) / l.warps;
  out.push_back(
      fmt::format("at most {} block(s), {:.1f}% of the SM's warps, resident per SM: "
                  "limited by {}",
                  resident, theoretical, limits.front().why));
  if (Measured(achieved_pct) && achieved_pct + 10.0 < theoretical)
    out.push_back(
        fmt::format("achieved {:.1f}% of {:.1f}% possible: the warps do not stay "
                    "resident (tail effects, uneven blocks)",
                    achieved_pct, theoretical));
  if (theoretical >= 50.0)
    out.push_back(
        "enough warps: they wait on dependent memory accesses, barriers or long arithmetic "
        "chains (more independent work per thread, fewer __syncthreads, prefetching)");
  return out;
}

std::optional<Hint> LatencyBound(const RuleContext& c) {
  uint32_t sms = 0;
  std::string cc;
  for (const DeviceInfo& d : c.analysis.summary.devices)
    if (d.sm_count > sms) {
      sms = d.sm_count;
      cc = d.compute_capability;
    }
  std::vector<const KernelRow*> rows;
  uint64_t total = 0;
  for (const KernelRow& k : c.analysis.kernels) {
    if (k.bound != Bound::Latency || k.stat.count == 0 || IsCommKernel(k.name)) continue;
    if (k.stat.total_ns / k.stat.count < kLatencyMinMeanNs) continue;
    if (sms > 0 && k.max_blocks < sms) continue;  // a small grid: underfilled-grid's
    rows.push_back(&k);
    total += k.stat.total_ns;
  }
  if (rows.empty() || PctOf(total, c.wall) < kEmitPct) return std::nullopt;
  Hint h;
  h.severity = Severity::Info;
  h.summary = fmt::format(
      "{} kernel(s) far from both roofs take {} of GPU time: latency, not throughput, limits "
      "them",
      rows.size(), Pct(PctOf(total, c.analysis.summary.gpu_busy_ns)));
  const SmLimits limits = LimitsOf(cc);
  for (size_t i = 0; i < rows.size() && i < 3; ++i) {
    const KernelRow& k = *rows[i];
    const KernelCounters* kc = c.analysis.counters.Find(k.name);
    h.evidence.push_back(fmt::format("{}: {} calls, {} (mean {}); {}", Short(k.name, 60),
                                     k.stat.count, Dur(k.stat.total_ns), Dur(k.stat.mean_ns),
                                     kc ? CounterLine(kc->values) : std::string("measured")));
    h.evidence.push_back(
        fmt::format("  grid ({},{},{}) block ({},{},{}), {} registers/thread, "
                    "{} shared memory",
                    k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z, k.registers,
                    FormatBytes(k.shared_mem)));
    for (const std::string& cause :
         Causes(k, sms, limits, kc ? kc->values.occupancy_pct : kNotMeasured))
      h.evidence.push_back("  " + cause);
  }
  h.est_saving_ns = 0;
  h.est_saving_pct = 0;
  h.assumption = fmt::format(
      "No estimate: both the SM and the memory throughputs are below {:.0f}% of peak (Nsight "
      "Compute's latency threshold), so neither roof says how fast the kernel could be. The "
      "causes come from the launch configuration, as an occupancy calculator derives them.",
      kHighThroughputPct);
  h.fix_cuda =
      "Raise the warps resident per SM where the configuration limits them (more blocks or "
      "threads per block, fewer registers with __launch_bounds__ or -maxrregcount, less shared "
      "memory per block); where enough warps are resident, give each thread more independent "
      "work (unrolling, several elements per thread) and cut barriers and dependent loads.";
  h.fix_pytorch =
      "For custom kernels (Triton, CUDA extensions): larger blocks or num_warps, more programs "
      "in the grid, fewer live values per thread; for library ops: larger batches, or shapes the "
      "library tiles well (multiples of 64/128).";
  return h;
}

}  // namespace kprof::hints
