// kprof diff BASE NEW: compares runs for CI (comparison in src/analysis/compare*.cpp,
// docs/ci.md). Also the loading of diff/check inputs: run directories (repN expansion), kprof
// files, Chrome traces and kprof JSON summaries.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ci_output.h"
#include "cli/load_runs.h"
#include "common.h"
#include "kprof/cli.h"
#include "kprof/compare.h"
#include "kprof/html.h"
#include "kprof/output.h"
#include "kprof/output_file.h"
#include "kprof/summary_json.h"

namespace kprof {
namespace {

/// The diff's outcome in a word: "regression", "improvement" (none, and at least one
/// improvement) or "pass". Figures not compared (a side did not record them) count for neither.
std::string Outcome(const DiffResult& r) {
  return r.Regressed() ? "regression" : r.Improved() ? "improvement" : "pass";
}

namespace fs = std::filesystem;
using namespace cli;  // the shared CI writers (ci_output.h)
using nlohmann::json;
using nlohmann::ordered_json;

/// JSON summaries are small (KB..MB); larger JSON files are traces and are never slurped here.
constexpr uintmax_t kMaxSummaryBytes = 64u << 20;

// ---- JSON summary ---------------------------------------------------------------------------

/// The file's text when it is small enough to be a summary and starts like a JSON object.
std::optional<std::string> ReadSmallJson(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size > kMaxSummaryBytes) return std::nullopt;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open");
  std::string text(static_cast<size_t>(size), '\0');
  f.read(text.data(), static_cast<std::streamsize>(size));
  if (!f) throw InputError(path + ": read failed");
  return text;
}

RunDigest DigestOfRun(const std::string& path) {
  Run run = ReadInputs({path});
  AnalysisOptions opts;
  opts.by = GroupBy::Op;
  opts.top = 0;
  const Timeline timeline = BuildTimeline(run);
  Analysis a = Analyze(timeline, opts);
  std::vector<Hint> hints = ComputeHints(timeline, a);
  return MakeDigest(a, hints, path);
}

/// repN subdirectories of `dir` (N > 0), in N order; empty when there are none.
std::vector<std::pair<uint64_t, std::string>> RepDirs(const std::string& dir, bool& has_files) {
  std::vector<std::pair<uint64_t, std::string>> reps;
  has_files = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".kprof") has_files = true;
    const uint32_t n = e.is_directory() ? RepNumber(name) : 0;
    if (n > 0) reps.emplace_back(n, e.path().string());
  }
  if (ec) throw InputError(dir + ": " + ec.message());
  std::sort(reps.begin(), reps.end());
  return reps;
}

// ---- Writers --------------------------------------------------------------------------------

ordered_json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (std::floor(v) == v && std::fabs(v) < 9e15) return static_cast<int64_t>(v);
  return v;
}

ordered_json MetricJson(const MetricDiff& m) {
  ordered_json base = ordered_json::array(), now = ordered_json::array();
  for (double v : m.base_values) base.push_back(Num(v));
  for (double v : m.new_values) now.push_back(Num(v));
  ordered_json j = {
      {"metric", m.metric},
      {"base_median", Num(m.base_median)},
      {"new_median", Num(m.new_median)},
      {"abs_change", Num(m.abs_change)},
      {"rel_change", Num(m.rel_change)},
      {"p_value", m.p_value ? Num(*m.p_value) : ordered_json(nullptr)},
      {"p_exact", m.p_exact},
      {"rel_change_ci95", m.rel_ci ? ordered_json::array({Num(m.rel_ci->lo), Num(m.rel_ci->hi)})
                                   : ordered_json(nullptr)},
      {"verdict", VerdictName(m.verdict)},
      {"reason", m.reason},
      {"base_values", base},
      {"new_values", now}};
  return j;
}

ordered_json ItemsJson(const std::vector<ItemDiff>& items) {
  ordered_json arr = ordered_json::array();
  for (const auto& i : items) {
    ordered_json metrics = ordered_json::array();
    for (const auto& m : i.metrics) metrics.push_back(MetricJson(m));
    arr.push_back({{"name", i.name},
                   {"verdict", VerdictName(i.verdict)},
                   {"impact_ns", Num(i.impact_ns)},
                   {"metrics", metrics}});
    if (!i.note.empty()) arr.back()["note"] = i.note;
  }
  return arr;
}

std::string DiffJson(const DiffResult& r) {
  ordered_json j;
  j["schema"] = "kprof.diff";
  j["schema_version"] = 1;
  j["result"] = Outcome(r);
  j["mode"] = r.mode == DiffMode::Test ? "test" : "threshold-only";
  j["mode_note"] = r.mode_note;
  j["base_runs"] = r.base_runs;
  j["new_runs"] = r.new_runs;
  j["options"] = {{"threshold", r.options.threshold},
                  {"min_time_ns", r.options.min_time_ns},
                  {"min_memory_bytes", r.options.min_memory_bytes},
                  {"alpha", r.options.alpha},
                  {"min_runs_for_test", r.options.min_runs_for_test}};
  j["counts"] = {{"regressions", r.Count(Verdict::Regression)},
                 {"improvements", r.Count(Verdict::Improvement)},
                 {"changed", r.Count(Verdict::Changed)},
                 {"added", r.Count(Verdict::Added)},
                 {"removed", r.Count(Verdict::Removed)},
                 {"not_compared", r.Count(Verdict::NotCompared)}};
  j["run"] = ItemsJson(r.run);
  j["ops"] = ItemsJson(r.ops);
  j["kernels"] = ItemsJson(r.kernels);
  if (!r.modules.empty()) j["modules"] = ItemsJson(r.modules);
  ordered_json hints = ordered_json::array();
  for (const auto& h : r.hints)
    hints.push_back({{"id", h.id},
                     {"severity", SeverityName(h.severity)},
                     {"summary", h.summary},
                     {"change", h.appeared ? "appeared" : "gone"},
                     {"base_runs", h.base_runs},
                     {"new_runs", h.new_runs}});
  j["hints"] = hints;
  j["warnings"] = r.warnings;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

/// Rows shown in table/Markdown: the first `top` by impact plus every flagged one.
/// Past the first `top`, items whose calls alone changed and that ran no GPU work on either
/// side (host-only ranges: torch.compile's phases, for one) are left to the JSON output.
std::vector<const ItemDiff*> Shown(const std::vector<ItemDiff>& items, size_t top) {
  std::vector<const ItemDiff*> out;
  for (size_t i = 0; i < items.size(); ++i) {
    const ItemDiff& it = items[i];
    const MetricDiff* t = it.metrics.size() > 1 ? &it.metrics.back() : nullptr;
    const bool host_only = t != nullptr && t->base_median == 0 && t->new_median == 0 &&
                           it.verdict != Verdict::Regression;
    if (top == 0 || i < top || (it.verdict != Verdict::Same && !host_only)) out.push_back(&it);
  }
  return out;
}

std::string Headline(const DiffResult& r) {
  std::vector<std::string> parts;
  auto add = [&](Verdict v, const char* one, const char* many) {
    if (size_t n = r.Count(v)) parts.push_back(fmt::format("{} {}", n, n == 1 ? one : many));
  };
  add(Verdict::Regression, "regression", "regressions");
  add(Verdict::Improvement, "improvement", "improvements");
  add(Verdict::Changed, "count change", "count changes");
  add(Verdict::Added, "added", "added");
  add(Verdict::Removed, "removed", "removed");
  add(Verdict::NotCompared, "not compared", "not compared");
  return parts.empty() ? std::string("no change") : fmt::format("{}", fmt::join(parts, ", "));
}

std::string PCell(const MetricDiff& m) {
  if (!m.p_value) return "-";
  return *m.p_value < 0.001 ? std::string("<0.001") : fmt::format("{:.3f}", *m.p_value);
}

std::string ChangeCell(const MetricDiff& m) {
  if (m.kind == MetricKind::Time)
    return m.abs_change == 0 ? std::string("0")
                             : fmt::format("{} ({})", FormatSignedDuration(m.abs_change),
                                           FormatPercent(m.rel_change));
  if (m.abs_change == 0) return "0";
  const std::string v = FormatMetric(std::fabs(m.abs_change), m.kind);
  return fmt::format("{}{} ({})", m.abs_change > 0 ? "+" : "-", v, FormatPercent(m.rel_change));
}

std::string CallsCell(const ItemDiff& i) {
  const MetricDiff* c = i.Find("calls");
  if (!c) return "";
  if (c->base_median == c->new_median) return FormatMetric(c->new_median, MetricKind::Count);
  return fmt::format("{} -> {}", FormatMetric(c->base_median, MetricKind::Count),
                     FormatMetric(c->new_median, MetricKind::Count));
}

const MetricDiff& TimeMetric(const ItemDiff& i) { return i.metrics.back(); }

/// The reason shown for an item: its flagged metric's reason (calls first when both).
std::string ItemReason(const ItemDiff& i) {
  if (!i.note.empty()) return i.note;
  std::vector<std::string> parts;
  for (const auto& m : i.metrics)
    if (!m.reason.empty())
      parts.push_back(i.section == Section::Run ? m.reason : m.metric + " " + m.reason);
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string DiffTable(const DiffResult& r, size_t top) {
  std::string out =
      fmt::format("kprof diff: {} ({})\n{}\n",
                  r.Regressed() ? std::string("REGRESSION") : Outcome(r), Headline(r), r.mode_note);
  TextTable run({"run total", "base", "new", "change", "p", "verdict", "why"},
                {false, true, true, true, true, false, false});
  for (const auto& i : r.run) {
    const MetricDiff& m = i.metrics.front();
    run.Add({i.name, FormatMetric(m.base_median, m.kind), FormatMetric(m.new_median, m.kind),
             ChangeCell(m), PCell(m), VerdictName(i.verdict), m.reason});
  }
  out += "\n" + run.Render();
  auto section = [&](const char* title, const char* what, const std::vector<ItemDiff>& items) {
    const auto shown = Shown(items, top);
    out += fmt::format("\n{} ({} of {}, by impact)\n", title, shown.size(), items.size());
    if (shown.empty()) return;
    TextTable t({what, "calls", "base GPU", "new GPU", "change", "p", "verdict", "why"},
                {false, true, true, true, true, true, false, false});
    for (const ItemDiff* i : shown) {
      const MetricDiff& m = TimeMetric(*i);
      t.Add({Shorten(Printable(i->name), 60), CallsCell(*i), FormatMetric(m.base_median, m.kind),
             FormatMetric(m.new_median, m.kind), ChangeCell(m), PCell(m), VerdictName(i->verdict),
             ItemReason(*i)});
    }
    out += t.Render();
  };
  section("Ops", "op", r.ops);
  section("Kernels", "kernel", r.kernels);
  if (!r.modules.empty()) section("Modules", "module", r.modules);
  if (!r.hints.empty()) {
    out += "\nHints\n";
    for (const auto& h : r.hints)
      out += fmt::format("  {} {} ({}): {}\n", h.appeared ? "+ appeared" : "- gone     ", h.id,
                         SeverityName(h.severity), Printable(h.summary));
  }
  for (const auto& w : r.warnings) out += "warning: " + Printable(w) + "\n";
  return out;
}

std::string DiffMarkdown(const DiffResult& r, size_t top) {
  std::string out = fmt::format("### kprof diff: {} {}\n\n",
                                r.Regressed() ? ":x:" : ":white_check_mark:", Outcome(r));
  out += fmt::format("{} &middot; {}\n\n", MdCell(Headline(r)), MdCell(r.mode_note));
  out += "| run total | base | new | change | p | verdict |\n|---|--:|--:|--:|--:|---|\n";
  for (const auto& i : r.run) {
    const MetricDiff& m = i.metrics.front();
    const bool bad = i.verdict == Verdict::Regression;
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", MdCell(i.name),
                       FormatMetric(m.base_median, m.kind), FormatMetric(m.new_median, m.kind),
                       MdCell(ChangeCell(m)), PCell(m),
                       bad ? "**regression**" : VerdictName(i.verdict));
  }
  auto section = [&](const char* title, const char* what, const std::vector<ItemDiff>& items) {
    const auto shown = Shown(items, top);
    out += fmt::format("\n#### {} ({} of {}, by impact)\n\n", title, shown.size(), items.size());
    if (shown.empty()) return;
    out += fmt::format("| {} | calls | base GPU | new GPU | change | p | verdict |\n", what);
    out += "|---|--:|--:|--:|--:|--:|---|\n";
    for (const ItemDiff* i : shown) {
      const MetricDiff& m = TimeMetric(*i);
      const bool bad = i->verdict == Verdict::Regression;
      out +=
          fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", MdCell(Shorten(i->name, 100), true),
                      MdCell(CallsCell(*i)), FormatMetric(m.base_median, m.kind),
                      FormatMetric(m.new_median, m.kind), MdCell(ChangeCell(m)), PCell(m),
                      bad ? "**regression**" : VerdictName(i->verdict));
    }
  };
  section("Ops", "op", r.ops);
  section("Kernels", "kernel", r.kernels);
  if (!r.modules.empty()) section("Modules", "module", r.modules);
  if (!r.hints.empty()) {
    out += "\n#### Hints\n\n";
    for (const auto& h : r.hints)
      out += fmt::format("- {} <code>{}</code> ({}): {}\n", h.appeared ? "appeared" : "went away",
                         MdCell(h.id), SeverityName(h.severity), MdCell(h.summary));
  }
  if (!r.warnings.empty()) {
    out += "\n";
    for (const auto& w : r.warnings) out += "> warning: " + MdCell(w) + "\n";
  }
  return out;
}

std::string DiffJunit(const DiffResult& r) {
  std::string cases;
  size_t tests = 0, failures = 0;
  auto add = [&](const char* cls, const ItemDiff& i) {
    ++tests;
    cases += fmt::format("    <testcase classname=\"kprof.diff.{}\" name=\"{}\"", cls,
                         XmlEscape(i.name));
    const std::string why = ItemReason(i);
    if (i.verdict == Verdict::Regression) {
      ++failures;
      cases += fmt::format(
          ">\n      <failure type=\"regression\" message=\"{}\">{}</failure>\n"
          "    </testcase>\n",
          XmlEscape(why), XmlEscape(r.mode_note));
    } else if (!why.empty() || i.verdict != Verdict::Same) {
      cases += fmt::format(">\n      <system-out>{}: {}</system-out>\n    </testcase>\n",
                           VerdictName(i.verdict), XmlEscape(why));
    } else {
      cases += "/>\n";
    }
  };
  for (const auto& i : r.run) add("run", i);
  for (const auto& i : r.ops) add("op", i);
  for (const auto& i : r.kernels) add("kernel", i);
  for (const auto& i : r.modules) add("module", i);
  return cli::JunitDocument("kprof diff", tests, failures, 0, cases);
}

}  // namespace

// ---- Loading (shared with kprof check) -----------------------------------------------------

std::vector<RunDigest> LoadRuns(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw InputError(path + ": no such file or directory");
  if (fs::is_directory(st)) {
    bool has_files = false;
    const auto reps = RepDirs(path, has_files);
    if (reps.empty() || has_files) return {DigestOfRun(path)};
    std::vector<RunDigest> runs;
    for (const auto& [n, dir] : reps) runs.push_back(DigestOfRun(dir));
    return runs;
  }
  if (auto text = ReadSmallJson(path))
    if (auto digest = ReadSummaryJson(*text, path)) return {std::move(*digest)};
  return {DigestOfRun(path)};
}

std::vector<RunDigest> LoadAllRuns(const std::vector<std::string>& paths) {
  std::vector<RunDigest> runs;
  for (const auto& p : paths)
    for (auto& d : LoadRuns(p)) runs.push_back(std::move(d));
  return runs;
}

// ---- kprof diff -----------------------------------------------------------------------------

int CmdDiff(const std::vector<std::string>& args) {
  CLI::App app{
      "Compare runs: per op and per kernel GPU time and calls, run totals, hints. "
      "Exit 0 pass, 1 regression, 2 usage or input error.\n"
      "  kprof diff [options] BASE NEW\n"
      "  kprof diff [options] --base RUN... --new RUN...\n"
      "Each RUN: a kprof run directory (a directory of rep1..repN holds N runs), a "
      ".kprof file, a kprof JSON summary or a Chrome/PyTorch trace.",
      "kprof diff"};
  std::vector<std::string> positional, base_paths, new_paths;
  std::string threshold = "5%", min_time = "50us", min_memory = "1MiB", format = "table", output;
  double alpha = 0.05;
  size_t top = 15;
  app.add_option("runs", positional, "BASE NEW (one item each)");
  app.add_option("--base", base_paths, "Base runs (several: statistics)")->expected(1, -1);
  app.add_option("--new", new_paths, "New runs (several: statistics)")->expected(1, -1);
  app.add_option("--threshold", threshold,
                 "Smallest relative change of a median that counts (default 5%)");
  app.add_option("--min-time", min_time,
                 "Smallest absolute change of a median time that counts (default 50us)");
  app.add_option("--min-memory", min_memory,
                 "Smallest peak-memory growth that counts (default 1MiB)");
  app.add_option("--alpha", alpha, "Significance level of the Mann-Whitney U test (default 0.05)")
      ->check(CLI::Range(1e-9, 0.5));
  app.add_option("--format", format, "table|json|md|junit (default table)");
  app.add_option("-o,--output", output, "Write the result to FILE instead of stdout");
  app.add_option("--top", top, "Op/kernel rows shown in table/md besides flagged ones (0 = all)");
  std::string html;
  bool force = false;
  app.add_option("--html", html, "Also write the comparison as a self-contained HTML page");
  app.add_flag("--force", force, "Overwrite the -o and --html files if they exist");
  if (auto rc = cli::Parse(app, args)) return *rc;

  auto usage = [](const std::string& msg) { return cli::UsageError("diff", msg); };
  if (!base_paths.empty() || !new_paths.empty()) {
    if (base_paths.empty() || new_paths.empty() || !positional.empty())
      return usage("give BASE NEW, or --base RUN... and --new RUN..., not a mix (see --help)");
  } else if (positional.size() != 2) {
    return usage(
        fmt::format("expected BASE and NEW, got {} input(s) (see --help)", positional.size()));
  } else {
    base_paths = {positional[0]};
    new_paths = {positional[1]};
  }
  DiffOptions opts;
  opts.alpha = alpha;
  const auto thr = ParseFraction(threshold);
  if (!thr)
    return usage("--threshold: expected a percentage like 5% or 0.05, got '" + threshold + "'");
  opts.threshold = *thr;
  const auto mt = ParseDurationNs(min_time);
  if (!mt)
    return usage("--min-time: expected a duration like 50us, 2ms, 1s, got '" + min_time + "'");
  opts.min_time_ns = *mt;
  const auto mm = ParseBytes(min_memory);
  if (!mm) return usage("--min-memory: expected a size like 1MiB, 512KB, got '" + min_memory + "'");
  opts.min_memory_bytes = *mm;
  const auto fmt_kind = cli::ParseCiFormat(format);
  if (!fmt_kind) return usage("--format: expected table, json, md or junit, got '" + format + "'");

  try {
    // The output files' places are checked before the runs are read.
    cli::ResultOutput result(output, force);
    std::optional<OutputFile> page;
    if (!html.empty()) page.emplace(html, force);
    const std::vector<RunDigest> base = LoadAllRuns(base_paths);
    const std::vector<RunDigest> now = LoadAllRuns(new_paths);
    const DiffResult r = Diff(base, now, opts);
    result.Write(cli::RenderCi(
        *fmt_kind, {[&] { return DiffTable(r, top); }, [&] { return DiffJson(r); },
                    [&] { return DiffMarkdown(r, top); }, [&] { return DiffJunit(r); }}));
    if (page) {
      HtmlOptions ho;
      ho.title = "kprof diff: " + fmt::format("{}", fmt::join(base_paths, " ")) + " vs " +
                 fmt::format("{}", fmt::join(new_paths, " "));
      WriteHtmlPage(page->stream(), ho.title, HtmlDiffData(r, base_paths, new_paths, ho));
      page->Commit();
      std::fprintf(stderr, "kprof: HTML diff written to %s\n", html.c_str());
    }
    return r.Regressed() ? kExitRegression : kExitOk;
  } catch (const InputError& e) {
    return cli::UsageError("diff", e.what());
  }
}

}  // namespace kprof
