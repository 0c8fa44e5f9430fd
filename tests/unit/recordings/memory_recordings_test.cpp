// Issue 37 on an H200 recording (tests/fixtures/gpu/memory_oom_exit: kernels/oom_planted.cu,
// recorded by scripts/record_fixtures.sh): a cudaMalloc larger than the free memory failed after
// known owners took known bytes. The failure, what held the memory then and the peak are exact.
#include <gtest/gtest.h>

#include <string>

#include "kprof/analysis.h"
#include "kprof/memory.h"
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

Recorded Load() {
  Recorded r{ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/memory_oom_exit"}),
             {}};
  r.an = Analyze(BuildTimeline(r.run));
  return r;
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

}  // namespace
}  // namespace kprof
