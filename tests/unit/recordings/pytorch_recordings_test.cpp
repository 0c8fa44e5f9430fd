// CPU tests on H100 recordings of examples/train_mlp.py (scripts/pytorch_session.sh):
// pytorch_auto (10 steps, plain `kprof run`: the PyTorch layer adds op and module ranges),
// pytorch_emit (the script's own emit_nvtx, --pytorch off), pytorch_off (no ranges but the
// script's "train_step"); and, 2 warm-up and 5 steps each (PHASE=fixtures), pytorch_stack
// (--pytorch stack), pytorch_eager_q and pytorch_compile_q (width 256, batch 8192, the script's
// QuickGELU; eager and torch.compile). docs/pytorch.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "kprof/analysis.h"
#include "kprof/compare.h"
#include "kprof/hints.h"
#include "kprof/output.h"
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

TEST(PyTorchRecordings, CompiledViewGivesTritonKernelsToTheirRegion) {
  kprof::Run run = Load("pytorch_compile_q");
  ASSERT_EQ(run.processes.size(), 2u);  // the script and Inductor's compile worker
  AnalysisOptions o;
  o.by = GroupBy::Compiled;
  Analysis a = Analyze(BuildTimeline(run), o);
  auto rows = ByKey(a.rows);
  ASSERT_EQ(rows.size(), 4u);
  const GroupRow& fwd = *rows.at("compiled 0/0 forward");
  const GroupRow& bwd = *rows.at("compiled 0/0 backward");
  const GroupRow& compiling = *rows.at(std::string(kCompilingRegion));
  const GroupRow& eager = *rows.at(std::string(kEagerRegion));
  // Each of the 7 calls of the compiled model (2 warm-up, 5 steps) runs its forward graph and,
  // on autograd's thread, its backward graph, both given to the module that called them.
  EXPECT_EQ(fwd.calls, 7u);
  EXPECT_EQ(bwd.calls, 7u);
  EXPECT_EQ(fwd.kind, "model");
  EXPECT_EQ(bwd.kind, "model");
  EXPECT_EQ(fwd.kernels, 35u);
  EXPECT_EQ(bwd.kernels, 154u);
  const auto triton = [](const GroupRow& g) {
    uint64_t n = 0;
    for (const KernelRow& k : g.kernel_rows)
      n += k.name.rfind("triton_", 0) == 0 ? k.stat.count : 0;
    return n;
  };
  EXPECT_EQ(triton(fwd), 14u);  // 2 fused QuickGELU+LayerNorm kernels a call
  EXPECT_EQ(triton(bwd), 98u);
  EXPECT_EQ(triton(eager), 0u);
  EXPECT_EQ(triton(compiling), 0u);  // Inductor benchmarks Triton configs in its worker
  // Compilation: its GPU work (autotuning the GEMMs), and no module's.
  EXPECT_EQ(compiling.calls, 2u);  // the forward frame and the backward graph
  EXPECT_EQ(compiling.kernels, 3046u);
  EXPECT_GT(compiling.gpu_ns, 10 * (fwd.gpu_ns + bwd.gpu_ns));
  EXPECT_EQ(eager.kernels, 118u);  // the optimizer, the loss; the copies are not kernels
  uint64_t all = 0;
  for (const GroupRow& g : a.rows) all += g.gpu_ns;
  uint64_t script = 0;
  for (const GroupRow& k : Analyze(BuildTimeline(run)).ops) script += k.gpu_ns;
  EXPECT_EQ(all, script);           // the view partitions the GPU time
  ASSERT_EQ(a.modules.size(), 1u);  // the model's children run inside compiled code
  EXPECT_EQ(a.modules[0].key, "model");
  EXPECT_EQ(a.modules[0].calls, 7u);
  EXPECT_EQ(a.modules[0].gpu_ns, fwd.gpu_ns + bwd.gpu_ns);
  EXPECT_EQ(a.modules[0].bwd_gpu_ns, bwd.gpu_ns);
  // Without torch.compile the view is empty.
  EXPECT_TRUE(Analyze(BuildTimeline(Load("pytorch_eager_q")), o).rows.empty());
}

TEST(PyTorchRecordings, CudaGraphsOfCompiledCodeBelongToTheirRegion) {
  // torch.compile(mode="reduce-overhead") of tests/gpu/scripts/torch_graph.py (--graph-trace
  // node, 50 replays after warm-up): Inductor records CUDA graphs inside its compiled graph's
  // call ("CUDAGraphNode.record (dynamo_timed)", which is not compilation); every node that
  // replays goes to the compiled region, through the range it was captured in.
  kprof::Run run = Load("pytorch_compile_cudagraphs");
  AnalysisOptions o;
  o.by = GroupBy::Compiled;
  Analysis a = Analyze(BuildTimeline(run), o);
  auto rows = ByKey(a.rows);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(a.summary.graph_node_activities, 2496u);
  const GroupRow& fwd = *rows.at("compiled 0/0 forward");
  EXPECT_EQ(fwd.calls, 53u);
  EXPECT_EQ(fwd.kind, "model");
  EXPECT_EQ(fwd.kernels, 2600u);  // the 2,496 graph nodes and the warm-up before recording
  EXPECT_EQ(rows.at(std::string(kCompilingRegion))->kernels, 0u);
  EXPECT_EQ(rows.at(std::string(kEagerRegion))->kernels, 97u);  // set-up (.cuda(), randn)
}

TEST(PyTorchRecordings, DiffOfEagerAndCompiledMatchesModules) {
  // Kernel names differ completely between the two runs; the model's modules still match.
  std::vector<RunDigest> digests;
  for (const char* name : {"pytorch_eager_q", "pytorch_compile_q"}) {
    kprof::Run run = Load(name);
    Timeline tl = BuildTimeline(run);
    Analysis a = Analyze(tl);
    digests.push_back(MakeDigest(a, ComputeHints(tl, a), name));
  }
  DiffResult d = Diff({digests[0]}, {digests[1]});
  ASSERT_EQ(d.modules.size(), 8u);
  std::map<std::string, const ItemDiff*> m;
  for (const ItemDiff& i : d.modules) m[i.name] = &i;
  const ItemDiff& model = *m.at("model");
  EXPECT_EQ(model.section, Section::Module);
  EXPECT_EQ(model.Find("calls")->base_values, std::vector<double>{7});
  EXPECT_EQ(model.Find("calls")->new_values, std::vector<double>{7});
  // The model's GPU time without compilation, forward and backward: 3.38 ms eager, 2.59 ms
  // compiled (-23.4%): torch.compile fused QuickGELU's three kernels with LayerNorm's.
  EXPECT_EQ(model.Find("gpu_ns")->base_values, std::vector<double>{3'377'965});
  EXPECT_EQ(model.Find("gpu_ns")->new_values, std::vector<double>{2'588'672});
  EXPECT_EQ(model.verdict, Verdict::Improvement);
  EXPECT_EQ(d.modules.front().name, "model.0");  // by impact: the largest module gone first
  // Its children run inside compiled code: no module of their own there.
  EXPECT_EQ(m.at("model.3")->verdict, Verdict::Removed);
  size_t removed = 0;
  for (const ItemDiff& i : d.modules) {
    if (i.verdict != Verdict::Removed) continue;
    ++removed;
    EXPECT_EQ(i.note,
              "inside compiled code in the new runs (torch.compile: no module ranges there)");
  }
  EXPECT_EQ(removed, 7u);
  EXPECT_EQ(model.note, "");
  // The other way round, the children are added, for the same reason.
  DiffResult back = Diff({digests[1]}, {digests[0]});
  for (const ItemDiff& i : back.modules) {
    if (i.name != "model") {
      EXPECT_NE(i.note.find("in the base runs"), std::string::npos) << i.name;
    }
  }
}

TEST(PyTorchRecordings, JsonSummaryKeepsWhatDiffNeedsOfModules) {
  // kprof diff reads JSON summaries as well as runs: the same modules and callers of compiled
  // code either way.
  kprof::Run run = Load("pytorch_compile_q");
  Analysis a = Analyze(BuildTimeline(run));
  std::ostringstream json;
  ReportOptions ro;
  ro.format = Format::Json;
  WriteReport(json, run, a, {}, ro);
  RunDigest from_json = DigestFromSummaryJson(json.str(), "summary.json");
  RunDigest direct = MakeDigest(a, {}, "run");
  ASSERT_EQ(from_json.modules.size(), 1u);
  EXPECT_EQ(from_json.modules.at("model").gpu_ns, direct.modules.at("model").gpu_ns);
  EXPECT_EQ(from_json.modules.at("model").calls, 7u);
  EXPECT_EQ(from_json.compiled_callers, std::set<std::string>{"model"});
  EXPECT_EQ(from_json.compiled_callers, direct.compiled_callers);
}

TEST(PyTorchRecordings, StackModeNamesTheLineOfEachOp) {
  kprof::Run run = Load("pytorch_stack");
  Analysis a = Analyze(BuildTimeline(run));
  ASSERT_FALSE(a.sources.empty());
  const std::string model_line = "examples/train_mlp.py:53";  // cross_entropy(net(x), y)
  const auto ops = ByKey(a.ops);
  // Forward and backward ops of the model are called from that line.
  for (const char* op : {"aten::addmm", "aten::mm", "aten::native_layer_norm", "aten::gelu"})
    EXPECT_TRUE(ops.at(op)->source.ends_with(model_line)) << op << ": " << ops.at(op)->source;
  EXPECT_TRUE(ops.at("aten::_foreach_mul_")->source.ends_with("train_mlp.py:56"));  // opt.step()
  const GroupRow& top = a.sources[0];
  EXPECT_TRUE(top.key.ends_with(model_line)) << top.key;
  EXPECT_EQ(top.kind, "aten::addmm");  // its backward (mm) counted for it
  EXPECT_GT(top.bwd_gpu_ns, 0u);
  // Most GPU work has a line: not the gradient accumulation autograd adds on its own (no
  // forward op, no line), nor work launched outside any torch call.
  uint64_t lines = 0;
  for (const GroupRow& g : a.sources) lines += g.gpu_ns;
  EXPECT_EQ(lines, 8'451'213u);
  EXPECT_GT(lines, (a.summary.kernel_ns + a.summary.memcpy_ns) * 85 / 100);
}

// Issue 34, on an H200: examples/train_mlp.py --steps 5 with ops from kprof's RecordFunction
// observer (pytorch_observer, the default) and from PyTorch's NVTX mode (pytorch_observer_nvtx,
// KPROF_PYTORCH_OPS=nvtx): the same ops with the same calls and the same GPU work beneath each,
// the same modules, and every autograd node traced to its forward op from the sequence number
// the observer keeps in its records (no ", seq = N" in any name).
TEST(PyTorchRecordings, TheOpObserverGivesTheOpsOfNvtxMode) {
  const auto ops_of = [](const Analysis& a) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> ops;  // op -> (calls, GPU activities)
    for (const GroupRow& g : a.ops)
      if (g.kernels + g.memcpys + g.memsets > 0)
        ops[g.key] = {g.calls, g.kernels + g.memcpys + g.memsets};
    return ops;
  };
  const auto modules_of = [](const kprof::Run& run) {
    AnalysisOptions o;
    o.by = GroupBy::Module;
    std::map<std::string, uint64_t> m;
    for (const GroupRow& g : Analyze(BuildTimeline(run), o).rows) m[g.key + " " + g.kind] = g.calls;
    return m;
  };
  const kprof::Run observed = Load("pytorch_observer"), nvtx = Load("pytorch_observer_nvtx");
  const ProcessTrace& p = observed.processes.at(0);
  EXPECT_EQ(p.Meta("op_observer"), "PyTorch RecordFunction observer, torch 2.11.0+cu130");
  size_t ranges = 0;
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::Range) continue;
    ++ranges;
    EXPECT_EQ(p.strings.Get(r.name).find(", seq = "), std::string::npos);
  }
  EXPECT_EQ(std::to_string(ranges), p.Meta("op_ranges"));
  EXPECT_EQ(p.Meta("op_ranges_dropped"), "0");
  EXPECT_EQ(nvtx.processes.at(0).Meta("op_observer"), "");

  const Analysis a = Analyze(BuildTimeline(observed)), b = Analyze(BuildTimeline(nvtx));
  const auto ops = ops_of(a);
  EXPECT_EQ(ops.size(), 21u);
  EXPECT_EQ(ops, ops_of(b));
  EXPECT_EQ(ops.at("aten::addmm"), (std::pair<uint64_t, uint64_t>{15, 20}));
  EXPECT_EQ(ops.at("aten::mm"), (std::pair<uint64_t, uint64_t>{25, 35}));
  EXPECT_EQ(a.unattributed_gpu_ns, 0u);
  EXPECT_EQ(a.summary.pytorch_added, "auto:ops,modules");
  EXPECT_EQ(a.summary.pytorch_ops, "PyTorch RecordFunction observer, torch 2.11.0+cu130");
  EXPECT_EQ(b.summary.pytorch_ops, "");  // NVTX mode
  EXPECT_EQ(modules_of(observed), modules_of(nvtx));
  EXPECT_EQ(modules_of(observed).at("model Sequential"), 5u);

  // Every numbered autograd node found the forward op that made it, as in NVTX mode.
  const Timeline tl = BuildTimeline(observed);
  const ProcessIndex& ix = tl.processes.at(0).index;
  size_t nodes = 0, linked = 0;
  for (size_t i = 0; i < ix.ranges.size(); ++i) {
    if (ix.backward_node.empty() || ix.backward_node[i] != static_cast<int>(i)) continue;
    if (ix.ranges[i].start->d == 0) continue;  // AccumulateGrad: no number
    ++nodes;
    linked += ix.creator[i] >= 0;
  }
  EXPECT_EQ(nodes, 60u);  // 12 numbered nodes a step
  EXPECT_EQ(linked, nodes);
  EXPECT_EQ(a.summary.backward_linked_ns, 1'418'738u);
}

// CUB's own NVTX ranges (domain "CCCL") open inside aten::embedding_dense_backward in the
// backward pass of memory_train.py (tests/fixtures/gpu/memory_torch_train, H200): their kernels
// belong to the op, which gets the GPU time PyTorch's own key_averages gives it; they are no ops
// of their own, and stay NVTX ranges.
TEST(PyTorchRecordings, LibraryRangesInsideAnOpBelongToIt) {
  kprof::Run run = Load("memory_torch_train");
  Analysis a = Analyze(BuildTimeline(run));
  const auto ops = ByKey(a.ops);
  // 105920 ns of its own kernels, and those of cub::DeviceRadixSort (248353 ns),
  // cub::DeviceSelect::UniqueByKey (18143) and cub::DeviceScan::ExclusiveScan (12479) inside it.
  ASSERT_TRUE(ops.count("aten::embedding_dense_backward"));
  EXPECT_EQ(ops.at("aten::embedding_dense_backward")->gpu_ns, 105920u + 248353 + 18143 + 12479);
  EXPECT_EQ(ops.at("aten::embedding_dense_backward")->calls, 4u);
  for (const auto& [name, row] : ops) EXPECT_FALSE(name.starts_with("cub::")) << name;
  uint64_t cub_calls = 0;
  for (const RangeRow& r : a.ranges)
    if (r.name.starts_with("cub::")) {
      EXPECT_EQ(r.domain, "CCCL");
      cub_calls += r.calls;
    }
  EXPECT_EQ(cub_calls, 12u);
  // The same with ops from kprof's observer (Range records on kprof's clock) and CUB's ranges from
  // CUPTI (markers on CUPTI's): a GPT's two embeddings, 3 steps (pytorch_observer_gpt).
  const Analysis gpt = Analyze(BuildTimeline(Load("pytorch_observer_gpt")));
  const auto gpt_ops = ByKey(gpt.ops);
  ASSERT_TRUE(gpt_ops.count("aten::embedding_dense_backward"));
  EXPECT_EQ(gpt_ops.at("aten::embedding_dense_backward")->calls, 6u);
  EXPECT_EQ(gpt_ops.at("aten::embedding_dense_backward")->kernels, 60u);
  for (const auto& [name, row] : gpt_ops) EXPECT_FALSE(name.starts_with("cub::")) << name;
  // The op view still adds up to the GPU time of every kernel, copy and memset.
  uint64_t total = 0, work = 0;
  for (const GroupRow& o : a.ops) total += o.gpu_ns;
  for (const Record& r : run.processes[0].records)
    if (IsGpuActivity(r.Kind())) work += r.DurationNs();
  EXPECT_EQ(total, work);
}

}  // namespace
}  // namespace kprof
