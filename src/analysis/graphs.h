// Internal to the analysis library: builds the GraphIndex of a process (kprof/timeline.h).
#pragma once

#include <vector>

#include "kprof/analysis.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof::detail {

/// Fills `g` from the GraphNode, GraphEvent and GraphLaunch records of `p`; `index` places each
/// node in the ranges of the thread that made it.
void BuildGraphIndex(const ProcessTrace& p, const ProcessIndex& index, GraphIndex& g);

/// The graph view: every launched graph of the run, most GPU time first.
std::vector<GraphRow> GraphRows(const Timeline& tl);

}  // namespace kprof::detail
