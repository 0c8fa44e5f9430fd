// Capture windows recorded on the H100 (issue 13, docs/capture.md): exact counts of what each
// window holds, the windows' records, and what the analysis makes of them.
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

using namespace kprof;

namespace {

std::string Fixture(const std::string& name) {
  return std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name;
}

struct Counts {
  uint64_t kernels = 0, syncs = 0, windows = 0, missing = 0;
  std::map<CaptureEnd, uint64_t> ends;
};

Counts Count(const kprof::Run& run) {
  Counts c;
  for (const ProcessTrace& p : run.processes) {
    c.missing += p.stats.missing_timestamps;
    for (const Record& r : p.records) {
      c.kernels += r.Kind() == RecordKind::Kernel;
      c.syncs += r.Kind() == RecordKind::Sync;
      if (r.Kind() == RecordKind::CaptureWindow) {
        ++c.windows;
        ++c.ends[static_cast<CaptureEnd>(r.c)];
      }
    }
  }
  return c;
}

}  // namespace

// `--capture nvtx:step --capture-count 3` on 50 steps of train_step: 3 steps of 5 kernels, their
// launches and synchronizations; the windows stand for the step ranges; no hint prices the
// time between windows.
TEST(CaptureRecordings, ThreeStepsOfFifty) {
  kprof::Run run = ReadInputs({Fixture("train_step_capture")});
  const Counts c = Count(run);
  EXPECT_EQ(c.kernels, 15u);
  EXPECT_EQ(c.syncs, 3u);
  EXPECT_EQ(c.windows, 3u);
  EXPECT_EQ(c.ends.at(CaptureEnd::RangeEnded), 3u);
  EXPECT_EQ(c.missing, 0u);
  const Timeline tl = BuildTimeline(run);
  const Analysis an = Analyze(tl);
  EXPECT_EQ(an.summary.capture, "nvtx:step");
  EXPECT_EQ(an.summary.capture_windows, 3u);
  EXPECT_EQ(an.summary.launches, 15u);
  std::map<std::string, const GroupRow*> ops;
  for (const GroupRow& g : an.ops) ops[g.key] = &g;
  ASSERT_TRUE(ops.count("step") && ops.count("forward") && ops.count("backward"));
  EXPECT_EQ(ops["step"]->calls, 3u);
  EXPECT_EQ(ops["forward"]->kernels, 9u);
  EXPECT_EQ(ops["backward"]->kernels, 3u);
  EXPECT_EQ(ops["optimizer"]->kernels, 3u);
  EXPECT_FALSE(ops.count("(no range)"));
  // The wall time is the windows' (a few ms), not the 50 steps' span.
  EXPECT_LT(an.summary.wall_ns, 10'000'000u);
  EXPECT_LE(an.summary.gpu_busy_ns, an.summary.wall_ns);
  size_t unrecorded = 0;
  for (const Gap& g : tl.processes[0].gaps) unrecorded += g.kind == GapKind::Unrecorded;
  EXPECT_EQ(unrecorded, 2u);  // between the 3 windows
  for (const Hint& h : ComputeHints(tl, an)) EXPECT_NE(h.id, "gpu-idle-gaps");
}

// `--capture cuda-profiler-api` on capture_window 1000 100 1000: the 100 kernels between
// cudaProfilerStart and Stop with their launches, none of the 2,000 around them, and the NVTX
// range pushed inside the window recorded as such.
TEST(CaptureRecordings, ProfilerApiWindow) {
  kprof::Run run = ReadInputs({Fixture("capture_window_api")});
  const Counts c = Count(run);
  EXPECT_EQ(c.kernels, 100u);
  EXPECT_EQ(c.windows, 1u);
  EXPECT_EQ(c.ends.at(CaptureEnd::ProfilerStop), 1u);
  const Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.capture, "cuda-profiler-api");
  EXPECT_EQ(an.summary.launches, 100u);
  EXPECT_EQ(an.summary.api_calls, 101u);  // and the cudaDeviceSynchronize
  const GroupRow* window = nullptr;
  for (const GroupRow& g : an.ops)
    if (g.key == "window") window = &g;
  ASSERT_NE(window, nullptr);
  EXPECT_EQ(window->calls, 1u);
  EXPECT_EQ(window->kernels, 100u);
}
