// Start-up told from the steady state (docs/hints.md, "Start-up and the steady state"): with
// kprof's module ranges, the work before the first call of the root module called most often is
// start-up, which no hint prices; the same work inside the loop is priced.
#include <gtest/gtest.h>

#include "kprof/hints.h"
#include "kprof/output.h"
#include "trace_builder.h"

namespace kprof {
namespace {

using testing::TraceBuilder;

constexpr uint64_t B = 1'000'000'000;
constexpr uint64_t MiB = 1 << 20;

// 20 calls of the model "vit" from `t` on: a module range around a 2 ms kernel, 1 ms apart.
void VitLoop(TraceBuilder& b, uint64_t& t) {
  for (int step = 0; step < 20; ++step) {
    const uint64_t begin = t;
    b.Launch("vit_block", t, t + 5'000, t + 10'000, t + 2'010'000);
    t += 2'010'000;
    b.Range("kprof.module:vit|ViTModel", begin, t);
    t += 1'000'000;
  }
}

// Ten pageable 64 MiB uploads of 6 ms each (weights moved to the GPU once, `uploads_in_loop`
// false) or one at the start of each of the first ten steps (true); then 20 calls of the model
// "vit" (a module range around a 2 ms kernel, 1 ms apart).
kprof::Run Inference(bool uploads_in_loop) {
  TraceBuilder b;
  uint64_t t = B;
  const auto upload = [&] {
    const uint32_t c = b.Api("cudaMemcpy", t, t + 6'200'000);
    b.Memcpy(CopyKind::HtoD, MemKind::Pageable, MemKind::Device, 64 * MiB, t + 100'000,
             t + 6'100'000, c, false);
    t += 6'500'000;
  };
  if (!uploads_in_loop)
    for (int i = 0; i < 10; ++i) upload();
  for (int step = 0; step < 20; ++step) {
    const uint64_t begin = t;
    if (uploads_in_loop && step < 10) upload();
    b.Launch("vit_block", t, t + 5'000, t + 10'000, t + 2'010'000);
    t += 2'010'000;
    b.Range("kprof.module:vit|ViTModel", begin, t);
    t += 1'000'000;
  }
  return b.Build();
}

TEST(StartUp, AWeightUploadBeforeTheLoopIsStartUpNotAHint) {
  const kprof::Run run = Inference(false);
  const Timeline tl = BuildTimeline(run);
  ASSERT_EQ(tl.processes.size(), 1u);
  EXPECT_EQ(tl.processes[0].steady_from_ns, B + 65'000'000);  // after the ten uploads
  EXPECT_EQ(tl.processes[0].steady_from_what, "vit");
  const Analysis a = Analyze(tl);
  const std::vector<Hint> hints = ComputeHints(tl, a);
  EXPECT_EQ(FindHint(hints, "pageable-memcpy"), nullptr);
  EXPECT_EQ(FindHint(hints, "no-copy-compute-overlap"), nullptr);
  EXPECT_EQ(a.summary.startup_copies, 10u);
  EXPECT_EQ(a.summary.startup_copy_bytes, 640u * MiB);
  std::string line;
  for (const auto& [k, v] : TotalsLines(a.summary, HintBaseNs(hints)))
    if (k == "start-up") line = v;
  EXPECT_EQ(line,
            "before the first call of vit: 10 copies (640.0 MiB, 60.00 ms), 0 kernels; not priced");
}

TEST(StartUp, TheSameUploadsInsideTheLoopArePriced) {
  const kprof::Run run = Inference(true);
  const Timeline tl = BuildTimeline(run);
  EXPECT_EQ(tl.processes[0].steady_from_ns, B);  // the first call holds the first upload
  const Analysis a = Analyze(tl);
  const std::vector<Hint> hints = ComputeHints(tl, a);
  const Hint* h = FindHint(hints, "pageable-memcpy");
  ASSERT_NE(h, nullptr);
  EXPECT_NE(h->summary.find("10 large copies"), std::string::npos) << h->summary;
  EXPECT_EQ(a.summary.startup_copies, 0u);
}

// Before the loop, a conversion op ("aten::copy_") called 8 times, its 6th call waiting 5 ms for
// a library's set-up: start-up, not shape-setup (which it would be inside the loop).
TEST(StartUp, SetUpInsideAnOpBeforeTheLoopIsNotShapeSetup) {
  TraceBuilder b;
  uint64_t t = B;
  for (int i = 0; i < 8; ++i) {
    const uint64_t wait = i == 5 ? 5'000'000 : 0;
    b.Range("aten::copy_", t, t + wait + 30'000);
    b.Launch("convert", t + wait + 10'000, t + wait + 15'000, t + wait + 20'000, t + wait + 40'000);
    t += wait + 100'000;
  }
  VitLoop(b, t);
  const kprof::Run run = b.Build();
  const Timeline tl = BuildTimeline(run);
  for (const Gap& g : tl.processes[0].gaps) EXPECT_NE(g.kind, GapKind::Setup);
  EXPECT_EQ(FindHint(ComputeHints(tl, Analyze(tl)), "shape-setup"), nullptr);
  EXPECT_EQ(Analyze(tl).summary.startup_kernels, 8u);
}

// Before the loop, 30 kernels each waited for with cudaStreamSynchronize (an initialisation that
// checks each step of itself): start-up, not excessive-sync. And a module called more often than
// the model, but only after the loop (a metric): the steady state still begins at the model.
TEST(StartUp, WaitsBeforeTheLoopAreStartUpAndTheFirstRepeatedModuleBeginsTheLoop) {
  TraceBuilder b;
  uint64_t t = B;
  for (int i = 0; i < 30; ++i) {
    b.Launch("init_kernel", t, t + 5'000, t + 10'000, t + 500'000);
    const uint32_t c = b.Api("cudaStreamSynchronize", t + 6'000, t + 510'000);
    b.Sync(SyncKind::StreamSynchronize, t + 6'000, t + 510'000, c, 7);
    t += 1'000'000;
  }
  const uint64_t loop = t;
  VitLoop(b, t);
  for (int i = 0; i < 50; ++i) {
    b.Launch("metric", t, t + 5'000, t + 10'000, t + 20'000);
    b.Range("kprof.module:metric|Accuracy", t, t + 30'000);
    t += 100'000;
  }
  const kprof::Run run = b.Build();
  const Timeline tl = BuildTimeline(run);
  EXPECT_EQ(tl.processes[0].steady_from_ns, loop);
  EXPECT_EQ(tl.processes[0].steady_from_what, "vit");
  EXPECT_EQ(FindHint(ComputeHints(tl, Analyze(tl)), "excessive-sync"), nullptr);
}

TEST(StartUp, WithoutModuleRangesNothingChanges) {
  TraceBuilder b;
  for (uint64_t i = 0; i < 10; ++i) {
    const uint64_t t = B + i * 6'500'000;
    const uint32_t c = b.Api("cudaMemcpy", t, t + 6'200'000);
    b.Memcpy(CopyKind::HtoD, MemKind::Pageable, MemKind::Device, 64 * MiB, t + 100'000,
             t + 6'100'000, c, false);
  }
  const kprof::Run run = b.Build();
  const Timeline tl = BuildTimeline(run);
  EXPECT_EQ(tl.processes[0].steady_from_ns, 0u);
  EXPECT_NE(FindHint(ComputeHints(tl, Analyze(tl)), "pageable-memcpy"), nullptr);
}

}  // namespace
}  // namespace kprof
