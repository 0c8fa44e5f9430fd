// kprof export RUN... --sqlite FILE: the run, its views and hints as an SQLite database whose
// core tables follow Nsight Systems' export schema (docs/sqlite.md).
#include <cstdio>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli/common.h"
#include "kprof/analysis.h"
#include "kprof/cli.h"
#include "kprof/hints.h"
#include "kprof/output_file.h"
#include "kprof/progress.h"
#include "kprof/sqlite_export.h"

namespace kprof {

int CmdExport(const std::vector<std::string>& args) {
  CLI::App app{
      "Export saved runs (kprof run directories or files, Chrome/PyTorch traces) as an SQLite "
      "database with Nsight Systems' table layout (docs/sqlite.md).",
      "kprof export"};
  std::vector<std::string> files;
  std::string sqlite_path;
  bool force = false;
  app.add_option("inputs", files, "Run directories, .kprof files or Chrome trace JSON")->required();
  app.add_option("--sqlite", sqlite_path, "Write the SQLite database to this file")->required();
  app.add_flag("--force", force, "Overwrite the output file if it exists");
  if (auto rc = cli::Parse(app, args)) return *rc;
  try {
    // The output is checked (and its temporary file made) before a possibly long read.
    OutputFile out(sqlite_path, force);
    Run run = ReadInputs(files);
#if defined(__GLIBC__)
    malloc_trim(0);  // reading's working memory back before the analysis (as kprof report)
#endif
    const Timeline timeline = BuildTimeline(run);
    AnalysisOptions ao;
    ao.every_memory_owner = true;  // the owner tables list every owner (one memory summary)
    const Analysis analysis = Analyze(timeline, ao);
    const std::vector<Hint> hints = ComputeHints(timeline, analysis);
    SqliteExportOptions opts;
    opts.force = force;
    opts.progress = ProgressToTerminal();
    WriteSqlite(out, timeline, analysis, hints, opts);
    std::fprintf(stderr, "kprof: SQLite database written to %s (docs/sqlite.md)\n",
                 sqlite_path.c_str());
  } catch (const InputError& e) {
    return cli::UsageError("export", e.what());
  }
  return kExitOk;
}

}  // namespace kprof
