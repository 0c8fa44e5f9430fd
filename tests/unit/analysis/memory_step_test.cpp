// What the PyTorch layer finds at the end of an optimizer step (src/analysis/memory_torch.cpp,
// docs/memory.md "After the optimizer step"): the blocks still live by the op and module that
// made them, the owners' storages by dtype, and the two hints priced from them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/memory.h"
#include "test_util.h"

using namespace kprof;

namespace {

constexpr int64_t kMiB = 1 << 20;

// A payload at exit: an allocated peak of `allocated` with `state` of optimizer state and
// `other` of other tensors (`kept` of them kept from an earlier step; the rest parameters), and
// the extra members `more` (step_end, dtypes).
std::string Payload(int64_t allocated, int64_t state, int64_t other, const std::string& more,
                    int64_t kept = 0) {
  return std::string(kTorchMemoryMark) +
         fmt::format(R"({{"v":1,"device":0,"when":"exit","now_us":90,"max_allocated":{0},
 "max_reserved":{0},"allocated":{0},"reserved":{0},"complete":true,"optimizer_steps":3,
 "backward_passes":3,"moments":[{{"kind":"allocated_peak","t_us":4,"allocated":{0},
 "reserved":{0},"kept":{5},"kept_blocks":[[15,{5}]],
 "categories":{{"parameters":{3},"optimizer_state":{1},"other":{2}}}}}]{4}}})",
                     allocated, state, other, allocated - state - other, more, kept);
}

// The device of `b` holds `capacity` bytes, of which the process's allocations (one cudaMalloc
// of PyTorch's allocator) held `held` at their peak.
void Device(test::TraceBuilder& b, int64_t capacity, int64_t held) {
  b.t.meta["device.0.memory_bytes"] = std::to_string(capacity);
  Record& m = b.Add(RecordKind::MemAlloc, "/venv/torch/lib/libc10_cuda.so", 1'000, 1'000);
  m.device = 0;
  m.bytes = static_cast<uint64_t>(held);
  m.a = 0x1000;
  m.c = static_cast<uint32_t>(MemKind::Device);
}

// Ranges of a training step: on the Python thread (1) a step, a module call and an op inside
// it; on autograd's thread (2) a backward op; times in ns (the payload's µs times 1000).
test::TraceBuilder Step(const std::string& payload) {
  test::TraceBuilder b;
  b.Range(1, "train_step", 5'000, 60'000);
  b.Range(1, "kprof.module:model.head|Linear", 10'000, 30'000);
  b.Range(1, "aten::cat", 11'400, 18'000);
  b.Range(1, "aten::empty", 14'000, 15'500);  // inside aten::cat: the block is aten::cat's
  b.Range(2, "aten::mm", 40'000, 50'000);
  b.Range(1, "fwd", 20'000, 22'000);  // the program's own range
  b.Range(1, "aten::empty", 20'500, 21'000);
  b.Add(RecordKind::MarkerInstant, payload, 90'000, 90'000);
  return b;
}

Analysis Analyzed(const test::TraceBuilder& b, std::vector<Hint>* hints = nullptr) {
  kprof::Run run;
  run.processes.push_back(b.t);
  const Timeline tl = BuildTimeline(run);
  Analysis an = Analyze(tl);
  if (hints != nullptr) *hints = ComputeHints(tl, an);
  return an;
}

std::string StepEnd(const std::string& blocks, int64_t rest_bytes, int rest_blocks) {
  return fmt::format(R"(,"step_end":{{"t_us":80,"blocks":[{}],"rest_bytes":{},"rest_blocks":{}}})",
                     blocks, rest_bytes, rest_blocks);
}

}  // namespace

TEST(MemoryStepEnd, BlocksLiveAfterTheStepAreOwnedByTheOpAndModuleThatMadeThem) {
  const std::string blocks = fmt::format(
      R"([15,{0},"other"],[45,{1},"gradients"],[null,{2},"parameters"],[70,{3},"other"],)"
      R"([16,{4},"other"],[20,{5},"other"],[11,{6},"activations"])",
      64 * kMiB, 32 * kMiB, 16 * kMiB, 8 * kMiB, 4 * kMiB, 2 * kMiB, kMiB / 2);
  const Analysis an = Analyzed(Step(Payload(1024 * kMiB, 0, 0, StepEnd(blocks, kMiB, 3))));
  ASSERT_EQ(an.memory.torch.size(), 1u);
  const TorchMemory& t = an.memory.torch[0];
  EXPECT_EQ(t.step_end_t_ns, 80'000u);
  ASSERT_EQ(t.step_end.size(), 7u);
  EXPECT_EQ(t.step_end[2].t_ns, 0u);  // made before the history's window
  EXPECT_EQ(t.step_end_live_bytes, 125 * kMiB + 2 * kMiB + kMiB / 2);
  ASSERT_EQ(t.step_end_by_op.size(), 7u);
  const auto& o = t.step_end_by_op;
  // Two blocks of aten::cat inside the module call.
  EXPECT_EQ(o[0].op, "aten::cat");
  EXPECT_EQ(o[0].module, "model.head");
  EXPECT_EQ(TorchCategoryName(o[0].category), "other tensors");
  EXPECT_EQ(o[0].bytes, 68 * kMiB);
  EXPECT_EQ(o[0].blocks, 2u);
  // On autograd's thread the backward op began after the step range of the Python thread.
  EXPECT_EQ(o[1].op, "aten::mm");
  EXPECT_EQ(o[1].module, "");
  EXPECT_EQ(TorchCategoryName(o[1].category), "gradients");
  EXPECT_EQ(o[2].op, "(made before the history's window)");
  EXPECT_EQ(o[3].op, "(no range)");
  EXPECT_EQ(o[3].bytes, 8 * kMiB);
  // aten::empty inside the program's own range stays aten::empty (the walk up stops at aten).
  EXPECT_EQ(o[4].op, "aten::empty");
  EXPECT_EQ(o[4].bytes, 2 * kMiB);
  EXPECT_EQ(o[5].op, "(smaller blocks)");
  EXPECT_EQ(o[5].blocks, 3u);
  EXPECT_EQ(o[5].bytes, kMiB);
  // Made in the µs aten::cat began (11 µs, rounded down from 11.x): aten::cat's, in the module.
  EXPECT_EQ(o[6].op, "aten::cat");
  EXPECT_EQ(o[6].module, "model.head");
  EXPECT_EQ(TorchCategoryName(o[6].category), "activations");
}

TEST(MemoryStepEnd, HostileStepEndsAndDtypesAreBounded) {
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += fmt::format("{}[{},1,\"other\"]", i ? "," : "", i);
  blocks += R"(,[1,-5,"other"],["x",1,"other"],[1,1,7],[1,9223372036854775807,"nonsense"],)"
            R"([1,9223372036854775807,"other"])";
  std::string dtypes = R"(,"dtypes":{"optimizer_state":{"float32":-4)";
  for (int i = 0; i < 100; ++i) dtypes += fmt::format(",\"t{}\":{}", i, i);
  dtypes += R"(},"parameters":[1,2],"gradients":{"bfloat16":"x"}})";
  const auto t = ParseTorchMemory(Payload(kMiB, 0, 0, StepEnd(blocks, -1, -1) + dtypes));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->step_end.size(), 1024u);  // kept: the first 1024
  EXPECT_EQ(t->step_end_rest_bytes, 0);
  EXPECT_EQ(t->step_end_rest_blocks, 0u);
  EXPECT_EQ(t->dtypes[2].size(), 32u);
  EXPECT_EQ(t->DtypeBytes(2, "float32"), 0);  // negative: clamped
  EXPECT_TRUE(t->dtypes[0].empty());
  EXPECT_TRUE(t->dtypes[1].empty());
  // Saturating sums of hostile sizes.
  const auto big = ParseTorchMemory(Payload(
      kMiB, 0, 0,
      StepEnd(R"([1,9223372036854775807,"other"],[2,9223372036854775807,"nonsense"])", 0, 0)));
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->step_end_live_bytes, INT64_MAX);
  EXPECT_EQ(TorchCategoryName(big->step_end[1].category), "other tensors");
}

TEST(MemoryHints, Fp32OptimizerStateAtThePeakIsPricedAtHalf) {
  const auto with = [](const std::string& dtype, int64_t state, int64_t capacity = 1200 * kMiB) {
    std::vector<Hint> hints;
    const std::string dtypes = fmt::format(
        R"(,"dtypes":{{"parameters":{{"float32":{0}}},"optimizer_state":{{"{1}":{2}}}}})",
        300 * kMiB, dtype, state);
    test::TraceBuilder b = Step(Payload(1024 * kMiB, state, 0, dtypes));
    Device(b, capacity, 1024 * kMiB);
    Analyzed(b, &hints);
    return hints;
  };
  const auto hints = with("float32", 400 * kMiB);
  const Hint* h = FindHint(hints, "fp32-optimizer-state");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_bytes, static_cast<uint64_t>(200 * kMiB));
  EXPECT_DOUBLE_EQ(h->est_saving_bytes_pct, 200.0 / 1024 * 100);
  EXPECT_EQ(h->evidence.at(0), "optimizer state by dtype: float32 400.0 MiB");
  EXPECT_EQ(h->evidence.at(2), "parameters by dtype: float32 300.0 MiB");
  // The same on a GPU four times as large: memory is not short, a numerics change not worth it.
  EXPECT_EQ(FindHint(with("float32", 400 * kMiB, 4800 * kMiB), "fp32-optimizer-state"), nullptr);
  // State already in bfloat16; FP32 state too small to matter (50 MiB saved: under 64 MiB).
  EXPECT_EQ(FindHint(with("bfloat16", 400 * kMiB), "fp32-optimizer-state"), nullptr);
  EXPECT_EQ(FindHint(with("float32", 100 * kMiB), "fp32-optimizer-state"), nullptr);
}

TEST(MemoryHints, TensorsMadeInTheStepBeforeAndHeldAtThePeakArePriced) {
  const auto with = [](int64_t kept_at_peak) {
    std::vector<Hint> hints;
    Analyzed(Step(Payload(1024 * kMiB, 0, 300 * kMiB, "", kept_at_peak)), &hints);
    return hints;
  };
  const auto hints = with(150 * kMiB);
  const Hint* h = FindHint(hints, "held-across-steps");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_bytes, static_cast<uint64_t>(150 * kMiB));
  EXPECT_NE(h->summary.find("the most, 150.0 MiB, made in aten::cat in model.head"),
            std::string::npos)
      << h->summary;
  EXPECT_EQ(h->evidence.at(0), "150.0 MiB in 1 block made in aten::cat in model.head");
  EXPECT_EQ(h->evidence.at(1),
            "at the allocated peak (1.00 GiB): 300.0 MiB of other tensors, 150.0 MiB of them made "
            "in the step before");
  // A few MiB: no hint; nothing kept: none.
  EXPECT_EQ(FindHint(with(10 * kMiB), "held-across-steps"), nullptr);
  EXPECT_EQ(FindHint(with(0), "held-across-steps"), nullptr);
}
