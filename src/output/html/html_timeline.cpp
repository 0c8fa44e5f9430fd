// The timeline part of the HTML report's data: tracks, density bins, utilisation, memory (in use
// per device, and held by owner per process and device).
// Past the limits (HtmlOptions::max_slices, max_ranges) the longest items stay individual and
// every other one goes into its track's bins, so that bins + items always add up to the run's
// exact counts and times (tests/unit/html/html_limits_test.cpp).
#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "kprof/metrics.h"
#include "output/html/html_internal.h"

namespace kprof::html {
namespace {

struct Item {
  uint64_t s = 0, e = 0;  ///< relative to the run's start
  uint32_t name = 0;      ///< index into the names table
  uint32_t depth = 0;     ///< nesting on a CPU thread (0 for GPU items)
};

enum class NameKind : uint8_t { Kernel = 0, Memcpy = 1, Memset = 2, Range = 3 };

struct Track {
  bool gpu = true;
  std::string label;
  uint32_t pid = 0, id = 0;  ///< stream (GPU) or thread (CPU)
  uint16_t device = 0;
  std::vector<Item> items;  ///< by start
  std::vector<bool> keep;   ///< parallel to items: drawn individually
};

class Names {
 public:
  uint32_t Get(std::string_view name, NameKind kind) {
    auto [it, added] = index_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (added) {
      names_.push_back(name);
      kinds_.push_back(kind);
    }
    return it->second;
  }
  NameKind Kind(uint32_t i) const { return kinds_[i]; }
  void Write(JsonWriter& j) const {
    j.Key("names").Arr();
    for (auto n : names_) j.Str(n);
    j.EndArr();
    j.U64Array("name_kinds", kinds_);
  }

 private:
  std::unordered_map<std::string_view, uint32_t> index_;
  std::vector<std::string_view> names_;
  std::vector<NameKind> kinds_;
};

/// Marks the `limit` longest items of all tracks (ties: earlier tracks and items first).
void ChooseShown(std::vector<Track>& tracks, size_t limit) {
  std::vector<uint64_t> durs;
  for (const auto& t : tracks)
    for (const auto& it : t.items) durs.push_back(it.e - it.s);
  const bool all = durs.size() <= limit;
  uint64_t thr = 0;
  if (!all && limit > 0) {
    std::nth_element(durs.begin(), durs.begin() + static_cast<ptrdiff_t>(limit - 1), durs.end(),
                     std::greater<>());
    thr = durs[limit - 1];
  }
  size_t above = 0;  // items strictly longer than thr (always kept)
  if (!all)
    for (uint64_t d : durs) above += d > thr ? 1 : 0;
  size_t ties = limit > above ? limit - above : 0;
  for (auto& t : tracks) {
    t.keep.assign(t.items.size(), all);
    if (all || limit == 0) continue;
    for (size_t i = 0; i < t.items.size(); ++i) {
      const uint64_t d = t.items[i].e - t.items[i].s;
      if (d > thr || (d == thr && ties > 0 && ties--)) t.keep[i] = true;
    }
  }
}

/// Adds [s, e) to per-bin busy time (exactly: the overlaps sum to e - s) and counts it in the
/// bin where it starts.
void AddToBins(uint64_t s, uint64_t e, uint64_t w, std::vector<uint64_t>& busy,
               std::vector<uint64_t>* count) {
  const size_t last = busy.size() - 1;
  size_t b = std::min<size_t>(s / w, last);
  if (count) ++(*count)[b];
  uint64_t at = s;
  while (at < e) {
    const uint64_t bin_end = b == last ? e : std::min<uint64_t>(e, (b + 1) * w);
    busy[b] += bin_end - at;
    at = bin_end;
    ++b;
  }
}

void WriteTrack(JsonWriter& j, const Track& t, const Names& names, uint64_t bin_ns, size_t bins) {
  size_t shown = 0, kernels = 0, kernels_shown = 0;
  uint32_t depth = 0;
  for (size_t i = 0; i < t.items.size(); ++i) {
    const bool k = t.gpu && names.Kind(t.items[i].name) == NameKind::Kernel;
    shown += t.keep[i] ? 1 : 0;
    kernels += k ? 1 : 0;
    kernels_shown += k && t.keep[i] ? 1 : 0;
    depth = std::max(depth, t.items[i].depth + 1);
  }
  j.Obj().S("label", t.label).S("type", t.gpu ? "gpu" : "cpu").U("pid", t.pid);
  if (t.gpu) j.U("device", t.device).U("stream", t.id);
  if (!t.gpu) j.U("tid", t.id);
  j.U("total", t.items.size()).U("shown", shown).U("depth", std::max<uint32_t>(depth, 1));
  if (t.gpu) j.U("kernels", kernels).U("kernels_shown", kernels_shown);
  // Items drawn individually: start as the delta from the previous one, duration, name.
  auto column = [&](const char* key, auto value) {
    j.Key(key).Arr();
    uint64_t prev = 0;
    for (size_t i = 0; i < t.items.size(); ++i)
      if (t.keep[i]) j.U64(value(t.items[i], prev));
    j.EndArr();
  };
  column("s", [](const Item& it, uint64_t& prev) {
    const uint64_t d = it.s - prev;
    prev = it.s;
    return d;
  });
  column("d", [](const Item& it, uint64_t&) { return it.e - it.s; });
  column("n", [](const Item& it, uint64_t&) { return uint64_t{it.name}; });
  if (!t.gpu) column("l", [](const Item& it, uint64_t&) { return uint64_t{it.depth}; });
  if (shown == t.items.size()) {
    j.Key("bins").Null();
  } else {
    std::vector<uint64_t> busy(bins), count(bins);
    for (size_t i = 0; i < t.items.size(); ++i)
      if (!t.keep[i]) AddToBins(t.items[i].s, t.items[i].e, bin_ns, busy, &count);
    j.Key("bins").Obj().U64Array("busy", busy).U64Array("count", count).EndObj();
  }
  j.EndObj();
}

std::string DeviceLabel(const Analysis& an, uint16_t dev) {
  for (const auto& d : an.summary.devices)
    if (d.id == dev) return fmt::format("dev {} {}", dev, d.name);
  return fmt::format("dev {}", dev);
}

void WriteUtilisation(JsonWriter& j, const Timeline& tl, const Analysis& an, const Span& span,
                      const HtmlOptions& o) {
  std::map<uint16_t, std::vector<NsInterval>> per_dev;
  for (const auto& pt : tl.processes)
    for (const Record* r : pt.acts)
      per_dev[r->device].emplace_back(span.Rel(r->start_ns),
                                      span.Rel(std::max(r->start_ns, r->end_ns)));
  const size_t bins = std::max<size_t>(o.util_bins, 1);
  const uint64_t w = std::max<uint64_t>(1, (span.len + bins - 1) / bins);
  j.Key("util").Obj().U("bin_ns", w).Key("devices").Arr();
  for (auto& [dev, iv] : per_dev) {
    std::sort(iv.begin(), iv.end());
    std::vector<uint64_t> busy(bins);
    uint64_t cs = 0, ce = 0;
    bool open = false;
    for (const auto& [s, e] : iv) {
      if (open && s <= ce) {
        ce = std::max(ce, e);
        continue;
      }
      if (open) AddToBins(cs, ce, w, busy, nullptr);
      cs = s, ce = e, open = true;
    }
    if (open) AddToBins(cs, ce, w, busy, nullptr);
    j.Obj().U("device", dev).S("label", DeviceLabel(an, dev)).U64Array("busy", busy).EndObj();
  }
  j.EndArr().EndObj();
}

void WriteMemory(JsonWriter& j, const Analysis& an, const Span& span, const HtmlOptions& o) {
  std::map<uint16_t, std::vector<const MemPoint*>> per_dev;
  for (const auto& m : an.memory_timeline) per_dev[m.device].push_back(&m);
  j.Key("memory").Obj().I("peak", an.summary.peak_memory_bytes).Key("devices").Arr();
  for (auto& [dev, pts] : per_dev) {
    bool reduced = false;
    if (pts.size() > o.max_memory_points && o.bins > 0) {
      // The largest value of each bin (the peak survives), at its own time.
      const uint64_t w = std::max<uint64_t>(1, (span.len + o.bins - 1) / o.bins);
      std::vector<const MemPoint*> kept;
      for (const MemPoint* p : pts) {
        if (!kept.empty() && span.Rel(kept.back()->t_ns) / w == span.Rel(p->t_ns) / w) {
          if (p->bytes_in_use > kept.back()->bytes_in_use) kept.back() = p;
        } else {
          kept.push_back(p);
        }
      }
      pts.swap(kept);
      reduced = true;
    }
    j.Obj().U("device", dev).S("label", DeviceLabel(an, dev)).B("reduced", reduced);
    j.Key("t").Arr();
    for (const MemPoint* p : pts) j.U64(span.Rel(p->t_ns));
    j.EndArr().Key("b").Arr();
    for (const MemPoint* p : pts) j.I64(p->bytes_in_use);
    j.EndArr().EndObj();
  }
  j.EndArr().EndObj();
}

// Device memory held over time by owner (Analysis::memory.series, docs/memory.md), one entry
// per process and device (at most kMaxOwnerSeries, the highest peaks first), with what was live
// at its peak (the matching MemorySummary::peaks entry): the page's stacked memory charts.
constexpr size_t kMaxOwnerSeries = 16;

void WriteMemoryState(JsonWriter& j, const MemoryState& s) {
  const bool split = !s.by_owner.empty();  // PyTorch's categories joined
  j.Key("at_peak").Obj().I("live_bytes", s.live_bytes).U("capacity_bytes", s.capacity_bytes);
  j.S("range", s.range).S("torch_moment", s.torch_moment).B("partial", s.partial);
  j.S("owners_by", split ? "owner" : "library").Key("owners").Arr();
  for (const MemoryOwner& o : split ? s.by_owner : s.by_library)
    j.Obj().S("name", o.name).I("live_bytes", o.live_bytes).EndObj();
  j.EndArr().Key("largest").Arr();
  for (const LiveAllocation& a : s.largest)
    j.Obj().U("bytes", a.bytes).S("owner", a.library).S("range", a.range).EndObj();
  j.EndArr().EndObj();
}

void WriteMemoryByOwner(JsonWriter& j, const Analysis& an, const Span& span) {
  const MemorySummary& m = an.memory;
  j.U("memory_by_owner_total", m.series.size()).Key("memory_by_owner").Arr();
  for (size_t i = 0; i < m.series.size() && i < kMaxOwnerSeries; ++i) {
    const MemorySeries& s = m.series[i];
    const std::string who =
        s.rank >= 0 ? fmt::format("rank {} pid {}", s.rank, s.pid) : fmt::format("pid {}", s.pid);
    j.Obj().U("pid", s.pid).I("rank", s.rank).U("device", s.device);
    j.S("label", fmt::format("{} · {}", DeviceLabel(an, s.device), who));
    j.Key("owners").Arr();
    for (const std::string& o : s.owners) j.Str(o);
    j.EndArr().Key("t").Arr();
    for (uint64_t t : s.t_ns) j.U64(span.Rel(t));
    j.EndArr().Key("bytes").Arr();
    for (int64_t b : s.bytes) j.I64(b);
    j.EndArr().U("peak_t", span.Rel(s.peak_t_ns)).I("peak_bytes", s.peak_bytes);
    if (i < m.peaks.size()) WriteMemoryState(j, m.peaks[i]);  // series[i] is peaks[i]'s
    j.EndObj();
  }
  j.EndArr();
}

// Hardware counters (docs/counters.md): PM sampling's tracks (each sample's value at its start,
// averaged per time bin past `util_bins` points) and the roofline's points (replayed kernels
// with FLOPs and DRAM bytes) under the peaks they were measured against.
void WriteCounters(JsonWriter& j, const Analysis& an, const Span& span, const HtmlOptions& o) {
  const CounterSummary& c = an.counters;
  j.Key("counters").Obj().S("roofline_text", FormatRoofline(c)).Key("tracks").Arr();
  const size_t bins = std::max<size_t>(o.util_bins, 1);
  const uint64_t w = std::max<uint64_t>(1, (span.len + bins - 1) / bins);
  for (const CounterTrack& t : c.tracks) {
    std::vector<uint64_t> ts;
    std::vector<double> vs;
    const bool reduce = t.t_ns.size() > bins;
    if (!reduce) {
      for (size_t i = 0; i < t.t_ns.size(); ++i) {
        ts.push_back(span.Rel(t.t_ns[i]));
        vs.push_back(t.value[i]);
      }
    } else {
      std::vector<double> sum(bins, 0);
      std::vector<uint32_t> n(bins, 0);
      for (size_t i = 0; i < t.t_ns.size(); ++i) {
        const size_t b = std::min<size_t>(span.Rel(t.t_ns[i]) / w, bins - 1);
        sum[b] += t.value[i];
        ++n[b];
      }
      for (size_t b = 0; b < bins; ++b)
        if (n[b] > 0) {
          ts.push_back(b * w);
          vs.push_back(sum[b] / n[b]);
        }
    }
    j.Obj().U("device", t.device);
    j.S("label", fmt::format("{} {}", DeviceLabel(an, t.device), MetricLabel(t.metric)));
    j.B("reduced", reduce).U64Array("t", ts).Key("v").Arr();
    for (double v : vs) j.Dbl(v);
    j.EndArr().EndObj();
  }
  j.EndArr().Key("roofline").Obj();
  double peak_flops = kNotMeasured, peak_bw = kNotMeasured;
  for (const KernelCounters& k : c.kernels) {
    if (!Measured(peak_flops) && Measured(k.values.peak_flops_per_s))
      peak_flops = k.values.peak_flops_per_s;
    if (!Measured(peak_bw) && Measured(k.values.peak_dram_bytes_per_s))
      peak_bw = k.values.peak_dram_bytes_per_s;
  }
  j.D("peak_flops_per_s", peak_flops).D("peak_dram_bytes_per_s", peak_bw).Key("points").Arr();
  for (const KernelCounters& k : c.kernels) {
    const double x = k.Intensity(), y = k.FlopsPerSecond();
    if (!Measured(x) || !Measured(y) || x <= 0 || y <= 0) continue;
    j.Obj().S("name", k.name).S("bound", BoundName(k.bound)).U("gpu_ns", k.gpu_ns);
    j.D("intensity", x).D("flops_per_s", y).EndObj();
  }
  j.EndArr().EndObj();
  // The top kernels no counter measured, and why (docs/counters.md, "Kernels not measured").
  j.Key("unmeasured").Arr();
  for (const UnmeasuredKernel& u : c.unmeasured)
    j.Obj()
        .S("name", u.name)
        .D("share", u.share)
        .U("launches", u.launches)
        .S("why", u.why)
        .EndObj();
  j.EndArr().EndObj();
}

}  // namespace

void WriteTimeline(JsonWriter& j, const Timeline& tl, const Analysis& an, const HtmlOptions& o) {
  Span span;
  span.start = an.summary.start_ns;
  span.len =
      std::max<uint64_t>(1, an.summary.end_ns > span.start ? an.summary.end_ns - span.start : 1);
  Names names;
  static const std::string kUnnamedRange = "(unnamed)";
  static constexpr const char* kCopyNames[6] = {"memcpy",      "memcpy HtoD", "memcpy DtoH",
                                                "memcpy DtoD", "memcpy HtoH", "memcpy PtoP"};
  std::vector<Track> gpu, cpu;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const ProcessTimeline& pt = tl.processes[pi];
    const ProcessTrace& p = *pt.process;
    std::map<std::pair<uint16_t, uint32_t>, size_t> by_stream;
    std::vector<Track> mine;
    for (const Record* r : pt.acts) {
      auto [it, added] = by_stream.try_emplace({r->device, r->tid}, mine.size());
      if (added) {
        Track t;
        t.label = fmt::format("{} · dev {} · stream {}", p.Label(), r->device, r->tid);
        t.pid = p.pid, t.device = r->device, t.id = r->tid;
        mine.push_back(std::move(t));
      }
      uint32_t name = 0;
      if (r->Kind() == RecordKind::Kernel || r->Kind() == RecordKind::GraphLaunch)
        name = names.Get(pt.KernelName(*r), NameKind::Kernel);
      else if (r->Kind() == RecordKind::Memcpy)
        name = names.Get(kCopyNames[r->flags < 6 ? r->flags : 0], NameKind::Memcpy);
      else
        name = names.Get("memset", NameKind::Memset);
      mine[it->second].items.push_back(
          {span.Rel(r->start_ns), span.Rel(std::max(r->start_ns, r->end_ns)), name, 0});
    }
    std::vector<size_t> order(mine.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::tie(mine[a].device, mine[a].id) < std::tie(mine[b].device, mine[b].id);
    });
    for (size_t i : order) gpu.push_back(std::move(mine[i]));

    const ProcessIndex& ix = pt.index;
    for (size_t i = 0; i < ix.ranges.size(); ++i) {
      const RangeInterval& r = ix.ranges[i];
      if (cpu.empty() || cpu.back().pid != p.pid || cpu.back().id != r.tid || cpu.back().gpu) {
        Track t;
        t.gpu = false;
        t.label = fmt::format("{} · thread {}", p.Label(), r.tid);
        t.pid = p.pid, t.id = r.tid;
        cpu.push_back(std::move(t));
      }
      std::string_view n = ix.Name(i);
      cpu.back().items.push_back({span.Rel(r.begin_ns), span.Rel(std::max(r.begin_ns, r.end_ns)),
                                  names.Get(n.empty() ? kUnnamedRange : n, NameKind::Range),
                                  r.depth});
    }
  }
  ChooseShown(gpu, o.max_slices);
  ChooseShown(cpu, o.max_ranges);
  const size_t bins = std::max<size_t>(o.bins, 1);
  const uint64_t bin_ns = std::max<uint64_t>(1, (span.len + bins - 1) / bins);

  j.Key("timeline").Obj().S("start_ns", std::to_string(span.start)).U("span_ns", span.len);
  j.U("bin_ns", bin_ns).U("bins", bins).U("max_slices", o.max_slices).U("max_ranges", o.max_ranges);
  names.Write(j);
  j.Key("gpu").Arr();
  for (const auto& t : gpu) WriteTrack(j, t, names, bin_ns, bins);
  j.EndArr().Key("cpu").Arr();
  for (const auto& t : cpu) WriteTrack(j, t, names, bin_ns, bins);
  j.EndArr().EndObj();
  WriteUtilisation(j, tl, an, span, o);
  WriteMemory(j, an, span, o);
  WriteMemoryByOwner(j, an, span);
  WriteCounters(j, an, span, o);
}

}  // namespace kprof::html
