// Shared by the HTML report's sources (src/output/html/): each writes one part of the data
// document (docs/html.md, "Data").
#pragma once

#include "kprof/analysis.h"
#include "kprof/html.h"
#include "kprof/timeline.h"
#include "output/html/html_json.h"

namespace kprof::html {

/// "timeline": GPU tracks per process, device and stream; NVTX tracks per process and thread;
/// the longest items in full, the rest as per-bin busy time and counts. Also "util" (busy time
/// per device and bin), "memory" (device memory in use over time) and "memory_by_owner" (held
/// by owner over time per process and device, with what was live at the peak).
void WriteTimeline(JsonWriter& j, const Timeline& tl, const Analysis& an, const HtmlOptions& o);

/// Start of the run's time axis (ns) and its length.
struct Span {
  uint64_t start = 0, len = 1;
  uint64_t Rel(uint64_t t) const { return t > start ? t - start : 0; }
};

}  // namespace kprof::html
