// Why replay left a top kernel unmeasured, from the agent's account (meta
// counters_replay_account): the reasons that need no GPU recording to show.
#include <gtest/gtest.h>

#include "analysis/counters.h"
#include "kprof/timeline.h"
#include "test_util.h"

namespace kprof::detail {
namespace {

// A 2-rank DDP step as one rank records it under --metrics replay: an NCCL all-reduce with most
// of the GPU time, which the agent never replays (a collective waits on the other rank), beside a
// GEMM it replayed once.
TEST(CountersUnmeasured, NcclKernelsAreNamedAsCommunication) {
  const std::string nccl = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorage";
  test::TraceBuilder b;
  for (int i = 0; i < 10; ++i) {
    const uint64_t t = 1'000'000 + i * 100'000;
    b.Launch(1, t, "gemm_kernel", t + 5'000, t + 15'000);
    b.Launch(1, t + 20'000, nccl, t + 25'000, t + 85'000);
  }
  b.t.meta["counters"] = "replay";
  b.t.meta["counters_top"] = "10";
  // replayed, launches, selected, busy, failed, captured, in_top, name
  b.t.meta["counters_replay_account"] =
      "1\t10\t1\t0\t0\t0\t1\tgemm_kernel\n0\t10\t0\t0\t0\t0\t1\t" + nccl + "\n";
  kprof::Run run;
  run.processes.push_back(b.t);
  const CounterSummary s = SummarizeCounters(BuildTimeline(run));
  const UnmeasuredKernel* u = nullptr;
  for (const UnmeasuredKernel& k : s.unmeasured)
    if (k.name.find("ncclDevKernel_AllReduce") != std::string::npos) u = &k;
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->reason, "communication");
  EXPECT_EQ(u->launches, 10u);
  EXPECT_NEAR(u->share, 60.0 / 70.0, 1e-9);
  EXPECT_NE(u->why.find("other ranks"), std::string::npos) << u->why;
}

}  // namespace
}  // namespace kprof::detail
