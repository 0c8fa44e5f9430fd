#include "cli/present.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/html.h"
#include "kprof/output.h"
#include "kprof/output_file.h"

namespace kprof::cli {

namespace {

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

/// The sources of a run's processes, for the HTML page's title.
std::string RunTitle(const Run& run) {
  std::string t;
  for (const auto& p : run.processes) {
    if (t.size() > 160) return t + ", ...";
    t += (t.empty() ? "" : ", ") + p.source;
  }
  return t;
}

/// --trace-dir: the per-rank traces, their line on stderr, and warnings about what HTA would
/// make of the directory.
void WriteTraceDir(const Timeline& timeline, const ViewOptions& v) {
  const Run& run = *timeline.run;
  const std::vector<std::string> written = WriteRankTraces(v.trace_dir, timeline, v.force);
  std::cerr << "kprof: " << written.size() << " per-rank Chrome trace"
            << (written.size() == 1 ? "" : "s") << " written to " << v.trace_dir << "\n";
  std::vector<std::string> unranked;
  std::map<int, std::vector<uint32_t>> by_rank;
  const std::vector<RankTraceFile> files = RankTraceFiles(run);
  for (const RankTraceFile& f : files) {
    const ProcessTrace& p = run.processes[f.process];
    if (p.rank >= 0) by_rank[p.rank].push_back(p.pid);
  }
  if (!by_rank.empty())
    for (const auto& p : run.processes)  // a launcher that made no CUDA context is no rank
      if (p.rank < 0 && p.Meta("contexts") != "0") unranked.push_back(std::to_string(p.pid));
  if (!unranked.empty())
    std::cerr << "kprof: note: " << unranked.size() << " process"
              << (unranked.size() == 1 ? "" : "es") << " without a rank (pid "
              << Join(unranked, ", ") << ") left out of " << v.trace_dir << "\n";
  for (const auto& [rank, pids] : by_rank) {
    if (pids.size() < 2) continue;
    std::vector<std::string> s;
    for (uint32_t pid : pids) s.push_back(std::to_string(pid));
    std::cerr << "kprof: warning: rank " << rank << " is held by " << pids.size()
              << " processes (pid " << Join(s, ", ")
              << "); Holistic Trace Analysis keeps one file per rank\n";
  }
  // HTA reads every *.json and *.gz file of the directory.
  size_t others = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(v.trace_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (IsRankTraceName(name)) continue;
    if (name.ends_with(".json") || name.ends_with(".gz")) ++others;
  }
  if (others > 0)
    std::cerr << "kprof: warning: " << v.trace_dir << " also holds " << others
              << " other .json/.gz file" << (others == 1 ? "" : "s")
              << ", which Holistic Trace Analysis would read too\n";
}

}  // namespace

void AddViewOptions(CLI::App& app, ViewOptions& v, bool with_output) {
  app.add_option(
         "--by", v.by,
         "Group GPU time by kernel|op|range-path|stream|device|graph|module|source|compiled; "
         "memory: device memory by owner at each peak (docs/memory.md)")
      ->capture_default_str();
  app.add_option("--format", v.format, "Output format: table|csv|json|md")->capture_default_str();
  app.add_option("--top", v.top, "Rows shown per table (0 = all)")->capture_default_str();
  app.add_option("--sort", v.sort, "Sort rows by gpu|calls|cpu|name")->capture_default_str();
  app.add_option("--filter", v.filter, "Keep rows whose name matches this regular expression");
  app.add_option("--trace", v.trace, "Also write a Chrome trace (Perfetto) to this file (.gz ok)");
  app.add_option("--trace-dir", v.trace_dir,
                 "Also write one Chrome trace per rank (PyTorch profiler conventions, "
                 "distributedInfo) into this directory, for Holistic Trace Analysis");
  app.add_option("--html", v.html,
                 "Also write a self-contained HTML report (timeline, tables, hints) to this file");
  app.add_flag("--no-hints", v.no_hints, "Do not compute bottleneck hints");
  app.add_option("--window", v.window,
                 "Only the K-th capture window of each process (1 = the first; kprof capture "
                 "says which): its records, its hints")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}));
  if (with_output) {
    app.add_option("-o,--output", v.output, "Write the report to this file");
    app.add_flag("--force", v.force,
                 "Overwrite the -o, --trace and --html files if they exist, and the per-rank "
                 "traces in the --trace-dir directory");
  }
}

ViewOutputs OpenOutputs(const ViewOptions& v) {
  auto open = [&](const std::string& path) {
    return path.empty() ? nullptr : std::make_unique<OutputFile>(path, v.force);
  };
  ViewOutputs out;
  out.report = open(v.quiet ? std::string() : v.output);
  out.trace = open(v.trace);
  out.html = open(v.html);
  if (!v.trace_dir.empty()) CheckRankTraceDir(v.trace_dir, v.force);
  return out;
}

void Present(const Run& whole, const ViewOptions& v, const std::string& saved_to,
             ViewOutputs& out) {
  const Run selected = v.window != 0 ? KeepWindow(whole, v.window) : Run();
  const Run& run = v.window != 0 ? selected : whole;
  AnalysisOptions ao;
  auto by = ParseGroupBy(v.by);
  if (!by)
    throw InputError(
        "--by " + v.by +
        ": expected kernel|op|range-path|stream|device|graph|module|source|compiled|memory");
  ao.by = *by;
  auto fmt = ParseFormat(v.format);
  if (!fmt) throw InputError("--format " + v.format + ": expected table|csv|json|md");
  if (ao.by == GroupBy::Memory && *fmt == Format::Markdown)
    throw InputError("--by memory: shown by --format table, json and csv, not " + v.format);
  if (v.sort == "gpu")
    ao.sort = AnalysisOptions::Sort::Gpu;
  else if (v.sort == "calls")
    ao.sort = AnalysisOptions::Sort::Calls;
  else if (v.sort == "cpu")
    ao.sort = AnalysisOptions::Sort::Cpu;
  else if (v.sort == "name")
    ao.sort = AnalysisOptions::Sort::Name;
  else
    throw InputError("--sort " + v.sort + ": expected gpu|calls|cpu|name");
  ao.filter = v.filter;
  // JSON and CSV are for programs: every row. Tables show the top rows.
  ao.top = (*fmt == Format::Json || *fmt == Format::Csv) ? 0 : v.top;

#if defined(__GLIBC__)
  // Reading, the analysis and the hints each free their working memory when done; giving it
  // back between them keeps the peak at the largest phase rather than their sum (large traces:
  // docs/benchmarks.md).
  malloc_trim(0);
#endif
  // The timeline is built once; the views, the hints and the Chrome trace read it.
  const Timeline timeline = BuildTimeline(run);
  Analysis an = Analyze(timeline, ao);
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  std::vector<Hint> hints;
  if (!v.no_hints) hints = ComputeHints(timeline, an);

  ReportOptions ro;
  ro.format = *fmt;
  ro.top = v.top;
  ro.saved_to = saved_to;
  if (v.quiet) {
    // Nothing printed; the files asked for below are still written.
  } else if (out.report) {
    WriteReport(out.report->stream(), run, an, hints, ro);
    out.report->Commit();
  } else {
    ro.color = ::isatty(1) != 0;
    WriteReport(std::cout, run, an, hints, ro);
    std::cout.flush();
  }
  if (out.trace) {
    WriteChromeTrace(*out.trace, timeline);
    std::cerr << "kprof: Chrome trace written to " << v.trace << "\n";
  }
  if (!v.trace_dir.empty()) WriteTraceDir(timeline, v);
  if (out.html) {
    HtmlOptions ho;
    ho.title = "kprof report: " + (saved_to.empty() ? RunTitle(run) : saved_to);
    WriteHtmlPage(out.html->stream(), ho.title, HtmlReportData(timeline, hints, ho));
    out.html->Commit();
    std::cerr << "kprof: HTML report written to " << v.html << "\n";
  }
}

}  // namespace kprof::cli
