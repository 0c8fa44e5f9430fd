// Hint rules on in-memory traces: one planted scenario per rule, with its estimate checked
// against the bound the rule documents (docs/hints.md), a healthy run that raises nothing of
// warning severity, and the ordering contract.
#include "kprof/hints.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>

#include "test_util.h"
#include "trace_builder.h"

namespace kprof {
namespace {

using testing::TraceBuilder;

constexpr uint64_t B = 1'000'000'000;  // runs start at 1 s (0 means "no timestamp")
constexpr uint64_t MiB = 1 << 20;

struct Result {
  kprof::Run run;
  Analysis an;
  std::vector<Hint> hints;
};

Result Compute(Run run) {
  Result r{std::move(run), {}, {}};
  r.an = Analyze(BuildTimeline(r.run));
  r.hints = ComputeHints(BuildTimeline(r.run), r.an);
  return r;
}

const Hint* Find(const Result& r, const std::string& id) { return FindHint(r.hints, id); }

bool EvidenceMentions(const Hint& h, const std::string& text) {
  return std::any_of(h.evidence.begin(), h.evidence.end(),
                     [&](const std::string& e) { return e.find(text) != std::string::npos; });
}

// --- Scenarios ---------------------------------------------------------------------------------

// 1000 kernels of 2 us, one every 5 us: 3 us idle before each kernel but the first.
Run LaunchBoundRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 1000; ++i) {
    uint64_t t = B + i * 5'000;
    b.Launch("tiny_step", t, t + 4'500, t + 3'000, t + 5'000);
  }
  uint32_t c = b.Api("cudaDeviceSynchronize", B + 4'999'500, B + 5'000'100);
  b.Sync(SyncKind::ContextSynchronize, B + 4'999'500, B + 5'000'100, c);
  return b.Build();
}

// 100 x: a kernel of 100 us (t+5 .. t+105 us), a cudaStreamSynchronize from `sync_from` us to
// 110 us, and the next launch a `period` later.
Run WaitRun(uint64_t period_us, uint64_t sync_from_us) {
  TraceBuilder b;
  for (uint64_t i = 0; i < 100; ++i) {
    uint64_t t = B + i * period_us * 1'000;
    b.Launch("step_kernel", t, t + 5'000, t + 5'000, t + 105'000);
    uint32_t c = b.Api("cudaStreamSynchronize", t + sync_from_us * 1'000, t + 110'000);
    b.Sync(SyncKind::StreamSynchronize, t + sync_from_us * 1'000, t + 110'000, c, 7);
  }
  return b.Build();
}

// Period 150 us: the host works 75 us, then waits (blocked 30 us) and launches the next kernel
// 40 us after the release. Each of the 99 gaps (50 us) holds a wait of 30 us: 30 us to
// excessive-sync, the other 20 us to launch-bound (40 us after a wait is below
// kHostWorkAfterWaitNs: launching again, not work).
Run ExcessiveSyncRun() { return WaitRun(150, 80); }

// Period 250 us: the wait blocks 104 us, then 140 us of the program's own work before the next
// launch. Each of the 99 gaps (150 us): the wait's 104 us (without it the work would start that
// much earlier) and the 140 us of work after the release (5 us into the gap) explain 145 us
// together; 5 us of launch latency remain.
Run HostAfterWaitRun() { return WaitRun(250, 6); }

// 40 steps (range "step"), each: a 100 us kernel "prep", then the op "library_op" launching
// "row_softmax" (50 us). At steps 10, 20 and 30 the op first sets up for 5 ms (a new shape):
// the GPU idles 4.92 ms inside those three calls of the op's 40. Other steps leave 50 us
// between them.
Run SetupRun(std::initializer_list<uint64_t> setup_steps = {10, 20, 30}) {
  TraceBuilder b;
  uint64_t t = B;
  for (uint64_t i = 0; i < 40; ++i) {
    const bool setup = std::find(setup_steps.begin(), setup_steps.end(), i) != setup_steps.end();
    const uint64_t op = setup ? 5'000'000 : 0;  // the set-up inside the op's call
    b.Launch("prep", t, t + 5'000, t + 10'000, t + 110'000);
    b.Range("library_op", t + 15'000, t + op + 30'000);
    b.Launch("row_softmax", t + op + 20'000, t + op + 25'000,
             t + std::max<uint64_t>(op + 30'000, 110'000),
             t + std::max<uint64_t>(op + 30'000, 110'000) + 50'000);
    const uint64_t end = t + std::max<uint64_t>(op + 30'000, 110'000) + 50'000;
    b.Range("step", t, end);
    t = end + 50'000;
  }
  return b.Build();
}

// Like ExcessiveSyncRun but the wait is a synchronous 4-byte cudaMemcpy DtoH (`.item()`).
Run SyncCopyRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 100; ++i) {
    uint64_t t = B + i * 250'000;
    b.Launch("step_kernel", t, t + 5'000, t + 5'000, t + 105'000);
    uint32_t c = b.Api("cudaMemcpy", t + 6'000, t + 112'000);
    b.Memcpy(CopyKind::DtoH, MemKind::Device, MemKind::Pageable, 4, t + 106'000, t + 108'000, c,
             false);
  }
  return b.Build();
}

// `steps` x: a 2 us kernel, then its 4-byte result read back with a synchronous cudaMemcpy (the
// call waits 2 us for the kernel, the copy takes 2 us, the call returns 2 us later), and the next
// step's launch 2 us after that: 10 us of GPU idle before each kernel but the first, 2 us of it
// the wait's.
Run ReadbackRun(uint64_t steps = 200) {
  TraceBuilder b;
  for (uint64_t i = 0; i < steps; ++i) {
    const uint64_t t = B + i * 15'000;
    b.Launch("tiny_step", t, t + 5'000, t + 6'000, t + 8'000);
    const uint32_t c = b.Api("cudaMemcpy", t + 5'000, t + 13'000);
    b.Memcpy(CopyKind::DtoH, MemKind::Device, MemKind::Pageable, 4, t + 9'000, t + 11'000, c,
             false);
  }
  return b.Build();
}

// One pinned 64 MiB copy in 1.6 ms, then ten pageable 64 MiB copies of 6 ms each.
Run PageableRun() {
  TraceBuilder b;
  uint32_t c = b.Api("cudaMemcpy", B, B + 1'700'000);
  b.Memcpy(CopyKind::HtoD, MemKind::Pinned, MemKind::Device, 64 * MiB, B + 50'000, B + 1'650'000, c,
           false);
  for (uint64_t i = 0; i < 10; ++i) {
    uint64_t t = B + 2'000'000 + i * 6'500'000;
    c = b.Api("cudaMemcpy", t, t + 6'200'000);
    b.Memcpy(CopyKind::HtoD, MemKind::Pageable, MemKind::Device, 64 * MiB, t + 100'000,
             t + 6'100'000, c, false);
  }
  return b.Build();
}

// 1000 synchronous 256-byte copies, each call 8 us, one every 10 us.
Run SmallTransfersRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 1000; ++i) {
    uint64_t t = B + i * 10'000;
    uint32_t c = b.Api("cudaMemcpy", t, t + 8'000);
    b.Memcpy(CopyKind::HtoD, MemKind::Pageable, MemKind::Device, 256, t + 5'000, t + 6'500, c,
             false);
  }
  return b.Build();
}

// 100 x: cudaMalloc 1 MiB (49 us), kernel 20 us, cudaFree (64 us); period 120 us.
Run AllocChurnRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 100; ++i) {
    uint64_t t = B + i * 120'000;
    uint32_t c = b.Api("cudaMalloc", t + 1'000, t + 50'000);
    b.Mem(true, MiB, t + 40'000, c, 0x7f0000000000);
    b.Launch("fill_scratch", t + 50'000, t + 55'000, t + 55'000, t + 75'000);
    c = b.Api("cudaFree", t + 56'000, t + 120'000);
    b.Mem(false, MiB, t + 110'000, c, 0x7f0000000000);
  }
  return b.Build();
}

// 20 x: 8 ms of host work in NVTX range load_batch, then a 1.99 ms kernel: 8.01 ms idle gaps.
Run IdleGapsRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 20; ++i) {
    uint64_t t = B + i * 10'000'000;
    b.Range("load_batch", t, t + 8'000'000);
    b.Launch("train_kernel", t + 8'000'000, t + 8'005'000, t + 8'010'000, t + 10'000'000);
  }
  return b.Build();
}

// 50 x on one stream: HtoD 1 ms, kernel 1.5 ms, DtoH 1 ms, all queued, no overlap.
Run NoOverlapRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 50; ++i) {
    uint64_t a = B + i * 3'000, t = B + 100'000 + i * 3'500'000;
    uint32_t c = b.Api("cudaMemcpyAsync", a, a + 1'000);
    b.Memcpy(CopyKind::HtoD, MemKind::Pinned, MemKind::Device, 32 * MiB, t, t + 1'000'000, c, true);
    b.Launch("compute_chunk", a + 1'000, a + 2'000, t + 1'000'000, t + 2'500'000);
    c = b.Api("cudaMemcpyAsync", a + 2'000, a + 3'000);
    b.Memcpy(CopyKind::DtoH, MemKind::Device, MemKind::Pinned, 32 * MiB, t + 2'500'000,
             t + 3'500'000, c, true);
  }
  uint64_t end = B + 100'000 + 50 * 3'500'000 + 5'000;
  uint32_t c = b.Api("cudaStreamSynchronize", B + 150'000, end);
  b.Sync(SyncKind::StreamSynchronize, B + 150'000, end, c, 7);
  return b.Build();
}

// 100 launches of 2 ms with 8 blocks on a 132-SM GPU, back to back.
Run UnderfilledRun() {
  TraceBuilder b;
  b.Device(0, "NVIDIA H100 80GB HBM3", 132);
  for (uint64_t i = 0; i < 100; ++i) {
    uint64_t a = B + i * 5'000, t = B + 10'000 + i * 2'000'000;
    b.Launch("block_sum(float const*, unsigned long, float*)", a, a + 4'000, t, t + 2'000'000,
             {8, 1, 1});
  }
  return b.Build();
}

// 100 FP32 SIMT GEMMs of 1 ms interleaved with 100 TF32 tensor-core GEMMs of 0.2 ms.
Run LatencyRun(bool measured);  // with hardware counters (below)

Run Fp32GemmRun() {
  TraceBuilder b;
  uint64_t t = B + 10'000;
  for (uint64_t i = 0; i < 100; ++i) {
    uint64_t a = B + i * 2'000;
    b.Launch("ampere_sgemm_128x64_nn", a, a + 900, t, t + 1'000'000);
    t += 1'000'000;
    b.Launch("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", a + 1'000, a + 1'900, t,
             t + 200'000);
    t += 200'000;
  }
  return b.Build();
}

// 50 x: matmul_tile 100 us, then elementwise 40 us, softmax 60 us, layer_norm 50 us; the first
// launch of `kernel` (if any) with replay's counters (SM, memory %).
Run ChainRunMeasured(const char* kernel, double sm, double mem);
Run ChainRun() { return ChainRunMeasured(nullptr, 0, 0); }

// 10 x: prepare_input 0.5 ms, transpose_naive 9 ms, finalize_output 0.5 ms, back to back.
Run DominantRun() {
  TraceBuilder b;
  const std::pair<const char*, uint64_t> step[] = {
      {"prepare_input", 500'000}, {"transpose_naive", 9'000'000}, {"finalize_output", 500'000}};
  uint64_t t = B + 10'000, a = B;
  for (uint64_t i = 0; i < 10; ++i)
    for (const auto& [name, d] : step) {
      b.Launch(name, a, a + 800, t, t + d);
      a += 1'000;
      t += d;
    }
  return b.Build();
}

// 10 kernels of 1 ms; 2 ms of profiler overhead (two overlapping records); 5000 records dropped.
Run DataLossRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 10; ++i)
    b.Launch("work", B + i * 1'000, B + i * 1'000 + 800, B + 10'000 + i * 1'000'000,
             B + 10'000 + (i + 1) * 1'000'000);
  b.Overhead(OverheadKind::BufferFlush, B + 2'000'000, B + 3'000'000);
  b.Overhead(OverheadKind::Instrumentation, B + 2'500'000, B + 4'000'000);
  b.Overhead(OverheadKind::LazyFunctionLoading, B + 5'000'000, B + 9'000'000);  // not kprof's
  b.Stats().records_written = 100'000;
  b.Stats().dropped_records = 5'000;
  return b.Build();
}

// Large BF16 GEMMs queued back to back after one-time set-up: allocations, two fill kernels,
// 30 ms of first-launch module loading, 200 GEMMs of 1.5 ms with 1 us between them, one wait.
// A PyTorch training run on a 1 GiB GPU: `held` bytes at the driver-level peak, one step's
// kernel, and the PyTorch layer's payload (JSON after the mark's prefix).
Run TorchRun(uint64_t held, const std::string& payload) {
  TraceBuilder b;
  b.Device(0, "NVIDIA H100 80GB HBM3", 132)
      .Meta("device.0.memory_bytes", std::to_string(1024 * MiB));
  const uint32_t c = b.Api("cudaMalloc", B, B + 10'000);
  b.Mem(true, held, B + 5'000, c, 0x7f0000000000);
  b.Launch("train_step", B + 20'000, B + 25'000, B + 30'000, B + 100'000'000);
  b.Mark("kprof.pytorch.memory:" + payload, B + 100'000'001);
  return b.Build();
}

// 900 MiB held at the driver-level peak (88% of the GPU); PyTorch's allocator peaked at 400 MiB
// allocated of 880 MiB reserved (480 MiB cached, unused), 250 MiB of it activations; the bytes
// after each of 6 optimizer steps grew by 50 MiB a step. All three memory rules speak; no time
// rule does.
Run TorchMemoryRun() {
  const uint64_t M = MiB;
  return TorchRun(900 * MiB,
                  fmt::format(R"({{"v":1,"device":0,"when":"exit","now_us":1,"max_allocated":{},
 "max_reserved":{},"allocated":{},"reserved":{},"complete":true,"optimizer_steps":6,
 "backward_passes":6,"steps":[{},{},{},{},{},{}],"steps_total":6,
 "moments":[{{"kind":"allocated_peak","t_us":1,
 "allocated":{},"reserved":{},"categories":{{"parameters":{},"activations":{},"other":{}}}}}]}})",
                              400 * M, 880 * M, 300 * M, 880 * M, 50 * M, 100 * M, 150 * M, 200 * M,
                              250 * M, 300 * M, 400 * M, 880 * M, 50 * M, 250 * M, 100 * M));
}

// 800 MiB held (78% of the GPU): FP32 AdamW state and a step's outputs kept into the next step:
// fp32-optimizer-state and held-across-steps, priced in bytes of the allocated peak.
Run TorchStateRun() {
  const uint64_t M = MiB;
  return TorchRun(800 * MiB,
                  fmt::format(R"({{"v":1,"device":0,"when":"exit","now_us":1,"max_allocated":{0},
 "max_reserved":{0},"allocated":{0},"reserved":{0},"complete":true,"optimizer_steps":6,
 "backward_passes":6,"moments":[{{"kind":"allocated_peak","t_us":1,"allocated":{0},
 "reserved":{0},"kept":{1},"kept_blocks":[[null,{1}]],
 "categories":{{"parameters":{1},"optimizer_state":{2},"other":{1}}}}}],
 "step_end":{{"t_us":1,"blocks":[[null,{1},"other"]],"rest_bytes":0,"rest_blocks":0}},
 "dtypes":{{"optimizer_state":{{"float32":{2}}}}}}})",
                              800 * M, 200 * M, 400 * M));
}

Run HealthyRun() {
  TraceBuilder b;
  b.Device(0, "NVIDIA H100 80GB HBM3", 132);
  for (uint64_t i = 0; i < 3; ++i) {
    uint32_t c = b.Api("cudaMalloc", B + i * 100'000, B + i * 100'000 + 90'000);
    b.Mem(true, 128 * MiB, B + i * 100'000 + 80'000, c, 0x7f0000000000 + i * 128 * MiB);
  }
  b.Launch("fill_bf16", B + 300'000, B + 305'000, B + 400'000, B + 600'000);
  b.Launch("fill_bf16", B + 306'000, B + 310'000, B + 600'000, B + 800'000);
  const std::string gemm = "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NNT";
  b.Launch(gemm, B + 800'000, B + 30'800'000, B + 31'000'000, B + 32'500'000);
  for (uint64_t j = 1; j < 200; ++j) {
    uint64_t a = B + 30'800'000 + j * 5'000, t = B + 31'000'000 + j * 1'501'000;
    b.Launch(gemm, a, a + 4'000, t, t + 1'500'000);
  }
  uint64_t last = B + 31'000'000 + 199 * 1'501'000 + 1'500'000;
  uint32_t c = b.Api("cudaStreamSynchronize", B + 32'000'000, last + 10'000);
  b.Sync(SyncKind::StreamSynchronize, B + 32'000'000, last + 10'000, c, 7);
  for (uint64_t i = 0; i < 3; ++i) {
    uint64_t t = last + 20'000 + i * 100'000;
    c = b.Api("cudaFree", t, t + 80'000);
    b.Mem(false, 128 * MiB, t + 50'000, c, 0x7f0000000000 + i * 128 * MiB);
  }
  return b.Build();
}

// 30 x in range "step": capture 1 ms (begin/end capture calls), instantiate 2 ms, launch the
// graph (its launch 20 us; 100 us of GPU work as a kernel of the graph launch). Captured and
// instantiated again every step, as torch.compile does when shapes change.
Run RecaptureRun() {
  TraceBuilder b;
  for (uint64_t i = 0; i < 30; ++i) {
    uint64_t t = B + i * 4'000'000;
    b.Range("step", t, t + 3'500'000);
    b.Api("cudaStreamBeginCapture", t, t + 10'000);
    b.Api("cudaStreamEndCapture", t + 990'000, t + 1'000'000);
    b.Api("cudaGraphInstantiate", t + 1'000'000, t + 3'000'000);
    uint32_t c = b.Api("cudaGraphLaunch", t + 3'000'000, t + 3'020'000);
    b.Kernel("graph_kernel", t + 3'030'000, t + 3'130'000, c);
  }
  return b.Build();
}

// Two ranks of 10 steps of 10 ms on dev 0 and dev 1: rank 1 starts each step's work 4.9 ms
// after rank 0 (its "load_batch" range), so rank 0's GPU waits 4.9 ms in each all-reduce with
// nothing else to run; each all-reduce then transfers for 1 ms beside no compute on either rank.
Run StragglerRun() {
  const char* ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  Run run;
  for (uint16_t rank = 0; rank < 2; ++rank) {
    TraceBuilder b(100 + rank);
    b.Device(rank, "NVIDIA H100 80GB HBM3", 132);
    b.Trace().rank = rank;
    for (uint64_t i = 0; i < 10; ++i) {
      const uint64_t t = B + i * 10'000'000, go = t + (rank ? 5'000'000 : 100'000);
      b.Range("step", t, t + 9'900'000);
      b.Range("load_batch", t, go);
      uint32_t c = b.Api("cudaLaunchKernel", go, go + 5'000);
      b.Kernel("gemm", go + 10'000, go + 2'010'000, c, {1024, 1, 1}, 7, rank);
      c = b.Api("cudaLaunchKernel", go + 5'000, go + 10'000);
      const uint64_t last = t + 5'000'000 + 2'010'000;  // rank 1's arrival
      b.Kernel(ar, go + 2'010'000, last + 1'000'000, c, {24, 1, 1}, 20, rank);
    }
    run.processes.push_back(b.Trace());
  }
  return run;
}

struct Scenario {
  const char* name;
  std::function<Run()> make;
};

const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> s = {{"launch-bound", LaunchBoundRun},
                                          {"excessive-sync", ExcessiveSyncRun},
                                          {"sync-readback", [] { return ReadbackRun(); }},
                                          {"host-work-after-sync", HostAfterWaitRun},
                                          {"sync-copy", SyncCopyRun},
                                          {"pageable-memcpy", PageableRun},
                                          {"small-transfers", SmallTransfersRun},
                                          {"alloc-churn", AllocChurnRun},
                                          {"gpu-idle-gaps", IdleGapsRun},
                                          {"shape-setup", [] { return SetupRun(); }},
                                          {"no-copy-compute-overlap", NoOverlapRun},
                                          {"underfilled-grid", UnderfilledRun},
                                          {"fp32-gemm", Fp32GemmRun},
                                          {"memory-bound-chain", ChainRun},
                                          {"dominant-kernel", DominantRun},
                                          {"profiler-data-loss", DataLossRun},
                                          {"graph-recapture", RecaptureRun},
                                          {"latency-bound", [] { return LatencyRun(true); }},
                                          {"rank-imbalance", StragglerRun},
                                          {"torch-memory", TorchMemoryRun},
                                          {"torch-state", TorchStateRun},
                                          {"healthy", HealthyRun}};
  return s;
}

// --- Per-rule tests ----------------------------------------------------------------------------

TEST(Hints, LaunchBoundIsTopAndBoundedByIdleBetweenKernels) {
  Result r = Compute(LaunchBoundRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "launch-bound");
  EXPECT_EQ(h.est_saving_ns, 999u * 3'000);  // the 999 gaps between kernels
  EXPECT_EQ(h.severity, Severity::Critical);
  EXPECT_LE(h.est_saving_ns, r.an.summary.wall_ns - r.an.summary.gpu_busy_ns);
  EXPECT_TRUE(EvidenceMentions(h, "1000 kernel launches"));
  EXPECT_EQ(Find(r, "excessive-sync"), nullptr);  // the final wait is followed by nothing
}

TEST(Hints, ExcessiveSyncIsTopAndSplitsGapsWithLaunchBound) {
  Result r = Compute(ExcessiveSyncRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "excessive-sync");
  EXPECT_EQ(h.est_saving_ns, 99u * 30'000);  // min(gap 50 us, blocked 30 us) per gap
  EXPECT_LE(h.est_saving_ns, r.an.summary.sync_ns);
  EXPECT_EQ(h.severity, Severity::Warning);  // 19.9% of the run
  EXPECT_TRUE(EvidenceMentions(h, "cudaStreamSynchronize: 100 calls"));
  const Hint* lb = Find(r, "launch-bound");
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(lb->est_saving_ns, 99u * 20'000);           // the rest of each gap
  EXPECT_EQ(Find(r, "host-work-after-sync"), nullptr);  // 40 us after the wait: launching
}

// The loop of issue 33: launch-bound priced it and advised a CUDA graph, which cannot hold a
// synchronous copy; the round trip is the cause, and reading back less often the fix.
TEST(Hints, PerStepReadBackIsItsOwnCauseNotLaunchBound) {
  Result r = Compute(ReadbackRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "sync-readback");
  EXPECT_EQ(h.est_saving_ns, 199u * 8'000);  // each gap less the 2 us the wait explains
  EXPECT_EQ(h.severity, Severity::Critical);
  EXPECT_TRUE(EvidenceMentions(h, "199 device-to-host copies of at most 4 B"));
  EXPECT_EQ(h.fix_cuda.find("cudaGraph"), std::string::npos);
  EXPECT_NE(h.fix_pytorch.find(".item()"), std::string::npos);
  EXPECT_EQ(Find(r, "launch-bound"), nullptr);  // no other launch gap
  // Ten read-backs are not a per-step pattern: launch-bound keeps their gaps.
  Result few = Compute(ReadbackRun(10));
  EXPECT_EQ(Find(few, "sync-readback"), nullptr);
  const Hint* lb = Find(few, "launch-bound");
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(lb->est_saving_ns, 9u * 8'000);
}

TEST(Hints, HostWorkAfterSyncIsTopAndOverlapsTheWaitOnlyOnce) {
  Result r = Compute(HostAfterWaitRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "host-work-after-sync");
  EXPECT_EQ(h.est_saving_ns, 99u * 140'000);  // from each release to the next launch call
  EXPECT_EQ(h.severity, Severity::Critical);
  EXPECT_TRUE(EvidenceMentions(h, "after cudaStreamSynchronize: 99 times"));
  EXPECT_TRUE(EvidenceMentions(h, "the launch rate is not what is slow"));
  EXPECT_EQ(h.fix_cuda.find("cudaGraphLaunch"), std::string::npos);  // graphs would not help
  // Removing the wait alone would let the work start 104 us earlier: priced too.
  const Hint* es = Find(r, "excessive-sync");
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(es->est_saving_ns, 99u * 104'000);
  const Hint* lb = Find(r, "launch-bound");
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(lb->est_saving_ns, 99u * 5'000);
  // The three estimates add up to 249 us a gap, but a gap is 150 us: the joint figure counts
  // each idle nanosecond once.
  const JointSaving j = EstimateJoint(r.hints);
  EXPECT_EQ(j.sum_est_ns, 99u * (140'000 + 104'000 + 5'000));
  EXPECT_EQ(j.est_saving_ns, 99u * 150'000);
  EXPECT_EQ(j.hints, 3u);
}

TEST(Hints, SynchronousCopyCountsAsAWaitNotAsTransferCost) {
  Result r = Compute(SyncCopyRun());
  const Hint* es = Find(r, "excessive-sync");
  ASSERT_NE(es, nullptr);
  // Blocked: the call's time before its copy while the kernel still ran (t+6 us .. t+105 us).
  EXPECT_EQ(es->est_saving_ns, 99u * 99'000);
  EXPECT_TRUE(EvidenceMentions(*es, "cudaMemcpy (DtoH, synchronous): 100 calls"));
  // Each copy is alone between two kernels: nothing to batch it with (reading less often is the
  // wait's fix, not a batched copy's).
  EXPECT_EQ(Find(r, "small-transfers"), nullptr);
  // 138 us from each release (the call's end) to the next launch: the program's own work.
  const Hint* hw = Find(r, "host-work-after-sync");
  ASSERT_NE(hw, nullptr);
  EXPECT_EQ(hw->est_saving_ns, 99u * 138'000);
}

TEST(Hints, PageableMemcpyIsTopAndBoundedByPinnedBandwidth) {
  Result r = Compute(PageableRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "pageable-memcpy");
  // Each 64 MiB pageable copy (6 ms) against the run's pinned 64 MiB copy (1.6 ms).
  EXPECT_EQ(h.est_saving_ns, 10u * (6'000'000 - 1'600'000));
  EXPECT_TRUE(EvidenceMentions(h, "fastest pinned copy of this run"));
  EXPECT_EQ(Find(r, "small-transfers"), nullptr);
}

TEST(Hints, SmallTransfersIsTopAndBoundedByOneBatchedCopy) {
  Result r = Compute(SmallTransfersRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "small-transfers");
  // 1000 copies of 8 us (call spans copy) minus one median copy minus 1000 x 256 B at 50 GB/s
  // (5.12 ns, rounded per copy to 5 ns).
  EXPECT_EQ(h.est_saving_ns, 1000u * 8'000 - 8'000 - 1000 * 5);
  EXPECT_TRUE(EvidenceMentions(h, "cudaMemcpy: 1000 small copies"));
  EXPECT_EQ(Find(r, "pageable-memcpy"), nullptr);  // below the small-copy size
}

TEST(Hints, AllocChurnIsTopAndCountsOnlyTheSteadyState) {
  Result r = Compute(AllocChurnRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "alloc-churn");
  // Wall 11.999 ms: calls from 1.2009 ms on are steady state (iterations 10..99): 90 cudaMalloc
  // of 49 us, all with the GPU idle, and the cudaFree of iterations 10..98 (the last one is
  // followed by no allocation), 64 us of which 19 us wait for the kernel: 45 us idle each.
  EXPECT_EQ(h.est_saving_ns, 90u * 49'000 + 89u * 45'000);
  EXPECT_TRUE(EvidenceMentions(h, "cudaMalloc: 90 calls"));
  EXPECT_TRUE(EvidenceMentions(h, "cudaFree: 89 calls"));
  // Gaps are 100 us, of which 94 us are spent in cudaFree/cudaMalloc: 6 us left per gap.
  const Hint* lb = Find(r, "launch-bound");
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(lb->est_saving_ns, 99u * 6'000);
}

TEST(Hints, GpuIdleGapsIsTopAndNamesTheHostRange) {
  Result r = Compute(IdleGapsRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "gpu-idle-gaps");
  EXPECT_EQ(h.est_saving_ns, 19u * 8'010'000);
  EXPECT_TRUE(EvidenceMentions(h, "in NVTX range 'load_batch'"));
  EXPECT_EQ(Find(r, "launch-bound"), nullptr);
}

TEST(Hints, NoCopyComputeOverlapIsTopAndBoundedByTheBusiestEngine) {
  Result r = Compute(NoOverlapRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "no-copy-compute-overlap");
  // Busy 175 ms; pipelined, uploads (50 ms), downloads (50 ms) and kernels (75 ms) run at once,
  // so the device stays busy for the kernels' 75 ms: 100 ms saved.
  EXPECT_EQ(h.est_saving_ns, 50u * 2'000'000);
  EXPECT_TRUE(EvidenceMentions(h, "dev 0 stream 7: 100 copies"));
  EXPECT_TRUE(EvidenceMentions(h, "busy at least as long as its kernels"));
  EXPECT_EQ(Find(r, "excessive-sync"), nullptr);
}

TEST(Hints, UnderfilledGridIsTopAndScalesBySmCount) {
  Result r = Compute(UnderfilledRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "underfilled-grid");
  EXPECT_EQ(h.est_saving_ns, 100u * (2'000'000 - 2'000'000 * 8 / 132));
  EXPECT_TRUE(EvidenceMentions(h, "at most 8 blocks for 132 SMs"));
}

TEST(Hints, UnderfilledGridNeedsTheSmCount) {
  kprof::Run run = UnderfilledRun();
  run.processes[0].meta.clear();
  Result r = Compute(std::move(run));
  EXPECT_EQ(Find(r, "underfilled-grid"), nullptr);
}

TEST(Hints, Fp32GemmIsTopAndCountsOnlyFp32Kernels) {
  Result r = Compute(Fp32GemmRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "fp32-gemm");
  EXPECT_EQ(h.est_saving_ns, 100u * (1'000'000 - 1'000'000 / 16));  // TF32 kernels excluded
  EXPECT_TRUE(EvidenceMentions(h, "ampere_sgemm_128x64_nn: 100 calls"));
}

TEST(Hints, MemoryBoundChainIsTopAndKeepsTheLongestMember) {
  Result r = Compute(ChainRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "memory-bound-chain");
  EXPECT_EQ(h.est_saving_ns, 50u * (150'000 - 60'000));  // matmul_tile breaks the chains
  EXPECT_TRUE(EvidenceMentions(h, "150 kernels in 50 chains"));
  EXPECT_EQ(Find(r, "dominant-kernel"), nullptr);  // matmul_tile has 40%
}

// With hardware counters (issue 12): the rules that guess from names take the counters' word
// for the kernels measured, and latency-bound speaks only from them.
Run Fp32GemmRunMeasured(double tensor_pct) {
  TraceBuilder b;
  uint64_t t = B + 10'000;
  for (uint64_t i = 0; i < 100; ++i) {
    const uint64_t a = B + i * 2'000;
    const uint32_t c = b.Api("cudaLaunchKernel", a, a + 900);
    b.Kernel("ampere_sgemm_128x64_nn", t, t + 1'000'000, c);
    if (i == 0) b.Counters(c, 85, 50, tensor_pct, 40);
    t += 1'000'000;
  }
  return b.Build();
}

TEST(Hints, Fp32GemmTakesTheTensorPipesWord) {
  Result r = Compute(Fp32GemmRunMeasured(0.0));
  const Hint* h = Find(r, "fp32-gemm");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_ns, 100u * (1'000'000 - 1'000'000 / 16));
  EXPECT_TRUE(EvidenceMentions(*h, "hardware counters: tensor pipes 0.0% busy, SM 85.0%"));
  // The same name, but the tensor pipes busy: not an FP32 GEMM on the FMA pipes.
  r = Compute(Fp32GemmRunMeasured(90.0));
  EXPECT_EQ(Find(r, "fp32-gemm"), nullptr);
}

Run ChainRunMeasured(const char* kernel, double sm, double mem) {
  TraceBuilder b;
  const std::pair<const char*, uint64_t> step[] = {
      {"matmul_tile", 100'000},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>()",
       40'000},
      {"softmax_warp_forward", 60'000},
      {"layer_norm_kernel", 50'000}};
  uint64_t t = B + 10'000, a = B;
  bool measured = false;
  for (uint64_t i = 0; i < 50; ++i)
    for (const auto& [name, d] : step) {
      const uint32_t c = b.Api("cudaLaunchKernel", a, a + 800);
      b.Kernel(name, t, t + d, c);
      if (!measured && kernel != nullptr && std::string(name) == kernel) {
        b.Counters(c, sm, mem, 0, 50);
        measured = true;
      }
      a += 1'000;
      t += d;
    }
  return b.Build();
}

TEST(Hints, MemoryBoundChainTakesTheCountersWord) {
  // layer_norm_kernel measured compute-bound: the chains are two kernels long, none counts.
  Result r = Compute(ChainRunMeasured("layer_norm_kernel", 85, 20));
  EXPECT_EQ(Find(r, "memory-bound-chain"), nullptr);
  // matmul_tile measured memory-bound joins: one chain of all 200 kernels, the longest kept.
  r = Compute(ChainRunMeasured("matmul_tile", 10, 85));
  const Hint* h = Find(r, "memory-bound-chain");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_ns, 50u * 250'000 - 100'000);
  EXPECT_TRUE(EvidenceMentions(*h, "200 kernels in 1 chains"));
  EXPECT_TRUE(EvidenceMentions(*h, "by their counters only"));
}

TEST(Hints, UnderfilledGridTakesTheCountersWord) {
  for (const double mem : {3.0, 85.0}) {
    TraceBuilder b;
    b.Device(0, "NVIDIA H100 80GB HBM3", 132);
    for (uint64_t i = 0; i < 100; ++i) {
      const uint64_t a = B + i * 5'000, t = B + 10'000 + i * 2'000'000;
      const uint32_t c = b.Api("cudaLaunchKernel", a, a + 4'000);
      b.Kernel("block_sum(float const*, unsigned long, float*)", t, t + 2'000'000, c, {8, 1, 1});
      if (i == 0) b.Counters(c, 4, mem, 0, 6);
    }
    Result r = Compute(b.Build());
    const Hint* h = Find(r, "underfilled-grid");
    if (mem > 60) {
      EXPECT_EQ(h, nullptr) << "memory at 85% of its peak limits it, not the grid";
    } else {
      ASSERT_NE(h, nullptr);
      EXPECT_TRUE(EvidenceMentions(*h, "hardware counters, block_sum"));
    }
  }
}

Run LatencyRun(bool measured) {
  TraceBuilder b;
  b.Device(0, "NVIDIA H100 80GB HBM3", 132);
  for (uint64_t i = 0; i < 100; ++i) {
    const uint64_t a = B + i * 5'000, t = B + 10'000 + i * 200'000;
    const uint32_t c = b.Api("cudaLaunchKernel", a, a + 4'000);
    b.Kernel("spin_step(float*, int)", t, t + 100'000, c, {132, 1, 1});
    if (measured && i == 0) b.Counters(c, 45, 1, 0, 12.5);
  }
  return b.Build();
}

TEST(Hints, LatencyBoundSpeaksOnlyFromCountersWithItsCauses) {
  EXPECT_EQ(Find(Compute(LatencyRun(false)), "latency-bound"), nullptr);
  Result r = Compute(LatencyRun(true));
  const Hint* h = Find(r, "latency-bound");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->severity, Severity::Info);
  EXPECT_EQ(h->est_saving_ns, 0u);
  EXPECT_TRUE(EvidenceMentions(*h, "SM 45.0%, memory 1.0%"));
  // 256 threads, 32 registers: the grid's one block per SM limits it to 8 of 64 warps.
  EXPECT_TRUE(EvidenceMentions(
      *h,
      "at most 1 block(s), 12.5% of the SM's warps, resident per SM: limited by the grid "
      "(132 blocks for 132 SMs)"));
}

TEST(Hints, DominantKernelIsInformationalWithStats) {
  Result r = Compute(DominantRun());
  ASSERT_EQ(r.hints.size(), 1u);
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "dominant-kernel");
  EXPECT_EQ(h.severity, Severity::Info);
  EXPECT_EQ(h.est_saving_ns, 0u);
  EXPECT_EQ(h.summary, "One kernel takes 90.0% of GPU time: start there");
  EXPECT_TRUE(EvidenceMentions(h, "transpose_naive"));
  EXPECT_TRUE(EvidenceMentions(h, "10 calls, total 90.00 ms"));
}

TEST(Hints, ProfilerDataLossIsTopAndPricesOnlyProfilerOverhead) {
  Result r = Compute(DataLossRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "profiler-data-loss");
  EXPECT_EQ(h.est_saving_ns, 2'000'000u);     // union of the flush and instrumentation records
  EXPECT_EQ(h.severity, Severity::Critical);  // 5000 of 105000 records lost
  EXPECT_TRUE(EvidenceMentions(h, "5000 records dropped"));
}

TEST(Hints, HealthyGemmRunRaisesNothingAboveInfo) {
  Result r = Compute(HealthyRun());
  for (const Hint& h : r.hints) EXPECT_EQ(h.severity, Severity::Info) << h.id << ": " << h.summary;
  ASSERT_EQ(r.hints.size(), 1u);
  EXPECT_EQ(r.hints.front().id, "dominant-kernel");
}

// --- Contract tests ----------------------------------------------------------------------------

TEST(Hints, OrderingIsCostThenSeverityThenId) {
  // Equal (zero) cost: the critical data-loss hint comes before the informational one.
  TraceBuilder b;
  for (uint64_t i = 0; i < 10; ++i)
    b.Launch("work", B + i * 1'000, B + i * 1'000 + 800, B + 10'000 + i * 1'000'000,
             B + 10'000 + (i + 1) * 1'000'000);
  b.Stats().records_written = 100;
  b.Stats().dropped_records = 10;
  Result r = Compute(b.Build());
  ASSERT_EQ(r.hints.size(), 2u);
  EXPECT_EQ(r.hints[0].id, "profiler-data-loss");
  EXPECT_EQ(r.hints[1].id, "dominant-kernel");

  for (const auto& s : Scenarios()) {
    Result x = Compute(s.make());
    for (size_t i = 1; i < x.hints.size(); ++i) {
      const Hint &a = x.hints[i - 1], &c = x.hints[i];
      bool ordered = a.est_saving_ns != c.est_saving_ns ? a.est_saving_ns > c.est_saving_ns
                     : a.severity != c.severity         ? a.severity > c.severity
                                                        : a.id < c.id;
      EXPECT_TRUE(ordered) << s.name << ": " << a.id << " before " << c.id;
    }
  }
}

TEST(Hints, EveryHintIsCompleteAndBounded) {
  for (const auto& s : Scenarios()) {
    Result x = Compute(s.make());
    const RunSummary& S = x.an.summary;
    uint64_t idle_rules = 0;
    for (const Hint& h : x.hints) {
      SCOPED_TRACE(std::string(s.name) + " / " + h.id);
      EXPECT_FALSE(h.summary.empty());
      EXPECT_FALSE(h.evidence.empty());
      EXPECT_FALSE(h.assumption.empty());
      EXPECT_FALSE(h.fix_cuda.empty());
      EXPECT_FALSE(h.fix_pytorch.empty());
      EXPECT_LE(h.est_saving_ns, S.wall_ns);
      EXPECT_DOUBLE_EQ(h.est_saving_pct, 100.0 * static_cast<double>(h.est_saving_ns) /
                                             static_cast<double>(S.wall_ns));
      if (h.id == "launch-bound" || h.id == "excessive-sync" || h.id == "gpu-idle-gaps")
        idle_rules += h.est_saving_ns;
    }
    // The three idle-time rules split the idle time; together they never exceed it.
    EXPECT_LE(idle_rules, S.wall_ns - S.gpu_busy_ns) << s.name;
  }
}

TEST(Hints, GraphRecaptureIsPricedByTheBuildsAfterTheFirstLaunch) {
  Result r = Compute(RecaptureRun());
  const Hint* h = Find(r, "graph-recapture");
  ASSERT_NE(h, nullptr);
  // Steps 1..29 come after the first launch: 29 captures of 1 ms and 29 instantiations of 2 ms.
  EXPECT_EQ(h->est_saving_ns, 29u * 1'000'000 + 29u * 2'000'000);
  EXPECT_TRUE(EvidenceMentions(*h, "29 captures"));
  EXPECT_TRUE(EvidenceMentions(*h, "op 'step': 29 instantiations"));
  EXPECT_GE(h->severity, Severity::Warning);
  // Built once and replayed: nothing.
  TraceBuilder b;
  b.Api("cudaStreamBeginCapture", B, B + 10'000);
  b.Api("cudaStreamEndCapture", B + 990'000, B + 1'000'000);
  b.Api("cudaGraphInstantiate", B + 1'000'000, B + 3'000'000);
  for (uint64_t i = 0; i < 30; ++i) {
    uint64_t t = B + 3'000'000 + i * 200'000;
    uint32_t c = b.Api("cudaGraphLaunch", t, t + 20'000);
    b.Kernel("graph_kernel", t + 30'000, t + 130'000, c);
  }
  EXPECT_EQ(Find(Compute(b.Build()), "graph-recapture"), nullptr);
}

TEST(Hints, ShapeSetupIsTopAndPricesOnlyTheCallsThatSetUp) {
  Result r = Compute(SetupRun());
  ASSERT_FALSE(r.hints.empty());
  const Hint& h = r.hints.front();
  EXPECT_EQ(h.id, "shape-setup");
  // The gap from prep's end (110 us into the step) to row_softmax (5.03 ms), three times.
  EXPECT_EQ(h.est_saving_ns, 3u * (5'030'000 - 110'000));
  EXPECT_TRUE(EvidenceMentions(h, "op 'library_op': 3 of its 40 calls"));
  EXPECT_EQ(Find(r, "gpu-idle-gaps"), nullptr);  // those long gaps are set-up, not host work
  EXPECT_NE(h.fix_pytorch.find("bucket"), std::string::npos);
}

TEST(Hints, SetUpInAnOpsFirstCallsIsStartUp) {
  // The same set-ups in the op's first calls (steps 1-3): start-up, not a new shape mid-run.
  Result r = Compute(SetupRun({1, 2, 3}));
  EXPECT_EQ(Find(r, "shape-setup"), nullptr);
  // And in more than a quarter of the calls: the op's normal cost, not a one-time set-up.
  Result many = Compute(SetupRun({5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(Find(many, "shape-setup"), nullptr);
}

TEST(Hints, LaunchGapsInCompiledCodeAreNotAdvisedTorchCompile) {
  // Eager: the advice names torch.compile. The same gaps inside a compiled region (Inductor's
  // "## Call CompiledFxGraph" range inside Dynamo's "Torch-Compiled Region"): it does not.
  Result eager = Compute(LaunchBoundRun());
  const Hint* e = Find(eager, "launch-bound");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->fix_pytorch.find("torch.compile(model"), std::string::npos);
  TraceBuilder b;
  b.Range("Torch-Compiled Region: 0/0", B - 1'000, B + 5'001'000);
  b.Range("## Call CompiledFxGraph fabc123 ##", B - 500, B + 5'000'500);
  for (uint64_t i = 0; i < 1000; ++i) {
    uint64_t t = B + i * 5'000;
    b.Launch("triton_poi_fused_add_0", t, t + 4'500, t + 3'000, t + 5'000);
  }
  Result compiled = Compute(b.Build());
  const Hint* c = Find(compiled, "launch-bound");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->est_saving_ns, e->est_saving_ns);
  EXPECT_TRUE(EvidenceMentions(*c, "999 of these gaps"));
  EXPECT_EQ(c->fix_pytorch.find("torch.compile(model"), std::string::npos) << c->fix_pytorch;
  EXPECT_NE(c->fix_pytorch.find("already compiled"), std::string::npos);
}

TEST(Hints, EveryHintsClaimsAddUpToItsEstimate) {
  for (const auto& s : Scenarios()) {
    Result x = Compute(s.make());
    for (const Hint& h : x.hints) {
      SCOPED_TRACE(std::string(s.name) + " / " + h.id);
      if (h.id == "profiler-data-loss") {  // kprof's own overhead: no time of the program
        EXPECT_TRUE(h.claims.empty());
        continue;
      }
      long double claimed = 0;
      for (const SavingClaim& c : h.claims) {
        EXPECT_LT(c.start_ns, c.end_ns);
        EXPECT_GT(c.fraction, 0.0);
        EXPECT_LE(c.fraction, 1.0);
        claimed += static_cast<long double>(c.end_ns - c.start_ns) * c.fraction;
      }
      EXPECT_NEAR(static_cast<double>(claimed), static_cast<double>(h.est_saving_ns),
                  1.0 + 1e-9 * static_cast<double>(h.est_saving_ns));
    }
    const JointSaving j = EstimateJoint(x.hints);
    uint64_t top = 0;
    for (const Hint& h : x.hints)
      if (!h.claims.empty()) top = std::max(top, h.est_saving_ns);
    EXPECT_LE(j.est_saving_ns, j.sum_est_ns) << s.name;
    EXPECT_GE(j.est_saving_ns + 1, top) << s.name;
    EXPECT_LE(j.est_saving_ns, x.an.summary.wall_ns) << s.name;
  }
}

TEST(Hints, RankImbalancePricesTheOthersIdleWait) {
  // gpu-idle-gaps prices the GPUs' idle time between steps (rank 1's while its host loads).
  Result r = Compute(StragglerRun());
  ASSERT_NE(Find(r, "rank-imbalance"), nullptr);
  const Hint& h = *Find(r, "rank-imbalance");
  EXPECT_EQ(h.est_saving_ns, 10u * 4'900'000);
  EXPECT_NE(h.summary.find("rank 1 is the straggler"), std::string::npos) << h.summary;
  EXPECT_TRUE(EvidenceMentions(h, "arrived last at 10 of the 10 collectives"));
  EXPECT_TRUE(EvidenceMentions(h, "in range 'load_batch'"));
  // The transfer after the last arrival, beside no compute on either rank, at the same instants.
  const Hint* e = Find(r, "exposed-communication");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->est_saving_ns, 10u * 1'000'000);
  // NCCL's 24-block kernel is communication, not an underfilled grid.
  EXPECT_EQ(Find(r, "underfilled-grid"), nullptr);
}

TEST(Hints, TheMemoryRulesPriceBytesOfTheirPeak) {
  const Result r = Compute(TorchMemoryRun());
  const Hint* leak = Find(r, "memory-leak");
  const Hint* frag = Find(r, "allocator-fragmentation");
  const Hint* acts = Find(r, "activation-memory");
  ASSERT_NE(leak, nullptr);
  ASSERT_NE(frag, nullptr);
  ASSERT_NE(acts, nullptr);
  EXPECT_EQ(leak->est_saving_bytes, 250 * MiB);  // 50 -> 300 MiB over the steps
  EXPECT_DOUBLE_EQ(leak->est_saving_bytes_pct, 62.5);
  EXPECT_EQ(frag->est_saving_bytes, 480 * MiB);
  EXPECT_EQ(acts->est_saving_bytes, 250 * MiB);
  EXPECT_DOUBLE_EQ(acts->est_saving_bytes_pct, 62.5);
  for (const Hint* h : {leak, frag, acts}) {
    EXPECT_EQ(h->est_saving_ns, 0u) << h->id;
    EXPECT_TRUE(h->claims.empty()) << h->id;
    EXPECT_EQ(h->severity, Severity::Critical) << h->id;
  }
  // The one kernel is all of the GPU's time: dominant-kernel speaks too; no rule prices time.
  std::string ids;
  for (const Hint& h : r.hints) ids += h.id + " ";
  EXPECT_EQ(ids, "activation-memory allocator-fragmentation memory-leak dominant-kernel ");
}

TEST(Hints, Fp32StateAndTensorsKeptAcrossStepsPriceBytesOfTheirPeak) {
  const Result r = Compute(TorchStateRun());
  const Hint* state = Find(r, "fp32-optimizer-state");
  const Hint* held = Find(r, "held-across-steps");
  ASSERT_NE(state, nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(state->est_saving_bytes, 200 * MiB);  // 400 MiB of FP32 state in bfloat16
  EXPECT_DOUBLE_EQ(state->est_saving_bytes_pct, 25.0);
  EXPECT_EQ(held->est_saving_bytes, 200 * MiB);
  EXPECT_NE(held->summary.find("the most, 200.0 MiB, made before the history's window"),
            std::string::npos)
      << held->summary;
  for (const Hint* h : {state, held}) EXPECT_EQ(h->est_saving_ns, 0u) << h->id;
  EXPECT_EQ(Find(r, "allocator-fragmentation"), nullptr);
  EXPECT_EQ(Find(r, "memory-leak"), nullptr);
}

TEST(Hints, EveryRuleIsExercised) {
  std::set<std::string> produced;
  for (const auto& s : Scenarios())
    for (const Hint& h : Compute(s.make()).hints) produced.insert(h.id);
  for (const std::string& id : HintIds()) EXPECT_TRUE(produced.count(id)) << id;
  EXPECT_EQ(produced.size(), HintIds().size());
}

TEST(Hints, IdsAndSeverityNames) {
  const auto& ids = HintIds();
  EXPECT_EQ(ids.size(), 24u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_STREQ(SeverityName(Severity::Info), "info");
  EXPECT_STREQ(SeverityName(Severity::Warning), "warning");
  EXPECT_STREQ(SeverityName(Severity::Critical), "critical");
}

TEST(Hints, EmptyRunHasNoHints) {
  kprof::Run run;
  EXPECT_TRUE(ComputeHints(BuildTimeline(run), Analyze(BuildTimeline(run))).empty());
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// Large runs stay linear: 200k copies with no kernel (the warm-up scan once rescanned to the end
// for every gap) and 60k idle gaps of 2 ms with their launches (the idle-gap rule once looked
// through every API call for every gap). Each took minutes before; well under a second now.
TEST(HintsScale, ManyGapsStayLinear) {
  test::TraceBuilder b;
  for (uint32_t i = 0; i < 200000; ++i) {
    Record& c = b.Add(RecordKind::Memcpy, "", 1'000'000 + uint64_t{i} * 10'000,
                      1'000'000 + uint64_t{i} * 10'000 + 1'000);
    c.flags = static_cast<uint8_t>(CopyKind::DtoD);
    c.bytes = 4096;
  }
  test::TraceBuilder k(101);
  for (uint32_t i = 0; i < 60000; ++i) {
    uint64_t t = 1'000'000 + uint64_t{i} * 2'000'000;
    k.Launch(1, t, "k", t + 5'000, t + 10'000);
  }
  kprof::Run run;
  run.processes.push_back(std::move(b.t));
  run.processes.push_back(std::move(k.t));
  auto t0 = std::chrono::steady_clock::now();
  Analysis a = Analyze(BuildTimeline(run));
  std::vector<Hint> hints = ComputeHints(BuildTimeline(run), a);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  ASSERT_FALSE(hints.empty());
}

}  // namespace
}  // namespace kprof
