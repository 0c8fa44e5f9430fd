// The capture-window fault matrix (docs/reliability.md, "Capture windows and CUDA graphs"): a
// window opening and closing at every point of a CUDA-graph program's life, by each trigger, in
// both graph modes, and 100 windows at random times. Each case: the program's exit status and
// output are those of its run without kprof, and the window holds exactly the work the program
// launched inside it (kernels/graph_windows prints what that is). Then the torch.compile
// reduce-overhead loop. Every test skips cleanly when no GPU is present.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
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

// What one recording holds.
struct Recorded {
  Run run;
  uint64_t node_kernels = 0;    // kernels of graph nodes (node mode)
  uint64_t eager_kernels = 0;   // eager and storm kernels
  uint64_t graph_launches = 0;  // GraphLaunch records (graph mode)
  uint64_t launch_calls = 0;    // cudaGraphLaunch API records
  uint64_t kernel_calls = 0;    // cudaLaunchKernel API records that launched a recorded kernel
  uint64_t orphan_kernels = 0;  // eager kernels recorded without their launch's call
  uint64_t lone_calls = 0;      // cudaLaunchKernel calls without a kernel (captured, or switching)
  uint64_t missing = 0;
  std::vector<Record> windows;
  std::string problem;
};

Recorded Read(const std::string& dir) {
  Recorded m;
  m.run = ReadInputs({dir});
  for (const ProcessTrace& p : m.run.processes) {
    m.missing += p.stats.missing_timestamps;
    std::multiset<uint32_t> eager, calls;  // correlation ids
    for (const Record& r : p.records) {
      switch (r.Kind()) {
        case RecordKind::Kernel: {
          const std::string name = p.Name(r);
          m.node_kernels += name.find("node_kernel") != std::string::npos;
          if (name.find("eager_kernel") != std::string::npos) {
            ++m.eager_kernels;
            eager.insert(r.correlation);
          }
          break;
        }
        case RecordKind::GraphLaunch:
          ++m.graph_launches;
          break;
        case RecordKind::RuntimeApi: {
          const std::string name = p.Name(r);
          m.launch_calls += name.rfind("cudaGraphLaunch", 0) == 0;
          if (name.rfind("cudaLaunchKernel", 0) == 0) calls.insert(r.correlation);
          break;
        }
        case RecordKind::CaptureWindow:
          m.windows.push_back(r);
          break;
        default:
          break;
      }
    }
    for (uint32_t c : calls) (eager.count(c) ? m.kernel_calls : m.lone_calls) += 1;
    for (uint32_t c : eager) m.orphan_kernels += calls.count(c) == 0;
  }
  m.problem = Analyze(BuildTimeline(m.run)).summary.capture_problem;
  return m;
}

// The program's own account: "graph_windows: ok ... in_window: launches=A graph_kernels=B
// eager_kernels=C storm_kernels=D recaptures=F".
struct Account {
  std::string line;
  uint64_t launches = 0, graph_kernels = 0, eager = 0, storm = 0;
};
uint64_t Field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  return at == std::string::npos ? UINT64_MAX : std::stoull(line.substr(at + key.size() + 2));
}
Account AccountOf(const std::string& out) {
  Account a;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("graph_windows: ", 0) == 0) a.line = l;
  const size_t in_window = a.line.find("in_window:");
  if (in_window == std::string::npos) return a;
  const std::string tail = a.line.substr(in_window + 10);
  a.launches = Field(tail, "launches");
  a.graph_kernels = Field(tail, "graph_kernels");
  a.eager = Field(tail, "eager_kernels");
  a.storm = Field(tail, "storm_kernels");
  return a;
}

std::vector<std::string> Program(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {Bin("kernels/graph_windows")};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Runs the program alone and under kprof in `mode` (graph|node): same status, same line.
struct Pair {
  Result plain, profiled;
  Account account;
  Recorded rec;
};
// `plain`: the program's run without kprof, when already known (the same arguments).
Pair RunBoth(const std::string& name, const std::string& mode,
             const std::vector<std::string>& options, const std::vector<std::string>& args,
             const Result* plain = nullptr) {
  Pair p;
  p.plain = plain != nullptr ? *plain : Exec(Program(args));
  const std::string dir = FreshDir("faults_" + name + "_" + mode);
  std::vector<std::string> opts = {"--graph-trace", mode};
  opts.insert(opts.end(), options.begin(), options.end());
  p.profiled = KprofWith(dir, opts, Program(args));
  p.account = AccountOf(p.profiled.out);
  EXPECT_EQ(p.profiled.status, p.plain.status) << name << " " << mode << "\n" << p.profiled.out;
  EXPECT_EQ(p.account.line, AccountOf(p.plain.out).line) << name << " " << mode;
  EXPECT_NE(p.account.line.find("graph_windows: ok"), std::string::npos) << p.profiled.out;
  p.rec = Read(dir);
  EXPECT_EQ(p.rec.missing, 0u) << name << " " << mode;
  return p;
}

// The window holds exactly what the program launched inside it, in either mode.
void ExpectExact(const Pair& p, const std::string& mode, const std::string& what) {
  const Account& a = p.account;
  const Recorded& m = p.rec;
  EXPECT_EQ(m.launch_calls, a.launches) << what << " " << mode;
  EXPECT_EQ(m.eager_kernels, a.eager + a.storm) << what << " " << mode;
  EXPECT_EQ(m.kernel_calls, a.eager + a.storm) << what << " " << mode;
  EXPECT_EQ(m.orphan_kernels, 0u) << what << " " << mode;
  if (mode == "graph") {
    EXPECT_EQ(m.graph_launches, a.launches) << what;
    EXPECT_EQ(m.node_kernels, 0u) << what;
  } else {
    EXPECT_EQ(m.node_kernels, a.graph_kernels) << what;
    EXPECT_EQ(m.graph_launches, 0u) << what;
  }
}

// Whatever the window's bounds: each recorded kernel has its launch's call, and each recorded
// graph launch call its work (the launch in graph mode, every node in node mode) and the other
// way round. (A kernel's call may be recorded without it: a launch made while the window was
// switching, or one captured into a graph.)
void ExpectConsistent(const Pair& p, const std::string& mode, uint64_t nodes,
                      const std::string& what) {
  const Recorded& m = p.rec;
  EXPECT_EQ(m.orphan_kernels, 0u) << what << " " << mode;
  EXPECT_EQ(m.eager_kernels, m.kernel_calls) << what << " " << mode;
  if (mode == "graph")
    EXPECT_EQ(m.graph_launches, m.launch_calls) << what;
  else
    EXPECT_EQ(m.node_kernels, nodes * m.launch_calls) << what;
}

struct Case {
  const char* name;
  std::vector<std::string> options;  // kprof's
  std::vector<std::string> args;     // the program's
};

const std::vector<std::string> kBase = {"--nodes", "20", "--launches", "60", "--eager", "50"};

std::vector<std::string> With(std::vector<std::string> more) {
  std::vector<std::string> all = kBase;
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

const std::vector<std::string> kNvtx = {"--capture", "nvtx:window"};
const std::vector<std::string> kApi = {"--capture", "cuda-profiler-api"};

// The deterministic cases: where each window opens and closes is a phase of the program.
const std::vector<Case>& Matrix() {
  static const std::vector<Case> cases = {
      // Before the context exists: opened after cuInit, closed 10 ms later.
      {"nvtx_before_context", kNvtx,
       With({"--trigger", "nvtx", "--open", "cuinit", "--close", "precontext"})},
      // Closed 3 ms into the context's creation, from another thread.
      {"nvtx_during_context", kNvtx,
       With({"--trigger", "nvtx", "--open", "cuinit", "--close", "precontext", "--close-after-us",
             "3000"})},
      // Opened before the context, closed after the eager kernels.
      {"nvtx_context_to_eager", kNvtx,
       With({"--trigger", "nvtx", "--open", "cuinit", "--close", "eager"})},
      {"api_ctx_to_eager", kApi, With({"--trigger", "api", "--open", "ctx", "--close", "eager"})},
      // Closed in the middle of the stream capture.
      {"nvtx_during_capture", kNvtx,
       With({"--trigger", "nvtx", "--open", "ctx", "--close", "capture"})},
      {"api_during_capture", kApi,
       With({"--trigger", "api", "--open", "ctx", "--close", "capture"})},
      // Opened in the middle of the capture, closed after launch 5.
      {"api_capture_to_launch", kApi,
       With({"--trigger", "api", "--open", "capture", "--close", "launch:5"})},
      // Closed during the instantiation of a 2000-node graph, from another thread.
      {"nvtx_during_instantiation",
       kNvtx,
       {"--nodes", "2000", "--launches", "10", "--eager", "50", "--trigger", "nvtx", "--open",
        "ctx", "--close", "captured", "--close-after-us", "300"}},
      // Closed between instantiation and the first launch.
      {"api_ctx_to_instantiated", kApi,
       With({"--trigger", "api", "--open", "ctx", "--close", "instantiated"})},
      // Opened after the instantiation: the crash of issue 30 in graph mode.
      {"api_instantiated_to_launch", kApi,
       With({"--trigger", "api", "--open", "instantiated", "--close", "launch:5"})},
      // Between launches, by each trigger, and from another thread than the launching one.
      {"api_between_launches", kApi,
       With({"--trigger", "api", "--open", "launch:3", "--close", "launch:8"})},
      {"nvtx_between_launches", kNvtx,
       With({"--trigger", "nvtx", "--open", "launch:3", "--close", "launch:8"})},
      {"api_other_thread", kApi,
       With({"--trigger", "api", "--open", "launch:3", "--close", "launch:8", "--window-thread"})},
      {"nvtx_other_thread", kNvtx,
       With({"--trigger", "nvtx", "--open", "launch:3", "--close", "launch:8", "--window-thread"})},
      // Closed by the program's exit.
      {"api_until_exit", kApi, With({"--trigger", "api", "--open", "launch:3", "--close", "exit"})},
      // Around launches with a storm of eager kernels after each.
      {"api_storm", kApi,
       With({"--trigger", "api", "--open", "ctx", "--close", "launch:5", "--storm", "100"})},
      // Graphs captured and instantiated again inside the window.
      {"api_recapture_inside", kApi,
       With({"--trigger", "api", "--open", "launch:2", "--close", "launch:9", "--recapture", "3"})},
  };
  return cases;
}

}  // namespace

// Whether a case opens its window before the program's first context ("--open cuinit").
bool OpensBeforeContext(const Case& c) {
  for (size_t i = 0; i + 1 < c.args.size(); ++i)
    if (c.args[i] == "--open" && c.args[i + 1] == "cuinit") return true;
  return false;
}

// Each case of the matrix, in both graph modes: the program unchanged, the window exact. In node
// mode an nvtx: window is dormant (docs/capture.md "Dormant"), which opens no window before a
// context is made: those cases run attached from the start there (KPROF_DORMANT=0), as before
// issue 35, and DormantWindowBeforeTheContextOpensNothing runs them dormant.
TEST(GpuCaptureFaults, MatrixOfWindowsAroundGraphs) {
  REQUIRE_GPU();
  for (const Case& c : Matrix()) {
    for (const std::string mode : {"graph", "node"}) {
      SCOPED_TRACE(std::string(c.name) + " " + mode);
      const bool attached = mode == "node" && OpensBeforeContext(c) && c.options == kNvtx;
      if (attached) setenv("KPROF_DORMANT", "0", 1);
      const Pair p = RunBoth(c.name, mode, c.options, c.args);
      unsetenv("KPROF_DORMANT");
      ExpectExact(p, mode, c.name);
      ASSERT_EQ(p.rec.windows.size(), 1u) << c.name << " " << mode << "\n" << p.profiled.out;
    }
  }
}

// Dormant (node mode), a window whose range is pushed after cuInit and before the first context:
// no window, nothing recorded, the program unchanged (attaching CUPTI then crashed it: SIGSEGV,
// H200, CUDA 13.0), and the run says why.
TEST(GpuCaptureFaults, DormantWindowBeforeTheContextOpensNothing) {
  REQUIRE_GPU();
  for (const Case& c : Matrix()) {
    if (!OpensBeforeContext(c) || c.options != kNvtx) continue;
    SCOPED_TRACE(c.name);
    const Pair p = RunBoth(std::string(c.name) + "_dormant", "node", c.options, c.args);
    EXPECT_TRUE(p.rec.windows.empty()) << p.profiled.out;
    EXPECT_EQ(p.rec.launch_calls + p.rec.node_kernels + p.rec.eager_kernels, 0u);
    EXPECT_EQ(p.rec.run.processes.at(0).MetaU64("capture_range_before_context"), 1u);
  }
}

// A window that never opens records nothing and says so; three windows in a row hold exactly
// their three iterations.
TEST(GpuCaptureFaults, NeverOpenAndThreeInARow) {
  REQUIRE_GPU();
  for (const std::string mode : {"graph", "node"}) {
    const Pair never = RunBoth("never", mode, {"--capture", "nvtx:never"}, With({"--iter-ranges"}));
    EXPECT_TRUE(never.rec.windows.empty());
    EXPECT_EQ(never.rec.launch_calls + never.rec.graph_launches + never.rec.node_kernels +
                  never.rec.eager_kernels,
              0u);
    EXPECT_NE(never.rec.problem.find("never opened"), std::string::npos) << never.rec.problem;
    const Pair three = RunBoth("three", mode, {"--capture", "nvtx:iter", "--capture-count", "3"},
                               With({"--iter-ranges"}));
    EXPECT_EQ(three.rec.windows.size(), 3u);
    EXPECT_EQ(three.rec.launch_calls, 3u);
    EXPECT_EQ(three.rec.eager_kernels, 0u);
    if (mode == "graph")
      EXPECT_EQ(three.rec.graph_launches, 3u);
    else
      EXPECT_EQ(three.rec.node_kernels, 60u);
  }
}

// A window closed in the middle of a launch storm, from another thread: where it closes is not
// known, what it holds is whole (every recorded kernel with its call) and within its bounds.
TEST(GpuCaptureFaults, ClosedDuringALaunchStorm) {
  REQUIRE_GPU();
  for (const std::string mode : {"graph", "node"}) {
    const Pair p = RunBoth("storm_async", mode, kNvtx,
                           With({"--trigger", "nvtx", "--open", "launch:3", "--close", "launch:4",
                                 "--storm", "3000", "--close-after-us", "2000"}));
    ExpectConsistent(p, mode, 20, "storm_async");
    std::printf(
        "storm closed from another thread (%s): %llu kernels, %llu calls without their "
        "kernel\n",
        mode.c_str(), static_cast<unsigned long long>(p.rec.eager_kernels),
        static_cast<unsigned long long>(p.rec.lone_calls));
    EXPECT_GE(p.rec.eager_kernels, 3000u);  // launch 3's storm, at least
    EXPECT_LE(p.rec.eager_kernels, 6000u);
    EXPECT_GE(p.rec.launch_calls, 1u);
    EXPECT_LE(p.rec.launch_calls, 2u);
  }
}

// --duration counts from the first context: a 50 ms window holds the eager kernels launched
// right after the context and the graph launches of about its first 50 ms: a run of consecutive
// launches holding every launch whose call lies inside the window. The program logs each call's
// CLOCK_REALTIME; its gaps are uneven, so the recorded calls line up with the log in one place
// only, which also gives the offset between the two clocks.
TEST(GpuCaptureFaults, DurationFromTheFirstContext) {
  REQUIRE_GPU();
  for (const std::string mode : {"graph", "node"}) {
    const std::string log = Bin("gpu-test-runs/faults_duration_" + mode + ".log");
    const Pair p =
        RunBoth("duration", mode, {"--duration", "0.05"},
                {"--nodes", "20", "--launches", "300", "--sleep-us", "400", "--log", log});
    ExpectConsistent(p, mode, 20, "duration");
    ASSERT_EQ(p.rec.windows.size(), 1u);
    const Record& w = p.rec.windows[0];
    const ProcessTrace& proc = p.rec.run.processes.at(0);
    const uint64_t context = proc.MetaU64("first_context_ns");
    ASSERT_GT(context, 0u);
    EXPECT_LE(w.start_ns, context);
    EXPECT_GE(w.end_ns, context + 50'000'000u);
    EXPECT_EQ(p.rec.eager_kernels, 50u);             // launched right after the context, inside
    std::vector<std::pair<int64_t, int64_t>> calls;  // the log's, CLOCK_REALTIME
    std::ifstream in(log);
    for (std::string kind; in >> kind;) {
      std::string a, b;
      in >> a >> b;
      if (kind == "launch") calls.emplace_back(std::stoll(a), std::stoll(b));
    }
    ASSERT_EQ(calls.size(), 300u);
    std::vector<int64_t> recorded;  // the recorded cudaGraphLaunch calls' starts, CUPTI's clock
    for (const Record& r : proc.records)
      if (r.Kind() == RecordKind::RuntimeApi && proc.Name(r).rfind("cudaGraphLaunch", 0) == 0)
        recorded.push_back(static_cast<int64_t>(r.start_ns));
    std::sort(recorded.begin(), recorded.end());
    const size_t n = recorded.size();
    ASSERT_GT(n, 5u);
    ASSERT_LT(n, 300u);
    // Where they line up: the first launch j with the least spread of offsets.
    size_t best = 0;
    int64_t best_spread = INT64_MAX;
    for (size_t j = 0; j + n <= calls.size(); ++j) {
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (size_t k = 0; k < n; ++k) {
        const int64_t d = recorded[k] - calls[j + k].first;
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
      if (hi - lo < best_spread) {
        best_spread = hi - lo;
        best = j;
      }
    }
    EXPECT_LT(best_spread, 100'000) << "the recorded calls line up with no run of the log";
    std::vector<int64_t> offsets;
    for (size_t k = 0; k < n; ++k) offsets.push_back(recorded[k] - calls[best + k].first);
    std::sort(offsets.begin(), offsets.end());
    const int64_t offset = offsets[n / 2];  // CUPTI's clock minus CLOCK_REALTIME
    // Every launch whose call lies inside the window, 2 ms from its ends (switching takes less,
    // docs/capture.md), is in the recorded run [best, best + n).
    constexpr int64_t kSwitch = 2'000'000;
    size_t inside = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      const int64_t t0 = calls[i].first + offset, t1 = calls[i].second + offset;
      if (t0 < static_cast<int64_t>(w.start_ns) + kSwitch ||
          t1 + kSwitch > static_cast<int64_t>(w.end_ns))
        continue;
      ++inside;
      EXPECT_TRUE(i >= best && i < best + n)
          << "launch " << i << " inside the window, not recorded";
    }
    EXPECT_GT(inside, 0u);
    std::printf(
        "duration window (%s): launches %zu..%zu of 300 recorded, %zu inside by 2 ms; "
        "offset CUPTI - CLOCK_REALTIME %lld ns, spread %lld ns\n",
        mode.c_str(), best, best + n - 1, inside, static_cast<long long>(offset),
        static_cast<long long>(best_spread));
  }
}

// 100 windows at random times (--delay, --duration, both counted from the first context) on a
// graph-heavy program, in a random graph mode each: no crash, the program's status and output
// unchanged, every window whole.
TEST(GpuCaptureFaults, RandomWindows) {
  REQUIRE_GPU();
  const char* env = std::getenv("KPROF_FAULT_RUNS");
  const int runs = env != nullptr ? std::atoi(env) : 100;
  std::mt19937 rng(20261126);
  std::uniform_int_distribution<int> delay_ms(0, 150), duration_ms(2, 200), coin(0, 1);
  const std::vector<std::string> args = {"--nodes", "50", "--launches", "600", "--eager", "20",
                                         "--storm", "3",  "--sleep-us", "300"};
  const Result plain = Exec(Program(args));  // the same every time: no window of its own
  ASSERT_EQ(plain.status, 0) << plain.out;
  int crashes = 0, windows = 0;
  uint64_t lone = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string mode = coin(rng) ? "graph" : "node";
    std::vector<std::string> opts;
    const int d = delay_ms(rng), u = duration_ms(rng);
    if (coin(rng)) opts = {"--delay", std::to_string(d / 1000.0)};
    opts.push_back("--duration");
    opts.push_back(std::to_string(u / 1000.0));
    SCOPED_TRACE("run " + std::to_string(i) + " " + mode + " delay " + std::to_string(d) +
                 " duration " + std::to_string(u));
    const Pair p = RunBoth("random", mode, opts, args, &plain);
    crashes += p.profiled.status >= 128;
    windows += static_cast<int>(p.rec.windows.size());
    lone += p.rec.lone_calls;
    ExpectConsistent(p, mode, 50, "random");
  }
  std::printf(
      "random windows: %d runs, %d crashes, %d windows, %llu kernel calls recorded "
      "without their kernel\n",
      runs, crashes, windows, static_cast<unsigned long long>(lone));
  EXPECT_EQ(crashes, 0);
  EXPECT_EQ(windows, runs);
}

// The program: a small decoder compiled with torch.compile(mode="reduce-overhead"),
// 300 iterations in NVTX ranges "iter". 50 windows hold exactly 50 iterations' graph launches,
// in both modes; a 0.5 s --duration closing during compilation leaves the program unharmed.
TEST(GpuCaptureFaults, CompiledReduceOverheadLoop) {
  REQUIRE_GPU();
  if (!HaveTorch()) GTEST_SKIP() << "no PyTorch with CUDA";
  const std::vector<std::string> program = {Python(), Src("tests/gpu/scripts/compiled_infer.py"),
                                            "300"};
  const Result plain = Exec(program);
  ASSERT_EQ(plain.status, 0) << plain.out;
  const auto first_line = [](const std::string& out) {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("compiled_infer: ", 0) == 0) return l;
    return std::string();
  };
  for (const std::string mode : {"graph", "node"}) {
    const std::string dir = FreshDir("faults_compiled_" + mode);
    const Result r = KprofWith(
        dir, {"--graph-trace", mode, "--capture", "nvtx:iter", "--capture-count", "50"}, program);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(first_line(r.out), first_line(plain.out));
    const Recorded m = Read(dir);
    EXPECT_EQ(m.windows.size(), 50u) << mode;
    EXPECT_EQ(m.launch_calls, 50u) << mode;
    if (mode == "graph") {
      EXPECT_EQ(m.graph_launches, 50u);
    }
    EXPECT_EQ(m.missing, 0u);
  }
  const std::string dir = FreshDir("faults_compiled_duration");
  const Result r = KprofWith(dir, {"--duration", "0.5"}, program);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(first_line(r.out), first_line(plain.out));
  // Every process that made a context has its window (Inductor's compile workers may make one).
  const Recorded m = Read(dir);
  EXPECT_GE(m.windows.size(), 1u);
  for (const Record& w : m.windows)  // a short-lived worker's ends with it
    EXPECT_TRUE(static_cast<CaptureEnd>(w.c) == CaptureEnd::Duration ||
                static_cast<CaptureEnd>(w.c) == CaptureEnd::ProcessEnd);
  EXPECT_EQ(m.graph_launches, m.launch_calls);
}
