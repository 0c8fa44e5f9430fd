// Internal to the analysis library: kprof's own cost taken out of the idle gaps it prices
// (docs/hints.md, "kprof's own cost").
#pragma once

#include "kprof/timeline.h"

namespace kprof::detail {

/// With the process's measured cost per event (meta `self_cost`), takes out of each priced
/// gap's rest (Short, Long, Setup) what kprof's recording of the host's calls and ranges between
/// the launch before the gap and the launch after it cost: the host would have reached the next
/// launch that much earlier. Sets ProcessTimeline::self_cost and self_cost_ns. Nothing without
/// the figures (runs recorded without calibration, foreign traces).
void TakeOutSelfCost(ProcessTimeline& t);

}  // namespace kprof::detail
