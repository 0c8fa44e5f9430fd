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

namespace {

std::string OnDemand(const std::string& name) {
  return std::string(KPROF_BINARY_DIR) + "/on_demand_h200/" + name;
}

struct WindowView {
  uint64_t steps = 0, step_kernels = 0, graph_nodes = 0, longest_node_ns = 0;
};

// What the report of window `k` (0: every window) says of on_demand_steps' steps.
WindowView View(const kprof::Run& run, uint64_t k) {
  AnalysisOptions opts;
  opts.by = GroupBy::RangePath;
  const Analysis an = Analyze(BuildTimeline(k == 0 ? run : KeepWindow(run, k)), opts);
  WindowView v;
  for (const GroupRow& g : an.rows)
    if (g.key == "step") v.steps = g.calls;
  for (const KernelRow& r : an.kernels) {
    if (r.name.rfind("step_kernel(", 0) == 0) v.step_kernels = r.stat.count;
    if (r.name.rfind("graph_node(", 0) == 0) {
      v.graph_nodes = r.stat.count;
      v.longest_node_ns = r.stat.max_ns;
    }
  }
  return v;
}

}  // namespace

// kprof run --on-demand on the H200, three windows asked of the running kernels/on_demand_steps
// (7 step_kernel and one 1000-node graph a step): 5 steps, 0.2 s, 3 steps. Each step is counted
// once although kprof's NVTX handlers had CUPTI record the push that opened its window; no graph
// node lasts long (a window's last graph once took a later launch's end times: about 0.9 us each).
TEST(CaptureRecordings, OnDemandWindowsHoldTheirStepsExactly) {
  const kprof::Run run = ReadInputs({OnDemand("steps")});
  const Counts c = Count(run);
  EXPECT_EQ(c.windows, 3u);
  EXPECT_EQ(c.ends.at(CaptureEnd::Steps), 2u);
  EXPECT_EQ(c.ends.at(CaptureEnd::Duration), 1u);
  const WindowView w1 = View(run, 1), w2 = View(run, 2), w3 = View(run, 3);
  EXPECT_EQ(w1.steps, 5u);
  EXPECT_EQ(w1.step_kernels, 35u);
  EXPECT_EQ(w1.graph_nodes, 5000u);
  EXPECT_EQ(w2.step_kernels, 287u);  // 41 steps of the 0.2 s window
  EXPECT_EQ(w2.graph_nodes, 41000u);
  EXPECT_EQ(w3.steps, 3u);
  EXPECT_EQ(w3.step_kernels, 21u);
  EXPECT_EQ(w3.graph_nodes, 3000u);
  for (const WindowView& w : {w1, w2, w3}) EXPECT_LT(w.longest_node_ns, 100'000u);
}

// The same 3 steps taken with --capture nvtx:three (a range around them) report what the
// on-demand window of 3 steps does.
TEST(CaptureRecordings, OnDemandStepsReportAsTheSameStepsUnderCapture) {
  const WindowView od = View(ReadInputs({OnDemand("steps")}), 3);
  const WindowView cap = View(ReadInputs({OnDemand("capture3")}), 0);
  EXPECT_EQ(od.steps, 3u);
  EXPECT_EQ(cap.steps, od.steps);
  EXPECT_EQ(cap.step_kernels, od.step_kernels);
  EXPECT_EQ(cap.graph_nodes, od.graph_nodes);
}
