// Counters on launch patterns nobody tuned them for (issue 32), recorded on an H200 with
// `scripts/counters_patterns.sh` (kernels/launch_patterns): replay measures kernels a program
// queues before the GPU has run the first, says why when it cannot, and PM sampling classifies
// kernels shorter than its interval from the samples that overlap them.
#include <gtest/gtest.h>

#include <string>

#include "kprof/analysis.h"
#include "kprof/counters.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

CounterSummary Counters(const std::string& name) {
  kprof::Run run =
      ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/launch_patterns_" + name});
  const Timeline tl = BuildTimeline(run);
  AnalysisOptions o;
  o.by = GroupBy::Kernel;
  return Analyze(tl, o).counters;
}

const UnmeasuredKernel* Unmeasured(const CounterSummary& c, const std::string& part) {
  for (const UnmeasuredKernel& u : c.unmeasured)
    if (u.name.find(part) != std::string::npos) return &u;
  return nullptr;
}

// 40 cuBLAS SGEMMs queued back to back, one sync at the end: every launch is made before the
// first kernel record reaches the trace's tally. The first launch of a name the tally does not
// know yet is replayed (before 2026-11-27: nothing was).
TEST(LaunchPatterns, ReplayMeasuresKernelsQueuedBeforeTheTallyKnowsThem) {
  const CounterSummary c = Counters("sgemm_replay");
  EXPECT_EQ(c.mode, "replay");
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.replayed_launches, 1u);
  ASSERT_EQ(c.kernels.size(), 1u);
  EXPECT_NE(c.kernels[0].name.find("sm80_xmma_gemm_f32f32"), std::string::npos);
  EXPECT_EQ(c.kernels[0].source, CounterSource::Replay);
  EXPECT_EQ(c.kernels[0].bound, Bound::Compute);
  EXPECT_NEAR(c.kernels[0].values.sm_pct, 86.7, 0.1);  // ncu on the H100: 87.2
  EXPECT_TRUE(c.unmeasured.empty());
}

// 24 names, 20 launches each, all queued; the heaviest (8 passes) comes last. The first 10 names
// take the replays; the last one's launches were all made before the trace ranked it: the report
// names it and says why, with what to do.
TEST(LaunchPatterns, ATopKernelLeftUnmeasuredIsNamedWithItsReason) {
  const CounterSummary c = Counters("names_replay");
  EXPECT_EQ(c.replayed_launches, 10u);
  EXPECT_EQ(c.kernels.size(), 10u);
  ASSERT_EQ(c.unmeasured.size(), 1u);
  const UnmeasuredKernel& u = c.unmeasured[0];
  EXPECT_NE(u.name.find("named_stream<23>"), std::string::npos);
  EXPECT_EQ(u.reason, "queued");
  EXPECT_EQ(u.launches, 20u);
  EXPECT_NEAR(u.share, 0.175, 0.005);
  EXPECT_NE(u.why.find("--metrics-from RUN"), std::string::npos) << u.why;
}

// A kernel launched on a stream between launches of a graph captured on the same stream: the
// launches made during the capture are not replayed (starting the range profiler inside a capture
// broke it: the program stopped after 6 calls), the stream launch is.
TEST(LaunchPatterns, ReplaySkipsLaunchesBeingCapturedAndMeasuresTheStreamOnes) {
  const CounterSummary c = Counters("graph_replay");
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.replayed_launches, 1u);
  ASSERT_EQ(c.kernels.size(), 1u);
  EXPECT_NE(c.kernels[0].name.find("axpy"), std::string::npos);
  EXPECT_TRUE(c.unmeasured.empty());  // graph mode: the graph's kernels are not kernel records
}

TEST(LaunchPatterns, KernelsOnlyInGraphsAreNamedAsOutOfReplaysReach) {
  const CounterSummary c = Counters("graph_node_replay");
  EXPECT_EQ(c.replayed_launches, 1u);
  ASSERT_EQ(c.unmeasured.size(), 1u);
  EXPECT_NE(c.unmeasured[0].name.find("graph_only"), std::string::npos);
  EXPECT_EQ(c.unmeasured[0].reason, "graph");
  EXPECT_EQ(c.unmeasured[0].launches, 200u);  // 50 graph launches of 4 nodes
}

// 180 launches of a 145 us kernel, sampled every 200 us: no sample lies wholly inside one, yet
// the fit of the samples that overlap them classifies it as replay does (DRAM 24.8%).
TEST(LaunchPatterns, SamplingClassifiesKernelsShorterThanItsInterval) {
  const CounterSummary c = Counters("medium_sampled");
  EXPECT_EQ(c.sample_interval_ns, 200'000u);
  EXPECT_EQ(c.samples, 411u);
  ASSERT_EQ(c.kernels.size(), 1u);
  EXPECT_EQ(c.kernels[0].source, CounterSource::Sampled);
  EXPECT_EQ(c.kernels[0].launches, 180u);
  EXPECT_EQ(c.kernels[0].bound, Bound::Latency);
  EXPECT_NEAR(c.kernels[0].values.dram_pct, 24.8, 1.5);
  EXPECT_TRUE(c.unmeasured.empty());
}

// 24 names of 12-57 us, 20 launches each, one after the other: each one classified.
TEST(LaunchPatterns, SamplingClassifiesEachOfManyShortNames) {
  const CounterSummary c = Counters("names_sampled");
  EXPECT_EQ(c.kernels.size(), 24u);
  for (const KernelCounters& k : c.kernels) {
    EXPECT_EQ(k.launches, 20u) << k.name;
    EXPECT_EQ(k.bound, Bound::Latency) << k.name;
  }
  EXPECT_TRUE(c.unmeasured.empty());
}

// 3000 launches of 0.7 us one-block kernels, three names interleaved: below what the samples can
// fit; each is named with the reason.
TEST(LaunchPatterns, KernelsTooShortToFitAreNamedAsSuch) {
  const CounterSummary c = Counters("tiny_sampled");
  EXPECT_TRUE(c.kernels.empty());
  ASSERT_EQ(c.unmeasured.size(), 3u);
  for (const UnmeasuredKernel& u : c.unmeasured) {
    EXPECT_EQ(u.reason, "short") << u.name;
    EXPECT_EQ(u.launches, 1000u) << u.name;
    EXPECT_LT(u.median_ns, 2000u) << u.name;
    EXPECT_NE(u.why.find("shorter than the 2.0 us"), std::string::npos) << u.why;
  }
  EXPECT_NE(Unmeasured(c, "tiny_a"), nullptr);
}

}  // namespace
}  // namespace kprof
