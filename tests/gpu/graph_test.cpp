// CUDA graphs on the GPU (issue 10): graph-level tracing (one record per launch, nodes known
// from capture), node-level tracing (every node, attributed to the range that captured it), a
// PyTorch model under torch.cuda.graph. Label "gpu": skipped without a GPU.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gpu_harness.h"
#include "kprof/analysis.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"
#include "workload_checks.h"

using namespace kprof;
using namespace kprof::gpu_test;
using namespace kprof::testing;

namespace {

size_t GraphNodeActivities(const ProcessTrace& t) {
  size_t n = 0;
  for (const Record& r : t.records) n += IsGpuActivity(r.Kind()) && GraphNodeOf(r) != 0;
  return n;
}

}  // namespace

TEST(GpuGraph, GraphModeRecordsEachLaunchOnceAndKnowsTheNodes) {
  REQUIRE_GPU();
  std::string dir = FreshDir("graph_mode");
  Result r = Kprof(dir, {Bin("kernels/graph_replay"), "1000", "1000"});
  ASSERT_EQ(r.status, 0) << r.out;
  kprof::Run run = ReadInputs({dir});
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(t.meta.at("graph_trace"), "graph");
  EXPECT_EQ(Count(t, RecordKind::GraphLaunch), 1000u);
  EXPECT_EQ(GraphNodeActivities(t), 0u);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "graph_node"), 0u);
  Timeline tl = BuildTimeline(run);
  const GraphIndex& g = tl.processes[0].graphs;
  EXPECT_EQ(g.captures, 1u);
  EXPECT_EQ(g.instantiations, 1u);
  size_t launched = 0;
  for (const auto& [id, info] : g.graphs) {
    bool has_launch = false;
    for (const Record& rec : t.records)
      has_launch |= rec.Kind() == RecordKind::GraphLaunch && rec.a == id;
    if (!has_launch) continue;
    ++launched;
    EXPECT_EQ(info.nodes, 1000u) << "graph " << id;
    ASSERT_EQ(info.capture_ranges.size(), 10u) << "graph " << id;
  }
  EXPECT_EQ(launched, 1u);
  Analysis an = Analyze(tl);
  EXPECT_EQ(an.summary.graph_launches, 1000u);
  // The launches' GPU time is shared among layer0..layer9 by node count: 100 nodes each.
  uint64_t shared = 0;
  for (int k = 0; k < 10; ++k) {
    const GroupRow* row = FindRow(an.ops, "layer" + std::to_string(k));
    ASSERT_NE(row, nullptr) << "layer" << k;
    shared += row->gpu_ns;
  }
  EXPECT_EQ(shared, an.summary.graph_ns);
  std::printf("graph mode: %s\n", r.out.c_str());
}

TEST(GpuGraph, NodeModeAttributesEveryNodeToTheRangeThatCapturedIt) {
  REQUIRE_GPU();
  std::string dir = FreshDir("node_mode");
  Result r =
      KprofWith(dir, {"--graph-trace", "node"}, {Bin("kernels/graph_replay"), "1000", "1000"});
  ASSERT_EQ(r.status, 0) << r.out;
  kprof::Run run = ReadInputs({dir});
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(t.meta.at("graph_trace"), "node");
  EXPECT_EQ(Count(t, RecordKind::GraphLaunch), 0u);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "graph_node"), 1000000u);
  EXPECT_EQ(GraphNodeActivities(t), 1000000u);
  std::map<std::string, size_t> by_op;
  for (const Attributed& at : Attribute(BuildTimeline(run))) {
    if (GraphNodeOf(*at.activity) == 0) continue;
    ASSERT_FALSE(at.ranges.empty());
    by_op[std::string(t.Name(*at.ranges.back()))]++;
    EXPECT_EQ(t.Name(*at.ranges.front()), "capture");
  }
  ASSERT_EQ(by_op.size(), 10u);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(by_op["layer" + std::to_string(k)], 100000u) << k;
}

TEST(GpuGraph, SmallGraphBothModes) {
  REQUIRE_GPU();
  for (const std::string mode : {"graph", "node"}) {
    std::string dir = FreshDir("graph_launch_" + mode);
    Result r = KprofWith(dir, {"--graph-trace", mode}, {Bin("kernels/graph_launch"), "5"});
    ASSERT_EQ(r.status, 0) << r.out;
    kprof::Run run = ReadInputs({dir});
    const ProcessTrace& t = Only(run);
    EXPECT_EQ(CountNamed(t, RecordKind::RuntimeApi, "cudaGraphLaunch"), 5u);
    EXPECT_EQ(Count(t, RecordKind::GraphLaunch), mode == "graph" ? 5u : 0u);
    EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "graph_k"), mode == "graph" ? 0u : 20u);
    if (mode == "node") {
      for (const Attributed& at : Attribute(BuildTimeline(run))) {
        if (at.activity->Kind() != RecordKind::Kernel) continue;
        ASSERT_FALSE(at.ranges.empty());
        EXPECT_EQ(t.Name(*at.ranges.back()), "capture");
      }
    }
  }
}

TEST(GpuGraph, TorchCudaGraphReplaysAreAttributedToTheAtenOpsThatCapturedThem) {
  REQUIRE_GPU();
  if (!HaveTorch()) GTEST_SKIP() << "no PyTorch with CUDA";
  for (const std::string mode : {"node", "graph"}) {
    std::string dir = FreshDir("torch_graph_" + mode);
    Result r = KprofWith(dir, {"--graph-trace", mode},
                         {Python(), Src("tests/gpu/scripts/torch_graph.py"), "50"});
    ASSERT_EQ(r.status, 0) << r.out;
    kprof::Run run = ReadInputs({dir});
    Timeline tl = BuildTimeline(run);
    Analysis an = Analyze(tl);
    uint64_t aten = 0, replay = 0;
    for (const GroupRow& g : an.ops) {
      if (g.key.rfind("aten::", 0) == 0) aten += g.gpu_ns;
      if (g.key == "replay") replay += g.gpu_ns;
    }
    std::printf("torch %s: aten %llu ns, replay %llu ns, graph launches %llu, node work %llu\n",
                mode.c_str(), static_cast<unsigned long long>(aten),
                static_cast<unsigned long long>(replay),
                static_cast<unsigned long long>(an.summary.graph_launches),
                static_cast<unsigned long long>(an.summary.graph_node_activities));
    if (mode == "graph") {
      EXPECT_EQ(an.summary.graph_launches, 50u);
    }
    // The replays' GPU time is the aten ops', not the replay range's.
    EXPECT_GT(aten, 10 * replay) << mode;
  }
}

TEST(GpuGraph, DriverApiDeviceAndConditionalLaunchesAreRecordedOrReported) {
  REQUIRE_GPU();
  for (const std::string mode : {"node", "graph"}) {
    std::string dir = FreshDir("graph_kinds_" + mode);
    Result r = KprofWith(dir, {"--graph-trace", mode}, {Bin("kernels/graph_kinds"), "3", "5"});
    ASSERT_EQ(r.status, 0) << r.out;
    kprof::Run run = ReadInputs({dir});
    const ProcessTrace& t = Only(run);
    ExpectClean(t);
    EXPECT_EQ(CountNamed(t, RecordKind::DriverApi, "cuGraphLaunch"), 3u) << mode;
    EXPECT_EQ(CountNamed(t, RecordKind::RuntimeApi, "cudaGraphLaunch"), 6u) << mode;
    Timeline tl = BuildTimeline(run);
    Analysis an = Analyze(tl);
    std::map<std::string, std::pair<uint64_t, uint64_t>> graphs_by_range;  // launches, device
    for (const GraphRow& g : an.graphs) {
      std::printf("%s: %s launches %llu from device %llu (%s) captured in %s\n", mode.c_str(),
                  g.Key().c_str(), static_cast<unsigned long long>(g.launches),
                  static_cast<unsigned long long>(g.device_launches), g.launched_by.c_str(),
                  g.captured_in.c_str());
      graphs_by_range[g.captured_in] = {g.launches, g.device_launches};
    }
    if (mode == "node") {
      EXPECT_EQ(t.meta.at("device_graph_trace"), "off");
      EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "driver_node"), 9u);
      EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "fire_device_graph"), 3u);
      EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "set_counter"), 3u);
      EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "cond_body"), 15u);
      EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "device_node"), 0u);  // CUPTI 13.0: none
      EXPECT_EQ(an.summary.graph_device_unrecorded, 1u);
      // Every graph kernel in a range; the conditional body's launches are three, not four
      // (its kernels carry no correlation id and take their launch's).
      for (const Attributed& at : Attribute(tl)) {
        if (GraphNodeOf(*at.activity) == 0) continue;
        EXPECT_FALSE(at.ranges.empty()) << t.Name(*at.activity);
      }
      EXPECT_EQ(graphs_by_range["capture_driver (100%)"].first, 3u);
      EXPECT_EQ(graphs_by_range["capture_launcher (100%)"].first, 3u);
      EXPECT_EQ(graphs_by_range["build_conditional (100%)"].first, 3u);
    } else {
      EXPECT_EQ(t.meta.at("device_graph_trace"), "on");
      EXPECT_EQ(Count(t, RecordKind::GraphLaunch), 12u);
      EXPECT_EQ(an.summary.graph_device_launches, 3u);
      EXPECT_EQ(an.summary.graph_device_unrecorded, 0u);
      EXPECT_EQ(graphs_by_range["capture_device (100%)"], (std::pair<uint64_t, uint64_t>{3u, 3u}));
      EXPECT_EQ(graphs_by_range["capture_driver (100%)"].first, 3u);
      const GroupRow* dev = FindRow(an.ops, "capture_device");
      ASSERT_NE(dev, nullptr);
      EXPECT_GT(dev->gpu_ns, 0u);
    }
  }
}
