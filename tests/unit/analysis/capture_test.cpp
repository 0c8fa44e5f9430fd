// Capture windows in the analysis (issue 13, docs/capture.md): the wall time is the time inside
// the windows, the idle time between windows is not priced, work launched in a window that runs
// on after it closes belongs to it, and a process that asked for windows and recorded none says
// why. Also the Chrome trace round trip of the windows.
#include <gtest/gtest.h>

#include <sstream>

#include "../hints/trace_builder.h"
#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/output.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

using namespace kprof;
using kprof::testing::TraceBuilder;

namespace {

constexpr uint64_t kMs = 1'000'000;

// Three 10 ms steps recorded of a longer run: each window holds a launch loop of 4 kernels of
// 2 ms, the last kernel of each window ending 1 ms after its window closed; 500 ms between
// windows (the steps not recorded).
TraceBuilder ThreeWindows() {
  TraceBuilder b;
  b.Device(0, "NVIDIA H100 80GB HBM3", 132);
  for (uint64_t w = 0; w < 3; ++w) {
    const uint64_t t0 = 1000 * kMs + w * 510 * kMs;
    b.Window(t0, t0 + 10 * kMs);
    for (uint64_t k = 0; k < 4; ++k)
      b.Launch("step_kernel", t0 + k * 100'000, t0 + k * 100'000 + 5'000,
               t0 + 3 * kMs + k * 2 * kMs, t0 + 5 * kMs + k * 2 * kMs);
  }
  return b;
}

}  // namespace

TEST(CaptureAnalysis, WallTimeIsTheTimeInsideTheWindows) {
  kprof::Run run = ThreeWindows().Build();
  Timeline tl = BuildTimeline(run);
  ASSERT_EQ(tl.processes[0].windows.size(), 3u);
  // Each window reaches the end of the work launched in it: 11 ms.
  for (const NsInterval& w : tl.processes[0].windows) EXPECT_EQ(w.second - w.first, 11 * kMs);
  Analysis a = Analyze(tl);
  const RunSummary& s = a.summary;
  EXPECT_EQ(s.capture, "nvtx:step");
  EXPECT_EQ(s.capture_windows, 3u);
  EXPECT_EQ(s.capture_problem, "");
  EXPECT_EQ(s.wall_ns, 33 * kMs);
  EXPECT_EQ(s.gpu_busy_ns, 24 * kMs);
  EXPECT_NEAR(s.utilisation, 24.0 / 33.0, 1e-9);
  EXPECT_EQ(s.gpu_idle_ns, 9 * kMs);
  ASSERT_EQ(a.processes.size(), 1u);
  EXPECT_EQ(a.processes[0].wall_ns, 33 * kMs);
  EXPECT_EQ(a.processes[0].windows, 3u);
  // Each window stands for the range that opened it (CUPTI records neither its push nor its
  // pop): the op "step", its 3 calls and their 12 kernels.
  const GroupRow* step = nullptr;
  for (const GroupRow& g : a.ops)
    if (g.key == "step") step = &g;
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->calls, 3u);
  EXPECT_EQ(step->kernels, 12u);
  EXPECT_EQ(step->gpu_ns, 24 * kMs);
}

// A window whose range CUPTI did record: the range once, not twice.
TEST(CaptureAnalysis, ARecordedRangeIsNotCountedTwice) {
  TraceBuilder b = ThreeWindows();
  b.Range("step", 1000 * kMs + 1000, 1000 * kMs + 9 * kMs);  // in the first window
  kprof::Run run = b.Build();
  Analysis a = Analyze(BuildTimeline(run));
  size_t rows = 0;
  for (const GroupRow& g : a.ops) {
    if (g.key != "step") continue;
    ++rows;
    EXPECT_EQ(g.calls, 3u);
  }
  EXPECT_EQ(rows, 1u);
}

TEST(CaptureAnalysis, IdleTimeBetweenWindowsIsNotPriced) {
  kprof::Run run = ThreeWindows().Build();
  Timeline tl = BuildTimeline(run);
  size_t unrecorded = 0;
  for (const Gap& g : tl.processes[0].gaps) {
    if (g.kind == GapKind::Unrecorded) {
      ++unrecorded;
      EXPECT_EQ(g.rest_ns, 0u);
      EXPECT_EQ(g.idle_ns(), 0u);
    }
  }
  EXPECT_EQ(unrecorded, 2u);  // between the 3 windows
  // No hint prices the 500 ms the windows leave out (gpu-idle-gaps would, recorded whole).
  Analysis a = Analyze(tl);
  for (const Hint& h : ComputeHints(tl, a)) {
    EXPECT_NE(h.id, "gpu-idle-gaps");
    EXPECT_LT(h.est_saving_ns, 33 * kMs) << h.id;
  }
  // The same work without windows: the gaps are long idle time, and priced.
  TraceBuilder whole = ThreeWindows();
  std::erase_if(whole.Trace().records,
                [](const Record& r) { return r.Kind() == RecordKind::CaptureWindow; });
  whole.Trace().meta.erase("capture");
  kprof::Run run2 = whole.Build();
  Timeline tl2 = BuildTimeline(run2);
  Analysis a2 = Analyze(tl2);
  EXPECT_EQ(a2.summary.capture, "");
  EXPECT_EQ(a2.summary.wall_ns, 1031 * kMs);  // the first API call to the last kernel
  bool idle = false;
  for (const Hint& h : ComputeHints(tl2, a2)) idle |= h.id == "gpu-idle-gaps";
  EXPECT_TRUE(idle);
}

TEST(CaptureAnalysis, AProcessWithoutWindowsSaysWhy) {
  TraceBuilder b(7);
  b.Launch("k", 1000, 2000, 3000, 4000);
  b.Trace().meta["capture"] = "nvtx:step";
  b.Trace().meta["capture_windows"] = "0";
  b.Trace().meta["capture_range_seen"] = "0";
  b.Trace().meta["capture_nvtx_ranges"] = "12";
  kprof::Run run = b.Build();
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.capture_windows, 0u);
  EXPECT_EQ(a.summary.capture_problem,
            "pid 7: its window never opened (no range 'step' among its 12 NVTX ranges)");
  b.Trace().meta["capture_nvtx_ranges"] = "0";
  run = b.Build();
  a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.capture_problem,
            "pid 7: its window never opened (no NVTX range reached kprof)");
  // The report says what was recorded.
  std::ostringstream out;
  ReportOptions o;
  WriteReport(out, run, a, {}, o);
  EXPECT_NE(out.str().find("recorded              0 capture windows (nvtx:step); pid 7: its "
                           "window never opened (no NVTX range reached kprof)"),
            std::string::npos)
      << out.str();
}

// A --duration window that closed before the program launched anything (it counts from the first
// context, but a program may do much else before its first launch): the report says so and how
// long CUDA took to make the context, rather than "no GPU activity".
TEST(CaptureAnalysis, AWindowClosedBeforeAnyWorkSaysSo) {
  TraceBuilder b(7);
  b.Trace().meta["capture"] = "time";
  b.Trace().meta["start_time_ns"] = std::to_string(1000 * kMs);
  b.Trace().meta["first_context_ns"] = std::to_string(1450 * kMs);
  b.Window(1000 * kMs, 1650 * kMs, "time", "start");
  kprof::Run run = b.Build();
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.capture_windows, 1u);
  EXPECT_EQ(a.summary.capture_problem,
            "pid 7: its window (650.00 ms) closed before the program launched any GPU work (its "
            "first CUDA context was ready 450.00 ms after CUDA started)");
  // A window holding a launch: nothing to say.
  b.Launch("k", 1500 * kMs, 1500 * kMs + 2000, 1500 * kMs + 3000, 1500 * kMs + 4000);
  run = b.Build();
  EXPECT_EQ(Analyze(BuildTimeline(run)).summary.capture_problem, "");
}

TEST(CaptureAnalysis, ReportAndJsonNameTheWindows) {
  kprof::Run run = ThreeWindows().Build();
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  std::ostringstream table, json;
  ReportOptions o;
  WriteReport(table, run, a, {}, o);
  EXPECT_NE(table.str().find("recorded              3 capture windows (nvtx:step)\n"),
            std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("wall time             33.00 ms inside the windows"),
            std::string::npos);
  o.format = Format::Json;
  WriteReport(json, run, a, {}, o);
  auto j = nlohmann::json::parse(json.str());
  EXPECT_EQ(j["summary"]["capture"]["trigger"], "nvtx:step");
  EXPECT_EQ(j["summary"]["capture"]["windows"], 3);
  EXPECT_EQ(j["processes"][0]["windows"], 3);
}

TEST(CaptureAnalysis, ChromeTraceKeepsTheWindows) {
  kprof::Run run = ThreeWindows().Build();
  kprof::test::TempDir dir;
  const std::string path = dir / "trace.json";
  WriteChromeTrace(path, BuildTimeline(run));
  kprof::Run back = ReadChromeTrace(path);
  ASSERT_EQ(back.processes.size(), 1u);
  size_t windows = 0;
  for (const Record& r : back.processes[0].records)
    if (r.Kind() == RecordKind::CaptureWindow) {
      ++windows;
      EXPECT_EQ(r.DurationNs(), 10 * kMs);
    }
  EXPECT_EQ(windows, 3u);
  Analysis a = Analyze(BuildTimeline(back));
  EXPECT_EQ(a.summary.capture, "nvtx:step");
  EXPECT_EQ(a.summary.capture_windows, 3u);
  EXPECT_EQ(a.summary.wall_ns, 33 * kMs);
}

// kprof report --window K: the K-th window's record and the records begun from its opening to the
// next window's; work running on after it closed stays with it; a K no process reached is an
// error naming the most any recorded.
TEST(CaptureAnalysis, KeepWindowSelectsOneWindowOfEachProcess) {
  kprof::Run run = ThreeWindows().Build();
  const kprof::Run second = KeepWindow(run, 2);
  Timeline tl = BuildTimeline(second);
  ASSERT_EQ(tl.processes[0].windows.size(), 1u);
  const uint64_t t0 = 1000 * kMs + 510 * kMs;
  EXPECT_EQ(tl.processes[0].windows[0], NsInterval(t0, t0 + 11 * kMs));
  Analysis a = Analyze(tl);
  EXPECT_EQ(a.summary.capture_windows, 1u);
  EXPECT_EQ(a.summary.gpu_busy_ns, 8 * kMs);  // its 4 kernels of 2 ms
  EXPECT_EQ(second.processes[0].Meta("capture_window_selected"), "2");
  try {
    KeepWindow(run, 4);
    FAIL() << "no process has 4 windows";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--window 4: no process recorded 4 capture windows (the most any "
                 "recorded: 3)");
  }
}

// An on-demand window of 3 steps (kprof capture --step-range step --steps 3) opens inside the
// first step's push, which CUPTI does not record: that step runs from the opening to the next
// recorded push; the 2nd and 3rd steps are the recorded ranges. 2 kernels of 1 ms a step.
TEST(CaptureAnalysis, OnDemandStepWindowStandsForItsFirstStep) {
  TraceBuilder b;
  b.Device(0, "NVIDIA H200", 132);
  const uint64_t t0 = 1000 * kMs;
  b.Window(t0, t0 + 30 * kMs, "on-demand", "step");
  b.Trace().records.back().flags = static_cast<uint8_t>(CaptureTrigger::OnDemandSteps);
  b.Trace().records.back().c = static_cast<uint32_t>(CaptureEnd::Steps);
  for (uint64_t step = 0; step < 3; ++step) {
    const uint64_t s = t0 + step * 10 * kMs;
    if (step > 0) b.Range("step", s, s + 10 * kMs);
    for (uint64_t k = 0; k < 2; ++k)
      b.Launch("step_kernel", s + 100'000 + k * 1000, s + 101'000 + k * 1000,
               s + 2 * kMs + k * 2 * kMs, s + 3 * kMs + k * 2 * kMs);
  }
  kprof::Run run = b.Build();
  Analysis a = Analyze(BuildTimeline(run));
  const GroupRow* step = nullptr;
  for (const GroupRow& g : a.ops)
    if (g.key == "step") step = &g;
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->calls, 3u);
  EXPECT_EQ(step->kernels, 6u);
  EXPECT_EQ(step->gpu_ns, 6 * kMs);
  // Had CUPTI recorded the first push (at the opening), the window stands for nothing more.
  TraceBuilder at_open = b;
  at_open.Range("step", t0 + 5000, t0 + 10 * kMs);
  Analysis r = Analyze(BuildTimeline(at_open.Build()));
  for (const GroupRow& g : r.ops) {
    if (g.key == "step") {
      EXPECT_EQ(g.calls, 3u);
    }
  }
  // Nor when it was recorded once the kinds were on, 80 us after the opening (kprof's NVTX
  // handlers forward the push after opening the window), before the step's first launch.
  TraceBuilder later = b;
  later.Range("step", t0 + 80'000, t0 + 10 * kMs);
  Analysis l = Analyze(BuildTimeline(later.Build()));
  const GroupRow* lstep = nullptr;
  for (const GroupRow& g : l.ops)
    if (g.key == "step") lstep = &g;
  ASSERT_NE(lstep, nullptr);
  EXPECT_EQ(lstep->calls, 3u);
  EXPECT_EQ(lstep->gpu_ns, 6 * kMs);
}
