// kprof check RUN... --budget FILE | --write-budget FILE: performance budgets for CI.
// Budget file format: docs/ci.md ("Budget files").
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ci_output.h"
#include "cli/load_runs.h"
#include "common.h"
#include "kprof/cli.h"
#include "kprof/compare.h"

namespace kprof {
namespace {

using namespace cli;  // the shared CI writers (ci_output.h)
using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kBudgetSchema = "kprof.budget";
constexpr int kBudgetVersion = 1;

// ---- Budget file ----------------------------------------------------------------------------

enum class Unit { Duration, Count, Bytes };

/// The string value of `v`, or null. (Not json::value(key, ""): GCC's -Wnull-dereference
/// fires inside nlohmann on it.)
const std::string* AsString(const json& v) { return v.get_ptr<const std::string*>(); }

uint64_t ReadLimit(const json& v, Unit unit, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 1.8e19 &&
      unit != Unit::Count)
    return static_cast<uint64_t>(std::llround(v.get<double>()));
  if (const std::string* s = AsString(v); s && unit != Unit::Count) {
    const auto parsed = unit == Unit::Duration ? ParseDurationNs(*s) : ParseBytes(*s);
    if (parsed) return *parsed;
  }
  switch (unit) {
    case Unit::Duration:
      throw InputError(where + ": expected a duration (integer ns, or a string like \"12ms\")");
    case Unit::Bytes:
      throw InputError(where + ": expected a size (integer bytes, or a string like \"8GiB\")");
    case Unit::Count:
      break;
  }
  throw InputError(where + ": expected a non-negative integer");
}

void ReadItems(const json& doc, const char* key, std::map<std::string, BudgetLimits>& out) {
  auto it = doc.find(key);
  if (it == doc.end()) return;
  if (!it->is_object()) throw InputError(fmt::format("\"{}\": expected an object", key));
  for (const auto& [name, limits] : it->items()) {
    const std::string where = fmt::format("{}.{}", key, json(name).dump());
    if (!limits.is_object()) throw InputError(where + ": expected an object");
    BudgetLimits l;
    for (const auto& [k, v] : limits.items()) {
      if (k == "max_gpu_ns")
        l.max_gpu_ns = ReadLimit(v, Unit::Duration, where + "." + k);
      else if (k == "max_calls")
        l.max_calls = ReadLimit(v, Unit::Count, where + "." + k);
      else
        throw InputError(fmt::format("{}: unknown key \"{}\" (max_gpu_ns, max_calls)", where, k));
    }
    out[name] = l;
  }
}

Budget ParseBudget(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw InputError("malformed JSON");
  const auto schema = doc.is_object() ? doc.find("schema") : doc.end();
  if (schema == doc.end() || !schema->is_string() || *schema != kBudgetSchema)
    throw InputError("not a kprof budget (expected \"schema\":\"kprof.budget\")");
  const auto ver = doc.find("version");
  if (ver == doc.end() || !ver->is_number_integer() || ver->get<int64_t>() < 1)
    throw InputError("version: missing or not a positive integer");
  if (ver->get<int64_t>() > kBudgetVersion)
    throw InputError(fmt::format("version {} is newer than this kprof reads ({})",
                                 ver->get<int64_t>(), kBudgetVersion));
  for (const auto& [k, v] : doc.items())
    if (k != "schema" && k != "version" && k != "comment" && k != "run" && k != "ops" &&
        k != "kernels")
      throw InputError(fmt::format("unknown key \"{}\" (run, ops, kernels, comment)", k));
  Budget b;
  if (auto run = doc.find("run"); run != doc.end()) {
    if (!run->is_object()) throw InputError("\"run\": expected an object");
    for (const auto& [k, v] : run->items()) {
      const std::string where = "run." + k;
      if (k == "max_wall_ns")
        b.max_wall_ns = ReadLimit(v, Unit::Duration, where);
      else if (k == "max_kernels")
        b.max_kernels = ReadLimit(v, Unit::Count, where);
      else if (k == "max_syncs")
        b.max_syncs = ReadLimit(v, Unit::Count, where);
      else if (k == "max_peak_memory_bytes")
        b.max_peak_memory_bytes = ReadLimit(v, Unit::Bytes, where);
      else if (k == "max_hint_severity") {
        const std::string* str = AsString(v);
        const auto sev = str ? ParseHintSeverity(*str) : std::nullopt;
        if (!sev)
          throw InputError(where + ": expected \"none\", \"info\", \"warning\" or \"critical\"");
        b.max_hint_severity = *sev;
      } else {
        throw InputError(
            fmt::format("run: unknown key \"{}\" (max_wall_ns, max_kernels, max_syncs, "
                        "max_peak_memory_bytes, max_hint_severity)",
                        k));
      }
    }
  }
  ReadItems(doc, "ops", b.ops);
  ReadItems(doc, "kernels", b.kernels);
  return b;
}

std::string BudgetJson(const Budget& b, const std::string& comment) {
  ordered_json j;
  j["schema"] = kBudgetSchema;
  j["version"] = kBudgetVersion;
  j["comment"] = comment;
  ordered_json run = ordered_json::object();
  if (b.max_wall_ns) run["max_wall_ns"] = *b.max_wall_ns;
  if (b.max_kernels) run["max_kernels"] = *b.max_kernels;
  if (b.max_syncs) run["max_syncs"] = *b.max_syncs;
  if (b.max_peak_memory_bytes) run["max_peak_memory_bytes"] = *b.max_peak_memory_bytes;
  if (b.max_hint_severity)
    run["max_hint_severity"] = *b.max_hint_severity == kNoHintAllowed
                                   ? "none"
                                   : SeverityName(static_cast<Severity>(*b.max_hint_severity));
  j["run"] = run;
  auto items = [](const std::map<std::string, BudgetLimits>& m) {
    ordered_json o = ordered_json::object();
    for (const auto& [name, l] : m) {
      ordered_json e = ordered_json::object();
      if (l.max_gpu_ns) e["max_gpu_ns"] = *l.max_gpu_ns;
      if (l.max_calls) e["max_calls"] = *l.max_calls;
      o[name] = e;
    }
    return o;
  };
  j["ops"] = items(b.ops);
  j["kernels"] = items(b.kernels);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open budget file");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- Writers --------------------------------------------------------------------------------

std::string Status(const BudgetLine& l) {
  if (!l.pass) return "FAIL";
  return l.missing ? "missing" : l.not_recorded ? "not compared" : "pass";
}

std::string LimitCell(const BudgetLine& l) {
  if (l.metric == "max_hint_severity")
    return l.limit < 0 ? "none" : SeverityName(static_cast<Severity>(static_cast<int>(l.limit)));
  return FormatMetric(l.limit, l.kind);
}

std::string ActualCell(const BudgetLine& l) {
  if (l.missing || l.not_recorded) return "-";
  if (l.metric == "max_hint_severity")
    return l.actual < 0 ? "none" : SeverityName(static_cast<Severity>(static_cast<int>(l.actual)));
  return FormatMetric(l.actual, l.kind);
}

std::string Headline(const CheckResult& r, const std::string& budget) {
  const std::string runs = r.runs == 1 ? "1 run" : fmt::format("median of {} runs", r.runs);
  return fmt::format("{} of {} budget lines exceeded ({} vs {})", r.Failures(), r.lines.size(),
                     runs, budget);
}

std::string CheckTable(const CheckResult& r, const std::string& budget) {
  std::string out =
      fmt::format("kprof check: {} - {}\n", r.Failed() ? "FAIL" : "pass", Headline(r, budget));
  TextTable t({"scope", "name", "budget", "limit", "actual", "result"},
              {false, false, false, true, true, false});
  for (const auto& l : r.lines)
    t.Add({l.scope, Shorten(Printable(l.name), 60), l.metric, LimitCell(l), ActualCell(l),
           Status(l)});
  out += t.Render();
  for (const auto& l : r.lines)
    if (!l.pass)
      out += fmt::format("FAIL {} {}: {}\n", l.scope, Printable(l.name), Printable(l.message));
  return out;
}

std::string CheckJson(const CheckResult& r, const std::string& budget) {
  ordered_json j;
  j["schema"] = "kprof.check";
  j["schema_version"] = 1;
  j["result"] = r.Failed() ? "fail" : "pass";
  j["runs"] = r.runs;
  j["budget"] = budget;
  j["failures"] = r.Failures();
  ordered_json lines = ordered_json::array();
  for (const auto& l : r.lines) {
    ordered_json e = {{"scope", l.scope},     {"name", l.name},      {"metric", l.metric},
                      {"limit", l.limit},     {"actual", l.actual},  {"pass", l.pass},
                      {"missing", l.missing}, {"message", l.message}};
    if (l.not_recorded) e["not_recorded"] = true;
    if (l.missing || l.not_recorded) e["actual"] = nullptr;
    lines.push_back(e);
  }
  j["lines"] = lines;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string CheckMarkdown(const CheckResult& r, const std::string& budget) {
  std::string out =
      fmt::format("### kprof check: {} {}\n\n{}\n\n", r.Failed() ? ":x:" : ":white_check_mark:",
                  r.Failed() ? "budget exceeded" : "pass", MdCell(Headline(r, budget)));
  out += "| scope | name | budget | limit | actual | result |\n|---|---|---|--:|--:|---|\n";
  for (const auto& l : r.lines)
    out +=
        fmt::format("| {} | {} | {} | {} | {} | {} |\n", l.scope,
                    MdCell(Shorten(l.name, 100), l.scope != "run"), l.metric, MdCell(LimitCell(l)),
                    MdCell(ActualCell(l)), l.pass ? Status(l) : "**FAIL**");
  return out;
}

std::string CheckJunit(const CheckResult& r, const std::string& budget) {
  std::string cases;
  size_t failures = 0, skipped = 0;
  for (const auto& l : r.lines) {
    cases += fmt::format("    <testcase classname=\"kprof.check.{}\" name=\"{}\"", l.scope,
                         XmlEscape(l.name + " " + l.metric));
    if (!l.pass) {
      ++failures;
      cases += fmt::format(
          ">\n      <failure type=\"budget\" message=\"{}\">limit {}, actual {} ({})</failure>\n"
          "    </testcase>\n",
          XmlEscape(l.message), XmlEscape(LimitCell(l)), XmlEscape(ActualCell(l)),
          XmlEscape(budget));
    } else if (l.missing || l.not_recorded) {
      ++skipped;
      cases += fmt::format(">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                           XmlEscape(l.message));
    } else {
      cases += "/>\n";
    }
  }
  return cli::JunitDocument("kprof check", r.lines.size(), failures, skipped, cases);
}

}  // namespace

int CmdCheck(const std::vector<std::string>& args) {
  CLI::App app{
      "Check runs against a performance budget (several runs: their median). "
      "Exit 0 pass, 1 budget exceeded, 2 usage or input error.\n"
      "  kprof check RUN... --budget FILE\n"
      "  kprof check RUN... --write-budget FILE [--margin 20%]\n"
      "Each RUN: a kprof run directory (a directory of rep1..repN holds N runs), a "
      ".kprof file, a kprof JSON summary or a Chrome/PyTorch trace. Budget format: "
      "docs/ci.md.",
      "kprof check"};
  std::vector<std::string> inputs;
  std::string budget_path, write_path, margin = "20%", count_margin = "0%", format = "table",
                                       output;
  size_t top_kernels = 20;
  app.add_option("runs", inputs, "Runs to check")->required();
  auto* budget_opt = app.add_option("--budget", budget_path, "Budget file (JSON) to check against");
  auto* write_opt =
      app.add_option("--write-budget", write_path, "Write a budget from these runs to FILE");
  budget_opt->excludes(write_opt);
  app.add_option("--margin", margin, "--write-budget: headroom on times and memory (default 20%)");
  app.add_option("--count-margin", count_margin,
                 "--write-budget: headroom on counts (default 0%: counts are exact)");
  app.add_option("--top-kernels", top_kernels,
                 "--write-budget: budget the N most expensive kernels (default 20)");
  app.add_option("--format", format, "table|json|md|junit (default table)");
  app.add_option("-o,--output", output, "Write the result to FILE instead of stdout");
  bool force = false;
  app.add_flag("--force", force, "Overwrite the -o and --write-budget files if they exist");
  if (auto rc = cli::Parse(app, args)) return *rc;

  auto usage = [](const std::string& msg) { return cli::UsageError("check", msg); };
  if (budget_path.empty() && write_path.empty())
    return usage("give --budget FILE or --write-budget FILE (see --help)");
  const auto fmt_kind = cli::ParseCiFormat(format);
  if (!fmt_kind) return usage("--format: expected table, json, md or junit, got '" + format + "'");

  try {
    // The output files' places are checked before the runs are read.
    cli::ResultOutput result(output, force);
    std::optional<cli::ResultOutput> budget_file;
    if (!write_path.empty()) budget_file.emplace(write_path, force);
    const std::vector<RunDigest> runs = LoadAllRuns(inputs);

    if (!write_path.empty()) {
      BudgetFromRunsOptions o;
      const auto m = ParseFraction(margin), cm = ParseFraction(count_margin);
      if (!m) return usage("--margin: expected a percentage like 20% or 0.2, got '" + margin + "'");
      if (!cm)
        return usage("--count-margin: expected a percentage like 0% or 0.1, got '" + count_margin +
                     "'");
      o.margin = *m;
      o.count_margin = *cm;
      o.top_kernels = top_kernels;
      const Budget b = BudgetFromRuns(runs, o);
      const std::string comment = fmt::format(
          "written by kprof check --write-budget from {} run(s): medians + {} (times, memory), "
          "+ {} (counts)",
          runs.size(), FormatPercent(o.margin).substr(1), FormatPercent(o.count_margin).substr(1));
      budget_file->Write(BudgetJson(b, comment));
      const int run_limits = b.max_wall_ns.has_value() + b.max_kernels.has_value() +
                             b.max_syncs.has_value() + b.max_peak_memory_bytes.has_value() +
                             b.max_hint_severity.has_value();
      const std::string note =
          fmt::format("kprof check: wrote {} ({} run limits, {} ops, {} kernels) from {} run(s)\n",
                      write_path, run_limits, b.ops.size(), b.kernels.size(), runs.size());
      result.Write(note);
      return kExitOk;
    }

    Budget budget;
    try {
      budget = ParseBudget(ReadFile(budget_path));
    } catch (const InputError& e) {
      const std::string what = e.what();
      // ReadFile's messages already name the path.
      throw InputError(what.rfind(budget_path + ":", 0) == 0 ? what : budget_path + ": " + what);
    }
    const CheckResult r = CheckBudget(runs, budget);
    result.Write(cli::RenderCi(*fmt_kind, {[&] { return CheckTable(r, budget_path); },
                                           [&] { return CheckJson(r, budget_path); },
                                           [&] { return CheckMarkdown(r, budget_path); },
                                           [&] { return CheckJunit(r, budget_path); }}));
    return r.Failed() ? kExitRegression : kExitOk;
  } catch (const InputError& e) {
    return cli::UsageError("check", e.what());
  }
}

}  // namespace kprof
