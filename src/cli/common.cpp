#include "cli/common.h"

#include <algorithm>
#include <cstdio>

#include "kprof/cli.h"

namespace kprof::cli {

std::optional<int> Parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 consumes the vector from its back
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    Error(app.get_name().substr(std::min<size_t>(app.get_name().size(), 6)),
          std::string(e.what()) + " (see --help)");
    return kExitUsage;
  }
  return std::nullopt;
}

void Error(const std::string& cmd, const std::string& message) {
  std::fprintf(stderr, "kprof %s: %s\n", cmd.c_str(), message.c_str());
}

void WarnIncomplete(const std::string& cmd, const Run& run) {
  for (const auto& p : run.processes) {
    if (auto it = p.meta.find("flush_timeout_detail"); it != p.meta.end())
      Error(cmd, "warning: " + p.source + ": " + it->second);
    if (p.complete) continue;
    std::string torn;
    if (p.torn_tail_bytes > 0)
      torn = " (its last block, " + std::to_string(p.torn_tail_bytes) +
             " bytes, was cut short and is skipped)";
    Error(cmd, "warning: " + p.source +
                   ": incomplete: the process ended without finishing its file (killed?); "
                   "records up to the last flush are kept" +
                   torn);
  }
}

int UsageError(const std::string& cmd, const std::string& message) {
  Error(cmd, message);
  return kExitUsage;
}

}  // namespace kprof::cli
