// GPU tests of device memory by owner (issue 37, docs/memory.md): a planted out-of-memory failure
// in plain CUDA and in PyTorch is recorded with the size asked for, the memory held then and by
// whom, and nothing recorded before it is lost, whether the program exits or aborts. Every test
// skips cleanly when no GPU is present.
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "gtest/gtest.h"
#include "kprof/analysis.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

using namespace kprof;
using namespace kprof::gpu_test;

namespace {

constexpr int64_t kMiB = 1 << 20;

// The number printed after `key=` in the program's output.
uint64_t Printed(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + "=");
  if (at == std::string::npos) return 0;
  return std::stoull(out.substr(at + key.size() + 1));
}

const MemoryOwner* Owner(const std::vector<MemoryOwner>& owners, const std::string& prefix) {
  for (const MemoryOwner& o : owners)
    if (o.name.rfind(prefix, 0) == 0) return &o;
  return nullptr;
}

uint64_t Kernels(const Run& run, const std::string& name) {
  uint64_t n = 0;
  for (const ProcessTrace& p : run.processes)
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::Kernel && Demangle(p.Name(r)).rfind(name, 0) == 0) ++n;
  return n;
}

void PlantedCuda(const std::string& mode, int status) {
  REQUIRE_GPU();
  const std::string dir = FreshDir("memory_oom_" + mode);
  const Result r = Kprof(dir, {Bin("kernels/oom_planted"), mode});
  ASSERT_EQ(r.status, status) << r.out;  // kprof run exits with the program's status
  const uint64_t asked = Printed(r.out, "asked");
  ASSERT_GT(asked, 0u) << r.out;
  const kprof::Run run = ReadInputs({dir});
  const Analysis an = Analyze(BuildTimeline(run));
  // Nothing recorded before the failure is lost: every kernel launched before it.
  EXPECT_EQ(Kernels(run, "touch"), Printed(r.out, "touch"));
  ASSERT_EQ(an.memory.failures.size(), 1u) << r.out;
  const FailedAllocation& f = an.memory.failures[0];
  EXPECT_EQ(f.call, "cudaMalloc");
  EXPECT_EQ(f.bytes, asked);
  EXPECT_EQ(f.code, 2u);  // cudaErrorMemoryAllocation
  EXPECT_EQ(f.range, "grow");
  const MemoryState& s = f.state;
  EXPECT_EQ(s.device, 0);
  EXPECT_GT(s.capacity_bytes, asked - 1024 * kMiB);
  // Held then: 2 x 256 MiB of weights, 4 x 512 MiB of activations, whatever cuBLAS took.
  const MemoryOwner* weights = Owner(s.by_range, "weights");
  const MemoryOwner* acts = Owner(s.by_range, "activations");
  ASSERT_NE(weights, nullptr);
  ASSERT_NE(acts, nullptr);
  EXPECT_EQ(weights->live_bytes, 512 * kMiB);
  EXPECT_EQ(weights->live_allocations, 2u);
  EXPECT_EQ(acts->live_bytes, 2048 * kMiB);
  EXPECT_EQ(acts->live_allocations, 4u);
  ASSERT_FALSE(s.by_library.empty());
  EXPECT_EQ(s.by_library[0].name, "oom_planted");  // the program asked for them itself
  EXPECT_GE(s.by_library[0].live_bytes, 2560 * kMiB);
  ASSERT_FALSE(s.largest.empty());
  EXPECT_EQ(s.largest[0].bytes, static_cast<uint64_t>(512 * kMiB));
  EXPECT_EQ(s.largest[0].range, "activations");
  // The report opens with it.
  const Result rep = Exec({Bin("kprof"), "report", dir});
  EXPECT_EQ(rep.status, 0) << rep.out;
  EXPECT_NE(rep.out.find("OUT OF MEMORY: 1 allocation call failed"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("cudaMalloc asked for"), std::string::npos) << rep.out;
  std::printf("[ oom %s ] %s", mode.c_str(), rep.out.substr(0, rep.out.find("\n\n") + 1).c_str());
  for (const MemoryOwner& o : s.by_library)
    std::printf("[ oom %s ] library %s %lld\n", mode.c_str(), o.name.c_str(),
                static_cast<long long>(o.live_bytes));
}

}  // namespace

TEST(GpuMemory, PlantedOutOfMemoryInCudaThenExit) { PlantedCuda("exit", 3); }

TEST(GpuMemory, PlantedOutOfMemoryInCudaThenAbort) { PlantedCuda("abort", 128 + 6); }

TEST(GpuMemory, PlantedOutOfMemoryInPyTorch) {
  REQUIRE_GPU();
  if (!HaveTorch()) GTEST_SKIP() << "PyTorch with CUDA not available";
  const std::string dir = FreshDir("memory_oom_torch");
  const Result r = Kprof(dir, {Python(), Src("tests/gpu/scripts/oom_torch.py")});
  ASSERT_EQ(r.status, 1) << r.out;
  ASSERT_NE(r.out.find("OutOfMemoryError"), std::string::npos) << r.out;
  const uint64_t asked = Printed(r.out, "asked");
  ASSERT_GT(asked, 0u) << r.out;
  const kprof::Run run = ReadInputs({dir});
  const Analysis an = Analyze(BuildTimeline(run));
  ASSERT_FALSE(an.memory.failures.empty()) << r.out;
  // The caching allocator asks the driver for the tensor rounded up to its 2 MiB pages; when
  // that fails it frees its cached blocks and asks once more.
  const FailedAllocation& last = an.memory.failures.back();
  EXPECT_EQ(last.call, "cudaMalloc");
  EXPECT_GE(last.bytes, asked);
  EXPECT_LT(last.bytes, asked + 2 * kMiB);
  EXPECT_EQ(last.code, 2u);
  const MemoryState& s = last.state;
  ASSERT_FALSE(s.by_library.empty());
  EXPECT_EQ(s.by_library[0].name.rfind("PyTorch caching allocator", 0), 0u) << s.by_library[0].name;
  // Parameters (4 x 64 MiB), AdamW's two moments, the input: at least 768 MiB held.
  EXPECT_GE(s.by_library[0].live_bytes, 768 * kMiB);
  EXPECT_GE(an.summary.kernels, 20u);
  const Result rep = Exec({Bin("kprof"), "report", dir});
  EXPECT_NE(rep.out.find("OUT OF MEMORY"), std::string::npos) << rep.out;
  std::printf("[ oom torch ] %s", rep.out.substr(0, rep.out.find("\n\n") + 1).c_str());
}
