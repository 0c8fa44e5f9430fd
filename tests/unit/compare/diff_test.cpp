// kprof diff/check core on synthetic run digests: planted regressions are caught and named,
// identical workloads pass, counts are exact, budgets, parsing helpers, XML escaping.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "compare_test_util.h"
#include "kprof/compare.h"

namespace kprof {
namespace {

using test::Spec;
using test::Synthetic;
using test::SyntheticRuns;

const ItemDiff* FindItem(const std::vector<ItemDiff>& items, const std::string& name) {
  for (const auto& i : items)
    if (i.name == name) return &i;
  return nullptr;
}

std::vector<std::string> Flagged(const DiffResult& r, Verdict v) {
  std::vector<std::string> out;
  for (const auto* items : {&r.run, &r.ops, &r.kernels})
    for (const auto& i : *items)
      if (i.verdict == v) out.push_back(std::string(SectionName(i.section)) + ":" + i.name);
  return out;
}

TEST(Diff, KernelTwentyPercentSlowerIsNamed) {
  Spec slow;
  slow.gemm_scale = 1.2;
  const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(slow, 5, 100));
  EXPECT_EQ(r.mode, DiffMode::Test);
  EXPECT_TRUE(r.Regressed());
  const ItemDiff* gemm = FindItem(r.kernels, "gemm_kernel");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->verdict, Verdict::Regression);
  const MetricDiff* t = gemm->Find("total_ns");
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->p_value);
  EXPECT_NEAR(*t->p_value, 2.0 / 252, 1e-12);  // 5 v 5, completely separated
  EXPECT_TRUE(t->p_exact);
  EXPECT_GT(t->rel_change, 0.12);
  EXPECT_LT(t->rel_change, 0.28);
  ASSERT_TRUE(t->rel_ci);
  EXPECT_GT(t->rel_ci->lo, 0.05);
  // Only the slow kernel, its op and the time totals it feeds are flagged.
  EXPECT_EQ(FindItem(r.kernels, "softmax_kernel")->verdict, Verdict::Same);
  EXPECT_EQ(FindItem(r.kernels, "elementwise_kernel")->verdict, Verdict::Same);
  EXPECT_EQ(FindItem(r.ops, "forward")->verdict, Verdict::Regression);
  EXPECT_EQ(FindItem(r.ops, "optimizer")->verdict, Verdict::Same);
  EXPECT_EQ(FindItem(r.run, "kernel time")->verdict, Verdict::Regression);
  EXPECT_EQ(FindItem(r.run, "syncs")->verdict, Verdict::Same);
  EXPECT_EQ(r.kernels.front().name, "gemm_kernel");  // sorted by impact
}

TEST(Diff, TenPercentSlowerKernelIsCaughtToo) {
  Spec slow;
  slow.gemm_scale = 1.10;
  const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(slow, 5, 100), DiffOptions{});
  EXPECT_EQ(FindItem(r.kernels, "gemm_kernel")->verdict, Verdict::Regression);
}

TEST(Diff, SameWorkloadPasses) {
  for (uint64_t seed : {100u, 200u, 300u, 400u}) {
    const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns({}, 5, seed));
    EXPECT_FALSE(r.Regressed()) << "seed " << seed << ": "
                                << testing::PrintToString(Flagged(r, Verdict::Regression));
    EXPECT_EQ(r.Count(Verdict::Improvement), 0u);
    EXPECT_TRUE(r.hints.empty());
  }
}

TEST(Diff, ImprovementIsNotARegression) {
  Spec fast;
  fast.gemm_scale = 0.8;
  const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(fast, 5, 100));
  EXPECT_FALSE(r.Regressed());
  EXPECT_EQ(FindItem(r.kernels, "gemm_kernel")->verdict, Verdict::Improvement);
}

TEST(Diff, ExtraSyncPerStepIsACountRegression) {
  Spec s;
  s.syncs_per_step = 2;  // one extra .item() per step
  const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(s, 5, 100));
  EXPECT_TRUE(r.Regressed());
  const ItemDiff* syncs = FindItem(r.run, "syncs");
  EXPECT_EQ(syncs->verdict, Verdict::Regression);
  const MetricDiff& m = syncs->metrics.front();
  EXPECT_FALSE(m.p_value);  // counts: no statistics
  EXPECT_EQ(m.base_median, 100);
  EXPECT_EQ(m.new_median, 200);
  EXPECT_EQ(m.reason, "+100 (100 -> 200)");
  // Also the copies that come with it.
  EXPECT_EQ(FindItem(r.run, "memcpys")->verdict, Verdict::Regression);
}

TEST(Diff, ExtraKernelIsACountChange) {
  Spec s;
  s.extra_kernel = true;
  const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(s, 5, 100));
  EXPECT_TRUE(r.Regressed());
  EXPECT_EQ(FindItem(r.run, "kernels")->verdict, Verdict::Regression);
  EXPECT_EQ(FindItem(r.run, "launches")->verdict, Verdict::Regression);
  const ItemDiff* extra = FindItem(r.kernels, "extra_kernel");
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(extra->verdict, Verdict::Added);
  EXPECT_EQ(extra->Find("calls")->new_median, 100);
  // And the other way round: removed, and fewer kernels is an improvement.
  const DiffResult back = Diff(SyntheticRuns(s, 5, 1), SyntheticRuns({}, 5, 100));
  EXPECT_FALSE(back.Regressed());
  EXPECT_EQ(FindItem(back.kernels, "extra_kernel")->verdict, Verdict::Removed);
  EXPECT_EQ(FindItem(back.run, "kernels")->verdict, Verdict::Improvement);
}

TEST(Diff, MoreMemoryIsARegression) {
  Spec more;
  more.peak_bytes = 5ull << 30;  // 4 GiB -> 5 GiB
  const DiffResult r = Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(more, 5, 100));
  EXPECT_TRUE(r.Regressed());
  EXPECT_EQ(FindItem(r.run, "peak memory")->verdict, Verdict::Regression);
  Spec little;
  little.peak_bytes = (4ull << 30) + (100ull << 20);  // +2.4%: under the 5% threshold
  EXPECT_FALSE(Diff(SyntheticRuns({}, 5, 1), SyntheticRuns(little, 5, 100)).Regressed());
}

TEST(Diff, SingleRunPerSideUsesThresholdOnly) {
  Spec quiet;
  quiet.jitter = 0;
  Spec slow = quiet;
  slow.gemm_scale = 1.2;
  const DiffResult r = Diff({Synthetic(quiet, 1)}, {Synthetic(slow, 2)});
  EXPECT_EQ(r.mode, DiffMode::ThresholdOnly);
  EXPECT_NE(r.mode_note.find("single run per side: threshold only"), std::string::npos)
      << r.mode_note;
  EXPECT_TRUE(r.Regressed());
  const ItemDiff* gemm = FindItem(r.kernels, "gemm_kernel");
  EXPECT_EQ(gemm->verdict, Verdict::Regression);
  EXPECT_FALSE(gemm->Find("total_ns")->p_value);
  EXPECT_NEAR(gemm->Find("total_ns")->rel_change, 0.2, 1e-9);

  Spec slight = quiet;
  slight.gemm_scale = 1.03;  // under the threshold
  EXPECT_FALSE(Diff({Synthetic(quiet, 1)}, {Synthetic(slight, 2)}).Regressed());
}

TEST(Diff, ThreeRunsPerSideFallBackToThresholdOnly) {
  const DiffResult r = Diff(SyntheticRuns({}, 3, 1), SyntheticRuns({}, 3, 100));
  EXPECT_EQ(r.mode, DiffMode::ThresholdOnly);
  EXPECT_NE(r.mode_note.find("fewer than 4 per side"), std::string::npos) << r.mode_note;
  EXPECT_NE(r.mode_note.find("threshold only"), std::string::npos);
}

TEST(Diff, LargeChangeWithOverlappingRunsIsNotSignificant) {
  std::vector<RunDigest> base, now;
  for (int i = 1; i <= 5; ++i) {
    RunDigest b, n;
    b.totals.wall_ns = static_cast<uint64_t>(i) * 100'000'000;
    n.totals.wall_ns = b.totals.wall_ns + 50'000'000;  // medians +16.7%, heavy overlap
    base.push_back(b);
    now.push_back(n);
  }
  const DiffResult r = Diff(base, now);
  const ItemDiff* wall = FindItem(r.run, "wall");
  EXPECT_EQ(wall->verdict, Verdict::Same);
  EXPECT_GT(*wall->metrics.front().p_value, 0.05);
  EXPECT_NE(wall->metrics.front().reason.find("not significant"), std::string::npos);
}

TEST(Diff, ChangeBelowMinTimeIsIgnored) {
  RunDigest b, n;
  b.kernels["tiny"] = {10, 100'000};  // 100 us
  n.kernels["tiny"] = {10, 140'000};  // +40%, but only +40 us < 50 us
  const DiffResult r = Diff({b}, {n});
  const ItemDiff* tiny = FindItem(r.kernels, "tiny");
  EXPECT_EQ(tiny->verdict, Verdict::Same);
  EXPECT_NE(tiny->Find("total_ns")->reason.find("below min-time"), std::string::npos);
  DiffOptions o;
  o.min_time_ns = 10'000;
  EXPECT_EQ(FindItem(Diff({b}, {n}, o).kernels, "tiny")->verdict, Verdict::Regression);
}

TEST(Diff, OpCallsChangeIsReportedNotFailed) {
  RunDigest b, n;
  b.ops["step"] = {100, 1'000'000};
  n.ops["step"] = {101, 1'000'000};
  const DiffResult r = Diff({b}, {n});
  EXPECT_FALSE(r.Regressed());
  EXPECT_EQ(FindItem(r.ops, "step")->verdict, Verdict::Changed);
}

TEST(Diff, HintsAppearedAndGone) {
  std::vector<RunDigest> base = SyntheticRuns({}, 5, 1), now = SyntheticRuns({}, 5, 100);
  for (auto& d : base) d.hints.push_back({"small-copies", Severity::Info, "many small copies"});
  for (size_t i = 0; i < now.size(); ++i)
    if (i < 3)  // 3 of 5 runs: a majority
      now[i].hints.push_back({"sync-in-loop", Severity::Warning, "sync every step"});
  now[0].hints.push_back({"flaky", Severity::Critical, "once"});  // 1 of 5: not a majority
  const DiffResult r = Diff(base, now);
  ASSERT_EQ(r.hints.size(), 2u);
  EXPECT_EQ(r.hints[0].id, "sync-in-loop");
  EXPECT_TRUE(r.hints[0].appeared);
  EXPECT_EQ(r.hints[0].new_runs, 3u);
  EXPECT_EQ(r.hints[1].id, "small-copies");
  EXPECT_FALSE(r.hints[1].appeared);
  EXPECT_FALSE(r.Regressed());  // hints inform; budgets (kprof check) enforce them
}

TEST(Diff, DataQualityWarnings) {
  std::vector<RunDigest> now = SyntheticRuns({}, 1, 100);
  now[0].totals.dropped_records = 12;
  const DiffResult r = Diff(SyntheticRuns({}, 1, 1), now);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("12 records dropped"), std::string::npos);
  EXPECT_THROW(Diff({}, now), InputError);
}

// ---- Budgets -----------------------------------------------------------------------------

TEST(Budget, MedianOfRunsAgainstLimits) {
  std::vector<RunDigest> runs = SyntheticRuns({}, 5, 1);
  Budget b;
  b.max_syncs = 100;
  b.max_kernels = 399;  // the workload launches 400
  b.ops["forward"].max_calls = 100;
  b.ops["gone_op"].max_gpu_ns = 1;
  const CheckResult r = CheckBudget(runs, b);
  ASSERT_EQ(r.lines.size(), 4u);
  EXPECT_EQ(r.Failures(), 1u);
  EXPECT_EQ(r.lines[0].metric, "max_kernels");
  EXPECT_FALSE(r.lines[0].pass);
  EXPECT_EQ(r.lines[0].actual, 400);
  EXPECT_EQ(r.lines[0].message, "400 > 399 budget");
  EXPECT_TRUE(r.lines[1].pass);  // syncs
  EXPECT_TRUE(r.lines[2].pass);  // forward calls
  EXPECT_TRUE(r.lines[3].missing);
  EXPECT_TRUE(r.lines[3].pass);
}

TEST(Budget, HintSeverity) {
  std::vector<RunDigest> runs = SyntheticRuns({}, 3, 1);
  for (auto& d : runs) d.hints.push_back({"sync-in-loop", Severity::Warning, "x"});
  Budget b;
  b.max_hint_severity = static_cast<int>(Severity::Info);
  CheckResult r = CheckBudget(runs, b);
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_FALSE(r.lines[0].pass);
  EXPECT_EQ(r.lines[0].message, "hints above info: sync-in-loop (warning)");
  b.max_hint_severity = static_cast<int>(Severity::Warning);
  EXPECT_FALSE(CheckBudget(runs, b).Failed());
  b.max_hint_severity = kNoHintAllowed;
  EXPECT_TRUE(CheckBudget(runs, b).Failed());
}

TEST(Budget, WrittenFromBaselinePassesBaselineAndCatchesRegressions) {
  const std::vector<RunDigest> base = SyntheticRuns({}, 5, 1);
  const Budget b = BudgetFromRuns(base, {});
  EXPECT_EQ(*b.max_syncs, 100u);  // counts exact by default
  EXPECT_EQ(*b.max_kernels, 400u);
  EXPECT_EQ(*b.max_hint_severity, static_cast<int>(Severity::Info));
  EXPECT_EQ(b.ops.size(), 2u);
  EXPECT_EQ(b.kernels.size(), 3u);
  EXPECT_FALSE(CheckBudget(base, b).Failed());
  EXPECT_FALSE(CheckBudget(SyntheticRuns({}, 5, 100), b).Failed());  // same workload, new noise

  Spec s;
  s.syncs_per_step = 2;
  EXPECT_TRUE(CheckBudget(SyntheticRuns(s, 5, 100), b).Failed());
  Spec slow;
  slow.gemm_scale = 1.5;  // beyond the 20% margin
  const CheckResult r = CheckBudget(SyntheticRuns(slow, 5, 100), b);
  EXPECT_TRUE(r.Failed());
  bool gemm_failed = false;
  for (const auto& l : r.lines) gemm_failed |= l.name == "gemm_kernel" && !l.pass;
  EXPECT_TRUE(gemm_failed);

  BudgetFromRunsOptions top1;
  top1.top_kernels = 1;
  const Budget one = BudgetFromRuns(base, top1);
  ASSERT_EQ(one.kernels.size(), 1u);
  EXPECT_EQ(one.kernels.begin()->first, "gemm_kernel");
}

// ---- Parsing / formatting ----------------------------------------------------------------

TEST(Parse, Durations) {
  EXPECT_EQ(ParseDurationNs("50us"), 50'000u);
  EXPECT_EQ(ParseDurationNs("1.5ms"), 1'500'000u);
  EXPECT_EQ(ParseDurationNs("2s"), 2'000'000'000u);
  EXPECT_EQ(ParseDurationNs("750ns"), 750u);
  EXPECT_EQ(ParseDurationNs("1234"), 1234u);
  EXPECT_EQ(ParseDurationNs("12 ms"), 12'000'000u);
  EXPECT_FALSE(ParseDurationNs("-1ms"));
  EXPECT_FALSE(ParseDurationNs("ms"));
  EXPECT_FALSE(ParseDurationNs("5 parsecs"));
  EXPECT_FALSE(ParseDurationNs(""));
}

TEST(Parse, FractionsAndBytes) {
  EXPECT_DOUBLE_EQ(*ParseFraction("5%"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseFraction("0.05"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseFraction("150%"), 1.5);
  EXPECT_FALSE(ParseFraction("5"));  // ambiguous: 5% or 500%?
  EXPECT_FALSE(ParseFraction("-5%"));
  EXPECT_EQ(ParseBytes("1MiB"), 1u << 20);
  EXPECT_EQ(ParseBytes("1.5GB"), 1'500'000'000u);
  EXPECT_EQ(ParseBytes("10 kB"), 10'000u);
  EXPECT_EQ(ParseBytes("4096"), 4096u);
  EXPECT_FALSE(ParseBytes("4 bananas"));
  EXPECT_EQ(ParseHintSeverity("warning"), 1);
  EXPECT_EQ(ParseHintSeverity("none"), kNoHintAllowed);
  EXPECT_FALSE(ParseHintSeverity("fatal"));
}

TEST(Format, SignedAndPercent) {
  EXPECT_EQ(FormatSignedDuration(1'500'000), "+1.50 ms");
  EXPECT_EQ(FormatSignedDuration(-2'000), "-2.00 us");
  EXPECT_EQ(FormatSignedDuration(0), "0 ns");
  EXPECT_EQ(FormatPercent(0.123), "+12.3%");
  EXPECT_EQ(FormatPercent(-0.04), "-4.0%");
  EXPECT_EQ(FormatPercent(std::numeric_limits<double>::infinity()), "new");
}

TEST(XmlEscape, HostileText) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(XmlEscape("tab\there\nnl"), "tab&#9;here&#10;nl");
  EXPECT_EQ(XmlEscape(std::string("nul\x01", 4) + std::string(1, '\0')),
            "nul\xEF\xBF\xBD\xEF\xBF\xBD");  // C0 controls are not XML characters
  EXPECT_EQ(XmlEscape("bad\xFF utf8"), "bad\xEF\xBF\xBD utf8");
  EXPECT_EQ(XmlEscape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(XmlEscape("\xC2\xB5s \xE2\x9C\x93"), "\xC2\xB5s \xE2\x9C\x93");      // valid kept
  EXPECT_EQ(XmlEscape("]]></testcase>"), "]]&gt;&lt;/testcase&gt;");
}

}  // namespace
}  // namespace kprof
