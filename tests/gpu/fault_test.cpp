// The fault matrix (issue 14; docs/reliability.md, "Fault matrix"): `kprof run` of programs that
// die, are killed, destroy their context, exec, fork, spawn, fill the disk or lose their run
// directory. Each test states what is kept, what is lost and the exit status, and measures the
// loss against the program's own progress record (kernels/fault.cu). Every test appends its
// outcome to gpu-test-runs/fault-matrix.txt, the source of the table in the docs.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu_harness.h"
#include "kprof/trace.h"
#include "workload_checks.h"

namespace fs = std::filesystem;
using namespace kprof;
using namespace kprof::testing;
using namespace kprof::gpu_test;

namespace {

constexpr int kDefaultFlushMs = 1000;  // the agent's default period (src/agent/agent.h)

// kernels/fault.cu's progress record.
struct Progress {
  int64_t pid = 0, completed = 0, elapsed_ns = 0, phase = 0;
};

Progress ReadProgress(const std::string& path) {
  Progress p;
  std::ifstream f(path, std::ios::binary);
  int64_t v[4] = {};
  f.read(reinterpret_cast<char*>(v), sizeof v);
  if (f) p = {v[0], v[1], v[2], v[3]};
  return p;
}

// What a fault cost: kernels the program knew complete that the run file does not hold, and the
// launching time they stand for at the program's own rate.
struct Loss {
  int64_t completed = 0, kept = 0, lost = 0;
  double lost_ms = 0;
};

Loss Measure(const Progress& p, size_t kept) {
  Loss l;
  l.completed = p.completed;
  l.kept = static_cast<int64_t>(kept);
  l.lost = std::max<int64_t>(0, l.completed - l.kept);
  if (p.completed > 0) l.lost_ms = l.lost * (p.elapsed_ns / 1e6) / p.completed;
  return l;
}

void Note(const std::string& scenario, int status, const std::string& kept_lost) {
  std::ofstream f(Bin("gpu-test-runs/fault-matrix.txt"), std::ios::app);
  f << scenario << " | " << status << " | " << kept_lost << "\n";
}

std::string Describe(const Loss& l) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld of %lld kernels kept, %lld lost (%.0f ms of launching)",
                static_cast<long long>(l.kept), static_cast<long long>(l.completed),
                static_cast<long long>(l.lost), l.lost_ms);
  return buf;
}

std::string FirstLine(const std::string& out, const std::string& needle) {
  const size_t at = out.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = out.rfind('\n', at) == std::string::npos ? 0 : out.rfind('\n', at) + 1;
  return out.substr(begin, out.find('\n', at) - begin);
}

// Waits until the program has completed `kernels` (bounded).
Progress WaitForProgress(const std::string& path, int64_t kernels) {
  Progress p;
  for (int i = 0; i < 600; ++i) {
    p = ReadProgress(path);
    if (p.pid > 0 && p.completed >= kernels) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return p;
}

// The fault's program: kernels/fault MODE PROGRESS [SECONDS], under kprof run (with
// KPROF_FLUSH_MS when flush_ms > 0).
std::vector<std::string> FaultRun(const std::string& dir, const std::string& mode,
                                  const std::string& progress, const std::string& seconds,
                                  int flush_ms = 0, int pause_ms = 0) {
  std::vector<std::string> argv = {"env"};
  if (flush_ms > 0) argv.push_back("KPROF_FLUSH_MS=" + std::to_string(flush_ms));
  for (const std::string& a :
       {Bin("kprof"), std::string("run"), std::string("-o"), dir, std::string("--quiet"),
        std::string("--"), Bin("kernels/fault"), mode, progress})
    argv.push_back(a);
  if (!seconds.empty()) argv.push_back(seconds);
  if (pause_ms > 0) argv.push_back(std::to_string(pause_ms));
  return argv;
}

// A fault run to its end: kprof run of kernels/fault MODE for SECONDS, read back.
struct Outcome {
  Result result;
  kprof::Run run;
  Progress progress;
};

Outcome RunFault(const std::string& name, const std::string& mode, const std::string& seconds,
                 const std::vector<std::string>& env = {}) {
  const std::string dir = FreshDir(name), progress = dir + ".progress";
  std::vector<std::string> argv = FaultRun(dir, mode, progress, seconds);
  argv.insert(argv.begin() + 1, env.begin(), env.end());
  Outcome o;
  o.result = Exec(argv);
  o.run = ReadInputs({dir});
  o.progress = ReadProgress(progress);
  return o;
}

}  // namespace

// The baseline: a normal exit keeps every kernel.
TEST(GpuFault, NormalExitKeepsEverything) {
  REQUIRE_GPU();
  const Outcome o = RunFault("fault_exit", "exit", "1.5");
  ASSERT_EQ(o.result.status, 0) << o.result.out;
  const ProcessTrace& t = Only(o.run);
  ExpectClean(t);
  const Loss l = Measure(o.progress, CountNamed(t, RecordKind::Kernel, "fault_kernel"));
  EXPECT_EQ(l.lost, 0);
  EXPECT_EQ(l.kept, l.completed);
  Note("normal exit", o.result.status, Describe(l));
}

// _exit skips atexit: what the periodic flush wrote is kept, the rest (at most one period) lost.
TEST(GpuFault, UnderscoreExitLosesAtMostOneFlushPeriod) {
  REQUIRE_GPU();
  const Outcome o = RunFault("fault__exit", "_exit", "2.5");
  ASSERT_EQ(o.result.status, 7) << o.result.out;
  const ProcessTrace& t = Only(o.run);
  EXPECT_FALSE(t.complete);
  const Loss l = Measure(o.progress, CountNamed(t, RecordKind::Kernel, "fault_kernel"));
  EXPECT_GT(l.kept, 0);
  EXPECT_LE(l.lost_ms, kDefaultFlushMs + 250) << Describe(l);
  Note("_exit(7)", o.result.status, Describe(l));
}

// SIGKILL of the program at a random time: no handler runs. The file is readable up to its last
// whole block. What is lost is what sat in CUPTI's buffers: at most one flush period, and less
// when the program launches fast enough to fill a buffer sooner (buffers are written as they
// fill). Measured for a program launching flat out and for one that pauses 100 ms per batch of
// 256 kernels, with the default period and with KPROF_FLUSH_MS=200.
TEST(GpuFault, SigkillAtARandomTimeLosesAtMostOneFlushPeriod) {
  REQUIRE_GPU();
  std::mt19937 rng(std::random_device{}());
  for (int pause_ms : {0, 100}) {
    for (int flush_ms : {kDefaultFlushMs, 200}) {
      for (int i = 0; i < 2; ++i) {
        const std::string name = "fault_kill_" + std::to_string(pause_ms) + "_" +
                                 std::to_string(flush_ms) + "_" + std::to_string(i);
        const std::string dir = FreshDir(name), progress = dir + ".progress";
        const pid_t kprof = Spawn(FaultRun(dir, "wait", progress, "1e9", flush_ms, pause_ms));
        const Progress started = WaitForProgress(progress, 256);
        ASSERT_GT(started.pid, 0) << "the program did not start";
        const int delay = std::uniform_int_distribution<int>(1500, 3500)(rng);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
        kill(static_cast<pid_t>(started.pid), SIGKILL);
        Result r = Wait(kprof);
        EXPECT_EQ(r.status, 137) << r.out;
        const kprof::Run run = ReadInputs({dir});
        const ProcessTrace& t = Only(run);
        EXPECT_FALSE(t.complete);
        const Loss l =
            Measure(ReadProgress(progress), CountNamed(t, RecordKind::Kernel, "fault_kernel"));
        EXPECT_GT(l.kept, 0) << name;
        EXPECT_LE(l.lost_ms, flush_ms + 250) << name << ": " << Describe(l);
        Note(
            "SIGKILL after " + std::to_string(delay) + " ms, " +
                (pause_ms ? "slow launcher (100 ms pause per 256 kernels)" : "launching flat out") +
                ", flush period " + std::to_string(flush_ms) + " ms",
            r.status, Describe(l) + (t.torn_tail_bytes ? ", torn last block" : ""));
      }
    }
  }
}

// SIGTERM (and SIGHUP, SIGQUIT, as SIGINT in gpu_test.cpp): the agent finishes the file before
// the default action ends the program. Nothing complete before the signal is lost; the program
// may run on for the few milliseconds the agent takes (the signal can land on any thread), and
// that work is not recorded.
TEST(GpuFault, SigtermFinishesTheFile) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("fault_term"), progress = dir + ".progress";
  const pid_t kprof = Spawn(FaultRun(dir, "wait", progress, ""));
  ASSERT_GT(WaitForProgress(progress, 256).pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Progress before = ReadProgress(progress);
  kill(static_cast<pid_t>(before.pid), SIGTERM);
  Result r = Wait(kprof);
  EXPECT_EQ(r.status, 143) << r.out;
  const kprof::Run run = ReadInputs({dir});
  const ProcessTrace& t = Only(run);
  EXPECT_TRUE(t.complete);
  EXPECT_EQ(t.meta.at("exit_reason"), "signal 15");
  const int64_t kept = static_cast<int64_t>(CountNamed(t, RecordKind::Kernel, "fault_kernel"));
  EXPECT_GE(kept, before.completed);
  EXPECT_EQ(t.meta.count("flush_timeout"), 0u);
  EXPECT_EQ(t.meta.count("displaced"), 0u);
  const Loss after = Measure(ReadProgress(progress), static_cast<size_t>(kept));
  Note("SIGTERM to the program", r.status,
       std::to_string(kept) + " kernels kept, all " + std::to_string(before.completed) +
           " complete at the signal among them; " + std::to_string(after.lost) + " (" +
           std::to_string(static_cast<int>(after.lost_ms)) +
           " ms) launched while the file was finished, not recorded" +
           (t.meta.count("flush_timeout") ? "; the final flush timed out" : ""));
}

// cudaDeviceReset mid-run destroys the context: the context-destroy callback flushes its records
// first; the program then creates a new context and launches again. Both halves are kept.
TEST(GpuFault, ContextDestroyedMidRunKeepsBothHalves) {
  REQUIRE_GPU();
  const Outcome o = RunFault("fault_reset", "reset", "1");
  ASSERT_EQ(o.result.status, 0) << o.result.out;
  const ProcessTrace& t = Only(o.run);
  ExpectClean(t);
  const size_t before = CountNamed(t, RecordKind::Kernel, "fault_kernel");
  const size_t after = CountNamed(t, RecordKind::Kernel, "after_reset");
  EXPECT_EQ(before, static_cast<size_t>(o.progress.completed));
  EXPECT_EQ(after, static_cast<size_t>(o.progress.completed));
  Note("cudaDeviceReset mid-run, then more work", o.result.status,
       std::to_string(before) + " + " + std::to_string(after) + " of " +
           std::to_string(2 * o.progress.completed) + " kernels kept");
}

// exec of another CUDA program: same pid, a new image with a new agent. The second image writes
// kprof.PID.1.kprof (never the first file); the first image had no exit path, so its file holds
// what the periodic flush wrote.
TEST(GpuFault, ExecOfAnotherCudaProgramKeepsBothImages) {
  REQUIRE_GPU();
  const Outcome o =
      RunFault("fault_exec", "exec", "2.5", {"FAULT_EXEC=" + Bin("kernels/vector_add")});
  ASSERT_EQ(o.result.status, 0) << o.result.out;
  ASSERT_EQ(o.run.processes.size(), 2u) << o.result.out;
  const ProcessTrace* first = nullptr;
  const ProcessTrace* second = nullptr;
  for (const auto& t : o.run.processes) {
    (CountNamed(t, RecordKind::Kernel, "vector_add") > 0 ? second : first) = &t;
  }
  ASSERT_TRUE(first != nullptr && second != nullptr);
  EXPECT_EQ(first->pid, second->pid);
  EXPECT_NE(second->source.find(".1.kprof"), std::string::npos) << second->source;
  EXPECT_EQ(CountNamed(*second, RecordKind::Kernel, "vector_add"), 1u);
  ExpectClean(*second);
  EXPECT_FALSE(first->complete);
  const Loss l = Measure(o.progress, CountNamed(*first, RecordKind::Kernel, "fault_kernel"));
  EXPECT_GT(l.kept, 0);
  EXPECT_LE(l.lost_ms, kDefaultFlushMs + 250) << Describe(l);
  Note("exec of another CUDA program", o.result.status,
       "first image: " + Describe(l) + "; second image: complete");
}

// A program that never starts CUDA: nothing to record, said in one line, its status kept.
TEST(GpuFault, ProgramWithoutCudaSaysSoAndKeepsItsStatus) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("fault_nocuda");
  Result r = Kprof(dir, {"sh", "-c", "echo no cuda here; exit 5"});
  EXPECT_EQ(r.status, 5) << r.out;
  const std::string line = FirstLine(r.out, "nothing recorded");
  EXPECT_NE(line.find("never initialised CUDA"), std::string::npos) << r.out;
  Note("a program that never uses CUDA", r.status, "nothing to keep; \"" + line + "\"");
}

// The run directory removed while the program runs: the recording is lost, and kprof says so
// instead of blaming the program.
TEST(GpuFault, RunDirectoryRemovedWhileRunningIsSaid) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("fault_rmdir"), progress = dir + ".progress";
  const pid_t kprof = Spawn(FaultRun(dir, "exit", progress, "2"));
  ASSERT_GT(WaitForProgress(progress, 256).pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  fs::remove_all(dir);
  Result r = Wait(kprof);
  EXPECT_EQ(r.status, 0) << r.out;
  const std::string line = FirstLine(r.out, "removed");
  EXPECT_NE(line.find(dir), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("never initialised CUDA"), std::string::npos) << r.out;
  Note("run directory removed while running", r.status, "all lost; \"" + line + "\"");
}

// A full disk, on an 8 MiB tmpfs mounted in a user namespace (skipped where the machine forbids
// unprivileged user namespaces): the agent stops writing at the first failed write with one
// line, the file ends at its last whole block, the program runs on undisturbed.
TEST(GpuFault, DiskFullStopsRecordingAndKeepsWholeBlocks) {
  REQUIRE_GPU();
  if (Exec({"unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
            "mount -t tmpfs -o size=1m none /mnt"})
          .status != 0)
    GTEST_SKIP() << "cannot mount a tmpfs in a user namespace here";
  const std::string dir = FreshDir("fault_full"), progress = dir + ".progress";
  fs::create_directories(dir);
  const std::string script = "mount -t tmpfs -o size=8m none '" + dir + "' && " +
                             "env KPROF_FLUSH_MS=100 '" + Bin("kprof") + "' run -o '" + dir +
                             "/run' --quiet -- '" + Bin("kernels/fault") + "' exit '" + progress +
                             "' 3; rc=$?; cp '" + dir + "'/run/*.kprof '" + dir +
                             ".kprof' || true; ls -l '" + dir + "/run'; exit $rc";
  Result r = Exec({"unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script});
  EXPECT_EQ(r.status, 0) << r.out;
  const std::string line = FirstLine(r.out, "recording stopped");
  EXPECT_NE(line.find("No space left on device"), std::string::npos) << r.out;
  ProcessTrace t = ReadRunFile(dir + ".kprof");
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.torn_tail_bytes, 0u);
  const Loss l = Measure(ReadProgress(progress), CountNamed(t, RecordKind::Kernel, "fault_kernel"));
  EXPECT_GT(l.kept, 0);
  EXPECT_GT(l.lost, 0);
  Note("disk full (8 MiB tmpfs)", r.status, Describe(l) + "; \"" + line + "\"");
}

// Eight CUDA processes at once under one kprof run: eight files, every kernel in each.
TEST(GpuFault, EightProcessesAtOnce) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("fault_eight");
  Result r = Kprof(dir, {Python(), Src("tests/gpu/scripts/many_procs.py"), "8",
                         Bin("kernels/kernel_storm"), "20000"});
  ASSERT_EQ(r.status, 0) << r.out;
  kprof::Run run = ReadInputs({dir});
  ASSERT_EQ(run.processes.size(), 8u);
  for (const auto& t : run.processes) {
    ExpectClean(t);
    EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "tiny_kernel"), 20000u) << t.source;
  }
  Note("8 processes at once", r.status, "8 files, 8 x 20000 kernels kept");
}

// multiprocessing with the spawn start method (PyTorch's choice for CUDA in workers): each
// worker is a new interpreter that initialises CUDA: one complete file per worker.
TEST(GpuFault, SpawnedPythonWorkersEachWriteAFile) {
  REQUIRE_GPU();
  if (!HaveTorch()) GTEST_SKIP() << "PyTorch with CUDA not available";
  const std::string dir = FreshDir("fault_spawn");
  Result r = Kprof(dir, {Python(), Src("tests/gpu/scripts/spawn_workers.py"), "3", "500"});
  ASSERT_EQ(r.status, 0) << r.out;
  kprof::Run run = ReadInputs({dir});
  ASSERT_EQ(run.processes.size(), 3u) << r.out;
  for (const auto& t : run.processes) {
    ExpectClean(t);
    EXPECT_EQ(t.meta.at("exit_reason"), "exit");
    EXPECT_GE(CountNamed(t, RecordKind::Kernel, "elementwise"), 500u) << t.source;
  }
  Note("multiprocessing spawn, 3 workers", r.status, "3 complete files, every add kernel kept");
}
