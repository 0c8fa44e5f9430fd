// kprof: CUDA profiler. `kprof run|report|diff|check ...`; see docs/cli.md.
#include <cstdio>
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
    "  kprof diff [options] BASE NEW              compare runs; exit 1 on a regression\n"
    "  kprof check [options] RUN --budget FILE    check a run against a budget\n"
    "\n"
    "'kprof COMMAND --help' shows the options of a command.\n"
    "exit codes: run: the program's own status (128+N when killed by signal N; 127 program not\n"
    "found, 126 not executable); report: 0 ok, 2 bad input; diff/check: 0 pass, 1 regression,\n"
    "2 usage or input error.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kprof::kExitUsage;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "run") return kprof::CmdRun(args);
  if (cmd == "report") return kprof::CmdReport(args);
  if (cmd == "diff") return kprof::CmdDiff(args);
  if (cmd == "check") return kprof::CmdCheck(args);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return kprof::kExitOk;
  }
  if (cmd == "--version") {
    std::puts("kprof " KPROF_VERSION);
    return kprof::kExitOk;
  }
  std::fprintf(stderr, "kprof: unknown command '%s' (expected run, report, diff or check)\n",
               cmd.c_str());
  return kprof::kExitUsage;
}
