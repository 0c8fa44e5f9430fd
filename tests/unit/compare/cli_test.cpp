// kprof diff / kprof check end to end on JSON summaries written to a temp dir: every exit code,
// the output formats, JUnit well-formedness with hostile names.
#include "kprof/cli.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/load_runs.h"
#include "compare_test_util.h"
#include "kprof/compare.h"

namespace kprof {
namespace {

using nlohmann::json;
using test::Slurp;
using test::Spec;
using test::Synthetic;
using test::TempDir;

/// Writes `n` runs of `s` as summaries NAME1.json..NAMEn.json; returns their paths.
std::vector<std::string> WriteRuns(const TempDir& dir, const std::string& name, const Spec& s,
                                   int n, uint64_t seed) {
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i)
    paths.push_back(dir.Write(name + std::to_string(i + 1) + ".json",
                              test::SummaryJson(Synthetic(s, seed, i))));
  return paths;
}

std::vector<std::string> Args(std::vector<std::string> head, const std::vector<std::string>& a,
                              const std::vector<std::string>& b = {},
                              std::vector<std::string> tail = {}) {
  head.insert(head.end(), a.begin(), a.end());
  head.insert(head.end(), b.begin(), b.end());
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

/// Minimal XML well-formedness check: balanced, properly nested tags, quoted attributes, only
/// the five named entities and numeric references. Returns "" when fine, else the problem.
std::string XmlProblem(const std::string& xml, size_t* testcases = nullptr) {
  std::vector<std::string> stack;
  size_t cases = 0;
  for (size_t i = 0; i < xml.size(); ++i) {
    const char c = xml[i];
    if (c == '&') {
      const size_t semi = xml.find(';', i);
      if (semi == std::string::npos) return "unterminated entity";
      const std::string ent = xml.substr(i + 1, semi - i - 1);
      const bool named =
          ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos";
      const bool numeric = ent.size() > 1 && ent[0] == '#' &&
                           ent.find_first_not_of("0123456789", 1) == std::string::npos;
      if (!named && !numeric) return "bad entity &" + ent + ";";
      continue;
    }
    if (c == '>') return "stray '>' at " + std::to_string(i);
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r')
      return "control character";
    if (c != '<') continue;
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    const std::string tag = xml.substr(i + 1, end - i - 1);
    i = end;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?') continue;  // <?xml ...?>
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return "unbalanced quotes in <" + tag;
    if (tag.find('<') != std::string::npos) return "'<' inside a tag";
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return "mismatched </" + tag.substr(1);
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" />"));
    if (name == "testcase") ++cases;
    if (tag.back() != '/') stack.push_back(name);
  }
  if (testcases) *testcases = cases;
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

class DiffCli : public ::testing::Test {
 protected:
  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(DiffCli, SameWorkloadPassesExit0) {
  const auto base = WriteRuns(dir, "base", {}, 5, 1), now = WriteRuns(dir, "new", {}, 5, 2);
  const std::string out = dir / "diff.json";
  EXPECT_EQ(CmdDiff(Args({"--format", "json", "-o", out, "--base"}, base, Args({"--new"}, now))),
            kExitOk);
  const json j = json::parse(Slurp(out));
  EXPECT_EQ(j["schema"], "kprof.diff");
  EXPECT_EQ(j["result"], "pass");
  EXPECT_EQ(j["mode"], "test");
  EXPECT_EQ(j["base_runs"], 5);
  EXPECT_EQ(j["new_runs"], 5);
}

TEST_F(DiffCli, PlantedSlowKernelExit1Named) {
  Spec slow;
  slow.gemm_scale = 1.2;
  const auto base = WriteRuns(dir, "base", {}, 5, 1), now = WriteRuns(dir, "new", slow, 5, 2);
  const std::string out = dir / "diff.json";
  EXPECT_EQ(CmdDiff(Args({"--base"}, base, Args({"--new"}, now), {"--format=json", "-o", out})),
            kExitRegression);
  const json j = json::parse(Slurp(out));
  EXPECT_EQ(j["result"], "regression");
  EXPECT_EQ(j["kernels"][0]["name"], "gemm_kernel");
  EXPECT_EQ(j["kernels"][0]["verdict"], "regression");
  EXPECT_EQ(j["kernels"][0]["metrics"][1]["metric"], "total_ns");
  EXPECT_NEAR(j["kernels"][0]["metrics"][1]["p_value"].get<double>(), 2.0 / 252, 1e-12);

  // Markdown names it and says regression; the table too.
  const std::string md = dir / "diff.md";
  EXPECT_EQ(CmdDiff(Args({"--base"}, base, Args({"--new"}, now), {"--format", "md", "-o", md})),
            kExitRegression);
  const std::string mdtext = Slurp(md);
  EXPECT_NE(mdtext.find("### kprof diff: :x: regression"), std::string::npos);
  EXPECT_NE(mdtext.find("<code>gemm\\_kernel</code>"), std::string::npos) << mdtext;
  const std::string table = dir / "diff.txt";
  EXPECT_EQ(CmdDiff(Args({"-o", table, "--base"}, base, Args({"--new"}, now))), kExitRegression);
  EXPECT_EQ(Slurp(table).rfind("kprof diff: REGRESSION", 0), 0u) << Slurp(table);
}

TEST_F(DiffCli, SingleRunPerSidePositional) {
  Spec quiet;
  quiet.jitter = 0;
  Spec slow = quiet;
  slow.gemm_scale = 1.2;
  const std::string a = dir.Write("a.json", test::SummaryJson(Synthetic(quiet, 1)));
  const std::string b = dir.Write("b.json", test::SummaryJson(Synthetic(slow, 2)));
  const std::string out = dir / "out.txt";
  EXPECT_EQ(CmdDiff({a, b, "-o", out}), kExitRegression);
  EXPECT_NE(Slurp(out).find("single run per side: threshold only"), std::string::npos);
  EXPECT_EQ(CmdDiff({a, a, "-o", out, "--force"}), kExitOk);
  // A higher threshold lets the 20% through.
  EXPECT_EQ(CmdDiff({a, b, "--threshold", "25%", "-o", out, "--force"}), kExitOk);
}

TEST_F(DiffCli, RepDirectoryOfSummariesIsNotARunDirectory) {
  // A directory holding only JSON summaries has neither *.kprof files nor repN: input error.
  dir.Write("runs/a.json", test::SummaryJson(Synthetic({}, 1)));
  const std::string b = dir.Write("b.json", test::SummaryJson(Synthetic({}, 2)));
  EXPECT_EQ(CmdDiff({dir / "runs", b, "-o", dir / "out"}), kExitUsage);
}

TEST_F(DiffCli, UsageAndInputErrorsExit2) {
  const std::string a = dir.Write("a.json", test::SummaryJson(Synthetic({}, 1)));
  const std::string o = dir / "out";
  EXPECT_EQ(CmdDiff({a}), kExitUsage);                           // one side only
  EXPECT_EQ(CmdDiff({a, a, a}), kExitUsage);                     // three positionals
  EXPECT_EQ(CmdDiff({a, "--base", a, "--new", a}), kExitUsage);  // a mix
  EXPECT_EQ(CmdDiff({"--base", a}), kExitUsage);                 // --new missing
  EXPECT_EQ(CmdDiff({a, a, "--threshold", "5"}), kExitUsage);    // ambiguous
  EXPECT_EQ(CmdDiff({a, a, "--min-time", "fast"}), kExitUsage);
  EXPECT_EQ(CmdDiff({a, a, "--format", "xml"}), kExitUsage);
  EXPECT_EQ(CmdDiff({a, a, "--no-such-option"}), kExitUsage);
  EXPECT_EQ(CmdDiff({a, a, "--alpha", "2"}), kExitUsage);
  EXPECT_EQ(CmdDiff({a, dir / "missing.json", "-o", o}), kExitUsage);
  const std::string broken = dir.Write("broken.json", "{\"schema\":\"kprof.summary\", \"summ");
  EXPECT_EQ(CmdDiff({a, broken, "-o", o}), kExitUsage);
  json future = json::parse(test::SummaryJson(Synthetic({}, 1)));
  future["schema_version"] = 2;
  EXPECT_EQ(CmdDiff({a, dir.Write("future.json", future.dump()), "-o", o}), kExitUsage);
  json bad = json::parse(test::SummaryJson(Synthetic({}, 1)));
  bad["summary"]["syncs"] = "many";
  EXPECT_EQ(CmdDiff({a, dir.Write("bad.json", bad.dump()), "-o", o}), kExitUsage);
  EXPECT_EQ(CmdDiff({a, a, "-o", dir / "no/such/dir/out"}), kExitUsage);
  EXPECT_EQ(CmdDiff({"--help"}), kExitOk);
}

TEST_F(DiffCli, SummaryErrorsNameTheFileAndField) {
  json bad = json::parse(test::SummaryJson(Synthetic({}, 1)));
  bad["summary"]["syncs"] = -3;
  const std::string p = dir.Write("bad.json", bad.dump());
  try {
    LoadRuns(p);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), p + ": summary.syncs: expected a non-negative number");
  }
}

TEST_F(DiffCli, JunitIsWellFormedWithHostileNames) {
  Spec quiet;
  quiet.jitter = 0;
  RunDigest b = Synthetic(quiet, 1), n = Synthetic(quiet, 2);
  const std::string evil = "</testcase><testcase name=\"x\">&amp;<![CDATA[\x01\"']]>";
  b.kernels[evil] = {10, 10'000'000};
  n.kernels[evil] = {10, 20'000'000};  // +100%: a failure whose message carries the name
  b.ops["op<&>"] = {1, 1'000};
  n.ops["op<&>"] = {1, 1'000};
  const std::string a = dir.Write("a.json", test::SummaryJson(b));
  const std::string c = dir.Write("c.json", test::SummaryJson(n));
  const std::string out = dir / "junit.xml";
  EXPECT_EQ(CmdDiff({a, c, "--format", "junit", "-o", out}), kExitRegression);
  const std::string xml = Slurp(out);
  size_t cases = 0;
  EXPECT_EQ(XmlProblem(xml, &cases), "") << xml;
  // One testcase per run metric, op and kernel.
  EXPECT_EQ(cases, RunMetrics().size() + 3 + 4);
  EXPECT_NE(xml.find("name=\"&lt;/testcase&gt;&lt;testcase name=&quot;x&quot;&gt;&amp;amp;"),
            std::string::npos);
  EXPECT_NE(xml.find("failures=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure type=\"regression\""), std::string::npos);
}

// ---- kprof check ---------------------------------------------------------------------------

class CheckCli : public DiffCli {};

TEST_F(CheckCli, BudgetPassFailAndWriteBudget) {
  const auto base = WriteRuns(dir, "base", {}, 5, 1);
  const std::string budget = dir / "budget.json";
  const std::string note = dir / "note.txt";
  EXPECT_EQ(CmdCheck(Args({"--write-budget", budget, "--margin", "20%", "-o", note}, base)),
            kExitOk);
  EXPECT_NE(Slurp(note).find("2 ops, 3 kernels"), std::string::npos) << Slurp(note);
  const json bj = json::parse(Slurp(budget));
  EXPECT_EQ(bj["schema"], "kprof.budget");
  EXPECT_EQ(bj["version"], 1);
  EXPECT_EQ(bj["run"]["max_syncs"], 100);
  EXPECT_EQ(bj["run"]["max_hint_severity"], "info");

  const std::string out = dir / "check.json";
  const auto same = WriteRuns(dir, "same", {}, 5, 7);
  EXPECT_EQ(CmdCheck(Args({"--budget", budget, "--format", "json", "-o", out}, same)), kExitOk);
  EXPECT_EQ(json::parse(Slurp(out))["result"], "pass");

  Spec s;
  s.syncs_per_step = 2;
  const auto worse = WriteRuns(dir, "worse", s, 5, 7);
  EXPECT_EQ(CmdCheck(Args({"--budget", budget, "--format", "json", "-o", out, "--force"}, worse)),
            kExitRegression);
  const json j = json::parse(Slurp(out));
  EXPECT_EQ(j["result"], "fail");
  EXPECT_EQ(j["runs"], 5);
  bool syncs_failed = false;
  for (const auto& l : j["lines"])
    syncs_failed |= l["metric"] == "max_syncs" && l["pass"] == false && l["actual"] == 200;
  EXPECT_TRUE(syncs_failed) << j.dump(1);

  // JUnit: one testcase per budget line, failures counted.
  const std::string xml_path = dir / "check.xml";
  EXPECT_EQ(CmdCheck(Args({"--budget", budget, "--format", "junit", "-o", xml_path}, worse)),
            kExitRegression);
  const std::string xml = Slurp(xml_path);
  size_t cases = 0;
  EXPECT_EQ(XmlProblem(xml, &cases), "") << xml;
  // 5 run lines + 2 ops x 2 + 3 kernels x 2.
  EXPECT_EQ(cases, 15u);
  EXPECT_NE(xml.find("classname=\"kprof.check.run\" name=\"syncs max_syncs\""), std::string::npos);
}

TEST_F(CheckCli, HandWrittenBudgetWithUnits) {
  const std::string run = dir.Write("run.json", test::SummaryJson(Synthetic({}, 1)));
  const std::string budget = dir.Write("b.json", R"({
    "schema": "kprof.budget", "version": 1, "comment": "hand written",
    "run": {"max_wall_ns": "1s", "max_peak_memory_bytes": "8GiB", "max_hint_severity": "info"},
    "ops": {"forward": {"max_gpu_ns": "300ms", "max_calls": 100}},
    "kernels": {"gemm_kernel": {"max_gpu_ns": "150ms"}, "renamed_kernel": {"max_calls": 1}}
  })");
  const std::string out = dir / "out.md";
  EXPECT_EQ(CmdCheck({run, "--budget", budget, "--format", "md", "-o", out}), kExitRegression);
  const std::string md = Slurp(out);
  EXPECT_NE(md.find("### kprof check: :x: budget exceeded"), std::string::npos) << md;
  EXPECT_NE(md.find("| kernel | <code>gemm\\_kernel</code> | max_gpu_ns | 150.00 ms |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("**FAIL**"), std::string::npos);
  EXPECT_NE(md.find("| missing |"), std::string::npos);  // renamed_kernel: stale line
}

TEST_F(CheckCli, UsageAndInputErrorsExit2) {
  const std::string run = dir.Write("run.json", test::SummaryJson(Synthetic({}, 1)));
  const std::string o = dir / "out";
  EXPECT_EQ(CmdCheck({run}), kExitUsage);  // neither --budget nor --write-budget
  EXPECT_EQ(CmdCheck({"--budget", dir / "b.json"}), kExitUsage);  // no run
  EXPECT_EQ(CmdCheck({run, "--budget", dir / "missing.json", "-o", o}), kExitUsage);
  EXPECT_EQ(CmdCheck({run, "--budget", "x", "--write-budget", "y"}), kExitUsage);
  auto bad_budget = [&](const std::string& text) {
    return CmdCheck({run, "--budget", dir.Write("bad.json", text), "-o", o});
  };
  EXPECT_EQ(bad_budget("{not json"), kExitUsage);
  EXPECT_EQ(bad_budget(R"({"schema":"kprof.summary","version":1})"), kExitUsage);
  EXPECT_EQ(bad_budget(R"({"schema":"kprof.budget","version":2})"), kExitUsage);
  EXPECT_EQ(bad_budget(R"({"schema":"kprof.budget","version":1,"run":{"max_wal_ns":1}})"),
            kExitUsage);  // typo: unknown key
  EXPECT_EQ(bad_budget(R"({"schema":"kprof.budget","version":1,"run":{"max_wall_ns":"fast"}})"),
            kExitUsage);
  EXPECT_EQ(bad_budget(R"({"schema":"kprof.budget","version":1,"ops":{"x":{"max_calls":"1ms"}}})"),
            kExitUsage);
  EXPECT_EQ(
      bad_budget(R"({"schema":"kprof.budget","version":1,"run":{"max_hint_severity":"bad"}})"),
      kExitUsage);
  EXPECT_EQ(bad_budget(R"({"schema":"kprof.budget","version":1})"), kExitOk);  // empty budget
  EXPECT_EQ(CmdCheck({run, "--write-budget", o, "--margin", "lots"}), kExitUsage);
  EXPECT_EQ(CmdCheck({run, "--budget", o, "--format", "yaml"}), kExitUsage);
}

}  // namespace
}  // namespace kprof
