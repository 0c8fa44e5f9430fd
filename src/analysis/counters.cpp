// Hardware counters: the metric catalogue, the classification, and the values per
// kernel name from a run's KernelMetric (replay) and CounterSample (PM sampling) records.
// See kprof/counters.h and docs/counters.md.
#include "analysis/counters.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <unordered_map>

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

std::vector<CounterTrack> CounterTracks(const ProcessTrace& p) {
  std::vector<CounterTrack> tracks;
  std::map<std::pair<uint16_t, uint32_t>, size_t> track_of;  // (device, metric name id)
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::CounterSample) continue;
    auto [it, fresh] = track_of.try_emplace({r.device, r.name}, tracks.size());
    if (fresh) tracks.push_back({p.pid, r.device, p.Name(r), {}, {}, {}});
    CounterTrack& t = tracks[it->second];
    t.t_ns.push_back(r.start_ns);
    t.end_ns.push_back(r.end_ns);
    t.value.push_back(MetricValue(r));
  }
  for (CounterTrack& t : tracks) {
    // The agent writes samples in order per device; files from elsewhere are sorted here.
    if (std::is_sorted(t.t_ns.begin(), t.t_ns.end())) continue;
    std::vector<size_t> idx(t.t_ns.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t x, size_t y) { return t.t_ns[x] < t.t_ns[y]; });
    CounterTrack s{t.pid, t.device, t.metric, {}, {}, {}};
    for (size_t i : idx) {
      s.t_ns.push_back(t.t_ns[i]);
      s.end_ns.push_back(t.end_ns[i]);
      s.value.push_back(t.value[i]);
    }
    t = std::move(s);
  }
  return tracks;
}

namespace detail {

void AddMetric(CounterValues& v, std::string_view metric, double value) {
  CounterRole role;
  double weight;
  if (!RoleOf(metric, &role, &weight) || !std::isfinite(value)) return;
  const auto add = [&](double& slot, double x) { slot = Measured(slot) ? slot + x : x; };
  const auto mul = [&](double& slot, double x) { slot = Measured(slot) ? slot * x : x; };
  switch (role) {
    case CounterRole::SmPct:
      v.sm_pct = value;
      break;
    case CounterRole::MemPct:
      v.mem_pct = value;
      break;
    case CounterRole::DramPct:
      v.dram_pct = value;
      break;
    case CounterRole::L2Pct:
      v.l2_pct = value;
      break;
    case CounterRole::TensorPct:
      v.tensor_pct = Measured(v.tensor_pct) ? std::max(v.tensor_pct, value) : value;
      break;
    case CounterRole::OccupancyPct:
      v.occupancy_pct = value;
      break;
    case CounterRole::Flops:
      add(v.flops, weight * value);
      break;
    case CounterRole::DramBytes:
      add(v.dram_bytes, value);
      break;
    case CounterRole::PeakFlops:
      mul(v.peak_flops_per_s, weight * value);
      break;
    case CounterRole::PeakDramBw:
      mul(v.peak_dram_bytes_per_s, weight * value);
      break;
    case CounterRole::DurationNs:
      v.duration_ns = value;
      break;
  }
}

void CounterMean::Add(const CounterValues& v, double w) {
  const double* in[] = {
      &v.sm_pct,        &v.mem_pct, &v.dram_pct,   &v.l2_pct,           &v.tensor_pct,
      &v.occupancy_pct, &v.flops,   &v.dram_bytes, &v.peak_flops_per_s, &v.peak_dram_bytes_per_s,
      &v.duration_ns};
  for (size_t i = 0; i < kFields; ++i) {
    if (!Measured(*in[i])) continue;
    sum[i] += *in[i] * w;
    weight[i] += w;
  }
}

CounterValues CounterMean::Mean() const {
  CounterValues v;
  double* out[] = {
      &v.sm_pct,        &v.mem_pct, &v.dram_pct,   &v.l2_pct,           &v.tensor_pct,
      &v.occupancy_pct, &v.flops,   &v.dram_bytes, &v.peak_flops_per_s, &v.peak_dram_bytes_per_s,
      &v.duration_ns};
  for (size_t i = 0; i < kFields; ++i)
    if (weight[i] > 0) *out[i] = sum[i] / weight[i];
  return v;
}

namespace {

// Adds `part` to a comma-separated list unless it is there.
void AddListed(std::string& list, const std::string& part) {
  if (part.empty()) return;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = list.find(',', at);
    const size_t end = comma == std::string::npos ? list.size() : comma;
    if (list.compare(at, end - at, part) == 0) return;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  list += (list.empty() ? "" : ",") + part;
}

struct NameAcc {
  CounterMean replay, sampled;
  uint64_t replay_launches = 0, replay_ns = 0, sampled_launches = 0, sampled_ns = 0,
           sampled_samples = 0;
};

}  // namespace

CounterSummary SummarizeCounters(const Timeline& tl) {
  CounterSummary out;
  std::map<std::string_view, NameAcc> by_name;
  std::vector<std::string_view> order;  // first seen, for a stable tie order
  for (const ProcessTimeline& pt : tl.processes) {
    const ProcessTrace& p = *pt.process;
    AddListed(out.mode, p.Meta("counters"));
    const std::string& problem = p.Meta("counters_problem");
    if (!problem.empty() && out.problem.find(problem) == std::string::npos)
      out.problem += (out.problem.empty() ? "" : "; ") + problem;
    out.sample_interval_ns = std::max(out.sample_interval_ns, p.MetaU64("counters_interval_ns"));

    // Replay: the metrics of each measured launch, by correlation id.
    std::unordered_map<uint32_t, CounterValues> replayed;
    // PM sampling: the tracks of this process, and for each device the tracks' indices.
    std::map<uint16_t, std::vector<size_t>> device_tracks;
    std::map<uint16_t, uint64_t> device_samples;
    for (CounterTrack& t : CounterTracks(p)) {
      device_tracks[t.device].push_back(out.tracks.size());
      // A device's samples: its longest track (each sample holds a value of every metric).
      uint64_t& n = device_samples[t.device];
      n = std::max<uint64_t>(n, t.t_ns.size());
      out.tracks.push_back(std::move(t));
    }
    for (const auto& [device, n] : device_samples) out.samples += n;
    for (const Record& r : p.records) {
      switch (r.Kind()) {
        case RecordKind::KernelMetric:
          AddMetric(replayed[r.correlation], p.Name(r), MetricValue(r));
          out.max_passes = std::max(out.max_passes, r.a);
          break;
        case RecordKind::Overhead:
          if (r.a == static_cast<uint32_t>(OverheadKind::CounterReplay))
            out.replay_ns += r.DurationNs();
          if (r.a == static_cast<uint32_t>(OverheadKind::CounterSetup))
            out.setup_ns += r.DurationNs();
          break;
        default:
          break;
      }
    }
    out.replayed_launches += replayed.size();

    for (size_t i = 0; i < pt.acts.size(); ++i) {
      const Record& k = *pt.acts[i];
      if (k.Kind() != RecordKind::Kernel) continue;
      const std::string_view name = pt.KernelName(k);
      const uint64_t dur = k.DurationNs();
      auto [acc_it, fresh] = by_name.try_emplace(name);
      if (fresh) order.push_back(name);
      NameAcc& acc = acc_it->second;
      if (auto it = replayed.find(pt.Correlation(k)); it != replayed.end() && k.correlation != 0) {
        acc.replay.Add(it->second, static_cast<double>(std::max<uint64_t>(dur, 1)));
        ++acc.replay_launches;
        acc.replay_ns += dur;
        continue;
      }
      auto dt = device_tracks.find(k.device);
      if (dt == device_tracks.end()) continue;
      // A kernel name gets the samples that lie within its launches (samples are GPU-wide: one
      // that overlaps a neighbour says what both did), at least kMinSamples over all launches.
      CounterValues v;
      size_t inside = 0;
      for (size_t ti : dt->second) {
        const CounterTrack& t = out.tracks[ti];
        auto lo = std::lower_bound(t.t_ns.begin(), t.t_ns.end(), k.start_ns);
        double sum = 0;
        size_t n = 0;
        for (auto j = static_cast<size_t>(lo - t.t_ns.begin());
             j < t.t_ns.size() && t.end_ns[j] <= k.end_ns; ++j) {
          sum += t.value[j];
          ++n;
        }
        if (n == 0) continue;
        inside = std::max(inside, n);
        AddMetric(v, t.metric, sum / static_cast<double>(n));
      }
      if (inside == 0) continue;
      acc.sampled.Add(v, static_cast<double>(inside));  // each sample counts once
      acc.sampled_samples += inside;
      ++acc.sampled_launches;
      acc.sampled_ns += dur;
    }
  }
  for (std::string_view name : order) {
    const NameAcc& acc = by_name[name];
    KernelCounters kc;
    kc.name = std::string(name);
    if (acc.replay_launches > 0) {
      kc.source = CounterSource::Replay;
      kc.launches = acc.replay_launches;
      kc.gpu_ns = acc.replay_ns;
      kc.values = acc.replay.Mean();
    } else if (acc.sampled_samples >= kMinSamples) {
      kc.source = CounterSource::Sampled;
      kc.launches = acc.sampled_launches;
      kc.gpu_ns = acc.sampled_ns;
      kc.values = acc.sampled.Mean();
    } else {
      continue;
    }
    kc.bound = Classify(kc.values);
    out.kernels.push_back(std::move(kc));
  }
  std::stable_sort(
      out.kernels.begin(), out.kernels.end(),
      [](const KernelCounters& x, const KernelCounters& y) { return x.gpu_ns > y.gpu_ns; });
  return out;
}

Bound GroupBound(const std::vector<KernelRow>& kernels) {
  uint64_t by_class[5] = {};
  uint64_t measured = 0;
  for (const KernelRow& k : kernels) {
    if (k.bound == Bound::Unknown) continue;
    by_class[static_cast<size_t>(k.bound)] += k.stat.total_ns;
    measured += k.stat.total_ns;
  }
  if (measured == 0) return Bound::Unknown;
  for (size_t b = 1; b < 5; ++b)
    if (2 * by_class[b] > measured) return static_cast<Bound>(b);
  return Bound::Mixed;
}

}  // namespace detail

std::string FormatRoofline(const CounterSummary& c) {
  uint64_t total = 0;
  std::map<Bound, std::pair<uint64_t, uint64_t>> by;  // launches... (names, gpu_ns)
  for (const KernelCounters& k : c.kernels) {
    if (k.bound == Bound::Unknown) continue;
    auto& [names, ns] = by[k.bound];
    ++names;
    ns += k.gpu_ns;
    total += k.gpu_ns;
  }
  std::string out;
  for (const auto& [bound, v] : by) {
    if (!out.empty()) out += ", ";
    out += fmt::format(
        "{}-bound {} kernel{} ({:.0f}% of measured GPU time)", BoundName(bound), v.first,
        v.first == 1 ? "" : "s",
        total ? 100.0 * static_cast<double>(v.second) / static_cast<double>(total) : 0.0);
  }
  return out;
}

}  // namespace kprof
