// The JSON summary's round trip (kprof/summary_json.h): what `kprof report --format json` writes
// of a run is what `kprof diff` and `kprof check` read back, field for field, against the digest
// made from the analysis directly; on every committed GPU recording, the default run and the
// kineto trace.
#include "kprof/summary_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/compare.h"
#include "kprof/hints.h"
#include "kprof/output.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

std::vector<std::string> Inputs() {
  const std::string root = KPROF_SOURCE_DIR;
  std::vector<std::string> in;
  for (const auto& e : std::filesystem::directory_iterator(root + "/tests/fixtures/gpu")) {
    if (!e.is_directory()) continue;
    bool run = false;  // a run directory (diff/ holds runs of runs)
    for (const auto& f : std::filesystem::directory_iterator(e.path()))
      run |= f.path().extension() == ".kprof";
    if (run) in.push_back(e.path().string());
  }
  in.push_back(root + "/examples/default-run");
  in.push_back(root + "/tests/fixtures/kineto/mlp_train_free.trace.json.gz");
  std::sort(in.begin(), in.end());
  return in;
}

void ExpectSameDigest(const RunDigest& read, const RunDigest& made, const std::string& what) {
  for (const RunMetric& m : RunMetrics())
    EXPECT_EQ(read.totals.*m.field, made.totals.*m.field) << what << " " << m.key;
  EXPECT_EQ(read.totals.processes, made.totals.processes) << what;
  EXPECT_EQ(read.totals.incomplete_processes, made.totals.incomplete_processes) << what;
  EXPECT_EQ(read.totals.dropped_records, made.totals.dropped_records) << what;
  ASSERT_EQ(read.ops.size(), made.ops.size()) << what;
  for (const auto& [name, op] : made.ops) {
    ASSERT_TRUE(read.ops.count(name)) << what << " " << name;
    EXPECT_EQ(read.ops.at(name).calls, op.calls) << what << " " << name;
    EXPECT_EQ(read.ops.at(name).gpu_ns, op.gpu_ns) << what << " " << name;
  }
  ASSERT_EQ(read.kernels.size(), made.kernels.size()) << what;
  for (const auto& [name, k] : made.kernels) {
    ASSERT_TRUE(read.kernels.count(name)) << what << " " << name;
    EXPECT_EQ(read.kernels.at(name).calls, k.calls) << what << " " << name;
    EXPECT_EQ(read.kernels.at(name).total_ns, k.total_ns) << what << " " << name;
  }
  ASSERT_EQ(read.modules.size(), made.modules.size()) << what;
  for (const auto& [name, m] : made.modules) {
    ASSERT_TRUE(read.modules.count(name)) << what << " " << name;
    EXPECT_EQ(read.modules.at(name).calls, m.calls) << what << " " << name;
    EXPECT_EQ(read.modules.at(name).gpu_ns, m.gpu_ns) << what << " " << name;
  }
  EXPECT_EQ(read.compiled_callers, made.compiled_callers) << what;
  ASSERT_EQ(read.hints.size(), made.hints.size()) << what;
  for (size_t i = 0; i < made.hints.size(); ++i) {
    EXPECT_EQ(read.hints[i].id, made.hints[i].id) << what;
    EXPECT_EQ(read.hints[i].severity, made.hints[i].severity) << what;
    EXPECT_EQ(read.hints[i].summary, made.hints[i].summary) << what;
  }
}

}  // namespace

TEST(SummaryJson, WhatIsWrittenIsWhatIsRead) {
  size_t runs = 0, hints = 0, ops = 0;
  for (const std::string& path : Inputs()) {
    const kprof::Run run = ReadInputs({path});
    const Timeline tl = BuildTimeline(run);
    const Analysis a = Analyze(tl);
    const std::vector<Hint> h = ComputeHints(tl, a);
    const std::string text = ReportJson(run, a, h);
    EXPECT_TRUE(LooksLikeSummaryJson(text)) << path;
    const std::optional<RunDigest> read = ReadSummaryJson(text, "summary.json");
    ASSERT_TRUE(read.has_value()) << path;
    EXPECT_EQ(read->source, "summary.json");
    ExpectSameDigest(*read, MakeDigest(a, h, path), path);
    ExpectSameDigest(DigestFromSummaryJson(text, "summary.json"), *read, path);
    ++runs;
    hints += h.size();
    ops += a.ops.size();
  }
  // Not vacuous: recordings with ops, kernels and hints went through.
  EXPECT_GE(runs, 30u);
  EXPECT_GT(hints, 20u);
  EXPECT_GT(ops, 100u);
}

// Not a summary: nothing (the caller reads the file as a trace or a recording); a summary that is
// malformed, or of another version: an error naming the file.
TEST(SummaryJson, OtherDocumentsAndBrokenSummaries) {
  EXPECT_FALSE(ReadSummaryJson(R"({"traceEvents": []})", "t.json").has_value());
  EXPECT_FALSE(ReadSummaryJson(R"([{"name": "kprof.summary"}])", "t.json").has_value());
  EXPECT_FALSE(ReadSummaryJson(R"({"name": "kprof.summary"})", "t.json").has_value());
  EXPECT_FALSE(LooksLikeSummaryJson(R"({"name": "kprof.summary"})"));
  try {
    (void)ReadSummaryJson(R"({"schema": "kprof.summary", )", "s.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "s.json: malformed JSON");
  }
  try {
    (void)ReadSummaryJson(R"({"schema": "kprof.summary", "schema_version": 99})", "s.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "s.json: schema_version 99 is not supported (this kprof reads 1)");
  }
}

}  // namespace kprof
