// CUDA graphs in the analysis: nodes followed from the executable graph back to where they were
// captured, per-node work attributed there, graph-level launches shared among the capture
// ranges by node count. The record sequences are the ones CUPTI 13.0 produced on the H100
// (measurements/h100-2026-11-23-issue10/probe_graph.txt): capture makes nodes
// GRAPH<<32|i; instantiation makes the executable graph's nodes (Created, on the instantiating
// thread), reports each cloned from its template node under the same id, and adds helper nodes
// of its own (graph-level tracing) that are never cloned.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/timeline.h"
#include "test_util.h"
#include "workload_checks.h"

namespace kprof {
namespace {

using test::TraceBuilder;
using testing::FindRow;

constexpr uint32_t kTid = 11;
constexpr uint64_t Node(uint32_t graph, uint32_t i) {
  return static_cast<uint64_t>(graph) << 32 | i;
}

Record& MadeNode(TraceBuilder& b, uint64_t t, uint32_t graph, uint64_t id) {
  Record& r = b.Add(RecordKind::GraphNode, "", t, t);
  r.tid = kTid;
  r.bytes = id;
  r.a = graph;
  r.flags = static_cast<uint8_t>(GraphNodeOrigin::Created);
  return r;
}

void ClonedNode(TraceBuilder& b, uint64_t t, uint32_t graph, uint64_t id, uint32_t orig_graph,
                uint64_t orig) {
  MadeNode(b, t, graph, id);                                   // instantiation makes it first ...
  Record& r = b.Add(RecordKind::GraphNode, "", t + 1, t + 1);  // ... then reports the clone
  r.tid = kTid;
  r.bytes = id;
  r.a = graph;
  r.flags = static_cast<uint8_t>(GraphNodeOrigin::Cloned);
  r.b = orig_graph;
  r.c = static_cast<uint32_t>(orig);
  r.d = static_cast<uint32_t>(orig >> 32);
}

void GraphEvent(TraceBuilder& b, uint64_t t, GraphEventKind kind, uint32_t a, uint32_t src = 0) {
  Record& r = b.Add(RecordKind::GraphEvent, "", t, t);
  r.tid = kTid;
  r.flags = static_cast<uint8_t>(kind);
  r.a = a;
  r.b = src;
}

// Graph 1 captured inside "capture": nodes 0,1 in "opA", node 2 in "opB"; instantiated as
// executable graph 4 (nodes 4<<32|0..2 cloned from 1<<32|0..2, plus helper node 4<<32|3).
TraceBuilder CapturedGraph() {
  TraceBuilder b;
  b.Range(kTid, "capture", 1000, 9000);
  b.Range(kTid, "opA", 1100, 1900);
  b.Range(kTid, "opB", 2100, 2900);
  b.Range(kTid, "replay", 10000, 90000);
  GraphEvent(b, 1050, GraphEventKind::GraphCreated, 1);
  MadeNode(b, 1200, 1, Node(1, 0));
  MadeNode(b, 1300, 1, Node(1, 1));
  MadeNode(b, 2200, 1, Node(1, 2));
  for (uint32_t i = 0; i < 3; ++i) ClonedNode(b, 3000 + 10 * i, 4, Node(4, i), 1, Node(1, i));
  MadeNode(b, 3100, 4, Node(4, 3));  // a helper node of the executable graph
  GraphEvent(b, 3200, GraphEventKind::ExecCreated, 4, 1);
  return b;
}

TEST(Graphs, ExecutableGraphNodesLeadBackToWhereTheyWereCaptured) {
  TraceBuilder b = CapturedGraph();
  kprof::Run run;
  run.processes.push_back(b.t);
  Timeline tl = BuildTimeline(run);
  const GraphIndex& g = tl.processes[0].graphs;
  EXPECT_EQ(g.captures, 1u);
  EXPECT_EQ(g.instantiations, 1u);
  const ProcessIndex& ix = tl.processes[0].index;
  auto name = [&](uint64_t node) {
    int r = g.CaptureRange(node);
    return r < 0 ? std::string("-") : std::string(ix.Name(static_cast<size_t>(r)));
  };
  EXPECT_EQ(name(Node(4, 0)), "opA");
  EXPECT_EQ(name(Node(4, 1)), "opA");
  EXPECT_EQ(name(Node(4, 2)), "opB");
  EXPECT_EQ(name(Node(1, 2)), "opB");
  EXPECT_EQ(name(Node(4, 3)), "capture");  // made where it was instantiated
  ASSERT_EQ(g.graphs.count(4), 1u);
  const GraphInfo& exec = g.graphs.at(4);
  EXPECT_EQ(exec.source, 1u);
  EXPECT_EQ(exec.nodes, 3u) << "the helper node is not one of the program's";
  ASSERT_EQ(exec.capture_ranges.size(), 2u);
  uint64_t in_a = 0, in_b = 0;
  for (const auto& [range, n] : exec.capture_ranges) {
    ASSERT_GE(range, 0);
    (ix.Name(static_cast<size_t>(range)) == "opA" ? in_a : in_b) += n;
  }
  EXPECT_EQ(in_a, 2u);
  EXPECT_EQ(in_b, 1u);
}

TEST(Graphs, NodeLevelWorkGoesToTheOpThatCapturedItNotToTheLaunch) {
  TraceBuilder b = CapturedGraph();
  // Two launches of graph 4 inside "replay"; each runs its three nodes (and a memset node).
  for (uint32_t l = 0; l < 2; ++l) {
    const uint64_t t0 = 20000 + 10000 * l;
    for (uint32_t i = 0; i < 3; ++i) {
      b.Launch(kTid, t0, "graph_node", t0 + 1000 + 100 * i, t0 + 1050 + 100 * i, 7,
               "cudaGraphLaunch");
      b.t.records.back().bytes = Node(4, i);
      b.t.records.back().flags = 1;
    }
  }
  // An eager kernel in "replay".
  b.Launch(kTid, 60000, "eager", 61000, 61100);
  kprof::Run run;
  run.processes.push_back(b.t);
  Timeline tl = BuildTimeline(run);
  size_t in_a = 0, in_b = 0, in_replay = 0;
  for (const Attributed& at : Attribute(tl)) {
    ASSERT_FALSE(at.ranges.empty());
    ASSERT_NE(at.api, nullptr);
    const std::string inner = b.t.Name(*at.ranges.back());
    in_a += inner == "opA";
    in_b += inner == "opB";
    in_replay += inner == "replay";
    if (GraphNodeOf(*at.activity) != 0) {
      EXPECT_EQ(b.t.Name(*at.ranges.front()), "capture");
      EXPECT_EQ(b.t.Name(*at.api), "cudaGraphLaunch");
    }
  }
  EXPECT_EQ(in_a, 4u);
  EXPECT_EQ(in_b, 2u);
  EXPECT_EQ(in_replay, 1u);
  Analysis an = Analyze(tl);
  EXPECT_EQ(an.summary.graph_node_activities, 6u);
  EXPECT_EQ(an.summary.graph_launches, 0u);
  ASSERT_NE(FindRow(an.ops, "opA"), nullptr);
  EXPECT_EQ(FindRow(an.ops, "opA")->kernels, 4u);
  EXPECT_EQ(FindRow(an.ops, "opA")->gpu_ns, 4u * 50);
  EXPECT_EQ(FindRow(an.ops, "opB")->gpu_ns, 2u * 50);
  EXPECT_EQ(FindRow(an.ops, "replay")->gpu_ns, 100u);
}

TEST(Graphs, GraphLevelLaunchIsSharedAmongCaptureRangesByNodeCount) {
  TraceBuilder b = CapturedGraph();
  for (uint32_t l = 0; l < 3; ++l) {
    const uint64_t t0 = 20000 + 10000 * l;
    b.Launch(kTid, t0, "x", 0, 0, 7, "cudaGraphLaunch");
    Record& launch = b.t.records.back();  // the "kernel" the helper made becomes the launch
    launch.kind = static_cast<uint8_t>(RecordKind::GraphLaunch);
    launch.name = b.t.strings.Intern("CUDA graph 4");
    launch.a = 4;
    launch.start_ns = t0 + 1000;
    launch.end_ns = t0 + 1000 + 3000;  // 3 us per launch
  }
  kprof::Run run;
  run.processes.push_back(b.t);
  Timeline tl = BuildTimeline(run);
  Analysis an = Analyze(tl);
  EXPECT_EQ(an.summary.graph_launches, 3u);
  EXPECT_EQ(an.summary.graph_ns, 9000u);
  EXPECT_EQ(an.summary.gpu_busy_ns, 9000u);
  EXPECT_EQ(an.summary.kernels, 0u);
  ASSERT_NE(FindRow(an.ops, "opA"), nullptr);
  ASSERT_NE(FindRow(an.ops, "opB"), nullptr);
  EXPECT_EQ(FindRow(an.ops, "opA")->gpu_ns, 6000u);  // 2 of 3 nodes
  EXPECT_EQ(FindRow(an.ops, "opB")->gpu_ns, 3000u);  // 1 of 3
  EXPECT_EQ(FindRow(an.ops, "opA")->gpu_projected_ns, 9000u);
  const GroupRow* replay = FindRow(an.ops, "replay");
  EXPECT_TRUE(replay == nullptr || replay->gpu_ns == 0);
}

TEST(Graphs, GraphLaunchWithoutKnownNodesGoesToItsLaunchRange) {
  TraceBuilder b;
  b.Range(kTid, "replay", 1000, 9000);
  b.Launch(kTid, 2000, "x", 0, 0, 7, "cudaGraphLaunch");
  Record& launch = b.t.records.back();
  launch.kind = static_cast<uint8_t>(RecordKind::GraphLaunch);
  launch.a = 9;
  launch.start_ns = 3000;
  launch.end_ns = 4000;
  kprof::Run run;
  run.processes.push_back(b.t);
  Analysis an = Analyze(BuildTimeline(run));
  ASSERT_NE(FindRow(an.ops, "replay"), nullptr);
  EXPECT_EQ(FindRow(an.ops, "replay")->gpu_ns, 1000u);
  EXPECT_EQ(an.summary.graph_launches, 1u);
}

TEST(Graphs, ACycleOfClonesFromAHostileFileEnds) {
  TraceBuilder b;
  b.Range(kTid, "r", 1000, 9000);
  // Node 1 cloned from 2, 2 cloned from 1: no node was ever made.
  for (uint64_t id : {uint64_t{1}, uint64_t{2}}) {
    Record& r = b.Add(RecordKind::GraphNode, "", 2000, 2000);
    r.tid = kTid;
    r.bytes = id;
    r.a = 1;
    r.flags = static_cast<uint8_t>(GraphNodeOrigin::Cloned);
    r.c = static_cast<uint32_t>(3 - id);
  }
  kprof::Run run;
  run.processes.push_back(b.t);
  Timeline tl = BuildTimeline(run);
  EXPECT_EQ(tl.processes[0].graphs.CaptureRange(1), -1);
  EXPECT_EQ(tl.processes[0].graphs.CaptureRange(2), -1);
}

}  // namespace
}  // namespace kprof
