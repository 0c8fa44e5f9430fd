// Internal to the output library: device memory by owner and the failed allocations
// (docs/memory.md), for the table, JSON and CSV reports (report.cpp, summary_json.cpp); --by
// memory is refused in Markdown (src/cli/present.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "kprof/analysis.h"

namespace kprof::report_memory {

/// The failed allocations, first of all in a report: what was asked for, what held the memory.
void OutOfMemory(std::ostream& out, const Analysis& a);
/// "Device memory": each process and device's peak by owner (the two highest; `all`: every one).
void Peaks(std::ostream& out, const Analysis& a, bool all);
/// Adds "memory" to the JSON summary document (when anything was recorded).
void Json(nlohmann::ordered_json& j, const Analysis& a);
/// --by memory --format csv: one row per owner of each state (the peaks, the described failures)
/// by library, by owner and by range, and per op of what PyTorch's allocator held after the last
/// optimizer step; `field` quotes a text field.
void Csv(std::ostream& out, const Analysis& a, std::string (*field)(const std::string&));

}  // namespace kprof::report_memory
