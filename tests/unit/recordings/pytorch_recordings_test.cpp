// CPU tests on H100 recordings of examples/train_mlp.py (10 steps, scripts/pytorch_session.sh):
// pytorch_auto (plain `kprof run`, the PyTorch layer adds op and module ranges), pytorch_emit
// (the script's own emit_nvtx, --pytorch off) and pytorch_off (no ranges but the script's
// "train_step"). docs/pytorch.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "kprof/analysis.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

kprof::Run Load(const std::string& name) {
  return ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name});
}

std::map<std::string, const GroupRow*> ByKey(const std::vector<GroupRow>& rows) {
  std::map<std::string, const GroupRow*> m;
  for (const GroupRow& r : rows) m[r.key] = &r;
  return m;
}

/// Op rows inside the script's "train_step" range, by op: (calls, kernels).
std::map<std::string, std::pair<uint64_t, uint64_t>> StepOps(const kprof::Run& run) {
  AnalysisOptions o;
  o.by = GroupBy::RangePath;
  Analysis a = Analyze(BuildTimeline(run), o);
  std::map<std::string, std::pair<uint64_t, uint64_t>> ops;
  for (const GroupRow& r : a.rows) {
    if (r.key.rfind("train_step/", 0) != 0) continue;
    auto& [calls, kernels] = ops[r.key.substr(r.key.rfind('/') + 1)];
    calls += r.calls;
    kernels += r.kernels;
  }
  return ops;
}

TEST(PyTorchRecordings, AutoGivesTheOpsOfEmitNvtxWithoutCodeChanges) {
  // Inside the training steps the same ops, called as often, running the same kernels, as with
  // the script's own emit_nvtx(). (Outside them auto names the set-up too: emit_nvtx only wraps
  // the loop.)
  auto autos = StepOps(Load("pytorch_auto"));
  auto emits = StepOps(Load("pytorch_emit"));
  EXPECT_GT(autos.size(), 40u);
  EXPECT_EQ(autos, emits);
  EXPECT_EQ(autos["aten::addmm"], std::make_pair(uint64_t{30}, uint64_t{40}));  // 3 Linear x 10
  // Without the layer, the steps hold no op at all.
  EXPECT_TRUE(StepOps(Load("pytorch_off")).empty());
}

TEST(PyTorchRecordings, ModuleViewIsTheModelTree) {
  kprof::Run run = Load("pytorch_auto");
  AnalysisOptions o;
  o.by = GroupBy::Module;
  Analysis a = Analyze(BuildTimeline(run), o);
  // The Sequential the script calls `model`, and its 7 children, in tree order.
  ASSERT_EQ(a.rows.size(), 8u);
  EXPECT_EQ(a.rows[0].key, "model");
  EXPECT_EQ(a.rows[0].kind, "Sequential");
  EXPECT_EQ(a.rows[0].depth, 0u);
  const std::map<std::string, std::string> kinds = {
      {"model.0", "Linear"}, {"model.1", "GELU"}, {"model.2", "LayerNorm"},
      {"model.3", "Linear"}, {"model.4", "GELU"}, {"model.5", "LayerNorm"},
      {"model.6", "Linear"}};
  uint64_t children_gpu = 0, children_bwd = 0, children_kernels = 0;
  for (size_t i = 1; i < a.rows.size(); ++i) {
    const GroupRow& r = a.rows[i];
    EXPECT_EQ(r.depth, 1u) << r.key;
    EXPECT_EQ(r.kind, kinds.at(r.key)) << r.key;
    EXPECT_EQ(r.calls, 10u) << r.key;
    EXPECT_GT(r.bwd_gpu_ns, 0u) << r.key;  // every module's backward is found
    EXPECT_LT(r.bwd_gpu_ns, r.gpu_ns) << r.key;
    if (i > 1) {
      EXPECT_LE(r.gpu_ns, a.rows[i - 1].gpu_ns) << r.key;  // siblings by GPU time
    }
    children_gpu += r.gpu_ns;
    children_bwd += r.bwd_gpu_ns;
    children_kernels += r.kernels;
  }
  // A Sequential runs nothing itself: its work is exactly its children's.
  EXPECT_EQ(a.rows[0].calls, 10u);
  EXPECT_EQ(a.rows[0].gpu_ns, children_gpu);
  EXPECT_EQ(a.rows[0].bwd_gpu_ns, children_bwd);
  EXPECT_EQ(a.rows[0].kernels, children_kernels);
  // Per step: Linear forward 1 kernel (addmm) + backward; GELU 1 + 1; LayerNorm 1 + 2.
  EXPECT_EQ(ByKey(a.rows)["model.1"]->kernels, 20u);
  EXPECT_EQ(ByKey(a.rows)["model.2"]->kernels, 30u);
  // What the layer added is reported.
  EXPECT_EQ(a.summary.pytorch_mode, "auto");
  EXPECT_EQ(a.summary.pytorch_added, "auto:ops,modules");
  // Module ranges are not ops, paths or NVTX ranges of the program.
  for (const RangeRow& r : a.ranges) EXPECT_NE(r.name.rfind("kprof.", 0), 0u) << r.name;
  Analysis ops = Analyze(BuildTimeline(run));
  for (const GroupRow& r : ops.rows) EXPECT_NE(r.key.rfind("kprof.", 0), 0u) << r.key;
}

/// "AddmmBackward0" -> "addmm"; "aten::native_layer_norm" -> "nativelayernorm".
std::string Squash(std::string s) {
  for (const char* cut : {"Backward0", "Backward1", "aten::"}) {
    if (auto at = s.find(cut); at != std::string::npos) s.erase(at, std::string(cut).size());
  }
  std::string out;
  for (char c : s)
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

TEST(PyTorchRecordings, EveryAutogradNodeIsTracedToTheForwardOpThatMadeIt) {
  for (const char* fixture : {"pytorch_auto", "pytorch_emit"}) {
    SCOPED_TRACE(fixture);
    kprof::Run run = Load(fixture);
    Timeline tl = BuildTimeline(run);
    const ProcessIndex& ix = tl.processes.at(0).index;
    size_t nodes = 0;
    std::map<std::string, size_t> made;
    for (size_t i = 0; i < ix.ranges.size(); ++i) {
      if (ix.backward_node.at(i) != static_cast<int>(i)) continue;
      const std::string node(ix.Name(i));
      if (run.processes[0].strings.Get(ix.ranges[i].start->name).find(", seq = ") ==
          std::string::npos)
        continue;  // AccumulateGrad: no sequence number, no forward op
      ++nodes;
      const int fwd = ix.creator.at(i);
      ASSERT_GE(fwd, 0) << node;
      const std::string op(ix.Name(static_cast<size_t>(fwd)));
      // The node is the backward of that op: LogSoftmaxBackward0 of aten::_log_softmax, ...
      const std::string want = Squash(node) == "nllloss" ? "nlllossforward" : Squash(node);
      EXPECT_EQ(Squash(op), want) << node << " <- " << op;
      EXPECT_LT(ix.ranges[static_cast<size_t>(fwd)].begin_ns, ix.ranges[i].begin_ns);
      EXPECT_NE(ix.ranges[static_cast<size_t>(fwd)].tid, ix.ranges[i].tid);  // autograd's thread
      ++made[node];
    }
    // Per step: 3 Addmm, 3 T (of each weight), 2 Gelu, 2 NativeLayerNorm, LogSoftmax, NllLoss.
    EXPECT_EQ(nodes, 120u);
    EXPECT_EQ(made["TBackward0"], 30u);
    EXPECT_EQ(made["AddmmBackward0"], 30u);
    EXPECT_EQ(made["NativeLayerNormBackward0"], 20u);
    // The op view prices each forward op with its backward: addmm's is the mm and sum kernels
    // of AddmmBackward0, all of it traced.
    Analysis a = Analyze(tl);
    auto ops = ByKey(a.ops);
    EXPECT_GT(ops.at("aten::addmm")->bwd_gpu_ns, ops.at("aten::addmm")->gpu_ns);
    EXPECT_EQ(ops.at("aten::mm")->bwd_gpu_ns, 0u);  // mm runs only inside backward here
    uint64_t linked = 0;
    for (const GroupRow& r : a.ops) linked += r.bwd_gpu_ns;
    EXPECT_EQ(linked, a.summary.backward_linked_ns);
  }
}

}  // namespace
}  // namespace kprof
