// PM sampling's per-name fit (src/analysis/counters_sampled.cpp) on samples made from the model
// it assumes: each sample the time-weighted mix of the kernels that ran in it. Real recordings
// are in tests/unit/recordings (LaunchPatterns.*, CounterRecordings.*).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "analysis/counters.h"

namespace kprof::detail {
namespace {

constexpr const char* kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

// Samples of `interval` ns over [0, end) whose value is the mix of `launches` with `rate` per
// column, and the track that holds them.
CounterTrack Track(const std::vector<SampledLaunch>& launches, const std::vector<double>& rate,
                   uint64_t end, uint64_t interval) {
  CounterTrack t;
  t.metric = kDram;
  for (uint64_t s = 0; s + interval <= end; s += interval) {
    double v = 0;
    for (const SampledLaunch& l : launches) {
      const uint64_t lo = std::max(s, l.start_ns), hi = std::min(s + interval, l.end_ns);
      if (hi > lo) v += rate[l.column] * static_cast<double>(hi - lo) / interval;
    }
    t.t_ns.push_back(s);
    t.end_ns.push_back(s + interval);
    t.value.push_back(v);
  }
  return t;
}

constexpr const char* kOccupancy = "sm__warps_active_realtime.avg.pct_of_peak_sustained_active";

// Two kernels with idle time between them, sampled every 100 us, and an occupancy track: a ratio
// over the SMs' active cycles, so each sample is the mix of the kernels that ran in it whatever
// part of the interval they filled. Fitted like DRAM (as a share of the interval) it came out at
// 2-4 times the kernels' value on eager PyTorch and kept them from being classified.
TEST(SampledFit, ActiveCycleMetricsAreTheMixOfTheKernelsThatRan) {
  std::vector<SampledLaunch> launches;
  for (uint64_t k = 0; k < 2000; ++k) {
    const uint64_t t0 = k * 170'000;
    launches.push_back({0, t0, t0 + 30'000});
    launches.push_back({1, t0 + 60'000, t0 + 100'000});
  }
  const uint64_t end = 2000 * 170'000, interval = 100'000;
  const CounterTrack dram = Track(launches, {80.0, 10.0}, end, interval);
  CounterTrack occupancy = dram;
  occupancy.metric = kOccupancy;
  const std::vector<double> rate = {40.0, 90.0};
  for (size_t j = 0; j < occupancy.value.size(); ++j) {
    double sum = 0, covered = 0;
    for (const SampledLaunch& l : launches) {
      const uint64_t lo = std::max(occupancy.t_ns[j], l.start_ns);
      const uint64_t hi = std::min(occupancy.end_ns[j], l.end_ns);
      if (hi <= lo) continue;
      sum += rate[l.column] * static_cast<double>(hi - lo);
      covered += static_cast<double>(hi - lo);
    }
    occupancy.value[j] = covered > 0 ? sum / covered : 0;
  }
  const std::vector<SampledFit> fit = FitSamples({&dram, &occupancy}, launches, 2);
  ASSERT_EQ(fit.size(), 2u);
  EXPECT_NEAR(fit[0].values.occupancy_pct, 40.0, 0.5);
  EXPECT_NEAR(fit[1].values.occupancy_pct, 90.0, 0.5);
  EXPECT_NEAR(fit[0].values.dram_pct, 80.0, 0.5);
  EXPECT_NEAR(fit[1].values.dram_pct, 10.0, 0.5);
  for (const SampledFit& f : fit) {
    EXPECT_FALSE(f.out_of_range);
    EXPECT_TRUE(f.Classified());
  }
}

// Two kernels of 30 and 70 us, back to back every 130 us, sampled every 200 us: no sample lies
// inside either, yet where the boundaries fall across 2000 launches tells them apart.
TEST(SampledFit, ShortKernelsSharingSamplesAreToldApart) {
  std::vector<SampledLaunch> launches;
  for (uint64_t k = 0; k < 2000; ++k) {
    const uint64_t t0 = k * 130'000;
    launches.push_back({0, t0, t0 + 30'000});
    launches.push_back({1, t0 + 30'000, t0 + 100'000});
  }
  const CounterTrack t = Track(launches, {80.0, 10.0}, 2000 * 130'000, 200'000);
  const std::vector<SampledFit> fit = FitSamples({&t}, launches, 2);
  ASSERT_EQ(fit.size(), 2u);
  EXPECT_NEAR(fit[0].values.dram_pct, 80.0, 0.5);
  EXPECT_NEAR(fit[1].values.dram_pct, 10.0, 0.5);
  for (const SampledFit& f : fit) {
    EXPECT_EQ(f.inside, 0u);
    EXPECT_TRUE(f.Classified());
    EXPECT_LT(f.max_error, 1.0);
  }
}

// Two names interleaved 3 us apart, 25 launches in each 100 us sample: the samples differ only
// by which name a boundary cuts, which with exact samples still tells them apart. (Real samples
// are noisy: on eager PyTorch such names are left unclassified by their standard error; see
// docs/counters.md.)
TEST(SampledFit, InterleavedNamesAreToldApartByTheBoundariesOfExactSamples) {
  std::vector<SampledLaunch> launches;
  for (uint64_t k = 0; k < 4000; ++k) {
    const uint64_t t0 = k * 4'000;
    launches.push_back({k % 2, t0, t0 + 3'000});
  }
  const CounterTrack t = Track(launches, {60.0, 20.0}, 4000 * 4'000, 100'000);
  const std::vector<SampledFit> fit = FitSamples({&t}, launches, 2);
  EXPECT_NEAR(fit[0].values.dram_pct, 60.0, 0.5);
  EXPECT_NEAR(fit[1].values.dram_pct, 20.0, 0.5);
}

// Past kMaxSampledColumns names no fit is made (it would take names^2 memory and names^3 time):
// names with whole samples inside still get their mean, the rest are not classified, at once.
TEST(SampledFit, TooManyNamesFallBackToWholeSamplesQuickly) {
  const size_t cols = kMaxSampledColumns + 100;
  std::vector<SampledLaunch> launches;
  std::vector<double> rate(cols);
  for (size_t c = 0; c < cols; ++c) {
    rate[c] = static_cast<double>(c % 90);
    const uint64_t t0 = c * 1'000'000;
    // Column 0 runs 1 ms (4 whole samples of 200 us); the others 50 us.
    launches.push_back({c, t0, t0 + (c == 0 ? 1'000'000 : 50'000)});
  }
  const CounterTrack t = Track(launches, rate, cols * 1'000'000, 200'000);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<SampledFit> fit = FitSamples({&t}, launches, cols);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(fit[0].Classified());
  EXPECT_NEAR(fit[0].values.dram_pct, 0.0, 1e-9);
  EXPECT_GE(fit[0].inside, kMinInsideSamples);
  EXPECT_FALSE(fit[1].Classified());
  EXPECT_TRUE(fit[1].error_unknown);
}

}  // namespace
}  // namespace kprof::detail
