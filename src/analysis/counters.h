// Internal to the analysis: how counter records become per-kernel values (counters.cpp).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/counters.h"
#include "kprof/timeline.h"

namespace kprof::detail {

/// A kernel name takes PM sampling values only from samples that lie within its launches, at
/// least this many over all of them.
inline constexpr size_t kMinSamples = 3;

/// Adds one metric's value to `v` by the metric's role (unknown names are ignored).
void AddMetric(CounterValues& v, std::string_view metric, double value);

/// Weighted means of CounterValues, field by field, over the values that were measured.
struct CounterMean {
  static constexpr size_t kFields = 11;
  double sum[kFields] = {}, weight[kFields] = {};
  void Add(const CounterValues& v, double w);
  CounterValues Mean() const;
};

/// The counters of a run's timeline: per kernel name (replayed launches first, else the PM
/// samples inside its launches), the tracks, the cost and what the agents reported.
CounterSummary SummarizeCounters(const Timeline& tl);

/// The class of a group of kernels: the class with more than half the GPU time of the measured
/// ones, Mixed when none has, Unknown when none was measured.
Bound GroupBound(const std::vector<KernelRow>& kernels);

}  // namespace kprof::detail
