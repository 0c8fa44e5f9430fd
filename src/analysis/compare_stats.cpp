// Statistics behind kprof diff: medians, the two-sided Mann-Whitney U test (exact distribution
// for small samples, normal approximation otherwise) and the bootstrap confidence interval of a
// relative change of medians. Pure functions over samples: nothing here knows about runs.
#include <algorithm>
#include <cmath>
#include <random>

#include "analysis/compare_internal.h"
#include "kprof/compare.h"

namespace kprof {

using compare_detail::AsDouble;

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

}  // namespace kprof
