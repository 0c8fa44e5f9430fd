// A figure one side did not record is not compared (issue 36): peak memory of a run that traced
// no allocation (a capture window in which nothing was allocated) is neither a regression nor an
// improvement, in diff and in check; the verdict and the exit code follow what both sides
// measured. On real recordings made on an H100: tests/fixtures/gpu/train_step (the whole
// program, one allocation traced) and train_step_capture (a window of the same program with no
// allocation in it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/load_runs.h"
#include "compare_test_util.h"
#include "kprof/cli.h"
#include "kprof/compare.h"

namespace kprof {
namespace {

using nlohmann::json;
using test::Slurp;
using test::TempDir;

std::string Fixture(const std::string& name) {
  return std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name;
}

const MetricDiff& PeakMemory(const DiffResult& r) {
  for (const ItemDiff& i : r.run)
    if (i.name == "peak memory") return i.metrics.front();
  throw std::runtime_error("no peak memory row");
}

RunDigest Digest(uint64_t peak, uint64_t events, uint64_t wall) {
  RunDigest d;
  d.source = "synthetic";
  d.totals.wall_ns = wall;
  d.totals.peak_memory_bytes = peak;
  d.totals.memory_events = events;
  return d;
}

// The case: the base window recorded no allocation, the new one 2 MiB; the new run is
// faster. Before: "peak memory 0 B -> 2.0 MiB (new)", a regression. Now: not compared, and the
// wall time decides: an improvement.
TEST(NotRecorded, PeakMemoryOneSideDidNotRecordIsNotARegression) {
  const DiffResult r = Diff({Digest(0, 0, 1'000'000'000)}, {Digest(2 << 20, 3, 630'000'000)});
  const MetricDiff& m = PeakMemory(r);
  EXPECT_EQ(m.verdict, Verdict::NotCompared);
  EXPECT_EQ(m.reason, "not compared (not recorded in base)");
  EXPECT_FALSE(r.Regressed());
  EXPECT_TRUE(r.Improved());
  EXPECT_EQ(r.Count(Verdict::NotCompared), 1u);
  EXPECT_STREQ(VerdictName(Verdict::NotCompared), "not compared");
  // The other way round, and neither side.
  EXPECT_EQ(PeakMemory(Diff({Digest(2 << 20, 3, 1)}, {Digest(0, 0, 1)})).reason,
            "not compared (not recorded in new)");
  EXPECT_EQ(PeakMemory(Diff({Digest(0, 0, 1)}, {Digest(0, 0, 1)})).reason,
            "not compared (not recorded in either)");
  // Both recorded: compared as before (a 0 B peak with frees traced is a measurement).
  const DiffResult both = Diff({Digest(0, 2, 1)}, {Digest(2 << 20, 3, 1)});
  EXPECT_EQ(PeakMemory(both).verdict, Verdict::Regression);
}

TEST(NotRecorded, RealWindowWithoutAllocationsAgainstTheWholeRun) {
  const std::vector<RunDigest> whole = LoadRuns(Fixture("train_step"));
  const std::vector<RunDigest> window = LoadRuns(Fixture("train_step_capture"));
  ASSERT_EQ(whole.size(), 1u);
  ASSERT_EQ(window.size(), 1u);
  EXPECT_EQ(whole[0].totals.memory_events, 2u);  // one cudaMalloc, one cudaFree
  EXPECT_EQ(whole[0].totals.peak_memory_bytes, 135168u);
  EXPECT_EQ(window[0].totals.memory_events, 0u);
  DiffOptions opts;
  opts.min_memory_bytes = 0;  // any change of the peak would count
  const DiffResult r = Diff(whole, window, opts);
  EXPECT_EQ(PeakMemory(r).verdict, Verdict::NotCompared);
  EXPECT_EQ(PeakMemory(r).reason, "not compared (not recorded in new)");
  EXPECT_FALSE(r.Regressed());  // the window holds fewer kernels: improvements only
  EXPECT_TRUE(r.Improved());

  // Through the CLI: the verdict line, the JSON and the exit code.
  TempDir dir{"not_recorded_cli"};
  const std::string out = dir / "diff.json";
  EXPECT_EQ(CmdDiff({"--min-memory", "0", "--format", "json", "-o", out, Fixture("train_step"),
                     Fixture("train_step_capture")}),
            kExitOk);
  const json j = json::parse(Slurp(out));
  EXPECT_EQ(j["result"], "improvement");
  EXPECT_EQ(j["counts"]["not_compared"], 1);
  EXPECT_EQ(j["counts"]["regressions"], 0);
  const std::string table = dir / "diff.txt";
  EXPECT_EQ(CmdDiff({"--min-memory", "0", "-o", table, Fixture("train_step_capture"),
                     Fixture("train_step")}),
            kExitRegression);  // the whole run launches more kernels than its window
  const std::string text = Slurp(table);
  EXPECT_NE(text.find("not compared (not recorded in base)"), std::string::npos) << text;
}

// Issue 36's pair, recorded on an H200 (tests/gpu/scripts/measured_train.py, batch 32768, 20
// steps inside `--capture nvtx:measured`): torch.compile fuses the element-wise work, so the
// compiled window is ~21% shorter in wall and GPU time. It makes 20 more memsets and launches one
// reduction twice as often, in a third of the time: changes, not regressions. Neither window saw
// an allocation (the caching allocator was filled in warm-up), so peak memory is not compared.
TEST(NotRecorded, EagerAgainstCompiledWindows) {
  const std::vector<RunDigest> eager = LoadRuns(Fixture("measured_train_eager"));
  const std::vector<RunDigest> compiled = LoadRuns(Fixture("measured_train_compiled"));
  ASSERT_EQ(eager.size(), 1u);
  ASSERT_EQ(compiled.size(), 1u);
  EXPECT_EQ(eager[0].totals.memory_events, 0u);
  EXPECT_EQ(compiled[0].totals.memory_events, 0u);
  const DiffResult r = Diff(eager, compiled);
  EXPECT_EQ(PeakMemory(r).verdict, Verdict::NotCompared);
  EXPECT_EQ(PeakMemory(r).reason, "not compared (not recorded in either)");
  size_t checked = 0;
  for (const ItemDiff& i : r.run) {
    const MetricDiff& m = i.metrics.front();
    if (i.name == "kernels" || i.name == "launches") {
      EXPECT_EQ(m.base_median, 1000.0) << i.name;
      EXPECT_EQ(m.new_median, 780.0) << i.name;
      EXPECT_EQ(m.verdict, Verdict::Improvement) << i.name;
      ++checked;
    } else if (i.name == "memsets") {
      EXPECT_EQ(m.base_median, 60.0);
      EXPECT_EQ(m.new_median, 80.0);
      EXPECT_EQ(m.verdict, Verdict::Changed);
      EXPECT_EQ(m.reason, "+20 (60 -> 80), while the run's wall time fell");
      ++checked;
    } else if (i.name == "GPU busy" || i.name == "wall") {
      EXPECT_EQ(m.verdict, Verdict::Improvement) << i.name;
      EXPECT_LT(m.rel_change, -0.15) << i.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5u);
  // The reduction launched twice as often in a third of the time: a change, not a regression.
  size_t doubled = 0;
  for (const ItemDiff& k : r.kernels) {
    const MetricDiff& calls = k.metrics.front();
    if (calls.base_median == 40 && calls.new_median == 80) {
      EXPECT_EQ(calls.verdict, Verdict::Changed) << k.name;
      EXPECT_EQ(k.verdict, Verdict::Improvement) << k.name;
      ++doubled;
    }
  }
  EXPECT_EQ(doubled, 1u);
  EXPECT_EQ(r.Count(Verdict::Regression), 0u);
  EXPECT_EQ(r.Count(Verdict::NotCompared), 1u);
  EXPECT_TRUE(r.Improved());
  // Through the CLI, as the issue ran it: verdict improvement, exit 0.
  TempDir dir{"not_recorded_eager_compiled"};
  const std::string out = dir / "diff.json";
  EXPECT_EQ(CmdDiff({"--format", "json", "-o", out, Fixture("measured_train_eager"),
                     Fixture("measured_train_compiled")}),
            kExitOk);
  const json j = json::parse(Slurp(out));
  EXPECT_EQ(j["result"], "improvement");
  EXPECT_EQ(j["counts"]["regressions"], 0);
  EXPECT_EQ(j["counts"]["not_compared"], 1);
}

TEST(NotRecorded, BudgetOnAPeakTheRunsDidNotRecordPassesNotCompared) {
  const std::vector<RunDigest> window = LoadRuns(Fixture("train_step_capture"));
  Budget b;
  b.max_peak_memory_bytes = 1;
  const CheckResult r = CheckBudget(window, b);
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_TRUE(r.lines[0].pass);
  EXPECT_TRUE(r.lines[0].not_recorded);
  EXPECT_EQ(r.lines[0].message, "not compared (not recorded in the runs)");
  EXPECT_FALSE(r.Failed());
  // A recorded peak over the budget still fails.
  EXPECT_TRUE(CheckBudget(LoadRuns(Fixture("train_step")), b).Failed());
  // No peak-memory budget is written from runs that recorded none.
  EXPECT_FALSE(BudgetFromRuns(window, {}).max_peak_memory_bytes.has_value());
  EXPECT_TRUE(BudgetFromRuns(LoadRuns(Fixture("train_step")), {}).max_peak_memory_bytes);
}

}  // namespace
}  // namespace kprof
