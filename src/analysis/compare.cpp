// Run comparison core: digests, Mann-Whitney U, bootstrap, diff decisions and budget checks.
// Plain C++ (fmt only); JSON reading/writing is in the CLI layer (src/cli/diff.cpp, check.cpp).
#include "kprof/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <utility>

namespace kprof {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double AsDouble(uint64_t v) { return static_cast<double>(v); }

uint64_t CeilToU64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 1.8e19) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(std::ceil(v));
}

int VerdictRank(Verdict v) {
  switch (v) {
    case Verdict::Regression:
      return 5;
    case Verdict::Added:
    case Verdict::Removed:
      return 4;
    case Verdict::Improvement:
      return 3;
    case Verdict::Changed:
      return 2;
    case Verdict::Same:
      return 0;
  }
  return 0;
}

/// Most severe of two verdicts for an item (Added/Removed are set by the caller, not merged).
Verdict Worse(Verdict a, Verdict b) { return VerdictRank(b) > VerdictRank(a) ? b : a; }

std::string FormatP(double p) {
  if (p < 0.001) return "p<0.001";
  return fmt::format("p={:.3f}", p);
}

std::string FormatCount(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.1f}", v);
}

bool AllEqual(const std::vector<double>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

/// Compares one metric across the runs of both sides; fills everything but `metric`'s name.
MetricDiff CompareValues(std::string metric, MetricKind kind, std::vector<double> base,
                         std::vector<double> now, DiffMode mode, const DiffOptions& opts) {
  MetricDiff d;
  d.metric = std::move(metric);
  d.kind = kind;
  d.base_median = Median(base);
  d.new_median = Median(now);
  d.abs_change = d.new_median - d.base_median;
  if (d.base_median != 0)
    d.rel_change = d.abs_change / d.base_median;
  else
    d.rel_change = d.new_median == 0 ? 0 : kInf;

  const double thr = opts.threshold;
  const bool up = d.rel_change > thr;
  const bool down = d.rel_change < -thr;
  switch (kind) {
    case MetricKind::Count:
    case MetricKind::Bytes: {
      if (d.abs_change == 0) break;
      d.verdict = d.abs_change > 0 ? Verdict::Regression : Verdict::Improvement;
      const bool fmt_bytes = kind == MetricKind::Bytes;
      d.reason = fmt::format(
          "{}{} ({} -> {})", d.abs_change > 0 ? "+" : "-",
          FormatMetric(std::fabs(d.abs_change), kind),
          fmt_bytes ? FormatBytes(CeilToU64(d.base_median)) : FormatCount(d.base_median),
          fmt_bytes ? FormatBytes(CeilToU64(d.new_median)) : FormatCount(d.new_median));
      if (!AllEqual(base) || !AllEqual(now)) d.reason += ", varies between runs";
      break;
    }
    case MetricKind::Memory: {
      const bool big = std::fabs(d.abs_change) > AsDouble(opts.min_memory_bytes);
      if (up && big) d.verdict = Verdict::Regression;
      if (down && big) d.verdict = Verdict::Improvement;
      if (d.verdict != Verdict::Same)
        d.reason =
            fmt::format("{} ({}{})", FormatPercent(d.rel_change), d.abs_change > 0 ? "+" : "-",
                        FormatBytes(CeilToU64(std::fabs(d.abs_change))));
      break;
    }
    case MetricKind::Time: {
      const bool big = std::fabs(d.abs_change) > AsDouble(opts.min_time_ns);
      bool significant = true;
      if (mode == DiffMode::Test) {
        const MannWhitneyResult mw = MannWhitneyU(now, base);
        d.p_value = mw.p;
        d.p_exact = mw.exact;
        d.rel_ci = BootstrapRelChangeCi(base, now, opts.bootstrap_resamples);
        significant = mw.p < opts.alpha;
      }
      const std::string change =
          fmt::format("{} ({})", FormatPercent(d.rel_change), FormatSignedDuration(d.abs_change));
      if ((up || down) && big && significant) {
        d.verdict = up ? Verdict::Regression : Verdict::Improvement;
        d.reason = d.p_value ? fmt::format("{}, {}", change, FormatP(*d.p_value)) : change;
      } else if ((up || down) && big) {
        d.reason = fmt::format("{}, not significant ({})", change, FormatP(*d.p_value));
      } else if (up || down) {
        d.reason = fmt::format("{}, below min-time", change);
      }
      break;
    }
  }
  d.base_values = std::move(base);
  d.new_values = std::move(now);
  return d;
}

template <class Map, class Fn>
std::vector<double> Values(const std::vector<RunDigest>& runs, Map RunDigest::*map,
                           const std::string& key, Fn field) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const auto& r : runs) {
    const auto& m = r.*map;
    auto it = m.find(key);
    out.push_back(it == m.end() ? 0.0 : AsDouble(field(it->second)));
  }
  return out;
}

template <class Map>
bool AnyHas(const std::vector<RunDigest>& runs, Map RunDigest::*map, const std::string& key) {
  return std::any_of(runs.begin(), runs.end(),
                     [&](const RunDigest& r) { return (r.*map).count(key) != 0; });
}

void SortByImpact(std::vector<ItemDiff>& items) {
  std::sort(items.begin(), items.end(), [](const ItemDiff& a, const ItemDiff& b) {
    if (a.impact_ns != b.impact_ns) return a.impact_ns > b.impact_ns;
    if (a.verdict != b.verdict) return VerdictRank(a.verdict) > VerdictRank(b.verdict);
    return a.name < b.name;
  });
}

/// Op/kernel item: calls (count) and time, plus added/removed.
template <class Map, class CallsFn, class TimeFn>
ItemDiff CompareItem(Section section, const std::string& name, const std::vector<RunDigest>& base,
                     const std::vector<RunDigest>& now, Map RunDigest::*map, CallsFn calls,
                     const char* time_metric, TimeFn time, DiffMode mode, const DiffOptions& opts) {
  ItemDiff item;
  item.section = section;
  item.name = name;
  MetricDiff c = CompareValues("calls", MetricKind::Count, Values(base, map, name, calls),
                               Values(now, map, name, calls), mode, opts);
  // Op calls are range occurrences: a change says the workload differs, not that it is slower.
  // Kernel calls are launches: more of them is a regression.
  if (section == Section::Op && c.verdict != Verdict::Same) c.verdict = Verdict::Changed;
  MetricDiff t = CompareValues(time_metric, MetricKind::Time, Values(base, map, name, time),
                               Values(now, map, name, time), mode, opts);
  item.impact_ns = std::fabs(t.abs_change);
  item.verdict = Worse(c.verdict, t.verdict);
  const bool in_base = AnyHas(base, map, name);
  const bool in_new = AnyHas(now, map, name);
  if (!in_base) item.verdict = Verdict::Added;
  if (!in_new) item.verdict = Verdict::Removed;
  item.metrics.push_back(std::move(c));
  item.metrics.push_back(std::move(t));
  return item;
}

struct HintTally {
  size_t runs = 0;
  Severity severity = Severity::Info;
  std::string summary;
};

std::map<std::string, HintTally> TallyHints(const std::vector<RunDigest>& runs) {
  std::map<std::string, HintTally> out;
  for (const auto& r : runs) {
    std::set<std::string> seen;
    for (const auto& h : r.hints) {
      auto& t = out[h.id];
      if (seen.insert(h.id).second) ++t.runs;
      if (t.summary.empty() || h.severity > t.severity) {
        t.severity = std::max(t.severity, h.severity);
        t.summary = h.summary;
      }
    }
  }
  return out;
}

/// Hints raised by more than half of the runs, with the highest severity seen.
std::map<std::string, HintTally> MajorityHints(const std::vector<RunDigest>& runs) {
  auto all = TallyHints(runs);
  std::erase_if(all, [&](const auto& kv) { return kv.second.runs * 2 <= runs.size(); });
  return all;
}

std::vector<double> TotalValues(const std::vector<RunDigest>& runs, uint64_t RunTotals::*field) {
  std::vector<double> v;
  v.reserve(runs.size());
  for (const auto& r : runs) v.push_back(AsDouble(r.totals.*field));
  return v;
}

void AddQualityWarnings(const std::vector<RunDigest>& runs, const char* side,
                        std::vector<std::string>& out) {
  for (const auto& r : runs) {
    if (r.totals.incomplete_processes > 0)
      out.push_back(
          fmt::format("{} run {}: {} process(es) did not finish writing (crash or "
                      "kill); its totals may be short",
                      side, r.source, r.totals.incomplete_processes));
    if (r.totals.dropped_records > 0)
      out.push_back(fmt::format("{} run {}: {} records dropped by CUPTI; its totals are short",
                                side, r.source, r.totals.dropped_records));
  }
}

std::optional<std::pair<double, std::string_view>> SplitNumber(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty() || s.front() == '-' || s.front() == '+') return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string_view unit(ptr, static_cast<size_t>(s.data() + s.size() - ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return std::make_pair(v, unit);
}

std::optional<uint64_t> ScaleToU64(double v, double scale) {
  const double x = std::round(v * scale);
  if (!(x >= 0) || x >= 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(x);
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Decodes one UTF-8 sequence at s[i]; returns the code point (0xFFFD when invalid) and
/// advances i past it (by one byte when invalid).
uint32_t DecodeUtf8(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  uint32_t cp = 0, min = 0;
  if (b0 < 0x80) {
    ++i;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Digest

const std::vector<RunMetric>& RunMetrics() {
  static const std::vector<RunMetric> kMetrics = {
      {"wall_ns", "wall", MetricKind::Time, &RunTotals::wall_ns},
      {"gpu_busy_ns", "GPU busy", MetricKind::Time, &RunTotals::gpu_busy_ns},
      {"kernel_ns", "kernel time", MetricKind::Time, &RunTotals::kernel_ns},
      {"memcpy_ns", "memcpy time", MetricKind::Time, &RunTotals::memcpy_ns},
      {"sync_ns", "sync time", MetricKind::Time, &RunTotals::sync_ns},
      {"kernels", "kernels", MetricKind::Count, &RunTotals::kernels},
      {"launches", "launches", MetricKind::Count, &RunTotals::launches},
      {"syncs", "syncs", MetricKind::Count, &RunTotals::syncs},
      {"memcpys", "memcpys", MetricKind::Count, &RunTotals::memcpys},
      {"memcpy_bytes", "memcpy bytes", MetricKind::Bytes, &RunTotals::memcpy_bytes},
      {"memsets", "memsets", MetricKind::Count, &RunTotals::memsets},
      {"peak_memory_bytes", "peak memory", MetricKind::Memory, &RunTotals::peak_memory_bytes},
  };
  return kMetrics;
}

RunDigest MakeDigest(const Analysis& analysis, const std::vector<Hint>& hints, std::string source) {
  RunDigest d;
  d.source = std::move(source);
  const RunSummary& s = analysis.summary;
  RunTotals& t = d.totals;
  t.wall_ns = s.wall_ns;
  t.gpu_busy_ns = s.gpu_busy_ns;
  t.kernel_ns = s.kernel_ns;
  t.memcpy_ns = s.memcpy_ns;
  t.sync_ns = s.sync_ns;
  t.kernels = s.kernels;
  t.launches = s.launches;
  t.syncs = s.syncs;
  t.memcpys = s.memcpys;
  for (uint64_t b : s.memcpy_bytes) t.memcpy_bytes += b;
  t.memsets = s.memsets;
  t.peak_memory_bytes = s.peak_memory_bytes > 0 ? static_cast<uint64_t>(s.peak_memory_bytes) : 0;
  t.processes = s.processes;
  t.incomplete_processes = s.incomplete_processes;
  t.dropped_records = s.dropped_records;
  for (const auto& row : analysis.ops) {
    auto& op = d.ops[row.key];
    op.calls += row.calls;
    op.gpu_ns += row.gpu_ns;
  }
  for (const auto& k : analysis.kernels) {
    auto& dk = d.kernels[k.name];
    dk.calls += k.stat.count;
    dk.total_ns += k.stat.total_ns;
  }
  for (const auto& h : hints) d.hints.push_back({h.id, h.severity, h.summary});
  return d;
}

// ---------------------------------------------------------------------------------------------
// Statistics

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return lo + (hi - lo) / 2;
}

double MannWhitneyExactP(size_t n1, size_t n2, double u) {
  if (n1 == 0 || n2 == 0) return 1;
  // count[m][n][k]: number of orderings of m x-values and n y-values with U = k; by the last
  // (largest) value: if it is an x it beats all n y's, f(m,n,k) = f(m-1,n,k-n) + f(m,n-1,k).
  std::vector<std::vector<std::vector<double>>> f(n1 + 1, std::vector<std::vector<double>>(n2 + 1));
  for (size_t m = 0; m <= n1; ++m) {
    for (size_t n = 0; n <= n2; ++n) {
      auto& cur = f[m][n];
      cur.assign(m * n + 1, 0.0);
      if (m == 0 || n == 0) {
        cur[0] = 1;
        continue;
      }
      const auto& a = f[m - 1][n];
      const auto& b = f[m][n - 1];
      for (size_t k = 0; k < b.size(); ++k) cur[k] += b[k];
      for (size_t k = 0; k < a.size(); ++k) cur[k + n] += a[k];
    }
  }
  const auto& dist = f[n1][n2];
  double total = 0;
  for (double c : dist) total += c;
  const double max_u = AsDouble(n1 * n2);
  const double hi = std::max(u, max_u - u);
  double tail = 0;
  for (size_t k = 0; k < dist.size(); ++k)
    if (AsDouble(k) >= hi - 1e-9) tail += dist[k];
  return std::min(1.0, 2 * tail / total);
}

MannWhitneyResult MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y,
                               MannWhitneyMethod method) {
  MannWhitneyResult r;
  const size_t n1 = x.size(), n2 = y.size();
  if (n1 == 0 || n2 == 0) return r;
  for (double a : x)
    for (double b : y) r.u += a > b ? 1.0 : (a == b ? 0.5 : 0.0);

  std::vector<double> all(x);
  all.insert(all.end(), y.begin(), y.end());
  std::sort(all.begin(), all.end());
  double tie_term = 0;  // sum of t^3 - t over groups of tied values
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const double t = AsDouble(j - i);
    tie_term += t * t * t - t;
    i = j;
  }

  const bool exact = method == MannWhitneyMethod::Exact ||
                     (method == MannWhitneyMethod::Auto && tie_term == 0 &&
                      n1 <= kMannWhitneyExactMax && n2 <= kMannWhitneyExactMax);
  if (exact) {
    r.exact = true;
    r.p = MannWhitneyExactP(n1, n2, r.u);
    return r;
  }
  const double a = AsDouble(n1), b = AsDouble(n2), n = a + b;
  const double mu = a * b / 2;
  const double var = a * b / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (!(var > 0)) return r;  // every value tied: no evidence of a difference
  const double z = (std::max(r.u, a * b - r.u) - mu - 0.5) / std::sqrt(var);
  r.p = std::clamp(std::erfc(z / std::sqrt(2.0)), 0.0, 1.0);
  return r;
}

std::optional<Interval> BootstrapRelChangeCi(const std::vector<double>& base,
                                             const std::vector<double>& now, size_t resamples,
                                             double confidence, uint64_t seed) {
  if (base.empty() || now.empty() || resamples == 0) return std::nullopt;
  std::mt19937_64 rng(seed);  // fully specified by the standard: same sequence everywhere
  std::vector<double> rb(base.size()), rn(now.size()), rel;
  rel.reserve(resamples);
  for (size_t i = 0; i < resamples; ++i) {
    for (auto& v : rb) v = base[rng() % base.size()];
    for (auto& v : rn) v = now[rng() % now.size()];
    const double mb = Median(rb), mn = Median(rn);
    if (mb == 0) return std::nullopt;
    rel.push_back((mn - mb) / mb);
  }
  std::sort(rel.begin(), rel.end());
  const double tail = (1 - confidence) / 2;
  const auto last = static_cast<double>(resamples - 1);
  const auto lo = static_cast<size_t>(std::floor(tail * last));
  const auto hi = static_cast<size_t>(std::ceil((1 - tail) * last));
  return Interval{rel[lo], rel[std::min(hi, resamples - 1)]};
}

// ---------------------------------------------------------------------------------------------
// Diff

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::Same:
      return "same";
    case Verdict::Changed:
      return "changed";
    case Verdict::Improvement:
      return "improvement";
    case Verdict::Regression:
      return "regression";
    case Verdict::Added:
      return "added";
    case Verdict::Removed:
      return "removed";
  }
  return "?";
}

const char* SectionName(Section s) {
  switch (s) {
    case Section::Run:
      return "run";
    case Section::Op:
      return "op";
    case Section::Kernel:
      return "kernel";
  }
  return "?";
}

const MetricDiff* ItemDiff::Find(std::string_view metric) const {
  for (const auto& m : metrics)
    if (m.metric == metric) return &m;
  return nullptr;
}

bool DiffResult::Regressed() const { return Count(Verdict::Regression) > 0; }

size_t DiffResult::Count(Verdict v) const {
  size_t n = 0;
  for (const auto* items : {&run, &ops, &kernels})
    for (const auto& i : *items) n += i.verdict == v ? 1 : 0;
  return n;
}

DiffResult Diff(const std::vector<RunDigest>& base, const std::vector<RunDigest>& now,
                const DiffOptions& opts) {
  if (base.empty()) throw InputError("diff: no base runs");
  if (now.empty()) throw InputError("diff: no new runs");
  DiffResult r;
  r.options = opts;
  r.base_runs = base.size();
  r.new_runs = now.size();
  const size_t min_runs = std::max<size_t>(opts.min_runs_for_test, 2);
  if (base.size() >= min_runs && now.size() >= min_runs) {
    r.mode = DiffMode::Test;
    r.mode_note =
        fmt::format("{} vs {} runs: Mann-Whitney U (alpha {}), threshold {}, min-time {}",
                    base.size(), now.size(), opts.alpha, FormatPercent(opts.threshold).substr(1),
                    FormatDuration(opts.min_time_ns));
  } else {
    r.mode = DiffMode::ThresholdOnly;
    const std::string why = base.size() == 1 && now.size() == 1
                                ? std::string("single run per side")
                                : fmt::format("{} vs {} runs (fewer than {} per side)", base.size(),
                                              now.size(), min_runs);
    r.mode_note =
        fmt::format("{}: threshold only ({}, min-time {})", why,
                    FormatPercent(opts.threshold).substr(1), FormatDuration(opts.min_time_ns));
  }

  for (const auto& m : RunMetrics()) {
    ItemDiff item;
    item.section = Section::Run;
    item.name = m.label;
    item.metrics.push_back(CompareValues(m.key, m.kind, TotalValues(base, m.field),
                                         TotalValues(now, m.field), r.mode, opts));
    item.verdict = item.metrics.back().verdict;
    if (m.kind == MetricKind::Time) item.impact_ns = std::fabs(item.metrics.back().abs_change);
    r.run.push_back(std::move(item));
  }

  std::set<std::string> op_names, kernel_names;
  for (const auto* side : {&base, &now}) {
    for (const auto& d : *side) {
      for (const auto& [name, op] : d.ops) op_names.insert(name);
      for (const auto& [name, k] : d.kernels) kernel_names.insert(name);
    }
  }
  for (const auto& name : op_names)
    r.ops.push_back(CompareItem(
        Section::Op, name, base, now, &RunDigest::ops, [](const DigestOp& o) { return o.calls; },
        "gpu_ns", [](const DigestOp& o) { return o.gpu_ns; }, r.mode, opts));
  for (const auto& name : kernel_names)
    r.kernels.push_back(CompareItem(
        Section::Kernel, name, base, now, &RunDigest::kernels,
        [](const DigestKernel& k) { return k.calls; }, "total_ns",
        [](const DigestKernel& k) { return k.total_ns; }, r.mode, opts));
  SortByImpact(r.ops);
  SortByImpact(r.kernels);

  const auto hb = MajorityHints(base), hn = MajorityHints(now);
  const auto all_b = TallyHints(base), all_n = TallyHints(now);
  auto runs_with = [](const std::map<std::string, HintTally>& m, const std::string& id) {
    auto it = m.find(id);
    return it == m.end() ? size_t{0} : it->second.runs;
  };
  for (const auto& [id, t] : hn)
    if (!hb.count(id))
      r.hints.push_back({id, t.severity, t.summary, true, runs_with(all_b, id), t.runs});
  for (const auto& [id, t] : hb)
    if (!hn.count(id))
      r.hints.push_back({id, t.severity, t.summary, false, t.runs, runs_with(all_n, id)});
  std::stable_sort(r.hints.begin(), r.hints.end(), [](const HintChange& a, const HintChange& b) {
    if (a.appeared != b.appeared) return a.appeared;
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.id < b.id;
  });

  AddQualityWarnings(base, "base", r.warnings);
  AddQualityWarnings(now, "new", r.warnings);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Budgets

bool CheckResult::Failed() const { return Failures() > 0; }

size_t CheckResult::Failures() const {
  return static_cast<size_t>(
      std::count_if(lines.begin(), lines.end(), [](const BudgetLine& l) { return !l.pass; }));
}

CheckResult CheckBudget(const std::vector<RunDigest>& runs, const Budget& budget) {
  if (runs.empty()) throw InputError("check: no runs");
  CheckResult r;
  r.runs = runs.size();
  auto add = [&](std::string scope, std::string name, std::string metric, MetricKind kind,
                 uint64_t limit, double actual) {
    BudgetLine l;
    l.scope = std::move(scope);
    l.name = std::move(name);
    l.metric = std::move(metric);
    l.kind = kind;
    l.limit = AsDouble(limit);
    l.actual = actual;
    l.pass = actual <= l.limit;
    l.message = fmt::format("{} {} {} budget", FormatMetric(actual, kind), l.pass ? "<=" : ">",
                            FormatMetric(l.limit, kind));
    r.lines.push_back(std::move(l));
  };
  auto run_line = [&](const std::optional<uint64_t>& limit, const char* metric, const char* label,
                      MetricKind kind, uint64_t RunTotals::*field) {
    if (limit) add("run", label, metric, kind, *limit, Median(TotalValues(runs, field)));
  };
  run_line(budget.max_wall_ns, "max_wall_ns", "wall", MetricKind::Time, &RunTotals::wall_ns);
  run_line(budget.max_kernels, "max_kernels", "kernels", MetricKind::Count, &RunTotals::kernels);
  run_line(budget.max_syncs, "max_syncs", "syncs", MetricKind::Count, &RunTotals::syncs);
  run_line(budget.max_peak_memory_bytes, "max_peak_memory_bytes", "peak memory", MetricKind::Memory,
           &RunTotals::peak_memory_bytes);

  if (budget.max_hint_severity) {
    BudgetLine l;
    l.scope = "run";
    l.name = "hints";
    l.metric = "max_hint_severity";
    l.kind = MetricKind::Count;
    l.limit = *budget.max_hint_severity;
    l.actual = kNoHintAllowed;
    std::vector<std::string> offending;
    for (const auto& [id, t] : MajorityHints(runs)) {
      l.actual = std::max(l.actual, static_cast<double>(t.severity));
      if (static_cast<int>(t.severity) > *budget.max_hint_severity)
        offending.push_back(fmt::format("{} ({})", id, SeverityName(t.severity)));
    }
    l.pass = offending.empty();
    const std::string allowed =
        *budget.max_hint_severity == kNoHintAllowed
            ? std::string("none")
            : SeverityName(static_cast<Severity>(*budget.max_hint_severity));
    l.message = l.pass ? fmt::format("no hint above {}", allowed)
                       : fmt::format("hints above {}: {}", allowed, fmt::join(offending, ", "));
    r.lines.push_back(std::move(l));
  }

  auto item_lines = [&](const char* scope, const std::map<std::string, BudgetLimits>& limits,
                        auto map, auto calls, auto time) {
    for (const auto& [name, lim] : limits) {
      if (!AnyHas(runs, map, name)) {
        BudgetLine l;
        l.scope = scope;
        l.name = name;
        l.metric = lim.max_gpu_ns ? "max_gpu_ns" : "max_calls";
        l.limit = AsDouble(lim.max_gpu_ns ? *lim.max_gpu_ns : lim.max_calls.value_or(0));
        l.kind = lim.max_gpu_ns ? MetricKind::Time : MetricKind::Count;
        l.missing = true;
        l.message = fmt::format("{} not present in the runs (stale budget line?)", scope);
        r.lines.push_back(std::move(l));
        continue;
      }
      if (lim.max_gpu_ns)
        add(scope, name, "max_gpu_ns", MetricKind::Time, *lim.max_gpu_ns,
            Median(Values(runs, map, name, time)));
      if (lim.max_calls)
        add(scope, name, "max_calls", MetricKind::Count, *lim.max_calls,
            Median(Values(runs, map, name, calls)));
    }
  };
  item_lines(
      "op", budget.ops, &RunDigest::ops, [](const DigestOp& o) { return o.calls; },
      [](const DigestOp& o) { return o.gpu_ns; });
  item_lines(
      "kernel", budget.kernels, &RunDigest::kernels, [](const DigestKernel& k) { return k.calls; },
      [](const DigestKernel& k) { return k.total_ns; });
  return r;
}

Budget BudgetFromRuns(const std::vector<RunDigest>& runs, const BudgetFromRunsOptions& opts) {
  if (runs.empty()) throw InputError("check: no baseline runs");
  constexpr double kMinTimeSlackNs = 50'000;       // the diff's default min-time
  constexpr double kMinMemorySlack = 1024 * 1024;  // the diff's default min-memory
  auto time_limit = [&](double median) {
    return CeilToU64(std::max(median * (1 + opts.margin), median + kMinTimeSlackNs));
  };
  auto count_limit = [&](double median) { return CeilToU64(median * (1 + opts.count_margin)); };
  auto total = [&](uint64_t RunTotals::*field) { return Median(TotalValues(runs, field)); };

  Budget b;
  b.max_wall_ns = time_limit(total(&RunTotals::wall_ns));
  b.max_kernels = count_limit(total(&RunTotals::kernels));
  b.max_syncs = count_limit(total(&RunTotals::syncs));
  const double peak = total(&RunTotals::peak_memory_bytes);
  b.max_peak_memory_bytes = CeilToU64(std::max(peak * (1 + opts.margin), peak + kMinMemorySlack));
  int worst = static_cast<int>(Severity::Info);
  for (const auto& [id, t] : MajorityHints(runs))
    worst = std::max(worst, static_cast<int>(t.severity));
  b.max_hint_severity = worst;

  std::set<std::string> ops;
  std::map<std::string, double> kernel_time;
  for (const auto& r : runs) {
    for (const auto& [name, op] : r.ops) ops.insert(name);
    for (const auto& [name, k] : r.kernels) kernel_time[name] = 0;
  }
  for (const auto& name : ops) {
    BudgetLimits l;
    l.max_gpu_ns = time_limit(
        Median(Values(runs, &RunDigest::ops, name, [](const DigestOp& o) { return o.gpu_ns; })));
    l.max_calls = count_limit(
        Median(Values(runs, &RunDigest::ops, name, [](const DigestOp& o) { return o.calls; })));
    b.ops[name] = l;
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (auto& [name, t] : kernel_time) {
    t = Median(
        Values(runs, &RunDigest::kernels, name, [](const DigestKernel& k) { return k.total_ns; }));
    ranked.emplace_back(t, name);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& c) {
    return a.first != c.first ? a.first > c.first : a.second < c.second;
  });
  if (ranked.size() > opts.top_kernels) ranked.resize(opts.top_kernels);
  for (const auto& [t, name] : ranked) {
    BudgetLimits l;
    l.max_gpu_ns = time_limit(t);
    l.max_calls = count_limit(Median(
        Values(runs, &RunDigest::kernels, name, [](const DigestKernel& k) { return k.calls; })));
    b.kernels[name] = l;
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Parsing and formatting

std::optional<uint64_t> ParseDurationNs(std::string_view s) {
  auto num = SplitNumber(s);
  if (!num) return std::nullopt;
  const auto [v, unit] = *num;
  double scale = 0;
  if (unit.empty() || unit == "ns")
    scale = 1;
  else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs")  // us, micro sign, mu
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else
    return std::nullopt;
  return ScaleToU64(v, scale);
}

std::optional<double> ParseFraction(std::string_view s) {
  auto num = SplitNumber(s);
  if (!num) return std::nullopt;
  const auto [v, unit] = *num;
  if (unit == "%") return v / 100;
  if (unit.empty() && v <= 1) return v;  // "5" is ambiguous (5%? 500%?): write 5% or 0.05
  return std::nullopt;
}

std::optional<uint64_t> ParseBytes(std::string_view s) {
  auto num = SplitNumber(s);
  if (!num) return std::nullopt;
  const auto [v, unit_sv] = *num;
  std::string unit(unit_sv);
  if (!unit.empty() && (unit[0] == 'k')) unit[0] = 'K';
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},         {"KB", 1e3},      {"MB", 1e6},         {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
  };
  for (const auto& [name, scale] : kUnits)
    if (unit == name) return ScaleToU64(v, scale);
  return std::nullopt;
}

std::optional<int> ParseHintSeverity(std::string_view s) {
  if (s == "none") return kNoHintAllowed;
  for (auto sev : {Severity::Info, Severity::Warning, Severity::Critical})
    if (s == SeverityName(sev)) return static_cast<int>(sev);
  return std::nullopt;
}

std::string FormatSignedDuration(double ns) {
  const double a = std::fabs(ns);
  if (a < 0.5) return "0 ns";
  return (ns < 0 ? "-" : "+") + FormatDuration(static_cast<uint64_t>(std::llround(a)));
}

std::string FormatPercent(double fraction) {
  if (std::isinf(fraction)) return fraction > 0 ? "new" : "gone";
  if (std::isnan(fraction)) return "n/a";
  return fmt::format("{:+.1f}%", fraction * 100);
}

std::string FormatMetric(double value, MetricKind kind) {
  const uint64_t rounded = CeilToU64(std::round(value));
  switch (kind) {
    case MetricKind::Time:
      return FormatDuration(rounded);
    case MetricKind::Count:
      return FormatCount(value);
    case MetricKind::Bytes:
    case MetricKind::Memory:
      return FormatBytes(rounded);
  }
  return "?";
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = DecodeUtf8(s, i);
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        // XML 1.0 forbids other C0 controls and U+FFFE/U+FFFF even as character references.
        AppendUtf8(out, cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF ? 0xFFFD : cp);
    }
  }
  return out;
}

}  // namespace kprof
