// Internal to the analysis library: the accumulators behind the rows of the views (a kernel
// name; an op, range path, stream or device). Used by Analyze (analysis.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis/intervals.h"
#include "kprof/analysis.h"

namespace kprof::detail {

/// acc += d, saturating at the int64 limits: memory deltas come from the input's byte counts,
/// which a corrupt or hostile file can set to anything (signed overflow is undefined).
inline void SatAdd(int64_t& acc, int64_t d) {
  if (__builtin_add_overflow(acc, d, &acc)) acc = d > 0 ? INT64_MAX : INT64_MIN;
}

/// A kernel launch configuration: grid a,b,c, block d,e, shared memory f (Record fields).
using LaunchConfig = std::array<uint32_t, 6>;
struct LaunchConfigHash {
  size_t operator()(const LaunchConfig& c) const {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (uint32_t v : c) h = (h ^ v) * 0x100000001B3ULL;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

/// Accumulates kernels of one name.
struct KernelAcc {
  std::vector<uint64_t> durations;
  UnionAcc busy;  ///< projected time (filled in the time-ordered pass)
  /// Launches per configuration. Hashed: a kernel launched with thousands of grid sizes costs
  /// O(1) a launch (a tree was the top of the profile on such runs, docs/benchmarks.md).
  std::unordered_map<LaunchConfig, uint64_t, LaunchConfigHash> configs;
  LaunchConfig last{};  ///< a run of launches of one configuration, not yet in `configs`
  uint64_t last_count = 0;
  uint64_t max_blocks = 0;

  void Add(const Record& r) {
    durations.push_back(r.DurationNs());
    const LaunchConfig c{r.a, r.b, r.c, r.d, r.e, r.f};
    if (c != last) {  // runs of one configuration skip the lookup
      if (last_count) configs[last] += last_count;
      last = c;
      last_count = 0;
    }
    ++last_count;
    max_blocks = std::max<uint64_t>(max_blocks, uint64_t{r.a} * r.b * r.c);
  }
  KernelRow Row(const std::string& name, uint64_t busy_ns) {
    KernelRow k;
    k.name = name;
    k.stat = MakeStat(durations);
    k.share = busy_ns ? static_cast<double>(k.stat.total_ns) / static_cast<double>(busy_ns) : 0;
    if (last_count) configs[last] += last_count;
    last_count = 0;
    // The most frequent configuration; on a tie the smallest one, whatever the hash order.
    auto best = std::max_element(configs.begin(), configs.end(), [](const auto& x, const auto& y) {
      return x.second != y.second ? x.second < y.second : y.first < x.first;
    });
    if (best != configs.end()) {
      Record r;
      const LaunchConfig& c = best->first;
      r.a = c[0];
      r.b = c[1];
      r.c = c[2];
      r.d = c[3];
      r.e = c[4];
      r.f = c[5];
      k.grid = KernelGrid(r);
      k.block = KernelBlock(r);
      k.registers = KernelRegisters(r);
      k.shared_mem = KernelSharedMem(r);
    }
    k.max_blocks = max_blocks;
    return k;
  }
};

/// Accumulates one group (op, path, stream, device, kernel).
struct GroupAcc {
  uint64_t calls = 0, gpu_ns = 0, cpu_ns = 0, kernels = 0, memcpys = 0, memsets = 0, bytes = 0;
  uint64_t bwd_gpu_ns = 0;  ///< GroupRow::bwd_gpu_ns
  int64_t mem_delta = 0;
  UnionAcc busy;  ///< projected time (filled in the time-ordered pass)
  /// Keyed by the timeline's interned kernel name: equal names share one address.
  std::unordered_map<const std::string*, KernelAcc> kernels_beneath;
  bool with_kernels = true;

  void AddActivity(const Record& r, const std::string& kernel_name) {
    gpu_ns += r.DurationNs();
    switch (r.Kind()) {
      case RecordKind::Kernel:
        ++kernels;
        if (with_kernels) kernels_beneath[&kernel_name].Add(r);
        break;
      case RecordKind::Memcpy:
        ++memcpys;
        bytes += r.bytes;
        break;
      case RecordKind::Memset:
        ++memsets;
        bytes += r.bytes;
        break;
      default:
        break;
    }
  }
  /// A part of a graph launch's GPU time (graph-level tracing: the launch is shared among the
  /// ranges its nodes were captured in, docs/analysis.md "CUDA graphs").
  void AddGraphShare(uint64_t ns) { gpu_ns += ns; }
  GroupRow Row(const std::string& key, uint64_t busy_ns) {
    GroupRow g;
    g.key = key;
    g.calls = calls;
    g.gpu_ns = gpu_ns;
    g.gpu_projected_ns = busy.Total();
    g.cpu_ns = cpu_ns;
    g.kernels = kernels;
    g.memcpys = memcpys;
    g.memsets = memsets;
    g.bytes = bytes;
    g.share = busy_ns ? static_cast<double>(gpu_ns) / static_cast<double>(busy_ns) : 0;
    g.mem_delta_bytes = mem_delta;
    g.bwd_gpu_ns = bwd_gpu_ns;
    for (auto& [name, acc] : kernels_beneath) g.kernel_rows.push_back(acc.Row(*name, busy_ns));
    std::sort(g.kernel_rows.begin(), g.kernel_rows.end(), [](const auto& x, const auto& y) {
      return x.stat.total_ns != y.stat.total_ns ? x.stat.total_ns > y.stat.total_ns
                                                : x.name < y.name;
    });
    return g;
  }
};

}  // namespace kprof::detail
