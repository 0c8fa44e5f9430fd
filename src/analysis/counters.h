// Internal to the analysis: how counter records become per-kernel values (counters.cpp).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/counters.h"
#include "kprof/timeline.h"

namespace kprof::detail {

/// PM sampling per kernel name (counters_sampled.cpp): one launch of the name in column
/// `column`, on the device whose tracks are fitted.
struct SampledLaunch {
  size_t column = 0;
  uint64_t start_ns = 0, end_ns = 0;
};
/// Above this many kernel names on a device the samples are not fitted (the fit takes names^2
/// memory and names^3 time): a name is classified only from samples wholly inside its launches.
inline constexpr size_t kMaxSampledColumns = 1500;
/// A name is classified from samples when it has kMinInsideSamples samples wholly inside its
/// launches, or when its weight is at least kMinSampledWeight (one whole sample's worth of its
/// time) and no percentage's standard error exceeds kMaxSampledError points.
inline constexpr double kMinSampledWeight = 1.0;
inline constexpr double kMaxSampledError = 10.0;
inline constexpr double kMaxSampledInflation = 1000.0;
inline constexpr size_t kMinInsideSamples = 3;
/// Launches shorter than this on average are not fitted: between such kernels the GPU spends as
/// long in its front end as in the kernels, and the samples are no longer a mix of the kernels
/// alone (20,000 launches of 1-2 us one-block kernels, sampled every 100 us on an H200, fitted
/// an occupancy of 100%).
inline constexpr uint64_t kMinFittedNs = 2000;
/// What the samples say of one kernel name: its values (least squares over the samples its
/// launches overlap, each weighted by the fraction of the sample they covered), its weight (those
/// fractions summed: how many whole samples' worth of its time was sampled), the samples it
/// appears in, and the largest standard error of its percentage values (points).
struct SampledFit {
  CounterValues values;
  double weight = 0;
  size_t samples = 0;
  double max_error = 0;
  bool error_unknown = false;  ///< more names than samples, or too many names to compute it
  /// Samples wholly inside its launches (the most of any metric): with kMinInsideSamples or more,
  /// a metric's value is their mean, not the fit, and the name is classified whatever the fit's
  /// error.
  size_t inside = 0;
  /// The largest variance inflation of its fitted percentages (G^-1 G on the diagonal: 1 when
  /// its samples hold no other name), and whether a fitted percentage fell outside 0-100 by
  /// more than its error.
  double inflation = 1;
  bool out_of_range = false;
  uint64_t mean_ns = 0;  ///< mean duration of its launches on this device
  /// Whether the fit classifies it (see kMinSampledWeight).
  bool Classified() const {
    return inside >= kMinInsideSamples ||
           (weight >= kMinSampledWeight && mean_ns >= kMinFittedNs && !error_unknown &&
            max_error <= kMaxSampledError && inflation <= kMaxSampledInflation && !out_of_range);
  }
};

/// The agent's account of replay for one kernel name (meta counters_replay_account, written by
/// src/agent/counters_replay.cpp): its launches replayed, seen, chosen, skipped because another
/// thread was replaying, failed, and made into a stream capture.
struct ReplaySeen {
  uint64_t replayed = 0, launches = 0, selected = 0, busy = 0, failed = 0, captured = 0;
};

/// Adds the account in `meta` (one line per name: the counts, tab-separated, then the name) to
/// `out`, summed by CUPTI's name; lines of an older agent (six counts) are read too.
void ReadReplayAccount(const std::string& meta, std::map<std::string, ReplaySeen>& out);

/// Fits every column's values to one device's tracks (`cols` kernel names).
std::vector<SampledFit> FitSamples(const std::vector<const CounterTrack*>& tracks,
                                   const std::vector<SampledLaunch>& launches, size_t cols);

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
