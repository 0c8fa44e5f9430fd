// Subcommands of the kprof executable. main() dispatches on argv[1]; each command parses its own
// options (CLI11) from the remaining arguments and returns the process exit code.
// Exit codes (docs/cli.md): kprof run returns the program's own status (128+N if killed by
// signal N); report: 0 ok, 2 usage/input error; diff/check: 0 pass, 1 regression or budget
// exceeded, 2 usage or input error.
#pragma once

#include <string>
#include <vector>

namespace kprof {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRegression = 1;      ///< diff/check: a regression or a budget exceeded
inline constexpr int kExitUsage = 2;           ///< bad option, missing/malformed input file
inline constexpr int kExitLaunchFailed = 127;  ///< run: program not found / not executable

/// `args` excludes "kprof" and the subcommand name itself.
int CmdRun(const std::vector<std::string>& args);
int CmdReport(const std::vector<std::string>& args);
int CmdDiff(const std::vector<std::string>& args);
int CmdCheck(const std::vector<std::string>& args);
int CmdExport(const std::vector<std::string>& args);  ///< 0 ok, 2 usage/input/output error
/// kprof capture: 0 every process recorded its window, 1 some did not, 2 no such job / ended /
/// already capturing / bad options.
int CmdCapture(const std::vector<std::string>& args);
int CmdDoctor(const std::vector<std::string>& args);  ///< 0 can record, 1 a problem, 2 usage

}  // namespace kprof
