// See kprof/self_cost.h.
#include "kprof/self_cost.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kprof {

std::string FormatSelfCost(const SelfCost& c) {
  // (No fmt here: the agent links this library without it; to_chars: no locale.)
  std::string out;
  const auto put = [&](const char* name, double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 1);
    out.append(name).append(buf, r.ptr).push_back(';');
  };
  put("launch_ns=", c.launch_ns);
  put("api_ns=", c.api_ns);
  put("range_ns=", c.range_ns);
  return out + "source=" + c.source;
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
    // from_chars: the same in every locale (the agent parses inside the user's process).
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + semi, v);
    if (ec != std::errc() || end != text.data() + semi || !std::isfinite(v) || v < 0 || v > 1e6)
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
