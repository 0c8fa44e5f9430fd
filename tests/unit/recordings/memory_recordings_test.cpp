// Issue 37 on an H200 recording (tests/fixtures/gpu/memory_oom_exit: kernels/oom_planted.cu,
// recorded by scripts/record_fixtures.sh): a cudaMalloc larger than the free memory failed after
// known owners took known bytes. The failure, what held the memory then and the peak are exact.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/memory.h"
#include "kprof/output.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

constexpr int64_t kMiB = 1 << 20;

const MemoryOwner* Named(const std::vector<MemoryOwner>& owners, const std::string& name) {
  for (const MemoryOwner& o : owners)
    if (o.name == name) return &o;
  return nullptr;
}

struct Recorded {
  Run run;
  Analysis an;
};

Recorded Load(const std::string& name = "memory_oom_exit") {
  Recorded r{ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + name}), {}};
  AnalysisOptions every;  // every owner, as --by memory
  every.by = GroupBy::Memory;
  r.an = Analyze(BuildTimeline(r.run), every);
  return r;
}

int64_t Bytes(const std::vector<MemoryOwner>& owners, const std::string& name) {
  const MemoryOwner* o = Named(owners, name);
  return o ? o->live_bytes : -1;
}

TEST(MemoryRecordings, ThePlantedFailureIsNamedWithWhatItAskedFor) {
  const Recorded r = Load();
  ASSERT_EQ(r.an.memory.failures.size(), 1u);
  const FailedAllocation& f = r.an.memory.failures[0];
  EXPECT_EQ(f.call, "cudaMalloc");
  EXPECT_EQ(f.code, 2u);  // cudaErrorMemoryAllocation
  EXPECT_EQ(f.range, "grow");
  // The free memory plus 1 GiB: more than was free, less than the device's capacity.
  EXPECT_EQ(f.bytes, 147844104192u);
  EXPECT_EQ(f.state.capacity_bytes, 150109880320u);
  EXPECT_EQ(f.state.device, 0);
  // Everything recorded before it is there: the 4 kernels and the GEMM.
  EXPECT_EQ(r.an.summary.kernels, 5u);
}

TEST(MemoryRecordings, TheOwnersAtTheFailureAreThePlantedOnes) {
  const Recorded r = Load();
  ASSERT_EQ(r.an.memory.failures.size(), 1u);
  const MemoryState& s = r.an.memory.failures[0].state;
  const MemoryOwner* weights = Named(s.by_range, "weights");
  const MemoryOwner* acts = Named(s.by_range, "activations");
  ASSERT_NE(weights, nullptr);
  ASSERT_NE(acts, nullptr);
  EXPECT_EQ(weights->live_bytes, 512 * kMiB);  // 3 x 256 MiB, one freed
  EXPECT_EQ(weights->live_allocations, 2u);
  EXPECT_EQ(weights->allocations, 3u);
  EXPECT_EQ(acts->live_bytes, 2048 * kMiB);
  EXPECT_EQ(acts->live_allocations, 4u);
  // By library: the program itself, then cuBLAS's workspace (made outside any range).
  ASSERT_GE(s.by_library.size(), 2u);
  EXPECT_EQ(s.by_library[0].name, "oom_planted");
  EXPECT_EQ(s.by_library[0].live_bytes, 2560 * kMiB);
  EXPECT_EQ(s.by_library[1].name, "cuBLAS (libcublas.so.13)");
  EXPECT_EQ(s.by_library[1].live_bytes, 67240960);
  EXPECT_EQ(s.live_bytes, 2560 * kMiB + 67240960 + 112);
  ASSERT_GE(s.largest.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.largest[i].bytes, static_cast<uint64_t>(512 * kMiB));
    EXPECT_EQ(s.largest[i].range, "activations");
  }
}

TEST(MemoryRecordings, ThePeakIsTheFailuresStateSinceNothingWasFreedAfter) {
  const Recorded r = Load();
  ASSERT_EQ(r.an.memory.peaks.size(), 1u);
  EXPECT_EQ(r.an.memory.peaks[0].live_bytes, r.an.memory.failures[0].state.live_bytes);
  EXPECT_EQ(r.an.summary.peak_memory_bytes, r.an.memory.peaks[0].live_bytes);
  EXPECT_EQ(r.an.memory.sourced_allocations, r.an.memory.allocations);
}

// PyTorch's categories on an H200 recording (tests/fixtures/gpu/memory_torch_train:
// tests/gpu/scripts/memory_train.py, 4 steps, under the PyTorch layer of 2026-11-28, whose
// categorizer then still called tensors kept across steps activations). PyTorch printed
// max_allocated=1139209216 max_reserved=1245708288 parameters=84025344.
TEST(MemoryRecordings, TorchCategoriesSplitTheAllocatorsShareAtTheDriverPeak) {
  const Recorded r = Load("memory_torch_train");
  ASSERT_EQ(r.an.memory.torch.size(), 1u);
  const TorchMemory& t = r.an.memory.torch[0];
  EXPECT_EQ(t.when, "exit");
  EXPECT_EQ(t.max_allocated, 1139209216);
  EXPECT_EQ(t.max_reserved, 1245708288);
  EXPECT_EQ(t.replayed_max_reserved, 1245708288);
  EXPECT_EQ(t.replayed_max_allocated, 1137112064);  // 0.18% short: a block's unsplit remainder
  EXPECT_TRUE(t.complete);
  EXPECT_EQ(t.optimizer_steps, 4u);
  EXPECT_EQ(t.steps, (std::vector<int64_t>{482148864, 480051712, 482148864, 480051712}));
  ASSERT_EQ(r.an.memory.peaks.size(), 1u);
  const MemoryState& s = r.an.memory.peaks[0];
  EXPECT_EQ(s.live_bytes, 1380473160);
  EXPECT_EQ(s.torch_moment, "reserved_peak");
  EXPECT_TRUE(s.torch_matched);
  EXPECT_EQ(Bytes(s.by_owner, "parameters (PyTorch)"), 84025344);
  EXPECT_EQ(Bytes(s.by_owner, "optimizer state (PyTorch)"), 174342144);
  EXPECT_EQ(Bytes(s.by_owner, "activations (PyTorch)"), 610308608);
  EXPECT_EQ(Bytes(s.by_owner, "other tensors (PyTorch)"), 134218240);
  EXPECT_EQ(Bytes(s.by_owner, "cached, unused (PyTorch caching allocator)"), 242813952);
  EXPECT_EQ(Bytes(s.by_owner, "cuBLAS (libcublas.so.13)"), 134481920);
  EXPECT_EQ(Bytes(s.by_owner, "PyTorch caching allocator (libc10_cuda.so)"), -1);
  int64_t owned = 0;
  for (const MemoryOwner& o : s.by_owner) owned += o.live_bytes;
  EXPECT_EQ(owned, s.live_bytes);  // every byte of the driver-level peak has an owner
  // The allocator's own share is the reserved peak, to the byte.
  EXPECT_EQ(Bytes(s.by_library, "PyTorch caching allocator (libc10_cuda.so)"), t.max_reserved);
}

// tests/gpu/scripts/oom_torch.py on an H200 (tests/fixtures/gpu/memory_oom_torch): both failed
// cudaMalloc calls take the allocator's moment that held what CUPTI saw, the first its peak, the
// second the out-of-memory observer's (after the allocator released its cached blocks).
TEST(MemoryRecordings, TorchOutOfMemoryNamesWhatHeldTheMemory) {
  const Recorded r = Load("memory_oom_torch");
  ASSERT_EQ(r.an.memory.failures.size(), 2u);
  const MemoryState& first = r.an.memory.failures[0].state;
  const MemoryState& last = r.an.memory.failures[1].state;
  EXPECT_EQ(r.an.memory.failures[1].bytes, 148849557504u);
  EXPECT_EQ(first.torch_moment, "allocated_peak");
  EXPECT_EQ(last.torch_moment, "oom");
  EXPECT_TRUE(first.torch_matched && last.torch_matched);
  // 4 x Linear(4096, 4096): 268500992 bytes of parameters; AdamW's two moments twice that.
  EXPECT_EQ(Bytes(last.by_owner, "parameters (PyTorch)"), 268500992);
  EXPECT_EQ(Bytes(last.by_owner, "optimizer state (PyTorch)"), 537001984);
  EXPECT_EQ(Bytes(last.by_owner, "cached, unused (PyTorch caching allocator)"), 13434368);
  EXPECT_EQ(Bytes(first.by_owner, "gradients (PyTorch)"), 268500992);
  ASSERT_EQ(r.an.memory.torch.size(), 2u);
  EXPECT_EQ(r.an.memory.torch[0].when, "oom");
  EXPECT_EQ(r.an.memory.torch[0].requested, 148849557504);
  EXPECT_EQ(r.an.memory.torch[1].when, "exit");
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// --by memory --format csv on the PyTorch OOM recording: one row per owner of each state, each
// state's rows of one view adding up to its live bytes, as the analysis holds them.
TEST(MemoryRecordings, CsvRowsAreTheOwnersOfEachState) {
  const Recorded r = Load("memory_oom_torch");
  ReportOptions o;
  o.format = Format::Csv;
  std::ostringstream out;
  WriteReport(out, r.run, r.an, {}, o);
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "pid,rank,device,moment,t_ns,live_bytes,view,owner,owner_bytes,live_allocations,"
            "allocations,position");
  std::map<std::pair<std::string, std::string>, int64_t> sums;  // (state, view) -> bytes
  std::map<std::string, int64_t> live;
  size_t rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f(1);  // fields; a quoted one may hold commas and doubled quotes
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
        f.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        f.emplace_back();
      } else {
        f.back() += c;
      }
    }
    ASSERT_EQ(f.size(), 12u) << line;
    ++rows;
    if (f[3] == "step_end") continue;
    const std::string state = f[3] + "@" + f[4];
    sums[{state, f[6]}] += std::stoll(f[8]);
    live[state] = std::stoll(f[5]);
  }
  size_t want = 0;
  const auto count = [&](const MemoryState& s) {
    want += s.by_library.size() + s.by_owner.size() + s.by_range.size();
  };
  for (const MemoryState& s : r.an.memory.peaks) count(s);
  for (const FailedAllocation& f : r.an.memory.failures)
    if (f.described) count(f.state);
  EXPECT_EQ(rows, want);  // the OOM recording predates the step-end rows
  ASSERT_FALSE(sums.empty());
  for (const auto& [key, bytes] : sums)
    if (key.second != "owner") {
      EXPECT_EQ(bytes, live[key.first]) << key.first << " " << key.second;
    }
}

// tests/gpu/scripts/memory_train.py --steps 6 --hold on an H200 (tests/fixtures/gpu/
// memory_torch_hold, 2026-11-28; PyTorch printed max_allocated=1273426944 parameters=84025344
// optimizer_state=168050688): an FP32 copy of each step's logits (128 MiB, made by aten::_to_copy)
// is kept into the next step. The owners' dtypes, what is live after the optimizer step by op,
// what the peak kept from the step before, and the one memory hint are exact.
TEST(MemoryRecordings, AStepsOutputsKeptIntoTheNextArePricedByTheOpThatMadeThem) {
  const Recorded r = Load("memory_torch_hold");
  ASSERT_EQ(r.an.memory.torch.size(), 1u);
  const TorchMemory& t = r.an.memory.torch[0];
  EXPECT_EQ(t.max_allocated, 1273426944);
  EXPECT_EQ(t.optimizer_steps, 6u);
  // The storages by dtype: the script's own counts.
  EXPECT_EQ(t.DtypeBytes(0, "float32"), 84025344);
  EXPECT_EQ(t.DtypeBytes(2, "float32"), 168050688);
  EXPECT_EQ(t.DtypeBytes(2, "bfloat16"), 0);
  // Live after the last optimizer step, by the op that made it.
  EXPECT_EQ(t.step_end_live_bytes, 616366592);
  ASSERT_GE(t.step_end_by_op.size(), 5u);
  EXPECT_EQ(t.step_end_by_op[0].op, "aten::zeros_like");  // AdamW's moments, at its first step
  EXPECT_EQ(TorchCategoryName(t.step_end_by_op[0].category), "optimizer state");
  EXPECT_EQ(t.step_end_by_op[0].bytes, 174342144);
  EXPECT_EQ(t.step_end_by_op[0].blocks, 102u);
  EXPECT_EQ(t.step_end_by_op[1].op, "aten::_to_copy");  // the held FP32 logits
  EXPECT_EQ(TorchCategoryName(t.step_end_by_op[1].category), "other tensors");
  EXPECT_EQ(t.step_end_by_op[1].bytes, 128 * kMiB);
  EXPECT_EQ(t.step_end_by_op[1].blocks, 1u);
  EXPECT_EQ(t.step_end_by_op[4].op, "aten::addmm");  // the bf16 logits, in the head
  EXPECT_EQ(t.step_end_by_op[4].module, "model.head");
  EXPECT_EQ(t.step_end_by_op[4].bytes, 64 * kMiB);
  // At the allocated peak: the held logits, made in the step before.
  const TorchMoment* peak = t.Find("allocated_peak");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->allocated, 1271329792);
  EXPECT_EQ(peak->kept, 128 * kMiB);
  ASSERT_EQ(peak->kept_by_op.size(), 1u);
  EXPECT_EQ(peak->kept_by_op[0].op, "aten::_to_copy");
  EXPECT_EQ(peak->kept_by_op[0].bytes, 128 * kMiB);
  // The one memory hint, priced as the GPU test measured deleting them saves (134217728).
  const Timeline tl = BuildTimeline(r.run);
  size_t memory_hints = 0;
  for (const Hint& h : ComputeHints(tl, Analyze(tl))) {
    if (h.est_saving_bytes == 0) continue;
    ++memory_hints;
    EXPECT_EQ(h.id, "held-across-steps");
    EXPECT_EQ(h.est_saving_bytes, 134217728u);
  }
  EXPECT_EQ(memory_hints, 1u);
  // Every byte of the driver-level peak has an owner.
  ASSERT_EQ(r.an.memory.peaks.size(), 1u);
  const MemoryState& s = r.an.memory.peaks[0];
  EXPECT_TRUE(s.torch_matched);
  int64_t owned = 0;
  for (const MemoryOwner& o : s.by_owner)
    if (o.name.find("not recorded") == std::string::npos &&
        o.name.find("not matched") == std::string::npos)
      owned += o.live_bytes;
  EXPECT_EQ(owned, s.live_bytes);
}

}  // namespace
}  // namespace kprof
