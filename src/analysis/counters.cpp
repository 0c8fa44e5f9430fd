// Hardware counters: the values per kernel name from a run's KernelMetric (replay) and
// CounterSample (PM sampling) records, and the top names not measured (the classification is in
// counters_classify.cpp). See kprof/counters.h and docs/counters.md.
#include "analysis/counters.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <unordered_map>

namespace kprof {

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
  uint64_t replay_launches = 0, replay_ns = 0, sampled_launches = 0, sampled_ns = 0;
  double sampled_weight = 0;
  // Every launch, for the account of the top names not measured.
  uint64_t launches = 0, ns = 0, graph_launches = 0;
  std::vector<uint64_t> durations;
  std::vector<std::string_view> raw;  // the names CUPTI gave it (mangled), per process
  bool on_sampled_device = false;
  SampledFit best;  // of its fits that did not classify it, the one with most weight
};

// One device's sampled launches as the columns of a fit: per kernel name, or per kernel name and
// launch configuration (grid and block). A name launched on tensors of other sizes (one
// element-wise kernel for a 4-byte fill and a 400 MB copy) is a different kernel to the samples:
// one value per name did not fit them (fitted percentages outside 0-100 with errors of 0.5-3
// points on eager PyTorch).
struct SampledColumns {
  std::vector<NameAcc*> accs;  // per column
  std::vector<uint64_t> launches_n, ns;
  std::vector<SampledLaunch> launches;
  std::map<std::pair<const NameAcc*, std::array<uint32_t, 4>>, size_t> index;

  void Add(NameAcc& acc, const std::array<uint32_t, 4>& config, const Record& k) {
    auto [it, added] = index.try_emplace({&acc, config}, accs.size());
    if (added) {
      accs.push_back(&acc);
      launches_n.push_back(0);
      ns.push_back(0);
    }
    launches.push_back({it->second, k.start_ns, k.end_ns});
    ++launches_n[it->second];
    ns[it->second] += k.DurationNs();
  }

  /// The same launches with one column per name (each name's configurations merged).
  SampledColumns ByName() const {
    SampledColumns out;
    std::unordered_map<const NameAcc*, size_t> column_of;
    std::vector<size_t> merged(accs.size());
    for (size_t c = 0; c < accs.size(); ++c) {
      auto [it, added] = column_of.try_emplace(accs[c], out.accs.size());
      if (added) {
        out.accs.push_back(accs[c]);
        out.launches_n.push_back(0);
        out.ns.push_back(0);
      }
      merged[c] = it->second;
      out.launches_n[it->second] += launches_n[c];
      out.ns[it->second] += ns[c];
    }
    out.launches.reserve(launches.size());
    for (const SampledLaunch& l : launches)
      out.launches.push_back({merged[l.column], l.start_ns, l.end_ns});
    return out;
  }
};

// Adds a fitted column to its name: its values where it is classified, else as the name's best
// unclassifying fit (for the reason the report gives).
void AddColumn(NameAcc& acc, const SampledFit& x, uint64_t launches, uint64_t ns) {
  if (x.Classified()) {
    acc.sampled.Add(x.values, x.weight);
    acc.sampled_weight += x.weight;
    acc.sampled_launches += launches;
    acc.sampled_ns += ns;
  } else if (x.weight >= acc.best.weight) {
    acc.best = x;
  }
}

// Fits one device's samples per name and launch configuration. A name whose classified
// configurations hold at least half of its time on this device takes them; the others are
// fitted once more as one column per name (a class from a minority of a name's time is not the
// name's).
void FitDevice(const SampledColumns& by_config, const std::vector<const CounterTrack*>& tracks) {
  const std::vector<SampledFit> fine =
      FitSamples(tracks, by_config.launches, by_config.accs.size());
  std::unordered_map<const NameAcc*, std::pair<uint64_t, uint64_t>> cover;  // classified, all
  for (size_t c = 0; c < by_config.accs.size(); ++c) {
    auto& [classified, all] = cover[by_config.accs[c]];
    all += by_config.ns[c];
    if (fine[c].Classified()) classified += by_config.ns[c];
  }
  const auto fine_enough = [&](const NameAcc* acc) {
    const auto& [classified, all] = cover[acc];
    return classified > 0 && 2 * classified >= all;
  };
  for (size_t c = 0; c < by_config.accs.size(); ++c)
    if (fine_enough(by_config.accs[c]))
      AddColumn(*by_config.accs[c], fine[c], by_config.launches_n[c], by_config.ns[c]);
  if (std::all_of(by_config.accs.begin(), by_config.accs.end(), fine_enough)) return;
  const SampledColumns by_name = by_config.ByName();
  const std::vector<SampledFit> coarse = FitSamples(tracks, by_name.launches, by_name.accs.size());
  for (size_t c = 0; c < by_name.accs.size(); ++c)
    if (!fine_enough(by_name.accs[c]))
      AddColumn(*by_name.accs[c], coarse[c], by_name.launches_n[c], by_name.ns[c]);
}

std::string Micro(uint64_t ns) { return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3); }

// Why replay did not measure a top kernel name (docs/counters.md, "Kernels not measured").
void ReplayReason(const NameAcc& acc, const std::map<std::string, ReplaySeen>& account,
                  bool have_account, bool named, const std::string& problem, UnmeasuredKernel& u) {
  if (acc.graph_launches == acc.launches) {
    u.reason = "graph";
    u.why = fmt::format(
        "its {} launch{} ran inside CUDA graphs, which kernel replay cannot reach (it replays "
        "launches made on streams); --metrics sampled measures kernels in graphs",
        acc.launches, acc.launches == 1 ? "" : "es");
    return;
  }
  // The agent never replays a collective's kernel: it waits on the other ranks, and replayed in
  // one process alone it never ends (a 2-rank DDP job hung on its first NCCL kernel).
  if (std::any_of(acc.raw.begin(), acc.raw.end(),
                  [](std::string_view raw) { return IsCommKernelName(raw); })) {
    u.reason = "communication";
    u.why =
        "an NCCL kernel waits on the other ranks, so replaying it in one process would never end; "
        "kprof never replays one";
    return;
  }
  ReplaySeen seen;
  bool found = false;
  for (std::string_view raw : acc.raw)
    if (auto it = account.find(std::string(raw)); it != account.end()) {
      found = true;
      seen.replayed += it->second.replayed;
      seen.launches += it->second.launches;
      seen.selected += it->second.selected;
      seen.busy += it->second.busy;
      seen.failed += it->second.failed;
      seen.captured += it->second.captured;
    }
  if (!have_account) {
    u.reason = "unknown";
    u.why = "recorded without the agent's account of its launches (a kprof before 2026-11-27)";
  } else if (!found) {
    u.reason = "not_seen";
    u.why =
        "the agent saw none of its launch calls (made through a call kprof does not watch); "
        "--metrics sampled measures it";
  } else if (seen.failed > 0) {
    u.reason = "failed";
    u.why = fmt::format("its replay failed{}", problem.empty() ? "" : ": " + problem);
  } else if (seen.captured > 0 && seen.replayed == 0 && seen.selected <= seen.busy) {
    u.reason = "graph";
    u.why = fmt::format(
        "it was chosen while being captured into a CUDA graph, and its {} launch{} on streams "
        "came before it was chosen; --metrics sampled with --graph-trace node measures kernels "
        "in graphs",
        seen.launches - seen.captured, seen.launches - seen.captured == 1 ? "" : "es");
  } else if (seen.replayed > 0) {
    u.reason = "unmatched";
    u.why = fmt::format(
        "replayed {} time{}, but no replay's counters matched one of its kernel records",
        seen.replayed, seen.replayed == 1 ? "" : "s");
  } else if (seen.selected > 0 && seen.busy == seen.selected) {
    u.reason = "busy";
    u.why = fmt::format(
        "each of the {} launch{} chosen came while another thread was replaying; "
        "--metrics-launches N gives more of its launches a chance",
        seen.selected, seen.selected == 1 ? "" : "es");
  } else if (named) {
    u.reason = "not_selected";
    u.why = "--metrics-kernels or --metrics-from did not select it";
  } else {
    u.reason = "queued";
    u.why = fmt::format(
        "none of its {} launch{} came while it was chosen: other names had taken the first "
        "replays, and the trace ranked it among the top kernels only after its last launch; "
        "--metrics-from RUN replays it by name in a second run",
        seen.launches, seen.launches == 1 ? "" : "es");
  }
}

// Why PM sampling did not classify a top kernel name.
void SampledReason(const NameAcc& acc, uint64_t interval_ns, UnmeasuredKernel& u) {
  if (!acc.on_sampled_device) {
    u.reason = "no_samples";
    u.why = "no PM samples on its device";
    return;
  }
  u.reason = "short";
  const SampledFit& f = acc.best;
  if (f.mean_ns < kMinFittedNs && f.weight >= kMinSampledWeight) {
    u.why = fmt::format(
        "its launches (median {}) are shorter than the {} PM sampling can fit (between such "
        "kernels the GPU's own launch work fills the samples); --metrics replay measures it",
        Micro(u.median_ns), Micro(kMinFittedNs));
  } else if (f.weight < kMinSampledWeight) {
    u.why = fmt::format(
        "its launches (median {}) filled {:.2f} samples' worth of time, less than one; a "
        "shorter --metrics-interval{} or --metrics replay measures it",
        Micro(u.median_ns), f.weight, interval_ns ? " than " + Micro(interval_ns) : std::string());
  } else if (f.inflation > kMaxSampledInflation || f.out_of_range) {
    u.why =
        "it runs beside the same kernels within most samples, so GPU-wide samples cannot tell it "
        "from them; --metrics replay measures it";
  } else if (f.error_unknown) {
    u.why = fmt::format(
        "its device ran more kernel names than the fit takes ({}) or than it has samples, and "
        "no samples lie wholly inside its launches; --metrics replay measures it",
        kMaxSampledColumns);
  } else {
    u.why = fmt::format(
        "the samples cannot tell it from the kernels beside it (standard error {:.0f} points, "
        "more than {:.0f}); --metrics replay measures it",
        f.max_error, kMaxSampledError);
  }
}

// The kernel names with kUnmeasuredMinShare of the GPU time or more that no counter measured,
// and why.
void AddUnmeasured(const std::vector<std::string_view>& order,
                   std::map<std::string_view, NameAcc>& by_name,
                   const std::map<std::string, ReplaySeen>& account, bool have_account, bool named,
                   CounterSummary& out) {
  uint64_t total_ns = 0;
  for (std::string_view name : order) total_ns += by_name[name].ns;
  if (out.mode.empty() || total_ns == 0) return;
  std::vector<std::string_view> top = order;
  std::stable_sort(top.begin(), top.end(), [&](std::string_view x, std::string_view y) {
    return by_name[x].ns > by_name[y].ns;
  });
  const bool replay = out.mode.find("replay") != std::string::npos;
  const bool sampled = out.mode.find("sampled") != std::string::npos;
  // Replay chooses the top N names; sampling sees every name.
  if (!sampled && top.size() > kUnmeasuredTop) top.resize(kUnmeasuredTop);
  for (std::string_view name : top) {
    NameAcc& acc = by_name[name];
    const double share = static_cast<double>(acc.ns) / static_cast<double>(total_ns);
    if (share < kUnmeasuredMinShare) break;
    if (out.Find(name) != nullptr) continue;
    UnmeasuredKernel u;
    u.name = std::string(name);
    u.gpu_ns = acc.ns;
    u.share = share;
    u.launches = acc.launches;
    std::vector<uint64_t>& d = acc.durations;
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
    u.median_ns = d.empty() ? 0 : d[d.size() / 2];
    if (sampled) SampledReason(acc, out.sample_interval_ns, u);
    if (replay) {
      UnmeasuredKernel r = u;
      ReplayReason(acc, account, have_account, named, out.problem, r);
      if (sampled) r.why += "; sampled: " + u.why;
      u = std::move(r);
    }
    out.unmeasured.push_back(std::move(u));
  }
}

}  // namespace

CounterSummary SummarizeCounters(const Timeline& tl) {
  CounterSummary out;
  std::map<std::string_view, NameAcc> by_name;
  std::vector<std::string_view> order;  // first seen, for a stable tie order
  std::map<std::string, ReplaySeen> account;
  bool have_account = false, named = false;
  for (const ProcessTimeline& pt : tl.processes) {
    const ProcessTrace& p = *pt.process;
    AddListed(out.mode, p.Meta("counters"));
    const std::string& problem = p.Meta("counters_problem");
    if (!problem.empty() && out.problem.find(problem) == std::string::npos)
      out.problem += (out.problem.empty() ? "" : "; ") + problem;
    out.sample_interval_ns = std::max(out.sample_interval_ns, p.MetaU64("counters_interval_ns"));
    if (p.meta.count("counters_replay_account")) {
      have_account = true;
      ReadReplayAccount(p.Meta("counters_replay_account"), account);
    }
    named = named || (p.Meta("counters").find("replay") != std::string::npos &&
                      !p.meta.count("counters_top"));

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

    // PM sampling per device: columns per kernel name and launch configuration, then per name
    // for the names those did not classify.
    std::map<uint16_t, SampledColumns> fits;
    for (size_t i = 0; i < pt.acts.size(); ++i) {
      const Record& k = *pt.acts[i];
      if (k.Kind() != RecordKind::Kernel) continue;
      const std::string_view name = pt.KernelName(k);
      const uint64_t dur = k.DurationNs();
      auto [acc_it, fresh] = by_name.try_emplace(name);
      if (fresh) order.push_back(name);
      NameAcc& acc = acc_it->second;
      ++acc.launches;
      acc.ns += dur;
      acc.durations.push_back(dur);
      if (GraphNodeOf(k) != 0) ++acc.graph_launches;
      const std::string_view raw = p.Name(k);
      if (acc.raw.empty() || acc.raw.back() != raw) acc.raw.push_back(raw);
      if (auto it = replayed.find(pt.Correlation(k)); it != replayed.end() && k.correlation != 0) {
        acc.replay.Add(it->second, static_cast<double>(std::max<uint64_t>(dur, 1)));
        ++acc.replay_launches;
        acc.replay_ns += dur;
        continue;
      }
      if (device_tracks.count(k.device) == 0) continue;
      acc.on_sampled_device = true;
      fits[k.device].Add(acc, {k.a, k.b, k.c, k.d}, k);
    }
    for (auto& [device, f] : fits) {
      std::vector<const CounterTrack*> tracks;
      for (size_t ti : device_tracks[device]) tracks.push_back(&out.tracks[ti]);
      FitDevice(f, tracks);
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
    } else if (acc.sampled_weight > 0) {
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

  AddUnmeasured(order, by_name, account, have_account, named, out);
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
