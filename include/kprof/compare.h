// Run comparison for CI: `kprof diff` (base runs vs new runs) and `kprof check` (runs vs a
// budget). The core is plain C++ over `RunDigest`, the per-run totals that diff and check need,
// built either from an Analysis (+ hints) or from a JSON summary (schema v1).
//
// Statistics (docs/ci.md): timings are compared per item (run total, op, kernel) on the per-run
// totals of each side. With at least `min_runs_for_test` runs per side a change is a regression
// only when a two-sided Mann-Whitney U test rejects equality (p < alpha) AND the relative change
// of the medians exceeds `threshold` AND the absolute change exceeds `min_time_ns`. With fewer
// runs, threshold and min-time alone decide, and the result says so. Counts (calls, launches,
// syncs, copies, kernels) are exact: any change of a median count is reported without statistics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"

namespace kprof {

// ---------------------------------------------------------------------------------------------
// Digest of one run

/// Run-level totals compared by diff/check (a subset of RunSummary, as unsigned values).
struct RunTotals {
  uint64_t wall_ns = 0;
  uint64_t gpu_busy_ns = 0;
  uint64_t kernel_ns = 0;
  uint64_t memcpy_ns = 0;
  uint64_t sync_ns = 0;
  uint64_t kernels = 0;   ///< kernel executions
  uint64_t launches = 0;  ///< kernel launch API calls
  uint64_t syncs = 0;
  uint64_t memcpys = 0;
  uint64_t memcpy_bytes = 0;  ///< all directions
  uint64_t memsets = 0;
  uint64_t peak_memory_bytes = 0;
  /// Device memory allocations and frees recorded: without any (memory not traced, or a capture
  /// window in which nothing was allocated) the peak was not recorded, and is not compared.
  uint64_t memory_events = 0;
  // Data quality (reported, never compared).
  uint64_t processes = 0;
  uint64_t incomplete_processes = 0;
  uint64_t dropped_records = 0;
};

/// How a metric is compared.
enum class MetricKind {
  Time,    ///< ns; noisy: statistics + threshold + min-time
  Count,   ///< exact; an increase is a regression, a decrease an improvement
  Bytes,   ///< exact like Count (bytes copied)
  Memory,  ///< peak bytes; regression when it grows by more than the threshold
};

/// One run-level metric: its key in JSON output, its label in tables, how it is compared.
struct RunMetric {
  const char* key;    ///< "wall_ns", "syncs", ...
  const char* label;  ///< "wall", "syncs", ...
  MetricKind kind;
  uint64_t RunTotals::*field;
  /// Whether a run recorded the metric at all (nullptr: always). A metric one side did not
  /// record is not compared.
  bool (*recorded)(const RunTotals&) = nullptr;
};
/// Peak memory was recorded: an allocation or free seen (or a peak read from a summary).
bool MemoryRecorded(const RunTotals& t);
/// The compared run-level metrics, in display order.
const std::vector<RunMetric>& RunMetrics();

struct DigestOp {
  uint64_t calls = 0;
  uint64_t gpu_ns = 0;
};
struct DigestKernel {
  uint64_t calls = 0;
  uint64_t total_ns = 0;
};
struct DigestHint {
  std::string id;
  Severity severity = Severity::Info;
  std::string summary;
};

/// What diff/check need of one run.
struct RunDigest {
  std::string source;  ///< where it was loaded from (messages)
  RunTotals totals;
  std::map<std::string, DigestOp> ops;          ///< full op view, by op name
  std::map<std::string, DigestKernel> kernels;  ///< all kernels, by (demangled) name
  /// nn.Modules (kprof run --pytorch): calls and inclusive GPU time, by qualified name.
  std::map<std::string, DigestOp> modules;
  /// Modules that called torch.compile's code: the modules inside them run compiled, without
  /// ranges of their own.
  std::set<std::string> compiled_callers;
  std::vector<DigestHint> hints;
};

/// Digest of an analysed run. `analysis.ops` must be the full op view.
RunDigest MakeDigest(const Analysis& analysis, const std::vector<Hint>& hints, std::string source);

// ---------------------------------------------------------------------------------------------
// Statistics

/// Median (mean of the two middle values for an even count); 0 for an empty sample.
double Median(std::vector<double> values);

struct MannWhitneyResult {
  double u = 0;        ///< U statistic of the first sample (pairs x > y, ties count 1/2)
  double p = 1;        ///< two-sided p-value
  bool exact = false;  ///< exact null distribution (no ties, both n <= kMannWhitneyExactMax)
};
/// Largest sample size (per side) for which the exact distribution is used.
inline constexpr size_t kMannWhitneyExactMax = 8;

enum class MannWhitneyMethod {
  Auto,        ///< exact when both n <= kMannWhitneyExactMax and no ties, else asymptotic
  Exact,       ///< exact distribution of U without ties (ties make it approximate)
  Asymptotic,  ///< normal approximation, tie correction, continuity correction
};

/// Two-sided Mann-Whitney U test of x against y. Exact p (the U distribution by recurrence)
/// when both samples have at most kMannWhitneyExactMax values and no ties; otherwise the normal
/// approximation with tie correction and continuity correction (as scipy.stats.mannwhitneyu,
/// method "auto"). Empty sample: p = 1.
MannWhitneyResult MannWhitneyU(const std::vector<double>& x, const std::vector<double>& y,
                               MannWhitneyMethod method = MannWhitneyMethod::Auto);

/// Two-sided p-value of the exact U distribution for sample sizes n1, n2 (no ties):
/// 2 * P(U >= max(u, n1*n2 - u)), capped at 1.
double MannWhitneyExactP(size_t n1, size_t n2, double u);

struct Interval {
  double lo = 0, hi = 0;
};
/// Percentile bootstrap confidence interval of (median(now) - median(base)) / median(base):
/// both samples resampled with replacement, `resamples` times, from a fixed seed (the result
/// is deterministic). nullopt when a sample is empty or a resampled base median is 0.
std::optional<Interval> BootstrapRelChangeCi(const std::vector<double>& base,
                                             const std::vector<double>& now,
                                             size_t resamples = 2000, double confidence = 0.95,
                                             uint64_t seed = 0x6b70726f66ULL);

// ---------------------------------------------------------------------------------------------
// Diff

struct DiffOptions {
  double threshold = 0.05;               ///< relative change of medians (0.05 = 5%)
  uint64_t min_time_ns = 50'000;         ///< absolute change of medians for timings
  uint64_t min_memory_bytes = 1u << 20;  ///< absolute change for peak memory
  double alpha = 0.05;                   ///< significance level of the Mann-Whitney test
  size_t min_runs_for_test = 4;          ///< runs per side needed for the test (3 v 3: p >= 0.1)
  size_t bootstrap_resamples = 2000;
};

enum class Verdict {
  Same,     ///< no change that matters
  Changed,  ///< a count changed that is not a regression by itself (op calls)
  Improvement,
  Regression,
  Added,        ///< present only in the new runs
  Removed,      ///< present only in the base runs
  NotCompared,  ///< a side did not record the metric: neither a regression nor an improvement
};
const char* VerdictName(Verdict v);  ///< "same", "changed", "improvement", "not compared", ...

/// Comparison of one metric of one item across the runs of both sides.
struct MetricDiff {
  std::string metric;  ///< "wall_ns", "gpu_ns", "calls", ...
  MetricKind kind = MetricKind::Time;
  std::vector<double> base_values, new_values;  ///< one value per run
  double base_median = 0, new_median = 0;
  double abs_change = 0;          ///< new_median - base_median
  double rel_change = 0;          ///< abs_change / base_median; +inf when the base median is 0
  std::optional<double> p_value;  ///< Mann-Whitney p (Time metrics, test mode)
  bool p_exact = false;
  std::optional<Interval> rel_ci;  ///< bootstrap CI of rel_change (Time, test mode)
  Verdict verdict = Verdict::Same;
  std::string reason;  ///< one short line: why (or why not) flagged
};

enum class Section { Run, Op, Kernel, Module };
const char* SectionName(Section s);  ///< "run", "op", "kernel", "module"

/// One row of the diff: a run-level metric, an op or a kernel.
struct ItemDiff {
  Section section = Section::Run;
  std::string name;                 ///< metric label, op name or kernel name
  std::vector<MetricDiff> metrics;  ///< run: the metric; op/kernel: calls, then time
  Verdict verdict = Verdict::Same;  ///< the most severe verdict of its metrics
  double impact_ns = 0;             ///< |change of the median time|, for sorting
  /// Why the item is where it is, when its metrics do not say: a module missing on one side
  /// because it ran inside torch.compile's code there. "" otherwise.
  std::string note;

  const MetricDiff* Find(std::string_view metric) const;
};

struct HintChange {
  std::string id;
  Severity severity = Severity::Info;
  std::string summary;
  bool appeared = false;               ///< true: in the new runs only; false: went away
  size_t base_runs = 0, new_runs = 0;  ///< runs of each side that raised it
};

enum class DiffMode { Test, ThresholdOnly };

struct DiffResult {
  DiffOptions options;
  size_t base_runs = 0, new_runs = 0;
  DiffMode mode = DiffMode::ThresholdOnly;
  std::string mode_note;      ///< "Mann-Whitney U, alpha 0.05, ..." or "single run per side: ..."
  std::vector<ItemDiff> run;  ///< run-level metrics, in RunMetrics() order
  std::vector<ItemDiff> ops;  ///< by impact, then name
  std::vector<ItemDiff> kernels;  ///< by impact, then name
  /// nn.Modules, by impact, then name: where kernel names differ completely (eager against
  /// torch.compile), the model's own parts still match. Empty when no run has modules.
  std::vector<ItemDiff> modules;
  std::vector<HintChange> hints;      ///< appeared first, then gone; by severity, then id
  std::vector<std::string> warnings;  ///< data-quality notes (dropped records, crashes)

  bool Regressed() const;
  /// No regression and at least one improvement.
  bool Improved() const;
  size_t Count(Verdict v) const;  ///< items (run, ops, kernels, modules) with this verdict
};

/// Compares base runs with new runs. Throws InputError when a side is empty.
DiffResult Diff(const std::vector<RunDigest>& base, const std::vector<RunDigest>& now,
                const DiffOptions& opts = {});

// ---------------------------------------------------------------------------------------------
// Budgets (kprof check); file format in docs/ci.md

struct BudgetLimits {
  std::optional<uint64_t> max_gpu_ns;
  std::optional<uint64_t> max_calls;
};

struct Budget {
  std::optional<uint64_t> max_wall_ns;
  std::optional<uint64_t> max_kernels;
  std::optional<uint64_t> max_syncs;
  std::optional<uint64_t> max_peak_memory_bytes;
  /// Highest hint severity allowed; kNoHintAllowed: no hint at all.
  std::optional<int> max_hint_severity;
  std::map<std::string, BudgetLimits> ops;
  std::map<std::string, BudgetLimits> kernels;
};
inline constexpr int kNoHintAllowed = -1;

struct BudgetLine {
  std::string scope;   ///< "run", "op", "kernel"
  std::string name;    ///< op/kernel name; for run lines the metric label
  std::string metric;  ///< the budget key: "max_wall_ns", "max_gpu_ns", "max_hint_severity"...
  double limit = 0;
  double actual = 0;  ///< median over the checked runs
  MetricKind kind = MetricKind::Count;
  bool pass = true;
  bool missing = false;       ///< the op/kernel is in no checked run (passes; stale budget line?)
  bool not_recorded = false;  ///< the runs did not record the metric (passes, not compared)
  std::string message;        ///< one line: "12.1 ms > 10 ms budget", "not present in the runs"
};

struct CheckResult {
  size_t runs = 0;
  std::vector<BudgetLine> lines;  ///< run lines, then ops, then kernels (budget order)
  bool Failed() const;
  size_t Failures() const;
};

/// Checks the median of `runs` against `budget`. Throws InputError when `runs` is empty.
CheckResult CheckBudget(const std::vector<RunDigest>& runs, const Budget& budget);

struct BudgetFromRunsOptions {
  double margin = 0.20;       ///< headroom for times and memory (0.2 = +20%)
  double count_margin = 0.0;  ///< headroom for counts (exact by default)
  size_t top_kernels = 20;    ///< kernels budgeted: the most expensive ones (0 = none)
};
/// A budget derived from baseline runs (medians plus margins). Throws InputError when empty.
Budget BudgetFromRuns(const std::vector<RunDigest>& runs, const BudgetFromRunsOptions& opts);

// ---------------------------------------------------------------------------------------------
// Parsing and formatting helpers

/// "50us", "1.5ms", "2s", "1000" (ns), "750ns". nullopt on anything else (negative included).
std::optional<uint64_t> ParseDurationNs(std::string_view s);
/// "5%", "0.05" (fraction), "12.5%". nullopt on anything else or negative.
std::optional<double> ParseFraction(std::string_view s);
/// "1024", "4KiB", "1.5GB", "512MiB", "10 kB". nullopt on anything else.
std::optional<uint64_t> ParseBytes(std::string_view s);
/// Parses "info|warning|critical|none" (none = kNoHintAllowed).
std::optional<int> ParseHintSeverity(std::string_view s);

/// "+1.23 ms" / "-456 us" / "0 ns".
std::string FormatSignedDuration(double ns);
/// "+12.3%", "-4.0%", "new" for an infinite change.
std::string FormatPercent(double fraction);
/// Value of a metric for display: duration, count or bytes.
std::string FormatMetric(double value, MetricKind kind);

/// Escapes text for XML attribute values and character data: & < > " ' and control characters
/// (tab, LF and CR become character references; other C0 controls, invalid in XML 1.0, become
/// U+FFFD, as do invalid UTF-8 sequences).
std::string XmlEscape(std::string_view s);

}  // namespace kprof
