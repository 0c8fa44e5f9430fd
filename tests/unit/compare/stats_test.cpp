// Statistics of kprof diff: Mann-Whitney U (exact and normal approximation), median, bootstrap.
//
// Reference values:
// - scipy.stats.mannwhitneyu documentation example (males vs females, Conover 1980):
//   males = [19, 22, 16, 29, 24], females = [20, 11, 17, 12] -> U = 17,
//   method="exact": p = 0.1111111111111111, method="asymptotic": p = 0.11134688653314041.
// - Complete separation: the two-sided exact p is 2 / C(n1+n2, n1): 5v5 2/252, 4v4 2/70,
//   3v3 2/20 (closed form).
// - Tied samples: normal approximation with tie correction and continuity correction, computed
//   independently (plain Python, formula of scipy/Conover) for the samples below:
//   x = [1,2,2,3,4,5,5,6], y = [3,4,5,6,6,7,8,9] -> U = 11, p = 0.029964585224922784;
//   x = 0..9, y = x + 3.5 (n = 10, no ties, beyond the exact range) -> U = 21,
//   p = 0.031209012771740242.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kprof/compare.h"

namespace kprof {
namespace {

TEST(MannWhitney, ScipyDocExampleExact) {
  const std::vector<double> males = {19, 22, 16, 29, 24}, females = {20, 11, 17, 12};
  const auto r = MannWhitneyU(males, females);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 17);
  EXPECT_NEAR(r.p, 0.1111111111111111, 1e-12);
  // Swapping the samples gives the complementary U and the same two-sided p.
  const auto s = MannWhitneyU(females, males);
  EXPECT_DOUBLE_EQ(s.u, 3);
  EXPECT_NEAR(s.p, r.p, 1e-12);
}

TEST(MannWhitney, ScipyDocExampleAsymptotic) {
  const std::vector<double> males = {19, 22, 16, 29, 24}, females = {20, 11, 17, 12};
  const auto r = MannWhitneyU(males, females, MannWhitneyMethod::Asymptotic);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 17);
  EXPECT_NEAR(r.p, 0.11134688653314041, 1e-12);
  EXPECT_NEAR(MannWhitneyU(males, females, MannWhitneyMethod::Exact).p, 0.1111111111111111, 1e-12);
}

TEST(MannWhitney, CompleteSeparationExactP) {
  EXPECT_NEAR(MannWhitneyU({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}).p, 2.0 / 252, 1e-15);
  EXPECT_NEAR(MannWhitneyU({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}).p, 2.0 / 252, 1e-15);
  EXPECT_NEAR(MannWhitneyU({1, 2, 3, 4}, {5, 6, 7, 8}).p, 2.0 / 70, 1e-15);
  // 3 v 3 can never reach p < 0.1: why diff needs 4 runs per side for the test.
  EXPECT_NEAR(MannWhitneyU({1, 2, 3}, {4, 5, 6}).p, 0.1, 1e-15);
  EXPECT_DOUBLE_EQ(MannWhitneyU({1, 2, 3}, {4, 5, 6}).u, 0);
}

TEST(MannWhitney, ExactDistributionMatchesEnumeration) {
  // Enumerate every split of ranks 1..n1+n2 for small sizes and compare the tail.
  for (size_t n1 = 1; n1 <= 5; ++n1) {
    for (size_t n2 = 1; n2 <= 5; ++n2) {
      const size_t n = n1 + n2;
      std::vector<int> counts(n1 * n2 + 1, 0);
      int total = 0;
      for (unsigned mask = 0; mask < (1u << n); ++mask) {
        if (static_cast<size_t>(__builtin_popcount(mask)) != n1) continue;
        int u = 0;  // pairs (x, y) with x > y; x = ranks in mask
        for (size_t i = 0; i < n; ++i)
          for (size_t j = 0; j < n; ++j)
            if ((mask >> i & 1u) && !(mask >> j & 1u) && i > j) ++u;
        ++counts[static_cast<size_t>(u)];
        ++total;
      }
      for (size_t u = 0; u <= n1 * n2; ++u) {
        const double hi =
            std::max<double>(static_cast<double>(u), static_cast<double>(n1 * n2 - u));
        int tail = 0;
        for (size_t k = 0; k <= n1 * n2; ++k)
          if (static_cast<double>(k) >= hi) tail += counts[k];
        const double want = std::min(1.0, 2.0 * tail / total);
        EXPECT_NEAR(MannWhitneyExactP(n1, n2, static_cast<double>(u)), want, 1e-12)
            << n1 << " v " << n2 << " U=" << u;
      }
    }
  }
}

TEST(MannWhitney, TiesUseNormalApproximationWithTieCorrection) {
  const auto r = MannWhitneyU({1, 2, 2, 3, 4, 5, 5, 6}, {3, 4, 5, 6, 6, 7, 8, 9});
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 11);
  EXPECT_NEAR(r.p, 0.029964585224922784, 1e-12);
}

TEST(MannWhitney, LargeSamplesUseNormalApproximation) {
  std::vector<double> x, y;
  for (int i = 0; i < 10; ++i) {
    x.push_back(i);
    y.push_back(i + 3.5);
  }
  const auto r = MannWhitneyU(x, y);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 21);
  EXPECT_NEAR(r.p, 0.031209012771740242, 1e-12);
}

TEST(MannWhitney, DegenerateInputs) {
  EXPECT_DOUBLE_EQ(MannWhitneyU({}, {1, 2}).p, 1);
  // Every value tied: zero variance, no evidence of a difference.
  const auto r = MannWhitneyU({5, 5, 5, 5, 5}, {5, 5, 5, 5, 5});
  EXPECT_DOUBLE_EQ(r.p, 1);
  EXPECT_DOUBLE_EQ(r.u, 12.5);
}

TEST(Median, OddEvenEmpty) {
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({7}), 7);
}

TEST(Bootstrap, DeterministicAndBracketsTheChange) {
  const std::vector<double> base = {100, 102, 98, 101, 99}, now = {120, 123, 118, 121, 119};
  const auto a = BootstrapRelChangeCi(base, now);
  const auto b = BootstrapRelChangeCi(base, now);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->lo, b->lo);  // same seed, same interval, bit for bit
  EXPECT_EQ(a->hi, b->hi);
  // The interval lies between the extreme ratios of the data and contains the point estimate.
  EXPECT_GE(a->lo, 118.0 / 102 - 1);
  EXPECT_LE(a->hi, 123.0 / 98 - 1);
  EXPECT_LE(a->lo, 0.20);
  EXPECT_GE(a->hi, 0.20);
  EXPECT_GT(a->lo, 0.1);  // clearly away from zero
}

TEST(Bootstrap, IdenticalSamplesGiveZeroWidth) {
  const auto ci = BootstrapRelChangeCi({10, 10, 10}, {10, 10, 10});
  ASSERT_TRUE(ci);
  EXPECT_DOUBLE_EQ(ci->lo, 0);
  EXPECT_DOUBLE_EQ(ci->hi, 0);
  EXPECT_FALSE(BootstrapRelChangeCi({}, {1}));
  EXPECT_FALSE(BootstrapRelChangeCi({0, 0}, {1, 2}));  // relative change undefined
}

}  // namespace
}  // namespace kprof
