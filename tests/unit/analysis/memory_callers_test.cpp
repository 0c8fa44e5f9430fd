// Memory that CUPTI gave no library for, owned by the caller kprof found for the virtual-memory
// call that made it (record.h kApiMemoryCaller, src/analysis/memory.cpp, docs/memory.md "Who
// made it"): by the call's correlation id, else by the address the call mapped.
#include <gtest/gtest.h>

#include <sstream>

#include "kprof/analysis.h"
#include "kprof/memory.h"
#include "kprof/output.h"
#include "test_util.h"

using namespace kprof;

namespace {

constexpr uint64_t kMiB = 1 << 20;

// A virtual-memory driver call on `tid` with the caller kprof found; `mapped` is the address
// (0 for cuMemCreate, which maps nothing).
void Call(test::TraceBuilder& b, const std::string& fn, uint64_t t, uint32_t corr, uint32_t tid,
          const std::string& caller, uint64_t bytes, uint64_t mapped) {
  const uint32_t caller_id = caller.empty() ? 0 : b.t.strings.Intern(caller);
  Record& r = b.Add(RecordKind::DriverApi, fn, t, t + 50);
  r.flags = kApiMemoryCaller;
  r.tid = tid;
  r.correlation = corr;
  r.bytes = bytes;
  r.c = static_cast<uint32_t>(mapped);
  r.d = static_cast<uint32_t>(mapped >> 32);
  r.e = caller_id;
}

// CUPTI's record of the memory, with the library it named (none by default).
void Alloc(test::TraceBuilder& b, uint64_t t, uint32_t corr, uint64_t bytes, uint64_t addr,
           const std::string& lib = "") {
  Record& m = b.Add(RecordKind::MemAlloc, lib, t, t);
  m.device = 0;
  m.correlation = corr;
  m.bytes = bytes;
  m.a = static_cast<uint32_t>(addr);
  m.b = static_cast<uint32_t>(addr >> 32);
  m.c = static_cast<uint32_t>(MemKind::Device);
}

const std::string kNccl = "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2";

MemorySummary Summarize(const test::TraceBuilder& b) {
  kprof::Run run;
  run.processes.push_back(b.t);
  return Analyze(BuildTimeline(run)).memory;
}

const MemoryOwner* Owner(const MemoryState& s, const std::string& name) {
  for (const MemoryOwner& o : s.by_library)
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

TEST(MemoryCallers, MemoryOfAVirtualMemoryCallIsItsCallersByCorrelation) {
  test::TraceBuilder b;
  Call(b, "cuMemCreate", 1000, 7, 42, kNccl, 6 * kMiB, 0);
  Alloc(b, 1040, 7, 6 * kMiB, 0x7f0000000000);
  Call(b, "cuMemCreate", 2000, 8, 42, kNccl, 6 * kMiB, 0);
  Alloc(b, 2040, 8, 6 * kMiB, 0x7f0000600000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  ASSERT_EQ(m.peaks[0].by_library.size(), 1u);
  EXPECT_EQ(m.peaks[0].by_library[0].name, "NCCL (libnccl.so.2)");
  EXPECT_EQ(m.peaks[0].by_library[0].live_bytes, static_cast<int64_t>(12 * kMiB));
  EXPECT_EQ(m.peaks[0].by_library[0].live_allocations, 2u);
}

TEST(MemoryCallers, WithoutACorrelatedCallTheAddressMappedNamesTheOwner) {
  test::TraceBuilder b;
  // CUPTI's record carries a correlation id no recorded call has; cuMemMap mapped its address.
  Call(b, "cuMemMap", 1000, 11, 42, kNccl, 4 * kMiB, 0x7f0000000000);
  Alloc(b, 1040, 99, 4 * kMiB, 0x7f0000000000);
  // Not mapped by any recorded call: no owner.
  Alloc(b, 1100, 0, 2 * kMiB, 0x7f1000000000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  const MemoryOwner* nccl = Owner(m.peaks[0], "NCCL (libnccl.so.2)");
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->live_bytes, static_cast<int64_t>(4 * kMiB));
  const MemoryOwner* unknown = Owner(m.peaks[0], "(library not recorded)");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->live_bytes, static_cast<int64_t>(2 * kMiB));
}

TEST(MemoryCallers, ACallerKnownOnlyByItsThreadIsNamedByIt) {
  test::TraceBuilder b;
  Call(b, "cuMemCreate", 1000, 7, 42, "[thread] NCCL Service 0", 6 * kMiB, 0);
  Alloc(b, 1040, 7, 6 * kMiB, 0x7f0000000000);
  Call(b, "cuMemCreate", 2000, 8, 43, "[thread] worker", kMiB, 0);
  Alloc(b, 2040, 8, kMiB, 0x7f0000600000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  ASSERT_EQ(m.peaks[0].by_library.size(), 2u);
  EXPECT_EQ(m.peaks[0].by_library[0].name, "NCCL (thread NCCL Service 0)");
  EXPECT_EQ(m.peaks[0].by_library[1].name, "(library not recorded) on thread worker");
}

TEST(MemoryCallers, AnApiRecordWithoutTheFlagNamesOnlyItsCall) {
  test::TraceBuilder b;
  // An ordinary driver API record (from CUPTI's activity): its e field means nothing.
  Record& r = b.Add(RecordKind::DriverApi, "cuMemAlloc_v2", 1000, 1050);
  r.tid = 42;
  r.correlation = 7;
  r.e = b.t.strings.Intern(kNccl);
  Alloc(b, 1040, 7, 6 * kMiB, 0x7f0000000000);
  const MemorySummary m = Summarize(b);
  ASSERT_EQ(m.peaks.size(), 1u);
  ASSERT_EQ(m.peaks[0].by_library.size(), 1u);
  EXPECT_EQ(m.peaks[0].by_library[0].name, "(library not recorded) from cuMemAlloc_v2");
}

// CUPTI names a library for memory a virtual-memory call mapped, but not the caller's: on an H200
// PyTorch's expandable segments came with cuDNN's and cuBLAS's names. The mapping call wins.
TEST(MemoryCallers, TheMappingCallsCallerWinsOverCuptisLibrary) {
  test::TraceBuilder b;
  const std::string torch = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
  Call(b, "cuMemMap", 1000, 11, 42, torch, 20 * kMiB, 0x2b54000000);
  Alloc(b, 1040, 12, 20 * kMiB, 0x2b54000000, "/venv/lib/libcudnn_graph.so.9");
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.peaks.size(), 1u);
  ASSERT_EQ(s.peaks[0].by_library.size(), 1u);
  EXPECT_EQ(s.peaks[0].by_library[0].name, "PyTorch caching allocator (libc10_cuda.so)");
}

// An address mapped twice over time, by two callers: each allocation takes the mapping made
// before it.
TEST(MemoryCallers, AnAddressMappedAgainTakesTheLatestMappingBeforeIt) {
  test::TraceBuilder b;
  Call(b, "cuMemMap", 1000, 11, 42, kNccl, 2 * kMiB, 0x7f0000000000);
  Alloc(b, 1040, 12, 2 * kMiB, 0x7f0000000000);
  Record& f = b.Add(RecordKind::MemFree, "", 2000, 2000);
  f.device = 0;
  f.bytes = 2 * kMiB;
  f.a = 0;
  f.b = 0x7f00;
  f.c = static_cast<uint32_t>(MemKind::Device);
  Call(b, "cuMemMap", 3000, 21, 43, "/opt/app/libpool.so", 4 * kMiB, 0x7f0000000000);
  Alloc(b, 3040, 22, 4 * kMiB, 0x7f0000000000);
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.peaks.size(), 1u);
  ASSERT_EQ(s.peaks[0].by_library.size(), 1u);
  EXPECT_EQ(s.peaks[0].by_library[0].name, "libpool.so");
  EXPECT_EQ(s.peaks[0].by_library[0].live_bytes, static_cast<int64_t>(4 * kMiB));
}

namespace {
void FailedCall(test::TraceBuilder& b, const std::string& fn, uint64_t t, uint32_t tid,
                uint32_t code) {
  Record& f = b.Add(RecordKind::MemAllocFailed, fn, t, t);
  f.tid = tid;
  f.bytes = 2 * kMiB;
  f.b = code;
  f.c = static_cast<uint32_t>(MemKind::Device);
  f.d = 0;
  f.flags = kAllocFailedDriver;
}
}  // namespace

// PyTorch's expandable segments ask cuMemCreate for a shareable handle, refused in a container
// (error 800), then ask again without one: a probe, retried with success, not a shortage. An
// out-of-memory failure stays one whatever follows; a failure not followed by a success on the
// same thread within 10 ms is not retried.
TEST(MemoryCallers, AFailureTheSameCallRetriedWithSuccessIsAProbe) {
  test::TraceBuilder b;
  FailedCall(b, "cuMemCreate", 1000, 42, 800);
  Call(b, "cuMemCreate", 1100, 7, 42, "/torch/lib/libc10_cuda.so", 2 * kMiB, 0);
  FailedCall(b, "cuMemCreate", 5000, 42, 2);  // out of memory
  Call(b, "cuMemCreate", 5100, 8, 42, "/torch/lib/libc10_cuda.so", 2 * kMiB, 0);
  FailedCall(b, "cuMemCreate", 9000, 43, 800);        // another thread's success does not count
  FailedCall(b, "cuMemCreate", 20'000'000, 42, 801);  // the success came too late
  Call(b, "cuMemCreate", 40'000'000, 9, 42, "/torch/lib/libc10_cuda.so", 2 * kMiB, 0);
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.failures.size(), 4u);
  EXPECT_TRUE(s.failures[0].retried);
  EXPECT_FALSE(s.failures[1].retried);
  EXPECT_FALSE(s.failures[2].retried);
  EXPECT_FALSE(s.failures[3].retried);
}

namespace {
std::string Report(const test::TraceBuilder& b) {
  kprof::Run run;
  run.processes.push_back(b.t);
  const Timeline tl = BuildTimeline(run);
  std::ostringstream out;
  WriteReport(out, run, Analyze(tl), {}, ReportOptions{});
  return out.str();
}
}  // namespace

// The report opens with a failure only when it was not a probe.
TEST(MemoryCallers, AProbeIsANoteAndAShortageAHeadline) {
  test::TraceBuilder probe;
  FailedCall(probe, "cuMemCreate", 1000, 42, 800);
  Call(probe, "cuMemCreate", 1100, 7, 42, "/torch/lib/libc10_cuda.so", 2 * kMiB, 0);
  const std::string quiet = Report(probe);
  EXPECT_EQ(quiet.find("ALLOCATION FAILED"), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("Note: 1 allocation call failed and succeeded when retried (cuMemCreate "
                       "error 800): not a shortage"),
            std::string::npos)
      << quiet;
  FailedCall(probe, "cudaMalloc", 9000, 42, 2);
  const std::string loud = Report(probe);
  EXPECT_NE(loud.find("OUT OF MEMORY: 1 allocation call failed\n  (and 1 allocation call failed "
                      "and succeeded when retried (cuMemCreate error 800): not a shortage)"),
            std::string::npos)
      << loud;
}

// A mapping names the first allocation CUPTI recorded at its address after it, once: memory made
// at the address later (after the mapping was released) is not the mapping's, nor memory
// recorded more than a second after it.
TEST(MemoryCallers, AMappingNamesOnlyTheFirstAllocationAfterIt) {
  test::TraceBuilder b;
  Call(b, "cuMemMap", 1000, 11, 42, "/opt/app/libpool.so", 2 * kMiB, 0x7f0000000000);
  Alloc(b, 1040, 12, 2 * kMiB, 0x7f0000000000);
  Record& f = b.Add(RecordKind::MemFree, "", 2000, 2000);
  f.device = 0;
  f.bytes = 2 * kMiB;
  f.b = 0x7f00;
  f.c = static_cast<uint32_t>(MemKind::Device);
  Alloc(b, 3000, 0, 4 * kMiB, 0x7f0000000000);  // another maker, at the same address
  Call(b, "cuMemMap", 4000, 21, 42, "/opt/app/libpool.so", 8 * kMiB, 0x7f2000000000);
  Alloc(b, 2'000'004'000, 0, 8 * kMiB, 0x7f2000000000);  // two seconds after its mapping
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.peaks.size(), 1u);
  ASSERT_EQ(s.peaks[0].by_library.size(), 1u);
  EXPECT_EQ(s.peaks[0].by_library[0].name, "(library not recorded)");
  EXPECT_EQ(s.peaks[0].by_library[0].live_bytes, static_cast<int64_t>(12 * kMiB));
  EXPECT_EQ(s.peaks[0].by_library[0].allocations, 2u);  // the first one was libpool.so's
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.sourced_allocations, 1u);
}

// A caller known only by its thread never overrides a library CUPTI named, and counts as no
// library.
TEST(MemoryCallers, AThreadNameNamesOnlyMemoryCuptiLeftUnnamed) {
  test::TraceBuilder b;
  Call(b, "cuMemMap", 1000, 11, 42, "[thread] worker", 2 * kMiB, 0x7f0000000000);
  Alloc(b, 1040, 12, 2 * kMiB, 0x7f0000000000, "/opt/app/libfoo.so");
  Call(b, "cuMemMap", 2000, 21, 42, "[thread] worker", 4 * kMiB, 0x7f1000000000);
  Alloc(b, 2040, 22, 4 * kMiB, 0x7f1000000000);
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.peaks.size(), 1u);
  ASSERT_EQ(s.peaks[0].by_library.size(), 2u);
  EXPECT_EQ(s.peaks[0].by_library[0].name, "(library not recorded) on thread worker");
  EXPECT_EQ(s.peaks[0].by_library[1].name, "libfoo.so");
  EXPECT_EQ(s.sourced_allocations, 1u);  // CUPTI's libfoo.so only
}

// A driver call's failure is named with CUPTI's version suffix, its retry's activity record
// without: they are the same call.
TEST(MemoryCallers, ARetryMatchesWithoutTheVersionSuffix) {
  test::TraceBuilder b;
  FailedCall(b, "cuMemAlloc_v2", 1000, 42, 801);
  Record& ok = b.Add(RecordKind::DriverApi, "cuMemAlloc", 1000, 1200);  // starts as it failed
  ok.tid = 42;
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.failures.size(), 1u);
  EXPECT_TRUE(s.failures[0].retried);
}

// Probes are neither described nor counted among the first failures: the shortages after four
// probes are described.
TEST(MemoryCallers, ProbesLeaveTheDescriptionsToTheShortages) {
  test::TraceBuilder b;
  Alloc(b, 500, 1, 2 * kMiB, 0x7f0000000000, "/opt/app/libfoo.so");
  for (uint64_t t : {1000, 2000, 3000, 4000}) {
    FailedCall(b, "cuMemCreate", t, 42, 800);
    Call(b, "cuMemCreate", t + 100, static_cast<uint32_t>(t), 42, "/torch/libc10_cuda.so", 2 * kMiB,
         0);
  }
  FailedCall(b, "cuMemCreate", 5000, 42, 2);
  FailedCall(b, "cuMemCreate", 6000, 42, 2);
  const MemorySummary s = Summarize(b);
  ASSERT_EQ(s.failures.size(), 6u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(s.failures[i].retried) << i;
    EXPECT_FALSE(s.failures[i].described) << i;
  }
  EXPECT_TRUE(s.failures[4].described);
  EXPECT_TRUE(s.failures[5].described);
}
