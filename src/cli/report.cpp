// kprof report FILE...: re-analyses saved runs (kprof files, run directories, Chrome traces).
#include "cli/common.h"
#include "cli/present.h"
#include "kprof/cli.h"

namespace kprof {

int CmdReport(const std::vector<std::string>& args) {
  CLI::App app{
      "Analyse saved runs: kprof run directories or files, Chrome trace JSON (also "
      "PyTorch profiler traces, plain or gzip). Several inputs merge.",
      "kprof report"};
  std::vector<std::string> files;
  cli::ViewOptions v;
  app.add_option("inputs", files,
                 "Run directories, .kprof files, Chrome trace JSON, or directories of Chrome "
                 "traces (one per rank, as --trace-dir writes them)")
      ->required();
  cli::AddViewOptions(app, v, true);
  if (auto rc = cli::Parse(app, args)) return *rc;
  try {
    cli::ViewOutputs out = cli::OpenOutputs(v);  // a bad output path fails before the reading
    Run run = ReadInputs(files);
    cli::WarnIncomplete("report", run);
    cli::Present(run, v, "", out);
  } catch (const InputError& e) {
    return cli::UsageError("report", e.what());
  }
  return kExitOk;
}

}  // namespace kprof
