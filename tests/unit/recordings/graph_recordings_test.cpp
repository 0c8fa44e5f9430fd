// CUDA graphs on real recordings (H100, scripts/record_fixtures.sh ... graphs): graph_replay with a
// 100-node graph (10 kernels captured in each of layer0..layer9) launched 20 times, then 50 eager
// kernels in "eager", in both graph modes; the same graph captured and instantiated before every
// launch; PyTorch's torch.cuda.graph (72 kernels per replay, 20 replays) in both modes;
// kernels/graph_kinds 3 5 in both modes (cuGraphLaunch, a graph launched from the GPU, a
// conditional WHILE node whose body runs 5 times per launch; 3 launches each).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"
#include "test_util.h"
#include "workload_checks.h"

namespace kprof {
namespace {

using namespace kprof::testing;

kprof::Run Load(const std::string& name) {
  return ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name});
}

// graph_replay_graph (format 1.1) holds a clone record per node of the executable graph;
// graph_replay_graph_f12 (1.2) none: with graph-level tracing the agent no longer asks for them,
// and the executable graph's ranges are its template's. Both give the same view.
class GraphModeRecordings : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphModeRecordings, GraphModeOneRecordPerLaunchSharedAmongTheCaptureRanges) {
  kprof::Run run = Load(GetParam());
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(t.meta.at("graph_trace"), "graph");
  EXPECT_EQ(Count(t, RecordKind::GraphLaunch), 20u);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "graph_node"), 0u);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "eager_step"), 50u);
  Timeline tl = BuildTimeline(run);
  const GraphIndex& g = tl.processes[0].graphs;
  EXPECT_EQ(g.captures, 1u);
  EXPECT_EQ(g.instantiations, 1u);
  uint32_t launched = 0;
  for (const Record& r : t.records)
    if (r.Kind() == RecordKind::GraphLaunch) launched = r.a;
  ASSERT_EQ(g.graphs.count(launched), 1u);
  const GraphInfo& info = g.graphs.at(launched);
  EXPECT_EQ(info.nodes, 100u);
  ASSERT_EQ(info.capture_ranges.size(), 10u);
  for (const auto& [range, n] : info.capture_ranges) {
    ASSERT_GE(range, 0);
    EXPECT_EQ(tl.processes[0].index.Name(static_cast<size_t>(range)).substr(0, 5), "layer");
    EXPECT_EQ(n, 10u);
  }
  Analysis an = Analyze(tl);
  EXPECT_EQ(an.summary.graph_launches, 20u);
  EXPECT_EQ(an.summary.kernels, 50u);
  uint64_t layers = 0;
  for (int k = 0; k < 10; ++k) {
    const GroupRow* row = FindRow(an.ops, "layer" + std::to_string(k));
    ASSERT_NE(row, nullptr) << k;
    // Equal node counts: equal shares (integer division leaves the rest to the last range).
    EXPECT_NEAR(static_cast<double>(row->gpu_ns), an.summary.graph_ns / 10.0, 20 * 10.0) << k;
    layers += row->gpu_ns;
  }
  EXPECT_EQ(layers, an.summary.graph_ns);
  ASSERT_NE(FindRow(an.ops, "eager"), nullptr);
  EXPECT_EQ(FindRow(an.ops, "eager")->kernels, 50u);
  const GroupRow* replay = FindRow(an.ops, "replay");
  EXPECT_TRUE(replay == nullptr || replay->gpu_ns == 0);
}

INSTANTIATE_TEST_SUITE_P(BothFormats, GraphModeRecordings,
                         ::testing::Values("graph_replay_graph", "graph_replay_graph_f12"));

TEST(GraphRecordings, GraphModeRecordsNoClonesAndTheAgentsOwnTime) {
  kprof::Run run = Load("graph_replay_graph_f12");
  const ProcessTrace& t = Only(run);
  uint64_t inst_from = 0, inst_to = 0;
  for (const Record& r : t.records)
    if (r.Kind() == RecordKind::RuntimeApi && GraphApiOf(t.Name(r)) == GraphApi::Instantiate)
      inst_from = r.start_ns, inst_to = r.end_ns;
  ASSERT_NE(inst_to, 0u);
  uint64_t captured = 0, by_instantiation = 0, cloned = 0, timed = 0;
  for (const Record& r : t.records) {
    if (r.Kind() != RecordKind::GraphNode) continue;
    if (r.flags == static_cast<uint8_t>(GraphNodeOrigin::Cloned)) {
      ++cloned;
      continue;
    }
    (r.start_ns >= inst_from && r.start_ns <= inst_to ? by_instantiation : captured) += 1;
    EXPECT_GE(r.end_ns, r.start_ns);
    timed += r.end_ns > r.start_ns ? 1 : 0;
  }
  // The 100 captured nodes; the instantiation's own (the executable graph's and its helpers'),
  // which the analysis leaves out; no clone records.
  EXPECT_EQ(captured, 100u);
  EXPECT_EQ(by_instantiation, 102u);
  EXPECT_EQ(cloned, 0u);
  EXPECT_EQ(timed, captured + by_instantiation);  // each carries the agent's time in its callback
}

TEST(GraphRecordings, NodeModeEveryNodeGoesToTheLayerThatCapturedIt) {
  kprof::Run run = Load("graph_replay_node");
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(t.meta.at("graph_trace"), "node");
  EXPECT_EQ(Count(t, RecordKind::GraphLaunch), 0u);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "graph_node"), 2000u);
  std::map<std::string, size_t> inner;
  for (const Attributed& at : Attribute(BuildTimeline(run))) {
    inner[at.ranges.empty() ? "(no range)" : std::string(t.Name(*at.ranges.back()))]++;
    if (GraphNodeOf(*at.activity) != 0) {
      EXPECT_EQ(t.Name(*at.ranges.front()), "capture");
      ASSERT_NE(at.api, nullptr);
      EXPECT_EQ(t.Name(*at.api), "cudaGraphLaunch");
    }
  }
  for (int k = 0; k < 10; ++k) EXPECT_EQ(inner["layer" + std::to_string(k)], 200u) << k;
  EXPECT_EQ(inner["eager"], 50u);
  EXPECT_EQ(inner.count("replay"), 0u) << inner["replay"];
  Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.graph_node_activities, 2000u);
  EXPECT_EQ(an.summary.kernels, 2050u);
}

TEST(GraphRecordings, TheGraphViewListsEachLaunchedGraph) {
  struct Want {
    const char* fixture;
    size_t graphs;
    uint64_t launches, nodes, node_activities;
  };
  for (const Want& w :
       {Want{"graph_replay_graph", 1, 20, 100, 0}, Want{"graph_replay_node", 1, 20, 100, 2000},
        Want{"graph_recapture", 20, 1, 100, 0}, Want{"torch_graph_node", 1, 20, 72, 1440},
        Want{"torch_graph_graph", 1, 20, 72, 0}}) {
    SCOPED_TRACE(w.fixture);
    kprof::Run run = Load(w.fixture);
    AnalysisOptions opts;
    opts.by = GroupBy::Graph;
    Analysis an = Analyze(BuildTimeline(run), opts);
    ASSERT_EQ(an.graphs.size(), w.graphs);
    ASSERT_EQ(an.rows.size(), w.graphs);
    uint64_t total = 0;
    for (const GraphRow& g : an.graphs) {
      EXPECT_EQ(g.launches, w.launches);
      EXPECT_EQ(g.per_launch.count, w.launches);
      EXPECT_EQ(g.nodes, w.nodes);
      EXPECT_EQ(g.instantiations, 1u);
      EXPECT_EQ(g.node_activities, w.node_activities);
      EXPECT_LE(g.busy_ns, g.per_launch.total_ns);
      EXPECT_FALSE(g.captured_in.empty());
      total += g.per_launch.total_ns;
    }
    EXPECT_EQ(an.rows.front().key, an.graphs.front().Key());
    EXPECT_EQ(an.rows.front().calls, w.launches);
    // Graph-level: the launches are the graph GPU time of the totals.
    if (w.node_activities == 0) {
      EXPECT_EQ(total, an.summary.graph_ns);
    }
  }
  // A run without graphs has no graph rows.
  EXPECT_TRUE(Analyze(BuildTimeline(Load("vector_add"))).graphs.empty());
}

TEST(GraphRecordings, GapsInsideAGraphAreNotLaunchLatency) {
  // launch-bound advises CUDA graphs for short gaps before kernels; the gaps between the nodes
  // of a graph launch are not the host's launches and must not be priced as such.
  for (const std::string name : {"graph_replay_node", "torch_graph_node"}) {
    kprof::Run run = Load(name);
    Timeline tl = BuildTimeline(run);
    const ProcessTimeline& p = tl.processes[0];
    size_t inside = 0, short_inside = 0;
    for (const Gap& g : p.gaps) {
      if (GraphNodeOf(*p.acts[g.next]) == 0) continue;
      ++inside;
      short_inside += g.kind == GapKind::Short;
    }
    EXPECT_GT(inside, 100u) << name;
    EXPECT_EQ(short_inside, 0u) << name;
  }
}

TEST(GraphRecordings, RecaptureBeforeEveryLaunchIsCounted) {
  kprof::Run run = Load("graph_recapture");
  Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.graph_launches, 20u);
  EXPECT_EQ(an.summary.graph_captures, 20u);
  EXPECT_EQ(an.summary.graph_instantiations, 20u);
  // Healthy runs beside it: one capture, one instantiation, and no graph-recapture hint.
  Analysis healthy = Analyze(BuildTimeline(Load("graph_replay_graph")));
  EXPECT_EQ(healthy.summary.graph_captures, 1u);
  EXPECT_EQ(healthy.summary.graph_instantiations, 1u);
  for (const char* f :
       {"graph_replay_graph", "graph_replay_node", "torch_graph_graph", "torch_graph_node"}) {
    kprof::Run r = Load(f);
    Timeline tl = BuildTimeline(r);
    for (const Hint& h : ComputeHints(tl, Analyze(tl))) EXPECT_NE(h.id, "graph-recapture") << f;
  }
}

TEST(GraphRecordings, TorchCudaGraphReplaysGoToTheAtenOpsThatCapturedThem) {
  for (const std::string mode : {"node", "graph"}) {
    kprof::Run run = Load("torch_graph_" + mode);
    Analysis an = Analyze(BuildTimeline(run));
    uint64_t aten = 0;
    for (const GroupRow& g : an.ops)
      if (g.key.rfind("aten::", 0) == 0) aten += g.gpu_ns;
    const GroupRow* replay = FindRow(an.ops, "replay");
    EXPECT_TRUE(replay == nullptr || replay->gpu_ns == 0) << mode;
    if (mode == "node") {
      EXPECT_EQ(an.summary.graph_node_activities, 72u * 20u);
      // Every replayed kernel is in an aten op (the 24 linear layers' GEMMs among them).
      ASSERT_NE(FindRow(an.ops, "aten::addmm"), nullptr);
      EXPECT_EQ(FindRow(an.ops, "aten::addmm")->kernels % 20u, 0u);
    } else {
      EXPECT_EQ(an.summary.graph_launches, 20u);
      EXPECT_EQ(an.summary.graph_captures, 1u);
      // The whole replay time is shared among the aten ops.
      EXPECT_GE(aten, an.summary.graph_ns);
    }
  }
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// torch.compile(mode="reduce-overhead") on the H100 (tests/gpu/scripts/torch_graph.py 50 --compile,
// both modes): Inductor's CUDA-graph trees capture one graph of 48 nodes outside any NVTX range and
// replay it 52 times (3 warm-up calls, 50 timed inside "replay"). Captured outside any range, its
// work goes to the range of each launch in both modes.
TEST(GraphRecordings, TorchCompileReduceOverheadGraphsAreSeen) {
  for (const std::string mode : {"graph", "node"}) {
    SCOPED_TRACE(mode);
    kprof::Run run =
        ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/torch_compile_" + mode});
    Timeline tl = BuildTimeline(run);
    Analysis an = Analyze(tl);
    ASSERT_EQ(an.graphs.size(), 1u);
    const GraphRow& g = an.graphs.front();
    EXPECT_EQ(g.launches, 52u);
    EXPECT_EQ(g.nodes, 48u);
    EXPECT_EQ(g.instantiations, 1u);
    EXPECT_EQ(g.captured_in, "(no range) (100%)");
    EXPECT_EQ(an.summary.graph_captures, 2u);
    EXPECT_EQ(an.summary.graph_instantiations, 2u);
    EXPECT_EQ(an.summary.graph_node_activities, mode == "node" ? 52u * 48u : 0u);
    EXPECT_EQ(an.summary.graph_launches, mode == "graph" ? 52u : 0u);
    // 50 of the 52 launches are inside "replay": at least 50/52 of the graphs' time is there.
    const GroupRow* replay = FindRow(an.ops, "replay");
    ASSERT_NE(replay, nullptr);
    EXPECT_GE(replay->gpu_ns * 52, g.busy_ns * 50);
  }
}

// The other ways to launch a graph. Node level: cuGraphLaunch's nodes like any others; the
// conditional body's kernels (CUPTI gives them no correlation id) in their launch, so the graph
// has 3 launches, not 4, and they are in the range of the launch, not "(no range)"; the graph
// made for device launch is reported as not recorded. Graph level: the device launches recorded,
// from the graph whose kernel launched them, and charged to the range that captured them.
TEST(GraphRecordings, DriverDeviceAndConditionalLaunches) {
  {
    kprof::Run run = Load("graph_kinds_node");
    const ProcessTrace& t = Only(run);
    ExpectClean(t);
    EXPECT_EQ(t.meta.at("device_graph_trace"), "off");
    EXPECT_EQ(CountNamed(t, RecordKind::DriverApi, "cuGraphLaunch"), 3u);
    EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "driver_node"), 9u);
    EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "cond_body"), 15u);
    EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "device_node"), 0u);
    size_t uncorrelated = 0;
    for (const Record& r : t.records)
      uncorrelated += r.Kind() == RecordKind::Kernel && r.correlation == 0;
    EXPECT_EQ(uncorrelated, 15u);  // the bodies
    Timeline tl = BuildTimeline(run);
    EXPECT_EQ(tl.processes[0].inherited_correlation.size(), 15u);
    Analysis an = Analyze(tl);
    EXPECT_EQ(an.summary.graph_device_unrecorded, 1u);
    EXPECT_EQ(an.summary.graph_node_activities, 30u);
    std::map<std::string, uint64_t> launches;
    for (const GraphRow& g : an.graphs) launches[g.captured_in] = g.launches;
    EXPECT_EQ(launches, (std::map<std::string, uint64_t>{{"build_conditional (100%)", 3},
                                                         {"capture_driver (100%)", 3},
                                                         {"capture_launcher (100%)", 3}}));
    AnalysisOptions by_path;
    by_path.by = GroupBy::RangePath;
    Analysis paths = Analyze(tl, by_path);
    const GroupRow* body = FindRow(paths.rows, "replay_conditional");
    ASSERT_NE(body, nullptr);
    EXPECT_EQ(body->kernels, 15u);
    EXPECT_EQ(FindRow(paths.rows, "capture_driver")->kernels, 9u);
    EXPECT_EQ(FindRow(paths.rows, "capture_launcher")->kernels, 3u);
    EXPECT_EQ(FindRow(paths.rows, "build_conditional")->kernels, 3u);
    for (const Hint& h : ComputeHints(tl, an)) EXPECT_NE(h.id, "graph-recapture");
  }
  {
    kprof::Run run = Load("graph_kinds_graph");
    const ProcessTrace& t = Only(run);
    ExpectClean(t);
    EXPECT_EQ(t.meta.at("device_graph_trace"), "on");
    EXPECT_EQ(Count(t, RecordKind::GraphLaunch), 12u);
    Timeline tl = BuildTimeline(run);
    Analysis an = Analyze(tl);
    EXPECT_EQ(an.summary.graph_launches, 12u);
    EXPECT_EQ(an.summary.graph_device_launches, 3u);
    EXPECT_EQ(an.summary.graph_device_unrecorded, 0u);
    EXPECT_EQ(an.summary.graph_captures, 5u);  // four graphs and the conditional's body
    EXPECT_EQ(an.summary.graph_instantiations, 4u);
    uint32_t launcher = 0;
    const GraphRow* device = nullptr;
    for (const GraphRow& g : an.graphs) {
      if (g.captured_in == "capture_launcher (100%)") launcher = g.id;
      if (g.device_launches != 0) device = &g;
    }
    ASSERT_NE(device, nullptr);
    EXPECT_EQ(device->launches, 3u);
    EXPECT_EQ(device->device_launches, 3u);
    EXPECT_EQ(device->captured_in, "capture_device (100%)");
    EXPECT_EQ(device->launched_by, "graph " + std::to_string(launcher));
    // Each device launch takes the correlation of the host launch of its launcher.
    const ProcessTimeline& p = tl.processes[0];
    size_t inherited = 0;
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::GraphLaunch || (a->flags & kGraphLaunchFromDevice) == 0)
        continue;
      const Record* api = p.Api(*a);
      ASSERT_NE(api, nullptr);
      EXPECT_EQ(t.Name(*api).rfind("cudaGraphLaunch", 0), 0u);
      ++inherited;
    }
    EXPECT_EQ(inherited, 3u);
    const GroupRow* dev = FindRow(an.ops, "capture_device");
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(dev->gpu_ns, device->per_launch.total_ns);
    for (const Hint& h : ComputeHints(tl, an)) EXPECT_NE(h.id, "graph-recapture");
  }
}

}  // namespace
}  // namespace kprof
