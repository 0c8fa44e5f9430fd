// Internal to the CLI: kprof's own cost per event on this machine, for `kprof run` to pass to the
// agent (kprof/self_cost.h; docs/hints.md, "kprof's own cost").
#pragma once

#include <optional>
#include <string>

#include "kprof/agent_config.h"
#include "kprof/self_cost.h"

namespace kprof::cli {

/// kprof-calibrate run without the agent and with it (`agent`, asked what `cfg` asks, without
/// windows or counters, writing into a temporary folder), the difference of each figure; or the
/// figure measured so within the last day on this machine for the same agent and kinds, from
/// the cache (`mode` "auto"; "fresh": measured again; "off": nothing). Nothing, with `why` set,
/// when it cannot be measured (no calibration program, no GPU, a CUDA error).
std::optional<SelfCost> MeasureSelfCost(const std::string& agent, const AgentConfig& cfg,
                                        const std::string& mode, std::string& why);

}  // namespace kprof::cli
