// See kprof/self_cost.h.
#include "kprof/self_cost.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kprof {

std::string FormatSelfCost(const SelfCost& c) {
  // (No fmt here: the agent links this library without it.)
  char buf[128];
  std::snprintf(buf, sizeof buf, "launch_ns=%.1f;api_ns=%.1f;range_ns=%.1f;source=", c.launch_ns,
                c.api_ns, c.range_ns);
  return buf + c.source;
}

std::optional<SelfCost> ParseSelfCost(std::string_view text) {
  SelfCost c;
  double* fields[] = {&c.launch_ns, &c.api_ns, &c.range_ns};
  const std::string_view names[] = {"launch_ns=", "api_ns=", "range_ns="};
  for (int i = 0; i < 3; ++i) {
    if (text.substr(0, names[i].size()) != names[i]) return std::nullopt;
    text.remove_prefix(names[i].size());
    const size_t semi = text.find(';');
    if (semi == std::string_view::npos || semi == 0 || semi > 32) return std::nullopt;
    const std::string num(text.substr(0, semi));
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || !std::isfinite(v) || v < 0 || v > 1e6)
      return std::nullopt;
    *fields[i] = v;
    text.remove_prefix(semi + 1);
  }
  constexpr std::string_view kSource = "source=";
  if (text.substr(0, kSource.size()) != kSource) return std::nullopt;
  text.remove_prefix(kSource.size());
  if (text.find('\n') != std::string_view::npos) return std::nullopt;
  c.source = std::string(text);
  return c;
}

}  // namespace kprof
