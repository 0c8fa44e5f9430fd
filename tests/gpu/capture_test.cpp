// GPU tests of capture windows (issue 13, docs/capture.md): an NVTX range, the profiler API,
// --delay and --duration each bound what is recorded, exactly; a window that never opens says
// why. Every test skips cleanly when no GPU is present.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "gtest/gtest.h"
#include "kprof/analysis.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

using namespace kprof;
using namespace kprof::gpu_test;

namespace {

struct Recorded {
  Run run;
  Analysis an;
  std::map<std::string, uint64_t> kernels;  // by name
  std::vector<Record> windows;
  uint64_t syncs = 0, missing = 0, first_kernel = UINT64_MAX;
};

Recorded Read(const std::string& dir) {
  Recorded m;
  m.run = ReadInputs({dir});
  m.an = Analyze(BuildTimeline(m.run));
  for (const ProcessTrace& p : m.run.processes) {
    m.missing += p.stats.missing_timestamps;
    for (const Record& r : p.records) {
      if (r.Kind() == RecordKind::Kernel) {
        ++m.kernels[Demangle(p.Name(r))];
        m.first_kernel = std::min(m.first_kernel, r.start_ns);
      }
      if (r.Kind() == RecordKind::Sync) ++m.syncs;
      if (r.Kind() == RecordKind::CaptureWindow) m.windows.push_back(r);
    }
  }
  return m;
}

uint64_t Total(const std::map<std::string, uint64_t>& by_name) {
  uint64_t n = 0;
  for (const auto& [name, count] : by_name) n += count;
  return n;
}

}  // namespace

// --capture nvtx:step --capture-count 3 on 50 steps: exactly 3 steps' kernels (5 each), their 3
// synchronizations, 3 windows each closed by its range's pop. Dormant (issue 35): CUPTI attached
// at a window's push and detached after it at a synchronization (train_step launches no graph;
// a window whose push comes before that shares the attachment), and the process ends detached.
TEST(GpuCapture, NvtxRangeRecordsExactlyTheStepsAsked) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_nvtx");
  Result r = KprofWith(dir, {"--capture", "nvtx:step", "--capture-count", "3"},
                       {Bin("kernels/train_step"), "50"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  ASSERT_EQ(m.run.processes.size(), 1u);
  EXPECT_EQ(Total(m.kernels), 15u);
  for (const char* k :
       {"matmul_like", "attention_like", "norm_like", "matmul_like_bwd", "sgd_update"}) {
    bool found = false;
    for (const auto& [name, count] : m.kernels)
      if (name.rfind(std::string(k) + "(", 0) == 0 || name == k) {
        EXPECT_EQ(count, 3u) << name;
        found = true;
      }
    EXPECT_TRUE(found) << k;
  }
  EXPECT_EQ(m.syncs, 3u);
  EXPECT_EQ(m.missing, 0u);
  ASSERT_EQ(m.windows.size(), 3u);
  for (const Record& w : m.windows) {
    EXPECT_EQ(static_cast<CaptureTrigger>(w.flags), CaptureTrigger::Nvtx);
    EXPECT_EQ(static_cast<CaptureEnd>(w.c), CaptureEnd::RangeEnded);
    EXPECT_GT(w.DurationNs(), 0u);
  }
  EXPECT_GE(m.first_kernel, m.windows[0].start_ns);
  // The launches' API records are there (the kernels' ops come from them), and each window
  // stands for its "step" range: 3 calls, the ranges inside them holding the 15 kernels.
  EXPECT_EQ(m.an.summary.launches, 15u);
  std::map<std::string, const GroupRow*> ops;
  for (const GroupRow& g : m.an.ops) ops[g.key] = &g;
  ASSERT_TRUE(ops.count("step"));
  EXPECT_EQ(ops["step"]->calls, 3u);
  ASSERT_TRUE(ops.count("forward") && ops.count("backward") && ops.count("optimizer"));
  EXPECT_EQ(ops["forward"]->kernels, 9u);
  EXPECT_EQ(ops["backward"]->kernels, 3u);
  EXPECT_EQ(ops["optimizer"]->kernels, 3u);
  EXPECT_FALSE(ops.count("(no range)"));
  EXPECT_EQ(m.an.summary.capture, "nvtx:step");
  EXPECT_EQ(m.an.summary.capture_windows, 3u);
  EXPECT_EQ(m.an.summary.capture_problem, "");
  EXPECT_LE(m.an.summary.utilisation, 1.0);
  const ProcessTrace& p = m.run.processes[0];
  EXPECT_EQ(p.Meta("dormant"), "until the range");
  EXPECT_GE(p.MetaU64("cupti_attachments"), 1u);
  EXPECT_LE(p.MetaU64("cupti_attachments"), 3u);
  EXPECT_EQ(p.MetaU64("cupti_detachments"), p.MetaU64("cupti_attachments"));
  EXPECT_GT(p.MetaU64("cupti_attach_max_us"), 0u);
  std::printf("dormant nvtx:step x3: %llu attachments, %llu detachments, longest attach %llu us\n",
              static_cast<unsigned long long>(p.MetaU64("cupti_attachments")),
              static_cast<unsigned long long>(p.MetaU64("cupti_detachments")),
              static_cast<unsigned long long>(p.MetaU64("cupti_attach_max_us")));
}

// KPROF_DORMANT=0: --capture nvtx:step attaches CUPTI from the start, as before issue 35, and
// records the same 3 steps (the test above ran dormant).
TEST(GpuCapture, NvtxTriggerAttachedFromTheStartRecordsTheSame) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_nvtx_attached");
  Result r = KprofWith(dir, {"--capture", "nvtx:step", "--capture-count", "3"},
                       {"env", "KPROF_DORMANT=0", Bin("kernels/train_step"), "50"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  ASSERT_EQ(m.run.processes.size(), 1u);
  EXPECT_EQ(m.run.processes[0].Meta("dormant"), "");
  EXPECT_EQ(m.run.processes[0].Meta("cupti_attachments"), "");
  EXPECT_EQ(Total(m.kernels), 15u);
  for (const auto& [name, count] : m.kernels) EXPECT_EQ(count, 3u) << name;
  EXPECT_EQ(m.windows.size(), 3u);
}

// A program that launches a 1000-node CUDA graph every step, three dormant windows of one step:
// each window exact, and CUPTI detached after each (the graph launched after the window and
// before the detachment with the GPU work's records on: with them off, its next launch after
// cuptiFinalize faulted, exit 2, on an H200; attach.cpp), so the graph launches after the
// windows run at the program's own speed again (attached, one costs 190-400 us; plain 3-6 us).
TEST(GpuCapture, DormantWindowsOnAGraphProgramDetachAfterEach) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_nvtx_graph_detach");
  const std::string times = dir + "_times.txt";
  std::remove(times.c_str());
  Result r = KprofWith(
      dir, {"--capture", "nvtx:step", "--capture-count", "3"},
      {"env", "ON_DEMAND_TIMES=" + times, Bin("kernels/on_demand_steps"), "60", "7", "1000", "1"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  ASSERT_EQ(m.run.processes.size(), 1u);
  EXPECT_EQ(m.windows.size(), 3u);
  EXPECT_EQ(m.kernels["step_kernel(float*, int)"], 21u);
  EXPECT_EQ(m.kernels["graph_node(float*, int)"], 3000u);
  const ProcessTrace& p = m.run.processes[0];
  EXPECT_GE(p.MetaU64("cupti_attachments"), 1u);
  EXPECT_EQ(p.MetaU64("cupti_detachments"), p.MetaU64("cupti_attachments"));
  // The step after the last window launches its graph before the detachment has come.
  EXPECT_GE(p.MetaU64("graph_launches_outside_windows"), 1u);
  // The host time of each step's graph launch ("STEP GRAPH_US KERNELS_US"): after the windows
  // (steps 0-2) and a few steps for the detachment, far below an attached launch's.
  std::vector<double> after;
  std::ifstream in(times);
  uint64_t step = 0;
  double graph_us = 0, kernels_us = 0;
  while (in >> step >> graph_us >> kernels_us)
    if (step >= 10) after.push_back(graph_us);
  ASSERT_GE(after.size(), 40u);
  std::sort(after.begin(), after.end());
  const double median = after[after.size() / 2];
  EXPECT_LT(median, 50.0);
  std::printf(
      "graph program, 3 dormant windows: %llu detachments, %llu graph launches outside "
      "them attached, graph launch after them %.2f us (median)\n",
      static_cast<unsigned long long>(p.MetaU64("cupti_detachments")),
      static_cast<unsigned long long>(p.MetaU64("graph_launches_outside_windows")), median);
}

// cudaProfilerStart/Stop bracket the window: the 100 kernels between them, none of the 2,000
// around them.
TEST(GpuCapture, ProfilerApiBracketsTheWindow) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_profiler_api");
  Result r = KprofWith(dir, {"--capture", "cuda-profiler-api"},
                       {Bin("kernels/capture_window"), "1000", "100", "1000"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  EXPECT_EQ(m.kernels["inside_kernel(int*)"], 100u);
  EXPECT_EQ(Total(m.kernels), 100u);
  EXPECT_EQ(m.an.summary.launches, 100u);
  EXPECT_EQ(m.missing, 0u);
  ASSERT_EQ(m.windows.size(), 1u);
  EXPECT_EQ(static_cast<CaptureEnd>(m.windows[0].c), CaptureEnd::ProfilerStop);
}

// The same program's NVTX range around the inside kernels.
TEST(GpuCapture, NvtxRangeOfAnotherProgram) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_nvtx_window");
  Result r = KprofWith(dir, {"--capture", "nvtx:window"},
                       {Bin("kernels/capture_window"), "1000", "100", "1000"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  EXPECT_EQ(m.kernels["inside_kernel(int*)"], 100u);
  EXPECT_EQ(Total(m.kernels), 100u);
  ASSERT_EQ(m.windows.size(), 1u);
}

// A range that never comes: nothing recorded, and the report says the window never opened and
// how many other ranges there were (5 steps of 4 ranges).
TEST(GpuCapture, AWindowThatNeverOpensSaysWhy) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_never");
  Result r = KprofWith(dir, {"--capture", "nvtx:nothing"}, {Bin("kernels/train_step"), "5"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  EXPECT_EQ(Total(m.kernels), 0u);
  EXPECT_TRUE(m.windows.empty());
  EXPECT_NE(m.an.summary.capture_problem.find("no range 'nothing' among its 20 NVTX ranges"),
            std::string::npos)
      << m.an.summary.capture_problem;
}

// --delay 0.3 --duration 0.3 on a loop of about 1.5 s: one window of 0.3 s, opened 0.3 s or more
// after CUDA started; some of the kernels, all launched inside it.
TEST(GpuCapture, DelayAndDuration) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("capture_time");
  Result r =
      KprofWith(dir, {"--delay", "0.3", "--duration", "0.3"}, {Bin("kernels/train_step"), "3000"});
  ASSERT_EQ(r.status, 0) << r.out;
  Recorded m = Read(dir);
  ASSERT_EQ(m.windows.size(), 1u);
  const Record& w = m.windows[0];
  EXPECT_EQ(static_cast<CaptureTrigger>(w.flags), CaptureTrigger::Time);
  EXPECT_EQ(static_cast<CaptureEnd>(w.c), CaptureEnd::Duration);
  EXPECT_GE(w.DurationNs(), 290'000'000u);
  EXPECT_LT(w.DurationNs(), 400'000'000u);
  const uint64_t start = std::stoull(m.run.processes[0].Meta("start_time_ns"));
  EXPECT_GE(w.start_ns, start + 290'000'000u);
  const uint64_t n = Total(m.kernels);
  EXPECT_GT(n, 100u);
  EXPECT_LT(n, 15000u - 100u);
  EXPECT_GE(m.first_kernel, w.start_ns);
  EXPECT_EQ(m.missing, 0u);
  // Dormant until the delay: CUPTI attached for the window only, and detached after it.
  const ProcessTrace& p = m.run.processes[0];
  EXPECT_EQ(p.Meta("dormant"), "until the delay");
  EXPECT_EQ(p.MetaU64("cupti_attachments"), 1u);
  EXPECT_EQ(p.MetaU64("cupti_detachments"), 1u);
}

// --delay without --duration: the window lasts until the process ends; KPROF_DORMANT=0 attaches
// CUPTI from the start, as before, and records a window of the same shape.
TEST(GpuCapture, DelayAloneRecordsUntilTheEnd) {
  REQUIRE_GPU();
  for (const char* dormant : {"1", "0"}) {
    const std::string dir = FreshDir(std::string("capture_delay_") + dormant);
    Result r = KprofWith(
        dir, {"--delay", "0.3"},
        {"env", std::string("KPROF_DORMANT=") + dormant, Bin("kernels/train_step"), "3000"});
    ASSERT_EQ(r.status, 0) << r.out;
    Recorded m = Read(dir);
    ASSERT_EQ(m.windows.size(), 1u) << dormant;
    const Record& w = m.windows[0];
    EXPECT_EQ(static_cast<CaptureTrigger>(w.flags), CaptureTrigger::Time);
    EXPECT_EQ(static_cast<CaptureEnd>(w.c), CaptureEnd::ProcessEnd) << dormant;
    const uint64_t start = std::stoull(m.run.processes[0].Meta("start_time_ns"));
    EXPECT_GE(w.start_ns, start + 290'000'000u) << dormant;
    EXPECT_LT(w.start_ns, start + 3'000'000'000u) << dormant;  // not long after the delay
    EXPECT_GT(Total(m.kernels), 100u) << dormant;
    EXPECT_GE(m.first_kernel, w.start_ns) << dormant;
    EXPECT_EQ(m.missing, 0u) << dormant;
    const ProcessTrace& p = m.run.processes[0];
    EXPECT_EQ(p.Meta("dormant"), std::string(dormant) == "1" ? "until the delay" : "");
    EXPECT_EQ(p.Meta("cupti_detachments"), std::string(dormant) == "1" ? "0" : "");
    EXPECT_EQ(p.Meta("cupti_attachments"), std::string(dormant) == "1" ? "1" : "");
  }
}
