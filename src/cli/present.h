// The part of `kprof run` and `kprof report` that analyses a Run and prints it.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kprof/output_file.h"
#include "kprof/trace.h"

namespace kprof::cli {

struct ViewOptions {
  std::string by = "op";
  std::string format = "table";
  size_t top = 15;
  std::string sort = "gpu";
  std::string filter;
  std::string trace;      ///< write a Chrome trace here too
  std::string trace_dir;  ///< write one Chrome trace per rank into this directory too
  std::string output;     ///< write the report here instead of stdout
  std::string html;       ///< write the HTML report here too
  bool force = false;     ///< overwrite existing -o, --trace, --trace-dir and --html files
  bool no_hints = false;
  uint64_t window = 0;  ///< --window K: only each process's K-th capture window (0: all)
  bool quiet = false;   ///< kprof run --quiet: no report printed; the files asked for still written
};

/// Adds --by, --format, --top, --sort, --filter, --trace, --trace-dir, --html, --no-hints (and -o
/// and --force for report; kprof run has its own --force, which also sets `force`).
void AddViewOptions(CLI::App& app, ViewOptions& v, bool with_output);

/// The files a view writes, each an OutputFile (null when not asked for): opening them checks
/// their places (a directory, an existing file without --force, a missing directory), so a bad
/// path fails before the work; so is the place of --trace-dir (CheckRankTraceDir). Throws
/// InputError naming the path.
struct ViewOutputs {
  std::unique_ptr<OutputFile> report;  ///< -o
  std::unique_ptr<OutputFile> trace;   ///< --trace
  std::unique_ptr<OutputFile> html;    ///< --html
};
ViewOutputs OpenOutputs(const ViewOptions& v);

/// Analyses `run` and writes the report (to stdout, or to out.report), the trace and the page.
/// Throws InputError on a bad option value or I/O error.
void Present(const Run& run, const ViewOptions& v, const std::string& saved_to, ViewOutputs& out);

}  // namespace kprof::cli
