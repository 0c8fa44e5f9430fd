// The HTML report past its limits and with hostile names: the bins and the drawn items add up to
// the run's exact counts and times; no name ever reaches the page raw; the 1M-kernel page stays
// under its size bound; bad --html places are one-line errors (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kprof/cli.h"
#include "kprof/html.h"
#include "kprof/timeline.h"
#include "test_util.h"

namespace kprof {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Totals {
  uint64_t count = 0, ns = 0;
};

/// Per track: drawn items + bins against the timeline's own items of that kind.
void ExpectExactTotals(const json& tracks, const Totals& want, bool expect_bins) {
  Totals got;
  bool any_bins = false;
  for (const auto& t : tracks) {
    got.count += t["shown"].get<uint64_t>();
    for (const auto& d : t["d"]) got.ns += d.get<uint64_t>();
    if (t["bins"].is_null()) continue;
    any_bins = true;
    for (const auto& c : t["bins"]["count"]) got.count += c.get<uint64_t>();
    for (const auto& b : t["bins"]["busy"]) got.ns += b.get<uint64_t>();
  }
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.ns, want.ns);
  EXPECT_EQ(any_bins, expect_bins);
}

TEST(HtmlLimits, PastTheLimitBinsKeepExactTotals) {
  kprof::Run run = ReadInputs({std::string(KPROF_SOURCE_DIR) + "/examples/default-run"});
  const Timeline tl = BuildTimeline(run);
  Totals acts, ranges;
  std::vector<uint64_t> durs;
  for (const auto& p : tl.processes) {
    for (const Record* r : p.acts) {
      ++acts.count;
      acts.ns += r->DurationNs();
      durs.push_back(r->DurationNs());
    }
    for (const auto& r : p.index.ranges) {
      ++ranges.count;
      ranges.ns += r.end_ns > r.begin_ns ? r.end_ns - r.begin_ns : 0;
    }
  }
  HtmlOptions o;
  o.max_slices = 500;
  o.max_ranges = 1000;
  o.bins = 300;
  const json doc = json::parse(HtmlReportData(tl, {}, o));
  ExpectExactTotals(doc["timeline"]["gpu"], acts, true);
  ExpectExactTotals(doc["timeline"]["cpu"], ranges, true);
  // Exactly the limit is drawn, and they are the longest ones.
  uint64_t shown = 0, shortest = UINT64_MAX;
  for (const auto& t : doc["timeline"]["gpu"]) {
    shown += t["shown"].get<uint64_t>();
    for (const auto& d : t["d"]) shortest = std::min(shortest, d.get<uint64_t>());
  }
  EXPECT_EQ(shown, 500u);
  std::sort(durs.rbegin(), durs.rend());
  EXPECT_EQ(shortest, durs[499]);
  // Under the limits: everything drawn, no bins.
  const json all = json::parse(HtmlReportData(tl, {}, HtmlOptions{}));
  ExpectExactTotals(all["timeline"]["gpu"], acts, false);
  ExpectExactTotals(all["timeline"]["cpu"], ranges, false);
}

TEST(HtmlLimits, HostileNamesNeverReachThePageRaw) {
  const std::string big(1u << 20, 'K');
  const std::vector<std::string> names = {
      "</script><script>alert(1)</script>",
      "</script><img src=x onerror=alert(1)>",
      "quote\" back\\slash\nnew\rline\ttab",
      std::string("ctl\x01\x02\x1f\x7f", 7),
      "sep\xE2\x80\xA8\xE2\x80\xA9",
      "<!-- <script> &amp; ]]>",
      big,
  };
  test::TraceBuilder b;
  uint64_t t = 1000;
  for (const auto& n : names) {
    b.Launch(1, t, n, t + 500, t + 900);
    b.Range(1, n, t, t + 400);
    t += 2000;
  }
  b.Launch(1, t, "bad\xff\xfeutf8", t + 500, t + 900);
  kprof::Run run;
  run.processes.push_back(b.t);
  const Timeline tl = BuildTimeline(run);
  std::ostringstream page;
  const std::string data = HtmlReportData(tl, {}, HtmlOptions{});
  WriteHtmlPage(page, names[0], data);
  const std::string html = page.str();
  for (const char* raw : {"<script>alert", "<img", "</script><", "onerror=alert(1)>", "<!--",
                          "\xE2\x80\xA8", "\n\r", "\x01", "\xff"})
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  EXPECT_LT(html.size(), 8u << 20);  // the 1 MB name: in the names and in a few table rows
  const json doc = json::parse(HtmlPageData(html));
  const auto& shown = doc["timeline"]["names"];
  for (const auto& n : names) {
    EXPECT_NE(std::find(shown.begin(), shown.end(), n), shown.end()) << n.substr(0, 40);
  }
  EXPECT_NE(std::find(shown.begin(), shown.end(), "bad\xEF\xBF\xBD\xEF\xBF\xBDutf8"), shown.end());
  bool in_table = false;
  for (const auto& r : doc["tables"][1]["rows"]) in_table |= r[0] == names[1];
  EXPECT_TRUE(in_table);
}

TEST(HtmlLimits, MillionKernelPageStaysUnderItsBound) {
  test::TempDir dir;
  const std::string run = dir / "gen1m.kprof";
  const auto gen =
      test::RunCommand(std::string(KPROF_BINARY_DIR) + "/tests/kprof_gen_run " + run + " 1000000");
  ASSERT_EQ(gen.status, 0) << gen.output;
  kprof::Run r = ReadInputs({run});
  const Timeline tl = BuildTimeline(r);
  const std::string data = HtmlReportData(tl, {}, HtmlOptions{});
  std::ostringstream page;
  WriteHtmlPage(page, "gen1m", data);
  EXPECT_LT(page.str().size(), 20u << 20);
  const json doc = json::parse(data);
  uint64_t kernels = 0, shown = 0, binned = 0;
  for (const auto& t : doc["timeline"]["gpu"]) {
    kernels += t["kernels"].get<uint64_t>();
    shown += t["shown"].get<uint64_t>();
    for (const auto& c : t["bins"]["count"]) binned += c.get<uint64_t>();
  }
  EXPECT_EQ(kernels, 1'000'000u);
  EXPECT_EQ(shown, HtmlOptions{}.max_slices);
  EXPECT_EQ(shown + binned, 1'005'002u);  // kernels + copies + memsets of the run
}

class HtmlCli : public ::testing::Test {
 protected:
  test::TempDir dir;
  const std::string run = std::string(KPROF_SOURCE_DIR) + "/examples/default-run";
};

TEST_F(HtmlCli, ReportRefusesADirectoryAndAnExistingFile) {
  EXPECT_EQ(CmdReport({run, "--html", dir.path(), "--format", "json", "-o", dir / "r.json"}),
            kExitUsage);
  const std::string page = dir / "r.html";
  test::WriteAll(page, "keep");
  EXPECT_EQ(CmdReport({run, "--html", page, "-o", dir / "r.txt"}), kExitUsage);
  EXPECT_EQ(test::ReadAll(page), "keep");
  EXPECT_EQ(CmdReport({run, "--html", dir / "no/such/dir/r.html", "-o", dir / "r.txt"}),
            kExitUsage);
  EXPECT_EQ(CmdReport({run, "--html", page, "--force", "-o", dir / "r.txt"}), kExitOk);
  EXPECT_NE(HtmlPageData(test::ReadAll(page)).find("\"kind\":\"report\""), std::string::npos);
}

TEST_F(HtmlCli, DiffWritesItsPageAndRefusesAnExistingFile) {
  const std::string base = std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/train_step";
  const std::string page = dir / "d.html";
  EXPECT_EQ(CmdDiff({base, base, "--html", page, "-o", dir / "d.txt"}), kExitOk);
  const json doc = json::parse(HtmlPageData(test::ReadAll(page)));
  EXPECT_EQ(doc["kind"], "diff");
  EXPECT_EQ(doc["result"], "pass");
  EXPECT_EQ(doc["tables"][0]["rows"].size(), RunMetrics().size());
  EXPECT_EQ(CmdDiff({base, base, "--html", page, "-o", dir / "d.txt"}), kExitUsage);
  EXPECT_EQ(CmdDiff({base, base, "--html", dir.path(), "-o", dir / "d.txt"}), kExitUsage);
  EXPECT_EQ(CmdDiff({base, base, "--html", page, "--force", "-o", dir / "d.txt"}), kExitOk);
}

}  // namespace
}  // namespace kprof
