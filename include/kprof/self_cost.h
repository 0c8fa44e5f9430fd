// What kprof's own recording costs the profiled program's host thread, per event, as measured on
// the machine of the run (src/calibrate: an event stream timed without the agent and with it).
// `kprof run` passes the figures to the agent (KPROF_SELF_COST), which writes them into each
// process's meta (`self_cost`); the analysis takes them out of the idle gaps it prices
// (docs/hints.md, "kprof's own cost"). One text form, shared by the three.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kprof {

struct SelfCost {
  double launch_ns = 0;  ///< a call that launches GPU work: its API record and its GPU record
  double api_ns = 0;     ///< any other API call: its record
  double range_ns = 0;   ///< an NVTX range (push and pop)
  /// When and how: "calibrated 2026-11-27T07:30:00Z" (with " (cached)" when reused).
  std::string source;

  bool operator==(const SelfCost&) const = default;
};

/// "launch_ns=2100.0;api_ns=350.0;range_ns=120.0;source=..." (the source last: it may hold
/// anything but a newline).
std::string FormatSelfCost(const SelfCost& c);
/// The figures of FormatSelfCost's text; nothing when it is not that form, or a figure is
/// negative, not finite or above 1 ms (no recording costs that per event).
std::optional<SelfCost> ParseSelfCost(std::string_view text);

}  // namespace kprof
