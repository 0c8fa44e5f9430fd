// Issue 12's hardware counters on H100 recordings (tests/fixtures/gpu): kernels/counter_characters
// with every kernel replayed once (`kprof run --metrics replay --metrics-kernels .
// --metrics-launches 1`), and examples/train_mlp.py with the top 10 kernels of the trace so far
// replayed (`--metrics replay`), kernels/counter_characters under PM sampling every 100 us
// (`--metrics sampled --metrics-interval 100`), kernels/train_step 300 with its top kernels
// replayed (the latency-bound hint); plus the classification rule on Nsight Compute's figures.
#include <gtest/gtest.h>

#include <string>

#include "kprof/analysis.h"
#include "kprof/counters.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name;
}

const KernelCounters* Named(const CounterSummary& c, const std::string& part) {
  for (const KernelCounters& k : c.kernels)
    if (k.name.find(part) != std::string::npos) return &k;
  return nullptr;
}

// The throughputs Nsight Compute measured on the same kernels (scripts/counters_bench.sh,
// docs/benchmarks.md), classified by the rule.
TEST(CounterClass, NsightComputesFiguresOfKnownKernels) {
  const auto cls = [](double sm, double mem, double dram, double l2, double tensor) {
    CounterValues v;
    v.sm_pct = sm;
    v.mem_pct = mem;
    v.dram_pct = dram;
    v.l2_pct = l2;
    v.tensor_pct = tensor;
    return Classify(v);
  };
  EXPECT_EQ(cls(87.19, 59.67, 4.47, 20.98, 0.0), Bound::Compute);     // FP32 SGEMM
  EXPECT_EQ(cls(93.08, 94.24, 31.76, 59.18, 96.79), Bound::Compute);  // BF16 GEMM: balanced
  EXPECT_EQ(cls(3.29, 87.50, 87.50, 77.91, 0.0), Bound::Memory);      // stream_axpy
  EXPECT_EQ(cls(0.0, 0.22, 0.22, 0.26, 0.0), Bound::Latency);         // latency_chase
  EXPECT_EQ(cls(8.53, 54.73, 54.73, 51.70, 0.0), Bound::Latency);     // grid-stride scale
  // Balanced with the memory outside the SM the busier: memory-bound.
  EXPECT_EQ(cls(70, 75, 74, 50, 10), Bound::Memory);
  // PM sampling on the BF16 GEMM (H100): few instructions issued, tensor pipes busy.
  EXPECT_EQ(cls(15.9, kNotMeasured, 30.4, kNotMeasured, 94.7), Bound::Compute);
  // Not measured: unknown; without the memory throughput, DRAM's stands for it.
  EXPECT_EQ(Classify(CounterValues{}), Bound::Unknown);
  CounterValues sampled;
  sampled.sm_pct = 5;
  sampled.dram_pct = 85;
  EXPECT_EQ(Classify(sampled), Bound::Memory);
  // With L2's sampled too, the higher of the two is the memory side: a kernel that keeps L2
  // busy out of DRAM's sight (a working set that fits in L2) is memory-bound, not latency.
  sampled.dram_pct = 20;
  EXPECT_EQ(MemoryPct(sampled), 20);
  EXPECT_EQ(Classify(sampled), Bound::Latency);
  sampled.l2_pct = 78;
  EXPECT_EQ(MemoryPct(sampled), 78);
  EXPECT_EQ(Classify(sampled), Bound::Memory);
  sampled.dram_pct = kNotMeasured;
  EXPECT_EQ(MemoryPct(sampled), 78);
  // The memory throughput, where measured (replay), is the memory side whatever L2 says.
  sampled.mem_pct = 40;
  EXPECT_EQ(MemoryPct(sampled), 40);
}

TEST(CounterRecordings, KernelsOfKnownCharacterAreClassified) {
  kprof::Run run = ReadInputs({Fixture("counter_characters_replay")});
  const Timeline tl = BuildTimeline(run);
  AnalysisOptions o;
  o.by = GroupBy::Kernel;
  const Analysis an = Analyze(tl, o);
  const CounterSummary& c = an.counters;
  EXPECT_EQ(c.mode, "replay");
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.replayed_launches, 10u);
  EXPECT_EQ(c.kernels.size(), 10u);
  EXPECT_EQ(c.max_passes, 10u);
  EXPECT_EQ(Named(c, "stream_axpy")->bound, Bound::Memory);
  EXPECT_EQ(Named(c, "latency_chase")->bound, Bound::Latency);
  for (const char* k : {"scale_kernel", "add_kernel", "relu_kernel"})
    EXPECT_EQ(Named(c, k)->bound, Bound::Memory) << k;
  const KernelCounters* sgemm = Named(c, "sm80_xmma_gemm_f32f32");
  const KernelCounters* bf16 = Named(c, "nvjet_sm90");
  ASSERT_NE(sgemm, nullptr);
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(sgemm->bound, Bound::Compute);
  EXPECT_EQ(bf16->bound, Bound::Compute);
  EXPECT_LT(sgemm->values.tensor_pct, 0.01);
  EXPECT_GT(bf16->values.tensor_pct, 90.0);
  // The SGEMM's FP32 FLOPs as counted: 2 * 4096^3 (FFMA counted twice), within 0.1%.
  EXPECT_NEAR(sgemm->values.flops, 2.0 * 4096 * 4096 * 4096, 2.0 * 4096 * 4096 * 4096 * 1e-3);
  // The roofline's peaks: the H100 SXM's FP32 peak and HBM3 bandwidth at its clocks.
  EXPECT_NEAR(sgemm->values.peak_flops_per_s / 1e12, 67.4, 1.0);
  EXPECT_NEAR(sgemm->values.peak_dram_bytes_per_s / 1e12, 3.35, 0.05);
  // Replayed kernels keep their records, with the replay's duration; the kernel view's rows
  // carry the class.
  uint64_t replayed = 0;
  for (const Record& r : run.processes[0].records)
    if (r.Kind() == RecordKind::Kernel && (r.flags & kKernelReplayed) != 0) {
      ++replayed;
      EXPECT_GT(r.DurationNs(), 0u);
    }
  EXPECT_EQ(replayed, 10u);
  for (const KernelRow& k : an.kernels) {
    if (k.name.find("stream_axpy") != std::string::npos) {
      EXPECT_EQ(k.bound, Bound::Memory);
    }
  }
}

// A PyTorch training loop with the top 10 kernels of the trace so far replayed: at most 10 names,
// at most 2 launches each (the default), the GEMMs compute-bound; kprof's replay time is never
// priced as the program's idle time.
TEST(CounterRecordings, PyTorchTopKernelsAndReplayTimeNotPriced) {
  kprof::Run run = ReadInputs({Fixture("pytorch_counters")});
  const Timeline tl = BuildTimeline(run);
  const Analysis an = Analyze(tl);
  const CounterSummary& c = an.counters;
  EXPECT_EQ(c.mode, "replay");
  EXPECT_EQ(c.kernels.size(), 10u);
  EXPECT_EQ(c.replayed_launches, 20u);
  for (const KernelCounters& k : c.kernels) EXPECT_LE(k.launches, 2u) << k.name;
  const KernelCounters* top = &c.kernels.front();
  EXPECT_EQ(top->bound, Bound::Compute) << top->name;
  EXPECT_GT(c.replay_ns, 1'000'000'000u);
  const ProcessTimeline& p = tl.processes[0];
  ASSERT_FALSE(p.replays.empty());
  for (const Gap& g : p.gaps) {
    uint64_t inside = 0;
    for (const NsInterval& r : p.replays)
      if (r.first < g.end_ns && r.second > g.start_ns)
        inside += std::min(r.second, g.end_ns) - std::max(r.first, g.start_ns);
    EXPECT_LE(g.rest_ns + g.explained_ns(), g.Len() - std::min(g.Len(), inside) + 1)
        << "gap at " << g.start_ns;
  }
}

// PM sampling: the samples inside each kernel long enough to hold some give it GPU-wide values,
// which match what replay and Nsight Compute measured on the same kernels (docs/benchmarks.md);
// the set-up the program waited for is kprof's time, as replay's is.
TEST(CounterRecordings, SampledKernelsOfKnownCharacter) {
  kprof::Run run = ReadInputs({Fixture("counter_characters_sampled")});
  const Timeline tl = BuildTimeline(run);
  AnalysisOptions o;
  o.by = GroupBy::Kernel;
  const Analysis an = Analyze(tl, o);
  const CounterSummary& c = an.counters;
  EXPECT_EQ(c.mode, "sampled");
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.samples, 4364u);
  EXPECT_EQ(c.sample_interval_ns, 100'000u);
  EXPECT_EQ(c.setup_ns, 527'716'761u);
  // SM, DRAM, tensor pipes, L2 sectors, achieved occupancy, on device 0.
  ASSERT_EQ(c.tracks.size(), 5u);
  for (const CounterTrack& t : c.tracks) EXPECT_EQ(t.t_ns.size(), 4364u) << t.metric;
  ASSERT_EQ(c.kernels.size(), 8u);
  for (const KernelCounters& k : c.kernels) EXPECT_EQ(k.source, CounterSource::Sampled);
  const KernelCounters* sgemm = Named(c, "sm80_xmma_gemm_f32f32");
  const KernelCounters* bf16 = Named(c, "nvjet");
  const KernelCounters* axpy = Named(c, "stream_axpy");
  const KernelCounters* chase = Named(c, "latency_chase");
  ASSERT_TRUE(sgemm && bf16 && axpy && chase);
  EXPECT_EQ(sgemm->bound, Bound::Compute);
  EXPECT_NEAR(sgemm->values.sm_pct, 87.6, 0.05);
  EXPECT_NEAR(sgemm->values.occupancy_pct, 12.5, 0.05);  // ncu: 12.5
  EXPECT_LT(sgemm->values.tensor_pct, 0.1);
  EXPECT_EQ(bf16->bound, Bound::Compute);  // by its tensor pipes: few instructions issued
  EXPECT_LT(bf16->values.sm_pct, 20.0);
  EXPECT_NEAR(bf16->values.tensor_pct, 94.9, 0.05);
  EXPECT_NEAR(bf16->values.l2_pct, 48.0, 0.05);  // ncu's L2 sectors: 46.6
  EXPECT_EQ(axpy->bound, Bound::Memory);
  EXPECT_NEAR(axpy->values.dram_pct, 88.3, 0.05);
  // L2's sectors (ncu 34.0) below DRAM's throughput: DRAM's figure is the memory side.
  EXPECT_NEAR(axpy->values.l2_pct, 34.1, 0.05);
  EXPECT_NEAR(MemoryPct(axpy->values), axpy->values.dram_pct, 1e-9);
  EXPECT_NEAR(axpy->values.occupancy_pct, 49.5, 0.05);  // ncu: 49.4
  EXPECT_EQ(chase->bound, Bound::Latency);
  EXPECT_NEAR(chase->values.occupancy_pct, 1.6, 0.05);  // 2 warps on 2 of 132 SMs' 64
  // The element-wise chain (0.2 ms each, one launch) holds no whole sample: its values come from
  // the fit of the samples that overlap it (the chain's three kernels are memory-bound).
  const KernelCounters* relu = Named(c, "relu_kernel");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->bound, Bound::Memory);
  // Its first launch of bf16 fill (47 us) fills less than one sample: named, with why.
  ASSERT_EQ(c.unmeasured.size(), 1u);
  EXPECT_NE(c.unmeasured[0].name.find("fill_uniform<__nv_bfloat16>"), std::string::npos);
  EXPECT_EQ(c.unmeasured[0].reason, "short");
  // The set-up is kprof's own time: no gap's rest includes it.
  const ProcessTimeline& p = tl.processes[0];
  ASSERT_EQ(p.replays.size(), 1u);
  EXPECT_EQ(p.replays[0].second - p.replays[0].first, c.setup_ns);
}

// The same program replayed and sampled: every kernel both measured has the same class, and the
// fitted short kernels (the element-wise chain, no whole sample inside) have DRAM throughputs
// within 1.5 points of replay's. (Elsewhere the two measure different things: replay one launch,
// sampling every launch, which for fill_uniform<float> are of different sizes.)
TEST(CounterRecordings, SampledAgreesWithReplayKernelByKernel) {
  AnalysisOptions o;
  o.by = GroupBy::Kernel;
  kprof::Run rs = ReadInputs({Fixture("counter_characters_sampled")});
  kprof::Run rr = ReadInputs({Fixture("counter_characters_replay")});
  const Timeline ts = BuildTimeline(rs), tr = BuildTimeline(rr);
  const CounterSummary s = Analyze(ts, o).counters, r = Analyze(tr, o).counters;
  size_t both = 0;
  for (const KernelCounters& k : s.kernels) {
    const KernelCounters* q = r.Find(k.name);
    if (q == nullptr) continue;
    ++both;
    EXPECT_EQ(k.bound, q->bound) << k.name;
    for (const char* fitted : {"add_kernel", "relu_kernel", "scale_kernel"}) {
      if (k.name.find(fitted) != std::string::npos) {
        EXPECT_NEAR(k.values.dram_pct, q->values.dram_pct, 1.5) << k.name;
      }
    }
  }
  EXPECT_EQ(both, 8u);
}

// train_step's kernels replayed (the top N of the trace so far): each is far from both roofs,
// and latency-bound names the cause its launch configuration shows: 132 blocks of 256 threads
// on 132 SMs, one block and 8 of 64 warps per SM, as the measured occupancy (12.5%) says.
TEST(CounterRecordings, TrainStepKernelsAreLatencyBoundByTheirGrid) {
  kprof::Run run = ReadInputs({Fixture("train_step_replay")});
  const Timeline tl = BuildTimeline(run);
  const Analysis an = Analyze(tl);
  const CounterSummary& c = an.counters;
  EXPECT_EQ(c.replayed_launches, 5u);
  ASSERT_EQ(c.kernels.size(), 5u);
  for (const KernelCounters& k : c.kernels) {
    EXPECT_EQ(k.bound, Bound::Latency) << k.name;
    EXPECT_NEAR(k.values.occupancy_pct, 12.5, 0.1) << k.name;
  }
  const std::vector<Hint> hints = ComputeHints(tl, an);
  const Hint* h = nullptr;
  for (const Hint& x : hints)
    if (x.id == "latency-bound") h = &x;
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->severity, Severity::Info);
  size_t by_grid = 0;
  for (const std::string& e : h->evidence)
    by_grid += e.find(
                   "at most 1 block(s), 12.5% of the SM's warps, resident per SM: limited by "
                   "the grid (132 blocks for 132 SMs)") != std::string::npos;
  EXPECT_EQ(by_grid, 3u);  // the three kernels of 20 us or more
}

}  // namespace
}  // namespace kprof
