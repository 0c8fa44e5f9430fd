// PM sampling per kernel name: the samples are GPU-wide averages over their interval, so a sample
// is a mix of the kernels that ran in it, each in proportion to the part of the interval it
// covered (idle time adds nothing). Per device and metric, kprof fits each kernel name one value
// to all its samples by least squares: sample_j = sum over names n of a_jn * x_n, with a_jn the
// fraction of sample j that launches of n covered. A kernel that fills whole samples gets their
// mean; kernels shorter than the interval are told apart by how the sample boundaries fall across
// them over many launches. See docs/counters.md, "PM sampling per kernel".
#include <algorithm>
#include <cmath>
#include <deque>
#include <string_view>
#include <unordered_map>

#include "analysis/counters.h"

namespace kprof::detail {
namespace {

// The design of one device's samples: for each sample that some launch overlaps, the names it
// overlaps and by which fraction of its interval; and the normal matrix G = A'A.
struct Design {
  std::vector<size_t> rows;                               // sample index of each row
  std::vector<std::vector<std::pair<size_t, double>>> a;  // per row: (column, fraction)
  size_t cols = 0;
  std::vector<double> g;  // cols x cols, row-major
  std::vector<double> chol;
  std::vector<double> inv_diag;  // diagonal of G^-1 (empty when not computed)
  bool ok = false;
};

// G^-1 b, from the Cholesky factor of G (lower triangle of `chol`).
std::vector<double> Solve(const Design& d, std::vector<double> b) {
  const size_t n = d.cols;
  for (size_t i = 0; i < n; ++i) {
    double s = b[i];
    for (size_t p = 0; p < i; ++p) s -= d.chol[i * n + p] * b[p];
    b[i] = s / d.chol[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t p = i + 1; p < n; ++p) s -= d.chol[p * n + i] * b[p];
    b[i] = s / d.chol[i * n + i];
  }
  return b;
}

// `per_active`: the design of a metric averaged over the SMs' active cycles (occupancy: a
// sample is the mix of the kernels that ran in it, whatever part of the interval they filled),
// each row scaled to sum to 1.
Design MakeDesign(const std::vector<uint64_t>& t0, const std::vector<uint64_t>& t1,
                  const std::vector<SampledLaunch>& launches, size_t cols, bool per_active) {
  Design d;
  d.cols = cols;
  std::unordered_map<size_t, std::unordered_map<size_t, double>> by_sample;
  for (const SampledLaunch& l : launches) {
    if (l.end_ns <= l.start_ns) continue;
    // The first sample ending after the launch starts (samples do not overlap each other).
    auto it = std::upper_bound(t1.begin(), t1.end(), l.start_ns);
    for (auto j = static_cast<size_t>(it - t1.begin()); j < t0.size() && t0[j] < l.end_ns; ++j) {
      if (t1[j] <= t0[j]) continue;
      const uint64_t lo = std::max(t0[j], l.start_ns), hi = std::min(t1[j], l.end_ns);
      if (hi <= lo) continue;
      by_sample[j][l.column] += static_cast<double>(hi - lo) / static_cast<double>(t1[j] - t0[j]);
    }
  }
  d.rows.reserve(by_sample.size());
  for (auto& [j, m] : by_sample) d.rows.push_back(j);
  std::sort(d.rows.begin(), d.rows.end());
  d.a.reserve(d.rows.size());
  for (size_t j : d.rows) {
    auto& m = by_sample[j];
    d.a.emplace_back(m.begin(), m.end());
    if (!per_active) continue;
    double sum = 0;
    for (const auto& [c, v] : d.a.back()) sum += v;
    for (auto& [c, v] : d.a.back()) v /= sum;
  }
  // Beyond this many names the fit (cols^2 memory, cols^3 time) is not made: only samples
  // wholly inside a name's launches give it values.
  if (cols > kMaxSampledColumns) return d;
  d.g.assign(cols * cols, 0.0);
  for (const auto& row : d.a)
    for (const auto& [c1, v1] : row)
      for (const auto& [c2, v2] : row) d.g[c1 * cols + c2] += v1 * v2;
  // A small ridge keeps names that always ran together solvable (they share their mix).
  double mean_diag = 0;
  for (size_t c = 0; c < cols; ++c) mean_diag += d.g[c * cols + c];
  mean_diag = cols ? mean_diag / static_cast<double>(cols) : 0;
  for (double ridge = 1e-9 * std::max(mean_diag, 1e-12); ridge < 1e6 * std::max(mean_diag, 1.0);
       ridge *= 100) {
    d.chol = d.g;
    for (size_t c = 0; c < cols; ++c) d.chol[c * cols + c] += ridge;
    bool pd = true;
    for (size_t i = 0; i < cols && pd; ++i) {
      for (size_t k = 0; k <= i; ++k) {
        double s = d.chol[i * cols + k];
        for (size_t p = 0; p < k; ++p) s -= d.chol[i * cols + p] * d.chol[k * cols + p];
        if (i == k) {
          if (s <= 0) {
            pd = false;
            break;
          }
          d.chol[i * cols + i] = std::sqrt(s);
        } else {
          d.chol[i * cols + k] = s / d.chol[k * cols + k];
        }
      }
    }
    if (pd) {
      d.ok = true;
      break;
    }
  }
  if (!d.ok) return d;
  d.inv_diag.assign(cols, 0.0);
  std::vector<double> e(cols, 0.0);
  for (size_t c = 0; c < cols; ++c) {  // G^-1 e_c, of which only its c-th entry is kept
    e[c] = 1.0;
    d.inv_diag[c] = Solve(d, e)[c];
    e[c] = 0.0;
  }
  return d;
}

constexpr double kWhollyInside = 0.9999;

bool IsPercent(std::string_view metric) {
  CounterRole role;
  double w;
  if (!RoleOf(metric, &role, &w)) return false;
  switch (role) {
    case CounterRole::SmPct:
    case CounterRole::MemPct:
    case CounterRole::DramPct:
    case CounterRole::L2Pct:
    case CounterRole::TensorPct:
    case CounterRole::OccupancyPct:
      return true;
    default:
      return false;
  }
}

// Whether a metric is a ratio over the SMs' active cycles rather than over the interval: a sample
// of it is the mix of the kernels that ran in it, however long the SMs idled.
bool PerActive(std::string_view metric) {
  constexpr std::string_view kSuffix = ".pct_of_peak_sustained_active";
  return metric.size() >= kSuffix.size() &&
         metric.compare(metric.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// Fits one track's metric to `d` (`plain`'s rows, scaled for a per-active metric) and adds each
// name's value to `fit`. The classification's gates (error, inflation, range) come from the
// interval metrics; a per-active one (occupancy, which no class depends on) that the samples do
// not determine is left unmeasured for that name instead.
void FitTrack(const CounterTrack& t, const Design& plain, const Design& d, bool per_active,
              std::vector<SampledFit>& fit) {
  const size_t cols = fit.size();
  std::vector<double> x(cols, 0.0);
  double sigma2 = kNotMeasured;
  if (d.ok) {
    std::vector<double> rhs(cols, 0.0);
    for (size_t r = 0; r < d.rows.size(); ++r)
      for (const auto& [c, v] : d.a[r]) rhs[c] += v * t.value[d.rows[r]];
    x = Solve(d, rhs);
    double sse = 0;
    for (size_t r = 0; r < d.rows.size(); ++r) {
      double pred = 0;
      for (const auto& [c, v] : d.a[r]) pred += v * x[c];
      const double e = t.value[d.rows[r]] - pred;
      sse += e * e;
    }
    const double dof = static_cast<double>(d.rows.size()) - static_cast<double>(cols);
    if (dof > 0) sigma2 = sse / dof;
  }
  const bool pct = IsPercent(t.metric);
  // Samples wholly inside one name's launches: their mean, where there are enough of them,
  // rather than the fit (it needs no alignment of the samples' clock with the kernels').
  std::vector<double> inside_sum(cols, 0.0);
  std::vector<size_t> inside_n(cols, 0);
  for (size_t r = 0; r < plain.rows.size(); ++r)
    for (const auto& [c, v] : plain.a[r])
      if (v >= kWhollyInside) {
        inside_sum[c] += t.value[plain.rows[r]];
        ++inside_n[c];
      }
  for (size_t c = 0; c < cols; ++c) {
    SampledFit& f = fit[c];
    if (inside_n[c] >= kMinInsideSamples) {
      AddMetric(f.values, t.metric, inside_sum[c] / static_cast<double>(inside_n[c]));
      f.inside = std::max(f.inside, inside_n[c]);
      continue;
    }
    const bool known = d.ok && !d.inv_diag.empty() && Measured(sigma2);
    if (per_active) {
      if (!known) continue;
      const double se = std::sqrt(sigma2 * std::max(0.0, d.inv_diag[c]));
      if (se <= kMaxSampledError && x[c] >= -std::max(2 * se, 5.0) &&
          (!pct || x[c] <= 100.0 + std::max(2 * se, 5.0)))
        AddMetric(f.values, t.metric, pct ? std::clamp(x[c], 0.0, 100.0) : std::max(0.0, x[c]));
      continue;
    }
    if (!d.ok) {  // no fit: not classified from partial samples
      f.error_unknown = true;
      continue;
    }
    double v = std::max(0.0, x[c]);
    if (pct) v = std::min(v, 100.0);
    AddMetric(f.values, t.metric, v);
    if (!pct) continue;
    if (!known) {
      f.error_unknown = true;
      continue;
    }
    const double se = std::sqrt(sigma2 * std::max(0.0, d.inv_diag[c]));
    f.max_error = std::max(f.max_error, se);
    // How much the other names' columns inflate this one's variance: names that always ran in
    // the same proportions (interleaved launches) cannot be told apart, whatever the residual
    // says.
    f.inflation = std::max(f.inflation, d.inv_diag[c] * d.g[c * cols + c]);
    // A fitted percentage far outside 0-100 says the mix is not what the samples hold.
    if (x[c] > 100.0 + std::max(2 * se, 5.0) || x[c] < -std::max(2 * se, 5.0))
      f.out_of_range = true;
  }
}

}  // namespace

std::vector<SampledFit> FitSamples(const std::vector<const CounterTrack*>& tracks,
                                   const std::vector<SampledLaunch>& launches, size_t cols) {
  std::vector<SampledFit> fit(cols);
  if (tracks.empty() || cols == 0) return fit;
  // The tracks of a device share their sample times (each sample holds every metric): one
  // design per set of times and kind of metric.
  struct Cached {
    const CounterTrack* times;
    bool per_active;
    Design d;
  };
  std::deque<Cached> cache;
  const auto design = [&](const CounterTrack* t, bool per_active) -> const Design& {
    for (const Cached& c : cache)
      if (c.per_active == per_active && c.times->t_ns == t->t_ns && c.times->end_ns == t->end_ns)
        return c.d;
    cache.push_back({t, per_active, MakeDesign(t->t_ns, t->end_ns, launches, cols, per_active)});
    return cache.back().d;
  };
  for (const CounterTrack* t : tracks) {
    const bool per_active = PerActive(t->metric);
    const Design& plain = design(t, false);
    if (plain.rows.empty()) continue;
    FitTrack(*t, plain, per_active ? design(t, true) : plain, per_active, fit);
  }
  std::vector<uint64_t> ns(cols, 0), n(cols, 0);
  for (const SampledLaunch& l : launches) {
    ns[l.column] += l.end_ns > l.start_ns ? l.end_ns - l.start_ns : 0;
    ++n[l.column];
  }
  for (size_t c = 0; c < cols; ++c) fit[c].mean_ns = n[c] ? ns[c] / n[c] : 0;
  // The weight: the first track's samples (every track of a device shares them).
  for (const auto& row : design(tracks.front(), false).a)
    for (const auto& [c, v] : row) {
      fit[c].weight += v;
      ++fit[c].samples;
    }
  return fit;
}

}  // namespace kprof::detail
