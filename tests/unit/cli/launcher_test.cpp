// kprof run on programs without CUDA: exit statuses, signals, launch failures, options.
// These run the real kprof executable (KPROF_BINARY_DIR/kprof) as a user would.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "kprof/cli.h"
#include "kprof/trace.h"
#include "test_util.h"

extern char** environ;

namespace kprof {
namespace {

using test::RunCommand;
using test::TempDir;

std::string RunCmd(const TempDir& d, const std::string& args) {
  return test::Kprof() + " run -o " + d / "run" + " " + args;
}

TEST(Launcher, ExitStatusIsTheProgramsOwn) {
  TempDir d;
  EXPECT_EQ(RunCommand(RunCmd(d, "-- /bin/true")).status, 0);
  TempDir d2;
  EXPECT_EQ(RunCommand(RunCmd(d2, "-- sh -c 'exit 3'")).status, 3);
  TempDir d3;
  auto r = RunCommand(RunCmd(d3, "-- sh -c 'echo from-the-program; exit 42'"));
  EXPECT_EQ(r.status, 42);
  EXPECT_NE(r.output.find("from-the-program"), std::string::npos);
}

TEST(Launcher, KilledBySignalGives128PlusN) {
  TempDir d;
  EXPECT_EQ(RunCommand(RunCmd(d, "-- sh -c 'kill -TERM $$'")).status, 128 + SIGTERM);
  TempDir d2;
  EXPECT_EQ(RunCommand(RunCmd(d2, "-- sh -c 'kill -SEGV $$'")).status, 128 + SIGSEGV);
  TempDir d3;
  EXPECT_EQ(RunCommand(RunCmd(d3, "-- sh -c 'kill -ABRT $$'")).status, 128 + SIGABRT);
}

TEST(Launcher, ProgramNotFoundOrNotExecutable) {
  TempDir d;
  auto r = RunCommand(RunCmd(d, "-- kprof-no-such-program-xyz"));
  EXPECT_EQ(r.status, kExitLaunchFailed);
  EXPECT_NE(r.output.find("kprof-no-such-program-xyz: command not found"), std::string::npos)
      << r.output;
  test::WriteAll(d / "script", "#!/bin/sh\nexit 0\n");  // mode 0644: not executable
  TempDir d2;
  r = RunCommand(RunCmd(d2, "-- " + d / "script"));
  EXPECT_EQ(r.status, 126);
  EXPECT_NE(r.output.find("Permission denied"), std::string::npos) << r.output;
}

TEST(Launcher, NothingRecordedSaysWhy) {
  TempDir d;
  auto r = RunCommand(RunCmd(d, "-- /bin/true"));
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("kprof run: nothing recorded: "), std::string::npos) << r.output;
  // One line.
  auto pos = r.output.find("nothing recorded");
  EXPECT_EQ(r.output.find('\n', pos), r.output.size() - 1) << r.output;
}

TEST(Launcher, UsageErrorsExit2) {
  TempDir d;
  auto r = RunCommand(RunCmd(d, "--no-such-option -- /bin/true"));
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("kprof run: "), std::string::npos);
  r = RunCommand(test::Kprof() + " run");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("no program given"), std::string::npos);
  r = RunCommand(RunCmd(d, "--format xml -- /bin/true"));
  EXPECT_EQ(r.status, kExitUsage);
  r = RunCommand(test::Kprof() + " frobnicate");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_EQ(RunCommand(test::Kprof()).status, kExitUsage);
  EXPECT_EQ(RunCommand(test::Kprof() + " --version").status, 0);
  EXPECT_EQ(RunCommand(test::Kprof() + " run --help").status, 0);
}

// The counters: a bad mode, and both modes at once (the GPU serves one), are refused before
// the program starts.
TEST(Launcher, MetricsModesAreCheckedFirst) {
  TempDir d;
  auto r = RunCommand(RunCmd(d, "--metrics everything -- /bin/true"));
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("--metrics must be sampled, replay or replay:top=N"), std::string::npos)
      << r.output;
  r = RunCommand(RunCmd(d, "--metrics sampled,replay:top=3 -- /bin/true"));
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("sampled and replay cannot run together"), std::string::npos) << r.output;
  r = RunCommand(RunCmd(d, "--metrics-kernels gemm -- /bin/true"));
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("need --metrics replay"), std::string::npos) << r.output;
}

TEST(Launcher, ProgramWithoutDoubleDash) {
  TempDir d;
  EXPECT_EQ(RunCommand(RunCmd(d, "--quiet sh -c 'exit 5'")).status, 5);
}

TEST(Launcher, RefusesToMixRunsUnlessForced) {
  TempDir d;
  std::filesystem::create_directories(d / "run");
  WriteRunFile(d / "run/kprof.1.kprof", ProcessTrace{});
  auto r = RunCommand(RunCmd(d, "-- /bin/true"));
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_NE(r.output.find("already holds a run"), std::string::npos) << r.output;
  EXPECT_EQ(RunCommand(RunCmd(d, "--force -- /bin/true")).status, 0);
  EXPECT_FALSE(std::filesystem::exists(d / "run/kprof.1.kprof"));
}

TEST(Launcher, RepeatRunsTheProgramNTimes) {
  TempDir d;
  std::string marker = d / "count";
  auto r = RunCommand(RunCmd(d, "--repeat 3 -- sh -c 'echo x >> " + marker + "'"));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(test::ReadAll(marker), "x\nx\nx\n");
  EXPECT_TRUE(std::filesystem::is_directory(d / "run/rep3"));
}

/// Starts `args` (no shell), sends it SIGTERM after `delay_ms` and returns its wait status.
// Sends SIGTERM once the program has created `started` (its first command), not after a fixed
// delay: a slow start (a sanitizer build, a loaded CI machine) let SIGTERM reach kprof before it
// had started the program, and kprof then took the default action.
int SigtermWhenStarted(std::vector<std::string> args, const std::string& started) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(started) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(pid, SIGTERM);
  int st = 0;
  return ::waitpid(pid, &st, 0) == pid ? st : -1;
}

// SIGTERM sent to kprof (a CI timeout) reaches the program, whose own status kprof returns.
TEST(Launcher, ForwardsSigtermToTheProgram) {
  TempDir d;
  std::string flag = d / "got-term";
  // The background sleep must not hold the test's output pipe open after the shell exits, or
  // ctest waits for it.
  std::string script = "trap 'echo term > " + flag + "; exit 7' TERM; touch " + d / "started" +
                       "; sleep 20 </dev/null >/dev/null 2>&1 & wait";
  int st = SigtermWhenStarted({test::Kprof(), "run", "-o", d / "run", "--", "sh", "-c", script},
                              d / "started");
  ASSERT_NE(st, -1);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);
  EXPECT_EQ(test::ReadAll(flag), "term\n");
}

TEST(Report, BadInputsExit2WithOneLine) {
  TempDir d;
  auto r = RunCommand(test::Kprof() + " report " + d / "missing");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output, "kprof report: " + d / "missing" + ": no such file or directory\n");
  test::WriteAll(d / "garbage.json", "{\"traceEvents\": [ {\"ph\": ");
  r = RunCommand(test::Kprof() + " report " + d / "garbage.json");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output.rfind("kprof report: " + d / "garbage.json" + ": ", 0), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1);
  r = RunCommand(test::Kprof() + " report");
  EXPECT_EQ(r.status, kExitUsage);
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// A signal to kprof during --repeat ends the series: the repetition in progress gets it, no
// further one starts, and kprof exits with its status.
TEST(Launcher, SignalStopsFurtherRepetitions) {
  TempDir d;
  auto t0 = std::chrono::steady_clock::now();
  int st = SigtermWhenStarted({test::Kprof(), "run", "--quiet", "--repeat", "3", "-o", d / "run",
                               "--", "sh", "-c", "touch " + d / "started" + "; sleep 1"},
                              d / "started");
  ASSERT_NE(st, -1);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGTERM);
  EXPECT_LT(secs, 2.5);  // repetitions 2 and 3 (1 s each) did not run
  EXPECT_FALSE(std::filesystem::exists(d / "run/rep2"));
}

}  // namespace
}  // namespace kprof
