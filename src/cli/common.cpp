#include "cli/common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

std::optional<uint64_t> ParseDurationNs(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string unit(end);
  double scale = 0;
  if (unit.empty() || unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else
    return std::nullopt;
  double ns = v * scale;
  if (ns > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(std::llround(ns));
}

void Error(const std::string& cmd, const std::string& message) {
  std::fprintf(stderr, "kprof %s: %s\n", cmd.c_str(), message.c_str());
}

}  // namespace kprof::cli
