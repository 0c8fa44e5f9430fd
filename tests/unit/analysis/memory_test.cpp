// Device memory by owner (src/analysis/memory.cpp, docs/memory.md): the peak and a failed
// allocation, with what was live then grouped by library and by the range of the allocating call.
#include "kprof/memory.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "kprof/analysis.h"
#include "kprof/hints.h"
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

TEST(Memory, TheMemoryHeldOverTimeByOwner) {
  const MemorySummary m = Summarize(Planted());
  ASSERT_EQ(m.series.size(), 1u);
  const MemorySeries& s = m.series[0];
  EXPECT_EQ(s.owners, (std::vector<std::string>{"PyTorch caching allocator (libc10_cuda.so)",
                                                "NCCL (libnccl.so.2)", "other owners"}));
  // Nine allocations and releases, each its own time bin: one point each.
  ASSERT_EQ(s.t_ns.size(), 9u);
  ASSERT_EQ(s.bytes.size(), 9u * 3);
  EXPECT_EQ(s.peak_t_ns, 5000u);
  EXPECT_EQ(s.peak_bytes, static_cast<int64_t>(330 * kMiB));
  const auto at = [&](size_t i) {
    return std::vector<int64_t>(s.bytes.begin() + static_cast<std::ptrdiff_t>(3 * i),
                                s.bytes.begin() + static_cast<std::ptrdiff_t>(3 * i + 3));
  };
  const auto mib = [](int64_t n) { return n * static_cast<int64_t>(kMiB); };
  EXPECT_EQ(s.t_ns[0], 1100u);
  EXPECT_EQ(at(0), (std::vector<int64_t>{mib(100), 0, 0}));
  EXPECT_EQ(s.t_ns[4], 3300u);  // an activation freed
  EXPECT_EQ(at(4), (std::vector<int64_t>{mib(250), 0, 0}));
  EXPECT_EQ(s.t_ns[6], 5000u);  // the peak
  EXPECT_EQ(at(6), (std::vector<int64_t>{mib(300), mib(30), 0}));
  EXPECT_EQ(at(8), (std::vector<int64_t>{mib(200), mib(30), 0}));
}

TEST(Memory, ThinnedSeriesKeepThePeak) {
  // 5000 allocate-and-free pairs of 1 MiB, one 64 MiB block live in the middle: at most
  // kSeriesPoints points, and the 65 MiB moment among them.
  test::TraceBuilder b;
  for (uint64_t i = 0; i < 5000; ++i) {
    Mem(b, true, 1000 + 40 * i, kMiB, 0x100000, kTorch);
    if (i == 2500) Mem(b, true, 1000 + 40 * i + 5, 64 * kMiB, 0x9000000, kTorch);
    if (i == 2501) Mem(b, false, 1000 + 40 * i + 5, 64 * kMiB, 0x9000000, kTorch);
    Mem(b, false, 1000 + 40 * i + 20, kMiB, 0x100000, kTorch);
  }
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.series.size(), 1u);
  const MemorySeries& s = m.series[0];
  EXPECT_LE(s.t_ns.size(), kSeriesPoints);
  EXPECT_GE(s.t_ns.size(), kSeriesPoints / 2);
  EXPECT_EQ(s.peak_bytes, static_cast<int64_t>(65 * kMiB));
  EXPECT_NE(std::find(s.t_ns.begin(), s.t_ns.end(), s.peak_t_ns), s.t_ns.end());
  EXPECT_EQ(*std::max_element(s.bytes.begin(), s.bytes.end()), static_cast<int64_t>(65 * kMiB));
  EXPECT_TRUE(std::is_sorted(s.t_ns.begin(), s.t_ns.end()));
  // The last point is the state after the last event: everything released.
  EXPECT_EQ(s.t_ns.back(), 1000u + 40 * 4999 + 20);
  EXPECT_EQ(s.bytes.back(), 0);
  EXPECT_EQ(s.bytes[s.bytes.size() - 2], 0);
}

TEST(Memory, EachPeakHasItsSeriesAtTheSameIndex) {
  // Two processes with the same pid (two hosts' files): the series follows its peak, not the pid.
  test::TraceBuilder small, big;
  Mem(small, true, 100, 10 * kMiB, 0x1000, kTorch);
  Mem(big, true, 100, 90 * kMiB, 0x1000, kNccl);
  kprof::Run run;
  run.processes.push_back(small.t);
  run.processes.push_back(big.t);
  run.processes[0].pid = run.processes[1].pid = 7;
  run.processes[1].source = "other-host.kprof";
  const MemorySummary m = Analyze(BuildTimeline(run)).memory;
  ASSERT_EQ(m.peaks.size(), 2u);
  ASSERT_EQ(m.series.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(m.series[i].peak_bytes, m.peaks[i].live_bytes);
    EXPECT_EQ(m.series[i].owners[0], m.peaks[i].by_library[0].name);
  }
  EXPECT_EQ(m.peaks[0].live_bytes, static_cast<int64_t>(90 * kMiB));
}

TEST(Memory, AFailureOnADeviceWithNoAllocationsIsNotDescribed) {
  test::TraceBuilder b;
  Mem(b, true, 100, 10 * kMiB, 0x1000, kTorch);  // on device 0
  Failed(b, 200, 1024 * kMiB);
  b.t.records.back().d = 3;  // asked on device 3, where nothing was allocated
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.failures.size(), 1u);
  EXPECT_FALSE(m.failures[0].described);
  EXPECT_EQ(m.failures[0].state.device, 3);
  EXPECT_TRUE(m.failures[0].state.by_library.empty());
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
  // No library: the call that allocated tells it apart.
  EXPECT_EQ(m.peaks[0].by_library[0].name, "(library not recorded) from cudaMalloc");
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

// ----- PyTorch's categories (src/analysis/memory_torch.cpp) -----------------------------------

namespace {

// What kprof's PyTorch layer (src/pytorch/kprof_memory.py) writes at exit for the planted run:
// three moments of the caching allocator; times in µs of the realtime clock (1 µs = 1000 of the
// planted run's ns).
const std::string kPayload = std::string(kTorchMemoryMark) + R"({"v":1,"device":0,"when":"exit",
 "now_us":9,"max_allocated":293601280,"max_reserved":314572800,"allocated":199229440,
 "reserved":209715200,"inactive_split":1048576,"entries":40,"max_entries":500000,
 "complete":true,"replayed_max_allocated":293601280,"replayed_max_reserved":314572800,
 "optimizer_steps":2,"backward_passes":2,"steps":[199229440,199229440],"steps_total":2,
 "moments":[
  {"kind":"segment","t_us":3,"allocated":262144000,"reserved":314572800,
   "categories":{"parameters":209715200,"gradients":0,"optimizer_state":0,
                 "activations":52428800,"other":0},"largest":[[104857600,"parameters"]]},
  {"kind":"allocated_peak","t_us":4,"allocated":293601280,"reserved":314572800,
   "categories":{"parameters":209715200,"gradients":0,"optimizer_state":0,
                 "activations":73400320,"other":10485760},"largest":[[104857600,"parameters"]]},
  {"kind":"exit","t_us":9,"allocated":199229440,"reserved":209715200,
   "categories":{"parameters":199229440,"gradients":0,"optimizer_state":0,"activations":0,
                 "other":0},"largest":[]}]})";

test::TraceBuilder PlantedWithTorch() {
  test::TraceBuilder b = Planted();
  b.Add(RecordKind::MarkerInstant, kPayload, 9000, 9000);
  return b;
}

const MemoryOwner* Owner(const std::vector<MemoryOwner>& owners, const std::string& name) {
  for (const MemoryOwner& o : owners)
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

TEST(MemoryTorch, TheLayersPayloadIsReadBack) {
  const auto t = ParseTorchMemory(kPayload);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->when, "exit");
  EXPECT_EQ(t->max_allocated, 280 * static_cast<int64_t>(kMiB));
  EXPECT_EQ(t->max_reserved, 300 * static_cast<int64_t>(kMiB));
  EXPECT_TRUE(t->complete);
  ASSERT_EQ(t->moments.size(), 3u);
  const TorchMoment* peak = t->Find("allocated_peak");
  ASSERT_NE(peak, nullptr);
  EXPECT_EQ(peak->t_ns, 4000u);
  EXPECT_EQ(peak->bytes[0], 200 * static_cast<int64_t>(kMiB));
  EXPECT_EQ(peak->bytes[3], 70 * static_cast<int64_t>(kMiB));
  ASSERT_EQ(peak->largest.size(), 1u);
  EXPECT_EQ(peak->largest[0].second, "parameters");
  EXPECT_EQ(t->steps, (std::vector<int64_t>{199229440, 199229440}));
}

TEST(MemoryTorch, HostilePayloadsAreDroppedOrClamped) {
  const std::string m(kTorchMemoryMark);
  EXPECT_FALSE(ParseTorchMemory("kprof.pytorch:auto:ops").has_value());
  EXPECT_FALSE(ParseTorchMemory(m + "{not json").has_value());
  EXPECT_FALSE(ParseTorchMemory(m + "[1,2]").has_value());
  EXPECT_FALSE(ParseTorchMemory(m + R"({"v":2})").has_value());
  EXPECT_FALSE(ParseTorchMemory(m + R"({"v":1,"device":70000})").has_value());
  const auto t = ParseTorchMemory(
      m + R"({"v":1,"max_allocated":-5,"max_reserved":18446744073709551615,"when":7,
             "steps":[1,"x",-3,{}],"moments":[3,{"t_us":18446744073709551615,
             "categories":{"parameters":"many"},"largest":[[1],[2,3],[-4,"gradients"]]}]})");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->max_allocated, 0);
  EXPECT_EQ(t->max_reserved, INT64_MAX);
  EXPECT_EQ(t->when, "");
  EXPECT_EQ(t->steps, (std::vector<int64_t>{1, 0}));
  ASSERT_EQ(t->moments.size(), 1u);
  EXPECT_EQ(t->moments[0].t_ns, UINT64_MAX);
  EXPECT_EQ(t->moments[0].bytes[0], 0);
  ASSERT_EQ(t->moments[0].largest.size(), 1u);
  EXPECT_EQ(t->moments[0].largest[0], (std::pair<int64_t, std::string>{0, "gradients"}));
}

TEST(MemoryTorch, ThePeakSplitsTheAllocatorsShareByCategory) {
  const MemorySummary m = Summarize(PlantedWithTorch());
  ASSERT_EQ(m.torch.size(), 1u);
  ASSERT_EQ(m.peaks.size(), 1u);
  const MemoryState& s = m.peaks[0];
  // CUPTI: the allocator held 300 MiB at the peak (5000 ns); the moment with 300 MiB reserved
  // nearest to it is the allocated peak (4000 ns).
  EXPECT_EQ(s.torch_moment, "allocated_peak");
  EXPECT_TRUE(s.torch_matched);
  const auto bytes = [&](const std::string& n) {
    const MemoryOwner* o = Owner(s.by_owner, n);
    return o ? o->live_bytes : -1;
  };
  EXPECT_EQ(bytes("parameters (PyTorch)"), static_cast<int64_t>(200 * kMiB));
  EXPECT_EQ(bytes("activations (PyTorch)"), static_cast<int64_t>(70 * kMiB));
  EXPECT_EQ(bytes("other tensors (PyTorch)"), static_cast<int64_t>(10 * kMiB));
  EXPECT_EQ(bytes("cached, unused (PyTorch caching allocator)"), static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(bytes("NCCL (libnccl.so.2)"), static_cast<int64_t>(30 * kMiB));
  EXPECT_EQ(Owner(s.by_owner, "PyTorch caching allocator (libc10_cuda.so)"), nullptr);
  int64_t sum = 0;
  for (const MemoryOwner& o : s.by_owner) sum += o.live_bytes;
  EXPECT_EQ(sum, s.live_bytes);  // every byte of the peak has an owner
  EXPECT_EQ(s.by_owner.front().name, "parameters (PyTorch)");
}

TEST(MemoryTorch, AFailureTakesTheMomentThatHeldWhatCuptiSaw) {
  const MemorySummary m = Summarize(PlantedWithTorch());
  ASSERT_EQ(m.failures.size(), 1u);
  const MemoryState& s = m.failures[0].state;
  // 200 MiB held by the allocator at the failure (7100 ns): the exit moment's reserved bytes.
  EXPECT_EQ(s.torch_moment, "exit");
  EXPECT_TRUE(s.torch_matched);
  const MemoryOwner* p = Owner(s.by_owner, "parameters (PyTorch)");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->live_bytes, 199229440);
  const MemoryOwner* c = Owner(s.by_owner, "cached, unused (PyTorch caching allocator)");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->live_bytes, static_cast<int64_t>(200 * kMiB) - 199229440);
}

TEST(MemoryTorch, NoMomentHoldingWhatCuptiSawNoSplit) {
  // The layer's history lost the part around the peak: its moments hold other reserved bytes.
  std::string payload = kPayload;
  for (size_t at = payload.find("314572800"); at != std::string::npos;
       at = payload.find("314572800", at))
    payload.replace(at, 9, "314572801");
  test::TraceBuilder b = Planted();
  b.Add(RecordKind::MarkerInstant, payload, 9000, 9000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  EXPECT_TRUE(m.peaks[0].by_owner.empty());
  EXPECT_EQ(m.peaks[0].torch_moment, "");
  EXPECT_FALSE(m.peaks[0].by_library.empty());
}

TEST(MemoryTorch, AThousandMarksOfOnePayloadAreReadOnce) {
  test::TraceBuilder b = Planted();
  for (uint64_t i = 0; i < 1000; ++i)
    b.Add(RecordKind::MarkerInstant, kPayload, 9000 + i, 9000 + i);
  const MemorySummary m = Summarize(b);
  EXPECT_EQ(m.torch.size(), 1u);
}

TEST(MemoryTorch, TheAllocatorsSegmentsAreItsWhateverLibraryCuptiNamed) {
  // A DDP rank: CUPTI names libcudart for the allocator's cudaMalloc calls. The layer's segment
  // list (address, bytes) names them: the 2 x 100 MiB and the 50 MiB at 0x5000000 (listed with
  // its size); 0x4000000 is listed with another size, so it stays libcudart's.
  const std::string cudart = "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13";
  test::TraceBuilder b;
  Mem(b, true, 1100, 100 * kMiB, 0x1000000, cudart);
  Mem(b, true, 1200, 100 * kMiB, 0x2000000, cudart);
  Mem(b, true, 3200, 50 * kMiB, 0x4000000, cudart);
  Mem(b, true, 3400, 50 * kMiB, 0x5000000, cudart);
  Mem(b, true, 5000, 30 * kMiB, 0x6000000, kNccl);
  std::string payload = kPayload;
  payload.insert(
      payload.rfind('}'),
      fmt::format(R"(,"segments":[[{},{}],[{},{}],[{},{}],[{},{}],"bad",[1]])", 0x1000000,
                  100 * kMiB, 0x2000000, 100 * kMiB, 0x4000000, 51 * kMiB, 0x5000000, 50 * kMiB));
  b.Add(RecordKind::MarkerInstant, payload, 9000, 9000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.torch.size(), 1u);
  EXPECT_EQ(m.torch[0].segments.size(), 4u);  // the malformed entries dropped
  ASSERT_EQ(m.peaks.size(), 1u);
  const MemoryState& s = m.peaks[0];
  const MemoryOwner* torch = Owner(s.by_library, "PyTorch caching allocator (libc10_cuda.so)");
  ASSERT_NE(torch, nullptr);
  EXPECT_EQ(torch->live_bytes, static_cast<int64_t>(250 * kMiB));
  const MemoryOwner* rt = Owner(s.by_library, "CUDA runtime (libcudart.so.13)");
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->live_bytes, static_cast<int64_t>(50 * kMiB));
}

TEST(MemoryTorch, WithoutTheLayerOwnersStayByLibrary) {
  const MemorySummary m = Summarize(Planted());
  EXPECT_TRUE(m.torch.empty());
  ASSERT_EQ(m.peaks.size(), 1u);
  EXPECT_TRUE(m.peaks[0].by_owner.empty());
  EXPECT_EQ(m.peaks[0].torch_moment, "");
}

// ----- The memory rules (src/analysis/hints/memory_*.cpp, docs/hints.md "Memory") -------------

namespace {

// A payload at exit with these PyTorch peaks, bytes after each optimizer step, and at the
// allocated peak `acts` of activations and `params` of parameters.
std::string Payload(int64_t max_allocated, int64_t max_reserved, const std::string& steps,
                    int64_t acts, int64_t params, const std::string& conf = "") {
  return std::string(kTorchMemoryMark) +
         fmt::format(R"({{"v":1,"device":0,"when":"exit","now_us":9,"max_allocated":{0},
 "max_reserved":{1},"allocated":{0},"reserved":{1},"complete":true,"optimizer_steps":6,
 "alloc_conf":"{6}","backward_passes":6,"steps":[{2}],"steps_total":{7},
 "moments":[{{"kind":"allocated_peak","t_us":4,
 "allocated":{0},"reserved":{1},"categories":{{"parameters":{4},"activations":{3},
 "other":{5}}}}}]}})",
                     max_allocated, max_reserved, steps, acts, params,
                     max_allocated - acts - params, conf,
                     steps.empty() ? 0 : std::count(steps.begin(), steps.end(), ',') + 1);
}

std::vector<Hint> HintsWith(const std::string& payload) {
  test::TraceBuilder b = Planted();
  b.Add(RecordKind::MarkerInstant, payload, 9000, 9000);
  kprof::Run run;
  run.processes.push_back(b.t);
  const Timeline tl = BuildTimeline(run);
  return ComputeHints(tl, Analyze(tl));
}

constexpr int64_t kGiB = 1024 * static_cast<int64_t>(kMiB);

}  // namespace

TEST(MemoryHints, AStepThatKeepsMoreEachTimeIsALeakPricedByItsGrowth) {
  const int64_t m = static_cast<int64_t>(kMiB);
  const std::string steps =
      fmt::format("{},{},{},{},{},{}", 336 * m, 400 * m, 464 * m, 528 * m, 592 * m, 656 * m);
  const auto hints = HintsWith(Payload(kGiB, kGiB + 10 * m, steps, 100 * m, 100 * m));
  const Hint* h = FindHint(hints, "memory-leak");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_bytes, static_cast<uint64_t>(320 * m));  // after step 1 to step 6
  EXPECT_DOUBLE_EQ(h->est_saving_bytes_pct, 31.25);
  EXPECT_EQ(h->severity, Severity::Critical);
  EXPECT_NE(h->summary.find("grows by 64.0 MiB a step"), std::string::npos) << h->summary;
  EXPECT_EQ(h->est_saving_ns, 0u);
  EXPECT_NE(h->evidence.at(0).find("after step 1: 336.0 MiB; after step 6: 656.0 MiB (5 of 5"),
            std::string::npos)
      << h->evidence[0];
  // Flat steps, or too few: no leak. A warm-up that grows over its first steps (compiled
  // code's graph pools) and then stops is no leak either.
  EXPECT_EQ(FindHint(HintsWith(Payload(kGiB, kGiB, "1,2,2,2,2,2", 0, 0)), "memory-leak"), nullptr);
  const std::string five = fmt::format("{},{},{},{},{}", m, 400 * m, 900 * m, 950 * m, 1000 * m);
  EXPECT_EQ(FindHint(HintsWith(Payload(kGiB, kGiB, five, 0, 0)), "memory-leak"), nullptr);
  const std::string warm = fmt::format("{},{},{},{},{},{},{},{}", m, 400 * m, 900 * m, 900 * m,
                                       900 * m, 900 * m, 900 * m, 900 * m);
  EXPECT_EQ(FindHint(HintsWith(Payload(kGiB, kGiB, warm, 0, 0)), "memory-leak"), nullptr);
}

TEST(MemoryHints, CachedButUnusedAtTheReservedPeakIsFragmentation) {
  const auto hints = HintsWith(Payload(kGiB, 2 * kGiB, "", 0, kGiB / 2));
  const Hint* h = FindHint(hints, "allocator-fragmentation");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_bytes, static_cast<uint64_t>(kGiB));
  EXPECT_DOUBLE_EQ(h->est_saving_bytes_pct, 50.0);
  EXPECT_NE(h->fix_pytorch.find("expandable_segments:True"), std::string::npos);
  // Already on: nothing to recommend.
  EXPECT_EQ(FindHint(HintsWith(Payload(kGiB, 2 * kGiB, "", 0, kGiB / 2,
                                       "max_split_size_mb:128,expandable_segments:True")),
                     "allocator-fragmentation"),
            nullptr);
  // 20 MiB unused of 300 MiB reserved: below the floors; 100 MiB of 1 GiB: 9.8%, under 10%.
  EXPECT_EQ(FindHint(HintsWith(kPayload), "allocator-fragmentation"), nullptr);
  EXPECT_EQ(FindHint(HintsWith(Payload(kGiB - 100 * static_cast<int64_t>(kMiB), kGiB, "", 0, 0)),
                     "allocator-fragmentation"),
            nullptr);
}

TEST(MemoryHints, FragmentationIsPricedByTheHistoryReplayedWithExpandableSegments) {
  // Reserved 2 GiB, allocated 1 GiB; replayed with expandable segments: 1.5 GiB reserved. The
  // saving is 0.5 GiB, not the 1 GiB between the peaks.
  std::string p = Payload(kGiB, 2 * kGiB, "", 0, kGiB / 2);
  p.insert(p.rfind('}'), fmt::format(R"(,"expandable_max_reserved":{})", 3 * kGiB / 2));
  const auto hints = HintsWith(p);
  const Hint* h = FindHint(hints, "allocator-fragmentation");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_bytes, static_cast<uint64_t>(kGiB / 2));
  EXPECT_DOUBLE_EQ(h->est_saving_bytes_pct, 25.0);
  EXPECT_NE(h->assumption.find("replayed"), std::string::npos);
  // The replay reserving about all of it: 60 MiB saved is under the floors.
  std::string q = Payload(kGiB, 2 * kGiB, "", 0, kGiB / 2);
  q.insert(q.rfind('}'), fmt::format(R"(,"expandable_max_reserved":{})",
                                     2 * kGiB - 60 * static_cast<int64_t>(kMiB)));
  EXPECT_EQ(FindHint(HintsWith(q), "allocator-fragmentation"), nullptr);
  // A history that missed one of PyTorch's peaks (complete false): the gap between the peaks.
  std::string inc = p;
  inc.replace(inc.find(R"("complete":true)"), 15, R"("complete":false)");
  const auto hi = HintsWith(inc);
  ASSERT_NE(FindHint(hi, "allocator-fragmentation"), nullptr);
  EXPECT_EQ(FindHint(hi, "allocator-fragmentation")->est_saving_bytes, static_cast<uint64_t>(kGiB));
  // A replay below the allocated peak is not believed under it: 1 GiB saved at most.
  std::string r = Payload(kGiB, 2 * kGiB, "", 0, kGiB / 2);
  r.insert(r.rfind('}'), R"(,"expandable_max_reserved":1)");
  const auto hr = HintsWith(r);
  ASSERT_NE(FindHint(hr, "allocator-fragmentation"), nullptr);
  EXPECT_EQ(FindHint(hr, "allocator-fragmentation")->est_saving_bytes, static_cast<uint64_t>(kGiB));
}

TEST(MemoryHints, ActivationsOverHalfATightPeakPointAtCheckpointing) {
  const int64_t m = static_cast<int64_t>(kMiB);
  const std::string acts = Payload(400 * m, 410 * m, "", 300 * m, 50 * m);
  // The planted run peaks at 330 MiB of a 1 GiB device (32%): memory is not short, no hint.
  EXPECT_EQ(FindHint(HintsWith(acts), "activation-memory"), nullptr);
  // On a device of 400 MiB the same peak is 82% of it.
  test::TraceBuilder b = Planted();
  b.t.meta["device.0.memory_bytes"] = std::to_string(400 * kMiB);
  b.Add(RecordKind::MarkerInstant, acts, 9000, 9000);
  kprof::Run run;
  run.processes.push_back(b.t);
  const Timeline tl = BuildTimeline(run);
  const auto hints = ComputeHints(tl, Analyze(tl));
  const Hint* h = FindHint(hints, "activation-memory");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_bytes, static_cast<uint64_t>(300 * m));
  EXPECT_DOUBLE_EQ(h->est_saving_bytes_pct, 75.0);
  EXPECT_NE(h->evidence.at(1).find("parameters 50.0 MiB"), std::string::npos) << h->evidence[1];
  // 70 of 280 MiB: not half.
  EXPECT_EQ(FindHint(HintsWith(kPayload), "activation-memory"), nullptr);
}
