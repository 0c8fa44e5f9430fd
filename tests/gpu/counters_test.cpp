// GPU tests of the hardware counters (issue 12, docs/counters.md): kernels of known character
// (kernels/counter_characters) replayed for their Speed Of Light counters and classified, PM
// sampling beside tracing, the replay's selection and cost, and the bad option. Every test skips
// cleanly when no GPU is present.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "gtest/gtest.h"
#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/metrics.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"
#include "workload_checks.h"

using namespace kprof;
using namespace kprof::gpu_test;
using kprof::testing::Count;

namespace {

struct Recorded {
  Run run;
  Analysis an;
};

Recorded Analyse(const std::string& dir) {
  Recorded m;
  m.run = ReadInputs({dir});
  Timeline tl = BuildTimeline(m.run);
  AnalysisOptions o;
  o.by = GroupBy::Kernel;
  m.an = Analyze(tl, o);
  return m;
}

// The measured kernel whose display name contains `part`, or null.
const KernelCounters* Named(const CounterSummary& c, const std::string& part) {
  for (const KernelCounters& k : c.kernels)
    if (k.name.find(part) != std::string::npos) return &k;
  return nullptr;
}

}  // namespace

// Each character classified as expected; the tensor pipe busy on the BF16 GEMM only; every
// replayed kernel keeps its record (with the replay's duration) and its launch's correlation.
TEST(GpuCounters, ReplayClassifiesKernelsOfKnownCharacter) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_replay");
  Result r =
      KprofWith(dir, {"--metrics", "replay", "--metrics-kernels", ".", "--metrics-launches", "1"},
                {Bin("kernels/counter_characters"), "2"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  const CounterSummary& c = m.an.counters;
  ASSERT_EQ(c.mode, "replay") << r.out;
  EXPECT_EQ(c.problem, "");
  EXPECT_GT(c.replay_ns, 0u);
  for (const char* name :
       {"stream_axpy", "latency_chase", "scale_kernel", "add_kernel", "relu_kernel"}) {
    const KernelCounters* k = Named(c, name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_EQ(k->source, CounterSource::Replay) << name;
    EXPECT_EQ(k->launches, 1u) << name;  // --metrics-launches 1: one of its two launches
  }
  EXPECT_EQ(Named(c, "stream_axpy")->bound, Bound::Memory);
  EXPECT_EQ(Named(c, "latency_chase")->bound, Bound::Latency);
  EXPECT_EQ(Named(c, "add_kernel")->bound, Bound::Memory);
  // The GEMMs: cuBLAS's kernels, BF16 on the tensor cores (the one with the tensor pipe busy),
  // FP32 on the FMA pipes (compute-bound, tensor pipe idle).
  const KernelCounters* bf16 = nullptr;
  const KernelCounters* fp32 = nullptr;
  for (const KernelCounters& k : c.kernels) {
    if (k.name.find("stream_axpy") != std::string::npos || k.gpu_ns < 1'000'000) continue;
    if (Measured(k.values.tensor_pct) && k.values.tensor_pct > 20) {
      bf16 = &k;
    } else if (k.name.find("gemm") != std::string::npos ||
               k.name.find("sgemm") != std::string::npos) {
      fp32 = &k;
    }
  }
  ASSERT_NE(bf16, nullptr) << r.out;
  ASSERT_NE(fp32, nullptr) << r.out;
  EXPECT_EQ(bf16->bound, Bound::Compute) << bf16->name;
  EXPECT_EQ(fp32->bound, Bound::Compute) << fp32->name;
  EXPECT_LT(fp32->values.tensor_pct, 1.0) << fp32->name;
  // Replayed kernels are in the trace with their durations; none is lost.
  uint64_t replayed = 0, missing = 0;
  for (const ProcessTrace& p : m.run.processes) {
    missing += p.stats.missing_timestamps;
    for (const Record& rec : p.records)
      replayed += rec.Kind() == RecordKind::Kernel && (rec.flags & kKernelReplayed) != 0;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(replayed, c.replayed_launches);
}

// PM sampling runs beside tracing: samples on the device's tracks, every kernel still recorded,
// and the long kernels get values from the samples inside them.
TEST(GpuCounters, SampledThroughputsBesideTracing) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_sampled");
  Result r = KprofWith(dir, {"--metrics", "sampled", "--metrics-interval", "100"},
                       {Bin("kernels/counter_characters"), "3"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  const CounterSummary& c = m.an.counters;
  ASSERT_EQ(c.mode, "sampled") << r.out;
  EXPECT_EQ(c.problem, "");
  EXPECT_GT(c.samples, 100u);
  EXPECT_EQ(c.sample_interval_ns, 100'000u);
  ASSERT_FALSE(c.tracks.empty());
  const KernelCounters* axpy = Named(c, "stream_axpy");
  ASSERT_NE(axpy, nullptr) << r.out;
  EXPECT_EQ(axpy->source, CounterSource::Sampled);
  EXPECT_EQ(axpy->bound, Bound::Memory);
  EXPECT_GT(axpy->values.dram_pct, 60.0);
  // The BF16 GEMM: few instructions issued, tensor pipes busy: compute-bound.
  const KernelCounters* bf16 = Named(c, "nvjet");
  ASSERT_NE(bf16, nullptr) << r.out;
  EXPECT_GT(bf16->values.tensor_pct, 80.0);
  EXPECT_EQ(bf16->bound, Bound::Compute);
  // Every sampled metric fits the one pass on this GPU (none left out): a track each, and L2
  // and occupancy per kernel. The streaming axpy keeps L2 and the SMs busy; the latency chase,
  // one warp per block on a tiny grid, leaves them nearly empty.
  std::vector<std::string> metrics;
  for (const CounterTrack& t : c.tracks)
    if (std::find(metrics.begin(), metrics.end(), t.metric) == metrics.end())
      metrics.push_back(t.metric);
  EXPECT_EQ(metrics.size(), SampledMetrics().size());
  // ncu on the same kernel on an H100 (scripts/counters_bench.sh ncu): L2 sectors 34.0%, warps
  // active 49.4%. Other chips give other figures (an H200's faster memory: L2 41.6% sampled on
  // 2026-11-26); there the L2 share is only checked to be a streaming kernel's, not ncu's.
  const std::string gpu = m.run.processes.at(0).Meta("device.0.name");
  if (gpu.find("H100") != std::string::npos) {
    EXPECT_NEAR(axpy->values.l2_pct, 34.0, 5.0);
    EXPECT_NEAR(axpy->values.occupancy_pct, 49.4, 5.0);
  } else {
    std::printf("%s: no ncu reference for the L2 and occupancy figures (H100 only)\n", gpu.c_str());
    EXPECT_GT(axpy->values.l2_pct, 20.0);
    EXPECT_GT(axpy->values.occupancy_pct, 30.0);
  }
  const KernelCounters* chase = Named(c, "latency_chase");
  ASSERT_NE(chase, nullptr) << r.out;
  EXPECT_EQ(chase->bound, Bound::Latency);
  EXPECT_LT(chase->values.occupancy_pct, 10.0);
  EXPECT_LT(chase->values.l2_pct, 10.0);
  EXPECT_GT(c.setup_ns, 0u);  // what the program waited for the set-up, stated
  // Tracing is whole: 3 rounds of 7 kernels, plus the 9 that fill the buffers; sampling started
  // before the first kernel (with the first context).
  uint64_t kernels = 0, first_kernel = UINT64_MAX, first_sample = UINT64_MAX;
  for (const ProcessTrace& p : m.run.processes)
    for (const Record& rec : p.records) {
      if (rec.Kind() == RecordKind::Kernel) {
        ++kernels;
        first_kernel = std::min(first_kernel, rec.start_ns);
      }
      if (rec.Kind() == RecordKind::CounterSample)
        first_sample = std::min(first_sample, rec.start_ns);
    }
  EXPECT_GE(kernels, 3u * 7u + 9u);
  EXPECT_LT(first_sample, first_kernel);
}

// A program that ends soon after its first context: sampling's set-up must not race its exit
// (a set-up on another thread crashed such programs inside CUPTI's host library).
TEST(GpuCounters, SampledShortProgramEndsCleanly) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_short");
  Result r = KprofWith(dir, {"--metrics", "sampled"}, {Bin("kernels/vector_add"), "100000"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  ASSERT_EQ(m.run.processes.size(), 1u);
  EXPECT_TRUE(m.run.processes[0].complete) << r.out;
  EXPECT_EQ(m.an.counters.mode, "sampled");
  EXPECT_EQ(m.an.counters.problem, "");
}

// The sampling configuration is made from the chip's name (the counter availability query, run
// beside the program's first context, delayed it by 0.15-0.25 s); one the device refuses is made
// again with the device's availability. KPROF_PM_REFUSE_CHIP_CONFIG=1 makes the device refuse
// the first: the samples must come all the same, with no problem reported.
TEST(GpuCounters, SampledConfigurationRefusedIsMadeAgainWithTheAvailability) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_refused");
  setenv("KPROF_PM_REFUSE_CHIP_CONFIG", "1", 1);
  setenv("KPROF_COUNTERS_DEBUG", "1", 1);
  Result r = KprofWith(dir, {"--metrics", "sampled", "--metrics-interval", "100"},
                       {Bin("kernels/counter_characters"), "1"});
  unsetenv("KPROF_PM_REFUSE_CHIP_CONFIG");
  unsetenv("KPROF_COUNTERS_DEBUG");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("again with its counter availability"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("counters: counter availability"), std::string::npos) << r.out;
  Recorded m = Analyse(dir);
  EXPECT_EQ(m.an.counters.problem, "");
  EXPECT_GT(m.an.counters.samples, 100u);
  const KernelCounters* axpy = Named(m.an.counters, "stream_axpy");
  ASSERT_NE(axpy, nullptr) << r.out;
  EXPECT_EQ(axpy->bound, Bound::Memory);
}

// A process that loads CUDA and exits without making a context, at 10 points of its first 0.5 s:
// each ends cleanly, with its own exit status. A preparation of PM sampling started with the
// agent (inside cuInit) crashed such programs inside CUPTI (exit 134 or 139 at 0-60 ms, on the
// H100); it now starts only with a context's creation, which these never make.
TEST(GpuCounters, SampledProgramEndingDuringThePreparationEndsCleanly) {
  REQUIRE_GPU();
  for (const char* sleep_ms : {"0", "5", "10", "20", "40", "60", "80", "120", "250", "500"}) {
    const std::string dir = FreshDir(std::string("counters_init_only_") + sleep_ms);
    Result r = KprofWith(dir, {"--metrics", "sampled"}, {Bin("kernels/init_only"), "7", sleep_ms});
    EXPECT_EQ(r.status, 7) << "after " << sleep_ms << " ms: " << r.out;
    EXPECT_NE(r.out.find("init_only: devices="), std::string::npos) << r.out;
  }
}

// A forked child that does no CUDA work: the preparation thread is the parent's only; the
// child's exit must neither wait for it nor hang, and the parent's kernels are all recorded.
TEST(GpuCounters, SampledForkedChildEndsCleanly) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_fork_child");
  Result r = KprofWith(dir, {"--metrics", "sampled"}, {Bin("kernels/fork_child"), "100"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  size_t kernels = 0;
  for (const ProcessTrace& p : m.run.processes) kernels += Count(p, RecordKind::Kernel);
  EXPECT_EQ(kernels, 200u);
  EXPECT_EQ(m.an.counters.mode, "sampled");
}

// The top N chosen from the trace over a long loop: the run must go at its pace after the
// replays (CUPTI held on to activity buffers after kernel replays, and the program stalled in
// every buffer request, until the flusher forced them back), drop no record, and replay each
// of the five kernel names once. Kernels CUPTI hands over without times are counted as such:
// a forced flush's kernel then running, and on the H100 some replayed launches whose record
// came without times and without a replay to match (3 of 100,000 with 1 forced flush and 5
// replays; not understood yet, docs/counters.md).
TEST(GpuCounters, ReplayOfALongLoopDoesNotStall) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_long");
  Result r = KprofWith(dir, {"--metrics", "replay"}, {Bin("kernels/train_step"), "20000"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  ASSERT_EQ(m.run.processes.size(), 1u);
  const ProcessTrace& p = m.run.processes[0];
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.stats.dropped_records, 0u);
  EXPECT_EQ(m.an.counters.replayed_launches, 5u);
  uint64_t kernels = 0;
  for (const Record& rec : p.records) kernels += rec.Kind() == RecordKind::Kernel;
  EXPECT_EQ(kernels + p.stats.missing_timestamps, 5u * 20000u);
  EXPECT_LE(p.stats.missing_timestamps,
            m.an.counters.replayed_launches + p.MetaU64("forced_flushes"));
}

// Without a regex, the top N kernels of the trace so far are replayed, each at most
// --metrics-launches times.
TEST(GpuCounters, ReplayTakesTheTopKernelsOfTheTraceSoFar) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_top");
  Result r = KprofWith(dir, {"--metrics", "replay:top=2", "--metrics-launches", "1"},
                       {Bin("kernels/counter_characters"), "1000", "elementwise"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  const CounterSummary& c = m.an.counters;
  EXPECT_LE(c.kernels.size(), 2u);
  EXPECT_GE(c.kernels.size(), 1u) << r.out;
  EXPECT_LE(c.replayed_launches, 2u);
}

// The hints that guess from kernel names take the counters' word on the planted workloads
// (every kernel name replayed once: a short program ends before the top N of its trace is
// known), and latency-bound speaks on train_step's full-grid, one-block-per-SM kernels.
struct CounterHintCase {
  const char* workload;
  const char* arg;
  const char* rule;
  const char* evidence;
};
class GpuCounterHints : public ::testing::TestWithParam<CounterHintCase> {};

TEST_P(GpuCounterHints, TheRuleUsesTheCounters) {
  REQUIRE_GPU();
  const CounterHintCase& c = GetParam();
  const std::string dir = FreshDir(std::string("counter_hints_") + c.rule);
  Result r = KprofWith(dir, {"--metrics", "replay", "--metrics-kernels", "."},
                       {Bin(std::string("kernels/") + c.workload), c.arg});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Analyse(dir);
  const Timeline tl = BuildTimeline(m.run);
  const Analysis an = Analyze(tl);
  const Hint* found = nullptr;
  const std::vector<Hint> hints = ComputeHints(tl, an);
  for (const Hint& h : hints)
    if (h.id == c.rule) found = &h;
  ASSERT_NE(found, nullptr) << c.rule << "\n" << r.out;
  bool mentioned = false;
  for (const std::string& e : found->evidence) mentioned |= e.find(c.evidence) != std::string::npos;
  EXPECT_TRUE(mentioned) << c.rule << ": no evidence line with '" << c.evidence << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Planted, GpuCounterHints,
    ::testing::Values(
        CounterHintCase{"hint_fp32_gemm", "50", "fp32-gemm", "hardware counters: tensor pipes"},
        CounterHintCase{"hint_memory_bound_chain", "300", "memory-bound-chain",
                        "hardware counters: "},
        CounterHintCase{"hint_underfilled_grid", "100", "underfilled-grid", "hardware counters, "},
        CounterHintCase{"train_step", "300", "latency-bound", "limited by the grid"}),
    [](const ::testing::TestParamInfo<CounterHintCase>& p) {
      return std::string(p.param.workload);
    });

TEST(GpuCounters, BadMetricsOptionIsAUsageError) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("counters_bad");
  Result r = KprofWith(dir, {"--metrics", "everything"}, {Bin("kernels/vector_add"), "1024"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--metrics must be"), std::string::npos) << r.out;
}
