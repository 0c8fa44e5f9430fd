// Device memory by owner (src/analysis/memory.cpp, docs/memory.md): the peak and a failed
// allocation, with what was live then grouped by library and by the range of the allocating call.
#include "kprof/memory.h"

#include <gtest/gtest.h>

#include "kprof/analysis.h"
#include "test_util.h"

using namespace kprof;

namespace {

// An allocation (or release) at `t` of `bytes` at `addr`, asked for by `lib` from a cudaMalloc
// call on thread 1 (its own correlation id).
void Mem(test::TraceBuilder& b, bool alloc, uint64_t t, uint64_t bytes, uint64_t addr,
         const std::string& lib) {
  const uint32_t corr = ++b.next_corr;
  Record& api = b.Add(RecordKind::RuntimeApi, alloc ? "cudaMalloc" : "cudaFree", t - 10, t + 10);
  api.tid = 1;
  api.correlation = corr;
  Record& m = b.Add(alloc ? RecordKind::MemAlloc : RecordKind::MemFree, lib, t, t);
  m.device = 0;
  m.correlation = corr;
  m.bytes = bytes;
  m.a = static_cast<uint32_t>(addr);
  m.b = static_cast<uint32_t>(addr >> 32);
  m.c = static_cast<uint32_t>(MemKind::Device);
}

void Failed(test::TraceBuilder& b, uint64_t t, uint64_t bytes) {
  Record& f = b.Add(RecordKind::MemAllocFailed, "cudaMalloc", t, t);
  f.tid = 1;
  f.bytes = bytes;
  f.b = 2;
  f.c = static_cast<uint32_t>(MemKind::Device);
  f.d = 0;
}

constexpr uint64_t kMiB = 1 << 20;
const std::string kTorch = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
const std::string kNccl = "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2";

// weights: 2 x 100 MiB by PyTorch; activations: 3 x 50 MiB by PyTorch, one freed before the
// peak; NCCL 30 MiB outside any range; then all activations freed, a failure asking 1 GiB.
test::TraceBuilder Planted() {
  test::TraceBuilder b;
  b.t.meta["device.0.memory_bytes"] = std::to_string(1024 * kMiB);
  b.Range(1, "weights", 1000, 2000);
  Mem(b, true, 1100, 100 * kMiB, 0x1000000, kTorch);
  Mem(b, true, 1200, 100 * kMiB, 0x2000000, kTorch);
  b.Range(1, "activations", 3000, 4000);
  Mem(b, true, 3100, 50 * kMiB, 0x3000000, kTorch);
  Mem(b, true, 3200, 50 * kMiB, 0x4000000, kTorch);
  Mem(b, false, 3300, 50 * kMiB, 0x3000000, kTorch);
  Mem(b, true, 3400, 50 * kMiB, 0x5000000, kTorch);
  Mem(b, true, 5000, 30 * kMiB, 0x6000000, kNccl);  // peak: 330 MiB
  Mem(b, false, 6000, 50 * kMiB, 0x4000000, kTorch);
  Mem(b, false, 6100, 50 * kMiB, 0x5000000, kTorch);
  b.Range(1, "grow", 7000, 8000);
  Failed(b, 7100, 1024 * kMiB);
  return b;
}

MemorySummary Summarize(const test::TraceBuilder& b) {
  kprof::Run run;
  run.processes.push_back(b.t);
  return Analyze(BuildTimeline(run)).memory;
}

}  // namespace

TEST(Memory, LibraryOwnersHaveTheNamesPeopleKnow) {
  EXPECT_EQ(LibraryOwner(kTorch), "PyTorch caching allocator (libc10_cuda.so)");
  EXPECT_EQ(LibraryOwner(kNccl), "NCCL (libnccl.so.2)");
  EXPECT_EQ(LibraryOwner("/usr/lib/x86_64-linux-gnu/libcublasLt.so.13"),
            "cuBLASLt (libcublasLt.so.13)");
  EXPECT_EQ(LibraryOwner("/usr/lib/libcublas.so.13"), "cuBLAS (libcublas.so.13)");
  EXPECT_EQ(LibraryOwner("/home/u/app/build/train"), "train");
  EXPECT_EQ(LibraryOwner("/venv/site-packages/cupy/cuda/memory.cpython-312.so"),
            "CuPy memory pool (memory.cpython-312.so)");
  // Where CuPy 13's pool calls cudaMalloc from (recorded on an H200: docs/memory.md).
  EXPECT_EQ(LibraryOwner("/venv/lib/python3.12/site-packages/cupy_backends/cuda/api/"
                         "runtime.cpython-312-x86_64-linux-gnu.so"),
            "CuPy memory pool (runtime.cpython-312-x86_64-linux-gnu.so)");
  EXPECT_EQ(LibraryOwner(""), "");
}

TEST(Memory, ThePeakIsHeldByTheOwnersLiveThen) {
  const MemorySummary m = Summarize(Planted());
  ASSERT_EQ(m.peaks.size(), 1u);
  const MemoryState& s = m.peaks[0];
  EXPECT_EQ(s.live_bytes, static_cast<int64_t>(330 * kMiB));
  EXPECT_EQ(s.t_ns, 5000u);
  EXPECT_EQ(s.capacity_bytes, 1024 * kMiB);
  EXPECT_EQ(m.allocations, 6u);
  EXPECT_EQ(m.sourced_allocations, 6u);
  ASSERT_EQ(s.by_library.size(), 2u);
  EXPECT_EQ(s.by_library[0].name, "PyTorch caching allocator (libc10_cuda.so)");
  EXPECT_EQ(s.by_library[0].live_bytes, static_cast<int64_t>(300 * kMiB));
  EXPECT_EQ(s.by_library[0].live_allocations, 4u);
  EXPECT_EQ(s.by_library[0].allocations, 5u);
  EXPECT_EQ(s.by_library[1].name, "NCCL (libnccl.so.2)");
  EXPECT_EQ(s.by_library[1].live_bytes, static_cast<int64_t>(30 * kMiB));
  ASSERT_EQ(s.by_range.size(), 3u);
  EXPECT_EQ(s.by_range[0].name, "weights");
  EXPECT_EQ(s.by_range[0].live_bytes, static_cast<int64_t>(200 * kMiB));
  EXPECT_EQ(s.by_range[1].name, "activations");
  EXPECT_EQ(s.by_range[1].live_bytes, static_cast<int64_t>(100 * kMiB));
  EXPECT_EQ(s.by_range[1].live_allocations, 2u);
  EXPECT_EQ(s.by_range[1].allocations, 3u);
  EXPECT_EQ(s.by_range[2].name, "(no range)");
  ASSERT_GE(s.largest.size(), 2u);
  EXPECT_EQ(s.largest[0].bytes, 100 * kMiB);
  EXPECT_EQ(s.largest[0].address, 0x1000000u);  // equal sizes: lower address first
  EXPECT_EQ(s.largest[0].range, "weights");
}

TEST(Memory, AFailedAllocationKeepsWhatWasLiveAtThatMoment) {
  const MemorySummary m = Summarize(Planted());
  ASSERT_EQ(m.failures.size(), 1u);
  const FailedAllocation& f = m.failures[0];
  EXPECT_EQ(f.call, "cudaMalloc");
  EXPECT_EQ(f.bytes, 1024 * kMiB);
  EXPECT_EQ(f.code, 2u);
  EXPECT_EQ(f.range, "grow");
  EXPECT_EQ(f.state.device, 0);
  EXPECT_EQ(f.state.live_bytes, static_cast<int64_t>(230 * kMiB));  // activations freed
  ASSERT_EQ(f.state.by_range.size(), 2u);
  EXPECT_EQ(f.state.by_range[0].name, "weights");
  EXPECT_EQ(f.state.by_range[1].name, "(no range)");
  EXPECT_EQ(f.state.capacity_bytes, 1024 * kMiB);
}

TEST(Memory, ReleasesOfUnseenAllocationsAndReusedAddressesKeepTheCountRight) {
  test::TraceBuilder b;
  Mem(b, false, 100, 500, 0x9000, "");  // allocated before the recording: ignored
  Mem(b, true, 200, 1000, 0x1000, "");
  Mem(b, true, 300, 400, 0x1000, "");  // its release was lost: the newer one replaces it
  Mem(b, true, 400, 100, 0x2000, "");
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  EXPECT_EQ(m.peaks[0].live_bytes, 1000);  // at 200: 1000; at 400: 400 + 100
  EXPECT_EQ(m.peaks[0].t_ns, 200u);
  ASSERT_EQ(m.peaks[0].by_library.size(), 1u);
  EXPECT_EQ(m.peaks[0].by_library[0].name, "(library not recorded)");
  EXPECT_EQ(m.sourced_allocations, 0u);
}

TEST(Memory, NoRecordsNoSummary) {
  test::TraceBuilder b;
  b.Launch(1, 100, "k", 200, 300);
  const MemorySummary m = Summarize(b);
  EXPECT_TRUE(m.peaks.empty());
  EXPECT_TRUE(m.failures.empty());
}

TEST(Memory, StaticMemoryIsItsModulesWhateverLibraryLoadedIt) {
  test::TraceBuilder b;
  Mem(b, true, 100, 4096, 0x1000, "/venv/torch/lib/libtorch_cuda.so");
  b.t.records.back().c = static_cast<uint32_t>(MemKind::DeviceStatic);
  Mem(b, true, 200, 8192, 0x9000, "");
  b.t.records.back().c = static_cast<uint32_t>(MemKind::DeviceStatic);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  ASSERT_EQ(m.peaks[0].by_library.size(), 2u);
  EXPECT_EQ(m.peaks[0].by_library[0].name, "static memory (module globals)");
  EXPECT_EQ(m.peaks[0].by_library[1].name, "static memory (module globals) of libtorch_cuda.so");
}

TEST(Memory, OnlyTheFirstFailuresAndTheLastAreReplayed) {
  test::TraceBuilder b = Planted();
  for (uint64_t t = 9000; t < 9005; ++t) Failed(b, t, 2048 * kMiB);
  b.t.records.back().b = 700;  // the last: a sticky error after a fault, not out of memory
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.failures.size(), 6u);
  const bool want[] = {true, true, true, false, false, true};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(m.failures[i].described, want[i]) << i;
  EXPECT_TRUE(m.failures[4].OutOfMemory());
  EXPECT_FALSE(m.failures[5].OutOfMemory());
  EXPECT_EQ(m.failures[5].state.live_bytes, static_cast<int64_t>(230 * kMiB));
  EXPECT_EQ(m.failures[4].state.live_bytes, 0);  // not described
}

TEST(Memory, AProcessWithCaptureWindowsHasOnlyPartOfItsMemory) {
  test::TraceBuilder b = Planted();
  b.Add(RecordKind::CaptureWindow, "step", 900, 9000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  EXPECT_TRUE(m.peaks[0].partial);
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_TRUE(m.failures[0].state.partial);
  EXPECT_FALSE(Summarize(Planted()).peaks[0].partial);
}

TEST(Memory, ByMemoryListsEveryOwner) {
  test::TraceBuilder b;
  for (uint64_t i = 0; i < 8; ++i)
    Mem(b, true, 100 + 100 * i, 1000 + i, 0x1000 * (i + 1),
        "/lib/libx" + std::to_string(i) + ".so");
  kprof::Run run;
  run.processes.push_back(b.t);
  AnalysisOptions all;
  all.by = GroupBy::Memory;
  EXPECT_EQ(Analyze(BuildTimeline(run), all).memory.peaks[0].by_library.size(), 8u);
  EXPECT_EQ(Analyze(BuildTimeline(run)).memory.peaks[0].by_library.size(), 5u);
}

TEST(Memory, HostileSizesSaturateInsteadOfOverflowing) {
  test::TraceBuilder b;
  Mem(b, true, 100, UINT64_MAX, 0x1000, "");
  Mem(b, true, 200, 8242495765652796513ull, 0x2000, "");
  Mem(b, false, 300, 1, 0x1000, "");
  const MemorySummary m = Summarize(b);  // (UBSan: no signed overflow)
  ASSERT_EQ(m.peaks.size(), 1u);
  EXPECT_EQ(m.peaks[0].live_bytes, INT64_MAX);
  EXPECT_EQ(m.peaks[0].by_library[0].live_bytes, INT64_MAX);
}
