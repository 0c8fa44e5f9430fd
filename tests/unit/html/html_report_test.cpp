// The HTML report's data against the real H100 recordings: every kernel, activity and range of
// the run is in the timeline (drawn or in the bins), every table has the Analysis's rows, the
// hints are kprof's; the page around the data holds exactly the page's own scripts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "kprof/html.h"
#include "kprof/timeline.h"
#include "test_util.h"

namespace kprof {
namespace {

using nlohmann::json;

struct Loaded {
  kprof::Run run;
  std::unique_ptr<Timeline> tl;
  Analysis an;
  std::vector<Hint> hints;
};

std::unique_ptr<Loaded> Load(const std::string& path) {
  auto l = std::make_unique<Loaded>();
  l->run = ReadInputs({path});
  l->tl = std::make_unique<Timeline>(BuildTimeline(l->run));
  AnalysisOptions ao;
  ao.top = 0;
  ao.timeline = true;
  l->an = Analyze(*l->tl, ao);
  l->hints = ComputeHints(*l->tl, l->an);
  return l;
}

std::string Src(const std::string& rel) { return std::string(KPROF_SOURCE_DIR) + "/" + rel; }

const json& Table(const json& doc, const std::string& id) {
  for (const auto& t : doc.at("tables"))
    if (t.at("id") == id) return t;
  static const json kNone;
  ADD_FAILURE() << "no table " << id;
  return kNone;
}

size_t Occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

class HtmlRecordings : public ::testing::TestWithParam<std::string> {};

TEST_P(HtmlRecordings, DataHoldsEveryItemOfTheRun) {
  auto l = Load(Src(GetParam()));
  const json doc = json::parse(HtmlReportData(*l->tl, l->hints, HtmlOptions{}));
  EXPECT_EQ(doc.at("kind"), "report");

  // Timeline: every kernel, activity and range, each drawn (these runs are under the limits).
  uint64_t kernels = 0, acts = 0, ranges = 0, drawn = 0;
  for (const auto& t : doc["timeline"]["gpu"]) {
    kernels += t["kernels"].get<uint64_t>();
    acts += t["total"].get<uint64_t>();
    drawn += t["shown"].get<uint64_t>();
    EXPECT_EQ(t["s"].size(), t["shown"].get<size_t>());
    EXPECT_TRUE(t["bins"].is_null());
  }
  for (const auto& t : doc["timeline"]["cpu"]) ranges += t["total"].get<uint64_t>();
  size_t want_acts = 0, want_ranges = 0;
  for (const auto& p : l->tl->processes) {
    want_acts += p.acts.size();
    want_ranges += p.index.ranges.size();
  }
  EXPECT_EQ(kernels, l->an.summary.kernels);
  EXPECT_EQ(acts, want_acts);
  EXPECT_EQ(drawn, want_acts);
  EXPECT_EQ(ranges, want_ranges);
  EXPECT_GT(acts, 0u);

  // Tables: the Analysis's rows.
  EXPECT_EQ(Table(doc, "op")["rows"].size(), l->an.ops.size());
  EXPECT_EQ(Table(doc, "kernel")["rows"].size(), l->an.kernels.size());
  EXPECT_EQ(Table(doc, "nvtx")["rows"].size(), l->an.ranges.size());
  EXPECT_EQ(Table(doc, "stream")["rows"].size(), l->an.summary.streams.size());
  EXPECT_EQ(Table(doc, "device")["rows"].size(), l->an.summary.devices.size());
  // PyTorch runs: the module tree (and source lines, --pytorch stack); others name the view.
  if (l->an.modules.empty()) {
    EXPECT_TRUE(Table(doc, "module").contains("unavailable"));
  } else {
    ASSERT_EQ(Table(doc, "module")["rows"].size(), l->an.modules.size());
    for (size_t i = 0; i < l->an.modules.size(); ++i)
      EXPECT_EQ(Table(doc, "module")["rows"][i][2], l->an.modules[i].gpu_ns);
  }
  if (!l->an.sources.empty()) {
    EXPECT_EQ(Table(doc, "source")["rows"].size(), l->an.sources.size());
  }
  uint64_t calls = 0;
  for (const auto& r : Table(doc, "kernel")["rows"]) calls += r[1].get<uint64_t>();
  EXPECT_EQ(calls, l->an.summary.kernels);
  for (size_t i = 0; i < l->an.ops.size(); ++i) {
    EXPECT_EQ(Table(doc, "op")["rows"][i][0], l->an.ops[i].key);
    EXPECT_EQ(Table(doc, "op")["rows"][i][2], l->an.ops[i].gpu_ns);
  }

  // Hints: kprof's, in its order.
  ASSERT_EQ(doc["hints"].size(), l->hints.size());
  for (size_t i = 0; i < l->hints.size(); ++i) {
    EXPECT_EQ(doc["hints"][i]["id"], l->hints[i].id);
    EXPECT_EQ(doc["hints"][i]["evidence"].size(), l->hints[i].evidence.size());
  }
  // Memory points: one per allocation or free.
  size_t mem = 0;
  for (const auto& d : doc["memory"]["devices"]) mem += d["t"].size();
  EXPECT_EQ(mem, l->an.memory_timeline.size());
  // Utilisation: busy time per device adds up to the run's busy time (one device here).
  uint64_t busy = 0;
  for (const auto& d : doc["util"]["devices"])
    for (const auto& b : d["busy"]) busy += b.get<uint64_t>();
  if (l->an.summary.devices.size() == 1) {
    EXPECT_EQ(busy, l->an.summary.gpu_busy_ns);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HtmlRecordings,
                         ::testing::Values("examples/default-run", "tests/fixtures/gpu/torch_nvtx",
                                           "tests/fixtures/gpu/train_step",
                                           "tests/fixtures/gpu/memcpy_kinds",
                                           "tests/fixtures/gpu/nvtx_threads",
                                           "tests/fixtures/gpu/pytorch_stack"));

TEST(HtmlPage, HoldsTheDataAndOnlyThePagesOwnScripts) {
  auto l = Load(Src("examples/default-run"));
  const std::string data = HtmlReportData(*l->tl, l->hints, HtmlOptions{});
  std::ostringstream page;
  WriteHtmlPage(page, "kprof report: examples/default-run", data);
  const std::string html = page.str();
  EXPECT_EQ(HtmlPageData(html), data);
  EXPECT_EQ(Occurrences(html, "</script>"), 4u);  // error hook, data, timeline, report
  EXPECT_EQ(Occurrences(html, "<script"), 4u);
  EXPECT_EQ(html.find("@KPROF_"), std::string::npos);
  // Offline: nothing is loaded from anywhere.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find(".innerHTML"), std::string::npos);
  EXPECT_LT(html.size(), 1u << 20);
}

TEST(HtmlPage, TitleIsEscaped) {
  std::ostringstream page;
  WriteHtmlPage(page, "<b>\"t\" & 'x'</b>\xff", "{}");
  const std::string html = page.str();
  EXPECT_NE(html.find("&lt;b&gt;&quot;t&quot; &amp; &#39;x&#39;&lt;/b&gt;\xEF\xBF\xBD"),
            std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
}

}  // namespace
}  // namespace kprof
