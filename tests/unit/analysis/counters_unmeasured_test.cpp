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

constexpr const char* kSm = "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

struct Piece {
  uint64_t start, end;
  uint32_t grid;
  double sm, dram;
  const char* name;
};

// `steps` periods of `period` laid out as `pieces` (times within the period), sampled every
// 100 us; `dram_of(step, piece)` gives a piece's DRAM value in that step (its sm is fixed).
template <class DramOf>
CounterSummary Sampled(const std::vector<Piece>& pieces, uint64_t period, uint64_t steps,
                       DramOf dram_of) {
  constexpr uint64_t kInterval = 100'000, kT0 = 1'000'000;
  test::TraceBuilder b;
  std::vector<Piece> all;
  for (uint64_t i = 0; i < steps; ++i)
    for (size_t j = 0; j < pieces.size(); ++j) {
      const Piece& p = pieces[j];
      const uint64_t t = kT0 + i * period;
      b.Launch(1, t + p.start - 5'000, p.name, t + p.start, t + p.end);
      b.t.records.back().a = p.grid;
      all.push_back({t + p.start, t + p.end, p.grid, p.sm, dram_of(i, j), p.name});
    }
  for (uint64_t s = kT0; s + kInterval <= kT0 + steps * period; s += kInterval) {
    double sm = 0, dram = 0;
    for (const Piece& p : all) {
      const uint64_t lo = std::max(s, p.start), hi = std::min(s + kInterval, p.end);
      if (hi <= lo) continue;
      const double f = static_cast<double>(hi - lo) / kInterval;
      sm += f * p.sm;
      dram += f * p.dram;
    }
    for (const auto& [metric, value] : {std::pair{kSm, sm}, std::pair{kDram, dram}}) {
      Record& r = b.Add(RecordKind::CounterSample, metric, s, s + kInterval);
      r.device = 0;
      SetMetricValue(r, value);
    }
  }
  b.t.meta["counters"] = "sampled";
  kprof::Run run;
  run.processes.push_back(b.t);
  return SummarizeCounters(BuildTimeline(run));
}

const KernelCounters* Measured(const CounterSummary& s, const std::string& name) {
  for (const KernelCounters& c : s.kernels)
    if (c.name == name) return &c;
  return nullptr;
}

// One kernel name launched in two configurations that behave differently (a 20 us 1-block fill
// right before a neighbour, and a 60 us 1000-block copy alone), sampled every 100 us. Fitted per
// configuration, the name's value is the time-weighted mean of its two and the neighbour's is
// exact; fitted as one column per name it came out at DRAM 85.6% (not 68.75%), and the
// neighbour's at 20.9% (not 40%).
TEST(CountersSampled, ANameIsFittedPerLaunchConfiguration) {
  const std::vector<Piece> period = {{0, 20'000, 1, 10, 5, "k"},
                                     {20'000, 80'000, 132, 60, 40, "n"},
                                     {110'000, 170'000, 1000, 20, 90, "k"}};
  constexpr uint64_t kN = 2000;
  const CounterSummary s =
      Sampled(period, 230'000, kN, [&](uint64_t, size_t j) { return period[j].dram; });
  const KernelCounters* k = Measured(s, "k");
  const KernelCounters* n = Measured(s, "n");
  ASSERT_NE(k, nullptr);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(k->source, CounterSource::Sampled);
  EXPECT_EQ(k->launches, 2 * kN);                                   // both configurations
  EXPECT_NEAR(k->values.dram_pct, (20 * 5 + 60 * 90) / 80.0, 0.5);  // 68.75
  EXPECT_NEAR(k->values.sm_pct, (20 * 10 + 60 * 20) / 80.0, 0.5);   // 17.5
  EXPECT_NEAR(n->values.dram_pct, 40.0, 0.5);
  EXPECT_NEAR(n->values.sm_pct, 60.0, 0.5);
}

}  // namespace
}  // namespace kprof::detail
