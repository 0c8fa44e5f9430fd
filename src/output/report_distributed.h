// Internal to the output library: the per-GPU and per-rank tables and the collectives of a run
// on several GPUs or ranks (docs/distributed.md), for the table, Markdown and JSON reports
// (report.cpp). Written only when Analysis::dist.Multi(): every other report stays as it was.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "kprof/analysis.h"

namespace kprof::report_dist {

/// "GPUs" and "Ranks" tables and the collectives' line, for the terminal.
void Tables(std::ostream& out, const Analysis& a);
/// The same as Markdown tables.
void Markdown(std::ostream& out, const Analysis& a);
/// Adds "gpus", "ranks" and "collectives" to the JSON summary document.
void Json(nlohmann::ordered_json& j, const Analysis& a);
/// "over 2 GPUs" wording of the GPU busy line, "" for one GPU.
std::string GpusNote(const RunSummary& s);

}  // namespace kprof::report_dist
