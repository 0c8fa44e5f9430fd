// Output writers: terminal table, CSV, JSON (versioned schema, docs/json-schema.md), Markdown,
// and Chrome trace JSON (Perfetto / chrome://tracing / PyTorch-profiler-trace tools).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"

namespace kprof {

enum class Format { Table, Csv, Json, Markdown };
std::optional<Format> ParseFormat(const std::string& s);  ///< "table|csv|json|md"

/// Version of the JSON summary schema (docs/json-schema.md). Bump on incompatible change.
inline constexpr int kJsonSchemaVersion = 1;

struct ReportOptions {
  Format format = Format::Table;
  size_t top = 15;       ///< rows shown in the table/markdown views
  bool color = false;    ///< ANSI colour in table output
  std::string saved_to;  ///< "results saved to ..." line, empty = none
};

/// Writes the analysis (and hints) in the requested format.
void WriteReport(std::ostream& out, const Run& run, const Analysis& analysis,
                 const std::vector<Hint>& hints, const ReportOptions& opts);

/// The totals block of the table report as (label, value) lines, in its order.
std::vector<std::pair<std::string, std::string>> TotalsLines(const RunSummary& s);

/// JSON summary as a string (the same document WriteReport writes for Format::Json).
std::string ReportJson(const Run& run, const Analysis& analysis, const std::vector<Hint>& hints);

/// Writes a Chrome trace of the timeline's run to `path` (".gz" suffix: gzip) through an
/// OutputFile: an existing file is replaced only with `force`, a symlink there is never followed.
/// Throws InputError (the OutputFile checks, I/O errors).
void WriteChromeTrace(const std::string& path, const Timeline& timeline, bool force = false);
/// Same, into an OutputFile opened by the caller (its place checked before the work); commits it.
class OutputFile;
void WriteChromeTrace(OutputFile& out, const Timeline& timeline);
/// Same, to a stream (uncompressed).
void WriteChromeTrace(std::ostream& out, const Timeline& timeline);

/// Escapes a string for JSON: quotes, backslashes, control characters; invalid UTF-8 bytes
/// are replaced by U+FFFD. Appends to `out`.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace kprof
