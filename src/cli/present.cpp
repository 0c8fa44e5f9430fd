#include "cli/present.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <iostream>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/html.h"
#include "kprof/output.h"
#include "kprof/output_file.h"

namespace kprof::cli {

namespace {

/// The sources of a run's processes, for the HTML page's title.
std::string RunTitle(const Run& run) {
  std::string t;
  for (const auto& p : run.processes) {
    if (t.size() > 160) return t + ", ...";
    t += (t.empty() ? "" : ", ") + p.source;
  }
  return t;
}

}  // namespace

void AddViewOptions(CLI::App& app, ViewOptions& v, bool with_output) {
  app.add_option(
         "--by", v.by,
         "Group GPU time by kernel|op|range-path|stream|device|graph|module|source|compiled")
      ->capture_default_str();
  app.add_option("--format", v.format, "Output format: table|csv|json|md")->capture_default_str();
  app.add_option("--top", v.top, "Rows shown per table (0 = all)")->capture_default_str();
  app.add_option("--sort", v.sort, "Sort rows by gpu|calls|cpu|name")->capture_default_str();
  app.add_option("--filter", v.filter, "Keep rows whose name matches this regular expression");
  app.add_option("--trace", v.trace, "Also write a Chrome trace (Perfetto) to this file (.gz ok)");
  app.add_option("--html", v.html,
                 "Also write a self-contained HTML report (timeline, tables, hints) to this file");
  app.add_flag("--no-hints", v.no_hints, "Do not compute bottleneck hints");
  if (with_output) {
    app.add_option("-o,--output", v.output, "Write the report to this file");
    app.add_flag("--force", v.force, "Overwrite the -o, --trace and --html files if they exist");
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
  return out;
}

void Present(const Run& run, const ViewOptions& v, const std::string& saved_to, ViewOutputs& out) {
  AnalysisOptions ao;
  auto by = ParseGroupBy(v.by);
  if (!by)
    throw InputError("--by " + v.by +
                     ": expected kernel|op|range-path|stream|device|graph|module|source|compiled");
  ao.by = *by;
  auto fmt = ParseFormat(v.format);
  if (!fmt) throw InputError("--format " + v.format + ": expected table|csv|json|md");
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
  if (out.html) {
    HtmlOptions ho;
    ho.title = "kprof report: " + (saved_to.empty() ? RunTitle(run) : saved_to);
    WriteHtmlPage(out.html->stream(), ho.title, HtmlReportData(timeline, hints, ho));
    out.html->Commit();
    std::cerr << "kprof: HTML report written to " << v.html << "\n";
  }
}

}  // namespace kprof::cli
