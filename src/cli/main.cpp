// kprof: CUDA profiler. `kprof run|report|diff|check ...`; see docs/cli.md.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kprof/cli.h"

namespace {

constexpr const char* kUsage =
    "kprof " KPROF_VERSION
    " - where GPU time goes, and what to change\n"
    "\n"
    "usage:\n"
    "  kprof run [options] -- PROGRAM [ARGS...]   profile a program (and its children)\n"
    "  kprof report [options] INPUT...            analyse saved runs or Chrome/PyTorch traces\n"
    "  kprof capture RUN_DIR [options]            a window in a job started with --on-demand\n"
    "  kprof diff [options] BASE NEW              compare runs; exit 1 on a regression\n"
    "  kprof check [options] RUN --budget FILE    check a run against a budget\n"
    "  kprof export INPUT... --sqlite FILE        export runs as SQLite (Nsight Systems tables)\n"
    "  kprof doctor [--json] [--dir DIR]          what this machine will record and what it lacks\n"
    "\n"
    "'kprof COMMAND --help' shows the options of a command.\n"
    "exit codes: run: the program's own status (128+N when killed by signal N; 127 program not\n"
    "found, 126 not executable); report, export: 0 ok, 2 bad input; diff/check: 0 pass,\n"
    "1 regression, 2 usage or input error; capture: 0 recorded, 1 some process did not, 2 no\n"
    "such job, ended, or already capturing.\n";

// `report`, `diff` and `check` allocate hundreds of MB at once on large traces. On virtual
// machines a page fault costs microseconds, and glibc's malloc backed by transparent huge pages
// (tunable glibc.malloc.hugetlb=1, glibc >= 2.35; ignored where THP is off) cut the analysis
// and hint time of a 1 GB trace from 1.9 s to 0.9 s (docs/benchmarks.md). Tunables are read
// at start-up, so kprof re-executes itself once with the tunable added; if that fails it carries
// on as it is. These commands start no other program, so the variable goes nowhere else.
// KPROF_HUGEPAGES=0 turns this off. `kprof run` never does it: its environment is the
// profiled program's.
void PreferHugePages(char** argv) {
#if defined(__linux__) && defined(__GLIBC__)
  if (const char* v = std::getenv("KPROF_HUGEPAGES"); v != nullptr && std::strcmp(v, "0") == 0)
    return;
  // Once only (glibc drops tunables for privileged programs, which would otherwise loop).
  if (std::getenv("KPROF_REEXECUTED") != nullptr) {
    unsetenv("KPROF_REEXECUTED");
    return;
  }
  const char* old = std::getenv("GLIBC_TUNABLES");
  std::string tunables = old != nullptr ? old : "";
  if (tunables.find("glibc.malloc.hugetlb") != std::string::npos) return;  // set by the user
  if (setenv("KPROF_REEXECUTED", "1", 1) != 0) return;
  std::string with =
      tunables.empty() ? "glibc.malloc.hugetlb=1" : tunables + ":glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", with.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("KPROF_REEXECUTED");
  if (old != nullptr) {  // exec failed: restore and carry on
    setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
#else
  (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kprof::kExitUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "report" || cmd == "diff" || cmd == "check" || cmd == "export") PreferHugePages(argv);
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "run") return kprof::CmdRun(args);
  if (cmd == "report") return kprof::CmdReport(args);
  if (cmd == "capture") return kprof::CmdCapture(args);
  if (cmd == "diff") return kprof::CmdDiff(args);
  if (cmd == "check") return kprof::CmdCheck(args);
  if (cmd == "export") return kprof::CmdExport(args);
  if (cmd == "doctor") return kprof::CmdDoctor(args);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return kprof::kExitOk;
  }
  if (cmd == "--version") {
    std::puts("kprof " KPROF_VERSION);
    return kprof::kExitOk;
  }
  std::fprintf(
      stderr, "kprof: unknown command '%s' (expected run, report, diff, check, export or doctor)\n",
      cmd.c_str());
  return kprof::kExitUsage;
}
