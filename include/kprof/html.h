// The self-contained HTML report (docs/html.md): one file that opens offline, with the hints,
// a zoomable timeline, sortable tables, GPU utilisation and device memory over time; and the
// HTML page of a `kprof diff`. The page's data is one JSON document inside
// <script type="application/json" id="kprof-data">, escaped so that no string can end the
// script (<, >, &, U+2028 and U+2029 as \u escapes; invalid UTF-8 as U+FFFD).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/compare.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"

namespace kprof {

/// What the page draws in full detail, and how it summarises the rest (docs/html.md, "Limits").
struct HtmlOptions {
  std::string title;            ///< shown in the page header and <title>
  size_t max_slices = 200'000;  ///< GPU activities drawn individually (the longest ones)
  size_t max_ranges = 200'000;  ///< NVTX ranges drawn individually (the longest ones)
  size_t bins = 4'000;          ///< time bins of the density lanes (activities past the limit)
  size_t util_bins = 1'000;     ///< time bins of the utilisation chart
  size_t max_memory_points = 20'000;  ///< memory points per device before taking the bin maxima
  size_t max_rows = 5'000;            ///< rows per table (the top rows by GPU time)
};

/// The page's data document (JSON, HTML-safe) for a run. Analyses the timeline's run itself
/// (every view, all rows, the memory timeline); `hints` are shown as given.
std::string HtmlReportData(const Timeline& timeline, const std::vector<Hint>& hints,
                           const HtmlOptions& opts);

/// The data document of a diff page. `base` and `now` name the inputs of each side.
std::string HtmlDiffData(const DiffResult& diff, const std::vector<std::string>& base,
                         const std::vector<std::string>& now, const HtmlOptions& opts);

/// The whole page around a data document (from HtmlReportData or HtmlDiffData).
void WriteHtmlPage(std::ostream& out, const std::string& title, const std::string& data);

/// The data document inside a page written by WriteHtmlPage (for tests); empty if none.
std::string HtmlPageData(const std::string& page);

/// Escapes text for HTML character data and attribute values (& < > " ').
std::string HtmlEscape(std::string_view s);

}  // namespace kprof
