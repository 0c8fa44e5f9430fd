// The part of `kprof run` and `kprof report` that analyses a Run and prints it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kprof/trace.h"

namespace kprof::cli {

struct ViewOptions {
  std::string by = "op";
  std::string format = "table";
  size_t top = 15;
  std::string sort = "gpu";
  std::string filter;
  std::string trace;   ///< write a Chrome trace here too
  std::string output;  ///< write the report here instead of stdout
  std::string html;    ///< write the HTML report here too
  bool force = false;  ///< overwrite an existing --html file
  bool no_hints = false;
  bool quiet = false;  ///< kprof run --quiet: no report printed; --trace and --html still written
};

/// Adds --by, --format, --top, --sort, --filter, --trace, --html, --no-hints (and -o and --force
/// for report; kprof run has its own --force, which also sets `force`).
void AddViewOptions(CLI::App& app, ViewOptions& v, bool with_output);

/// Analyses `run` and writes the report. Throws InputError on a bad option value or I/O error.
void Present(const Run& run, const ViewOptions& v, const std::string& saved_to);

}  // namespace kprof::cli
