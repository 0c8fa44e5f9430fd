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
  // Memory by owner: the analysis's series (at most 16), each with its owners as columns, the
  // last "other owners", and one row of bytes per point.
  const json& by_owner = doc.at("memory_by_owner");
  EXPECT_EQ(doc.at("memory_by_owner_total"), l->an.memory.series.size());
  ASSERT_EQ(by_owner.size(), std::min<size_t>(l->an.memory.series.size(), 16));
  for (size_t i = 0; i < by_owner.size(); ++i) {
    const json& s = by_owner[i];
    ASSERT_FALSE(s["owners"].empty());
    EXPECT_EQ(s["owners"].back(), "other owners");
    EXPECT_EQ(s["owners"].size(), l->an.memory.series[i].owners.size());
    EXPECT_EQ(s["bytes"].size(), s["owners"].size() * s["t"].size());
    EXPECT_EQ(s["peak_bytes"], l->an.memory.series[i].peak_bytes);
  }
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

// The stacked memory chart's data (docs/html.md) for a PyTorch training run recorded on an H200:
// the owners and the peak `kprof report --by memory` gives, over time on the run's axis.
TEST(HtmlMemory, ByOwnerHoldsTheSeriesAndWhatWasLiveAtThePeak) {
  auto l = Load(Src("tests/fixtures/gpu/memory_torch_train"));
  const json doc = json::parse(HtmlReportData(*l->tl, l->hints, HtmlOptions{}));
  EXPECT_EQ(doc.at("memory_by_owner_total"), 1);
  ASSERT_EQ(doc.at("memory_by_owner").size(), 1u);
  const json& s = doc["memory_by_owner"][0];
  EXPECT_EQ(s["pid"], 785);
  EXPECT_EQ(s["rank"], -1);
  EXPECT_EQ(s["device"], 0);
  EXPECT_EQ(s["label"], "dev 0 NVIDIA H200 · pid 785");
  const std::vector<std::string> owners = {
      "PyTorch caching allocator (libc10_cuda.so)",
      "cuBLAS (libcublas.so.13)",
      "static memory (module globals) of libtorch_cuda.so",
      "cuDNN (libcudnn_graph.so.9)",
      "static memory (module globals) of libcudnn_engines_runtime_compiled.so.9",
      "static memory (module globals) of libcublasLt.so.13",
      "other owners"};
  EXPECT_EQ(s["owners"].get<std::vector<std::string>>(), owners);
  EXPECT_EQ(s["peak_bytes"], 1380473160);
  EXPECT_EQ(s["peak_t"], 8725399668u);  // after the run's start, as the other timeline data
  // The points: after the run's start, ascending; the highest total is the peak, at its time.
  const MemorySeries& want = l->an.memory.series.at(0);
  ASSERT_EQ(s["t"].size(), want.t_ns.size());
  ASSERT_EQ(s["bytes"].size(), owners.size() * want.t_ns.size());
  int64_t highest = 0;
  uint64_t highest_t = 0;
  for (size_t i = 0; i < want.t_ns.size(); ++i) {
    EXPECT_EQ(s["t"][i], want.t_ns[i] - l->an.summary.start_ns);
    if (i > 0) {
      EXPECT_GE(s["t"][i], s["t"][i - 1]);
    }
    int64_t total = 0;
    for (size_t k = 0; k < owners.size(); ++k)
      total += s["bytes"][i * owners.size() + k].get<int64_t>();
    if (total > highest) {
      highest = total;
      highest_t = s["t"][i];
    }
    EXPECT_EQ(s["bytes"][i * owners.size() + owners.size() - 1], 0);  // six owners: none other
  }
  EXPECT_EQ(highest, 1380473160);
  EXPECT_EQ(highest_t, 8725399668u);
  // What was live at the peak: PyTorch's categories joined (the report cuts the owners to 5).
  const json& p = s["at_peak"];
  EXPECT_EQ(p["live_bytes"], 1380473160);
  EXPECT_EQ(p["capacity_bytes"], 150109880320u);
  EXPECT_EQ(p["range"], "aten::_log_softmax_backward_data");
  EXPECT_EQ(p["torch_moment"], "reserved_peak");
  EXPECT_EQ(p["owners_by"], "owner");
  const std::vector<std::pair<std::string, int64_t>> owners_at_peak = {
      {"activations (PyTorch)", 610308608},
      {"cached, unused (PyTorch caching allocator)", 242813952},
      {"optimizer state (PyTorch)", 174342144},
      {"cuBLAS (libcublas.so.13)", 134481920},
      {"other tensors (PyTorch)", 134218240}};
  ASSERT_EQ(p["owners"].size(), owners_at_peak.size());
  for (size_t i = 0; i < owners_at_peak.size(); ++i) {
    EXPECT_EQ(p["owners"][i]["name"], owners_at_peak[i].first);
    EXPECT_EQ(p["owners"][i]["live_bytes"], owners_at_peak[i].second);
  }
  ASSERT_EQ(p["largest"].size(), 5u);
  EXPECT_EQ(p["largest"][0]["bytes"], 138412032);
  EXPECT_EQ(p["largest"][0]["owner"], "PyTorch caching allocator (libc10_cuda.so)");
  EXPECT_EQ(p["largest"][0]["range"], "aten::sum");
  EXPECT_EQ(p["largest"][1]["bytes"], 134217728);
  EXPECT_EQ(p["largest"][1]["range"], "aten::_log_softmax_backward_data");
}

// A run whose library CUPTI did not name for its allocations (the bundled run, format before
// 1.5) still gets its series, with what was live at the peak by library.
TEST(HtmlMemory, ByLibraryWithoutPyTorchsCategories) {
  auto l = Load(Src("examples/default-run"));
  const json doc = json::parse(HtmlReportData(*l->tl, l->hints, HtmlOptions{}));
  ASSERT_EQ(doc.at("memory_by_owner").size(), 1u);
  const json& s = doc["memory_by_owner"][0];
  const std::vector<std::string> owners = {"(library not recorded) from cudaMalloc",
                                           "static memory (module globals)", "other owners"};
  EXPECT_EQ(s["owners"].get<std::vector<std::string>>(), owners);
  EXPECT_EQ(s["peak_bytes"], 350497084);
  EXPECT_EQ(s["at_peak"]["owners_by"], "library");
  ASSERT_EQ(s["at_peak"]["owners"].size(), 2u);
  EXPECT_EQ(s["at_peak"]["owners"][0]["name"], "(library not recorded) from cudaMalloc");
  EXPECT_EQ(s["at_peak"]["owners"][0]["live_bytes"], 350488576);
  EXPECT_EQ(s["at_peak"]["owners"][1]["live_bytes"], 8508);
  EXPECT_EQ(s["at_peak"]["range"], "");
  EXPECT_EQ(s["at_peak"]["largest"][0]["range"], "aten::addmm");
}

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
