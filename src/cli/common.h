// Shared by the subcommands: option parsing with kprof's error conventions.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kprof/trace.h"

namespace kprof::cli {

/// Parses `args` (without "kprof" and the subcommand) into `app`. Returns an exit code when the
/// command must stop now: 0 after --help, kExitUsage (2) after a one-line error on stderr.
std::optional<int> Parse(CLI::App& app, std::vector<std::string> args);

/// Prints "kprof <cmd>: <message>" on stderr.
void Error(const std::string& cmd, const std::string& message);

/// One warning line on stderr for each process of `run` whose file has no End block (the
/// process was killed or crashed): what was kept and what it means.
void WarnIncomplete(const std::string& cmd, const Run& run);

/// Error(cmd, message), then kExitUsage: how a command ends on a bad option or input.
int UsageError(const std::string& cmd, const std::string& message);

}  // namespace kprof::cli
