// Attribution and views on hand-built runs whose answers are known exactly.
#include "kprof/analysis.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace kprof {
namespace {

const GroupRow* Find(const std::vector<GroupRow>& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r.key == key) return &r;
  return nullptr;
}

// Thread 1: step{ forward{ k1 } k2 }   Thread 2: other{ k3 }   no range: k4
kprof::Run TwoThreads() {
  test::TraceBuilder b;
  b.Range(1, "step", 1000, 100000);
  b.Range(1, "forward", 2000, 50000);
  b.Launch(1, 3000, "k1", 10000, 11000, 7);
  b.Launch(1, 60000, "k2", 61000, 64000, 7);
  b.Range(2, "other", 2500, 40000);
  b.Launch(2, 3500, "k3", 10500, 12500, 8);
  b.Launch(1, 200000, "k4", 201000, 202000, 7);
  kprof::Run run;
  run.processes.push_back(b.t);
  return run;
}

TEST(Attribute, NestedRangesOnTwoThreads) {
  kprof::Run run = TwoThreads();
  auto att = Attribute(BuildTimeline(run));
  ASSERT_EQ(att.size(), 4u);
  auto path = [&](const Attributed& a) {
    std::string s;
    for (const Record* r : a.ranges) s += "/" + a.process->Name(*r);
    return s;
  };
  // Ordered by activity start.
  EXPECT_EQ(att[0].process->Name(*att[0].activity), "k1");
  EXPECT_EQ(path(att[0]), "/step/forward");
  EXPECT_EQ(att[1].process->Name(*att[1].activity), "k3");
  EXPECT_EQ(path(att[1]), "/other");
  EXPECT_EQ(path(att[2]), "/step");
  EXPECT_EQ(path(att[3]), "");
  for (const auto& a : att) ASSERT_NE(a.api, nullptr);
}

TEST(Analyze, OpViewCountsAndTimes) {
  kprof::Run run = TwoThreads();
  Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.kernels, 4u);
  EXPECT_EQ(an.summary.kernel_ns, 1000u + 3000 + 2000 + 1000);
  // k1 [10000,11000) and k3 [10500,12500) overlap: union 2500; + 3000 + 1000.
  EXPECT_EQ(an.summary.gpu_busy_ns, 6500u);
  EXPECT_EQ(an.summary.launches, 4u);
  EXPECT_EQ(an.summary.nvtx_ranges, 3u);
  const GroupRow* fwd = Find(an.rows, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->calls, 1u);
  EXPECT_EQ(fwd->gpu_ns, 1000u);
  EXPECT_EQ(fwd->cpu_ns, 48000u);
  ASSERT_EQ(fwd->kernel_rows.size(), 1u);
  EXPECT_EQ(fwd->kernel_rows[0].name, "k1");
  const GroupRow* step = Find(an.rows, "step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->gpu_ns, 3000u);  // only k2: k1 belongs to the innermost range
  const GroupRow* none = Find(an.rows, "(no range)");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->gpu_ns, 1000u);
  EXPECT_EQ(an.unattributed_gpu_ns, 1000u);
  EXPECT_EQ(an.rows.front().key, "step");  // sorted by GPU time
}

TEST(Analyze, RangePathView) {
  kprof::Run run = TwoThreads();
  AnalysisOptions o;
  o.by = GroupBy::RangePath;
  Analysis an = Analyze(BuildTimeline(run), o);
  ASSERT_NE(Find(an.rows, "step/forward"), nullptr);
  EXPECT_EQ(Find(an.rows, "step/forward")->gpu_ns, 1000u);
  EXPECT_EQ(Find(an.rows, "step")->gpu_ns, 3000u);
  EXPECT_EQ(Find(an.rows, "other")->gpu_ns, 2000u);
}

TEST(Analyze, StreamAndDeviceViews) {
  kprof::Run run = TwoThreads();
  run.processes[0].meta["device.0.name"] = "NVIDIA H100 80GB HBM3";
  run.processes[0].meta["device.0.sm_count"] = "132";
  AnalysisOptions o;
  o.by = GroupBy::Stream;
  Analysis an = Analyze(BuildTimeline(run), o);
  ASSERT_EQ(an.rows.size(), 2u);
  EXPECT_EQ(Find(an.rows, "dev 0 stream 7")->kernels, 3u);
  EXPECT_EQ(Find(an.rows, "dev 0 stream 8")->gpu_ns, 2000u);
  ASSERT_EQ(an.summary.streams.size(), 2u);
  o.by = GroupBy::Device;
  an = Analyze(BuildTimeline(run), o);
  ASSERT_EQ(an.rows.size(), 1u);
  EXPECT_EQ(an.rows[0].key, "dev 0 NVIDIA H100 80GB HBM3");
  ASSERT_EQ(an.summary.devices.size(), 1u);
  EXPECT_EQ(an.summary.devices[0].sm_count, 132u);
}

TEST(Analyze, KernelViewDemanglesAndFilters) {
  test::TraceBuilder b;
  for (int i = 0; i < 20; ++i)
    b.Launch(1, 1000 + i * 10000, "_Z6vecAddPfS_S_i", 2000 + i * 10000,
             2000 + i * 10000 + 100 * (i + 1));
  b.Launch(1, 500000, "other_kernel", 500100, 500200);
  kprof::Run run;
  run.processes.push_back(b.t);
  AnalysisOptions o;
  o.by = GroupBy::Kernel;
  Analysis an = Analyze(BuildTimeline(run), o);
  ASSERT_EQ(an.rows.size(), 2u);
  EXPECT_EQ(an.rows[0].key, "vecAdd(float*, float*, float*, int)");
  const KernelRow& k = an.kernels[0];
  EXPECT_EQ(k.stat.count, 20u);
  EXPECT_EQ(k.stat.total_ns, 100u * 210);
  EXPECT_EQ(k.stat.min_ns, 100u);
  EXPECT_EQ(k.stat.max_ns, 2000u);
  EXPECT_EQ(k.stat.median_ns, 1000u);  // lower median of 100..2000
  EXPECT_EQ(k.stat.p95_ns, 1900u);     // nearest rank: 19th of 20
  EXPECT_EQ(k.grid.x, 132u);
  EXPECT_EQ(k.block.x, 256u);
  EXPECT_EQ(k.registers, 32u);
  o.filter = "^other";
  an = Analyze(BuildTimeline(run), o);
  ASSERT_EQ(an.rows.size(), 1u);
  EXPECT_EQ(an.rows[0].key, "other_kernel");
  o.filter = "([";
  EXPECT_THROW(Analyze(BuildTimeline(run), o), InputError);
  o.filter = "";
  o.top = 1;
  EXPECT_EQ(Analyze(BuildTimeline(run), o).rows.size(), 1u);
}

TEST(Analyze, GraphReplaysGoToTheGraphLaunchRange) {
  test::TraceBuilder b;
  b.Range(1, "replay", 1000, 90000);
  Record& g = b.Add(RecordKind::RuntimeApi, "cudaGraphLaunch", 2000, 3000);
  g.tid = 1;
  g.correlation = 77;
  for (int i = 0; i < 4; ++i) {
    Record& k = b.Add(RecordKind::Kernel, "graph_k", 5000 + i * 1000, 5500 + i * 1000);
    k.correlation = 77;
    k.flags = 1;
  }
  kprof::Run run;
  run.processes.push_back(b.t);
  Analysis an = Analyze(BuildTimeline(run));
  const GroupRow* r = Find(an.rows, "replay");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kernels, 4u);
  EXPECT_EQ(an.summary.launches, 1u);  // one launch call for four kernels
}

TEST(Analyze, StartEndRangeEndedOnAnotherThread) {
  test::TraceBuilder b;
  Record& s = b.Add(RecordKind::MarkerStart, "io", 1000, 1000);
  s.tid = 1;
  s.a = 5;
  Record& e = b.Add(RecordKind::MarkerEnd, "", 9000, 9000);
  e.tid = 2;  // nvtxRangeEnd on another thread
  e.a = 5;
  b.Launch(1, 2000, "k", 3000, 4000);
  kprof::Run run;
  run.processes.push_back(b.t);
  Analysis an = Analyze(BuildTimeline(run));
  ASSERT_NE(Find(an.rows, "io"), nullptr);
  EXPECT_EQ(Find(an.rows, "io")->kernels, 1u);
  EXPECT_EQ(Find(an.rows, "io")->cpu_ns, 8000u);
}

TEST(Analyze, CopiesSyncsMemoryOverlap) {
  test::TraceBuilder b;
  b.Launch(1, 1000, "k", 10000, 20000);
  Record& c1 = b.Add(RecordKind::Memcpy, "", 15000, 25000);  // overlaps k by 5000
  c1.flags = static_cast<uint8_t>(CopyKind::HtoD);
  c1.bytes = 4096;
  c1.tid = 8;
  Record& c2 = b.Add(RecordKind::Memcpy, "", 30000, 31000);
  c2.flags = static_cast<uint8_t>(CopyKind::DtoH);
  c2.bytes = 100;
  Record& ms = b.Add(RecordKind::Memset, "", 40000, 40500);
  ms.bytes = 17;
  Record& sy = b.Add(RecordKind::Sync, "", 20000, 26000);
  sy.flags = static_cast<uint8_t>(SyncKind::StreamSynchronize);
  for (auto [t, bytes, alloc] : {std::tuple{100ull, 1000ull, true},
                                 {200, 500, true},
                                 {300, 1000, false},
                                 {400, 2000, true}}) {
    Record& m = b.Add(alloc ? RecordKind::MemAlloc : RecordKind::MemFree, "", t, t);
    m.bytes = bytes;
  }
  kprof::Run run;
  run.processes.push_back(b.t);
  Analysis an = Analyze(BuildTimeline(run));
  const auto& s = an.summary;
  EXPECT_EQ(s.memcpys, 2u);
  EXPECT_EQ(s.memcpy_count[static_cast<int>(CopyKind::HtoD)], 1u);
  EXPECT_EQ(s.memcpy_bytes[static_cast<int>(CopyKind::HtoD)], 4096u);
  EXPECT_EQ(s.memcpy_bytes[static_cast<int>(CopyKind::DtoH)], 100u);
  EXPECT_EQ(s.memsets, 1u);
  EXPECT_EQ(s.memset_bytes, 17u);
  EXPECT_EQ(s.syncs, 1u);
  EXPECT_EQ(s.sync_ns, 6000u);
  EXPECT_EQ(s.copy_compute_overlap_ns, 5000u);
  EXPECT_EQ(s.peak_memory_bytes, 2500);  // 1000 + 500 - 1000 + 2000
  EXPECT_EQ(s.allocs, 3u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_EQ(s.gpu_busy_ns, 15000u + 1000 + 500);
  EXPECT_EQ(s.wall_ns, 40500u - 100);
}

TEST(Analyze, MultipleProcessesAndIncomplete) {
  kprof::Run run = TwoThreads();
  run.processes.push_back(run.processes[0]);
  run.processes[1].pid = 200;
  run.processes[1].rank = 1;
  run.processes[1].complete = false;
  run.processes[1].stats.dropped_records = 3;
  Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.processes, 2u);
  EXPECT_EQ(an.summary.incomplete_processes, 1u);
  EXPECT_EQ(an.summary.dropped_records, 3u);
  EXPECT_EQ(an.summary.kernels, 8u);
  ASSERT_EQ(an.processes.size(), 2u);
  EXPECT_EQ(an.processes[1].rank, 1);
  EXPECT_EQ(an.processes[1].kernels, 4u);
  EXPECT_EQ(Find(an.rows, "forward")->calls, 2u);
}

TEST(Units, UnionAndFormatting) {
  std::vector<std::pair<uint64_t, uint64_t>> iv = {{5, 10}, {0, 3}, {8, 12}, {12, 13}, {20, 20}};
  EXPECT_EQ(UnionLength(iv), 3u + 8);
  std::vector<uint64_t> none;
  EXPECT_EQ(MakeStat(none).count, 0u);
  EXPECT_EQ(FormatDuration(999), "999 ns");
  EXPECT_EQ(FormatDuration(1500), "1.50 us");
  EXPECT_EQ(FormatDuration(2500000), "2.50 ms");
  EXPECT_EQ(FormatDuration(3210000000ull), "3.210 s");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(17u << 20), "17.0 MiB");
  EXPECT_EQ(ParseGroupBy("range-path"), GroupBy::RangePath);
  EXPECT_FALSE(ParseGroupBy("bogus"));
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// Pinned and pageable host allocations (cudaHostAlloc) are not device memory.
TEST(Analysis, PeakDeviceMemoryIgnoresHostAllocations) {
  test::TraceBuilder b;
  struct A {
    uint64_t t;
    uint64_t bytes;
    MemKind kind;
  };
  for (const A& a : {A{100, 1000, MemKind::Device}, A{200, 1u << 30, MemKind::Pinned},
                     A{300, 500, MemKind::Unknown}, A{400, 64, MemKind::Pageable}}) {
    Record& m = b.Add(RecordKind::MemAlloc, "", a.t, a.t);
    m.bytes = a.bytes;
    m.c = static_cast<uint32_t>(a.kind);
  }
  kprof::Run run;
  run.processes.push_back(b.t);
  Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.peak_memory_bytes, 1500);  // device + unknown (foreign traces)
  EXPECT_EQ(an.summary.allocs, 2u);
}

TEST(Analysis, RepNumberAcceptsOnlyRepeatDirectories) {
  EXPECT_EQ(RepNumber("rep1"), 1u);
  EXPECT_EQ(RepNumber("rep12"), 12u);
  EXPECT_EQ(RepNumber("rep0"), 0u);
  EXPECT_EQ(RepNumber("rep"), 0u);
  EXPECT_EQ(RepNumber("reports"), 0u);
  EXPECT_EQ(RepNumber("rep1a"), 0u);
  EXPECT_EQ(RepNumber("xrep1"), 0u);
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// Rebased traces start at ts 0: GPU work at time 0 is inside the run, never busier than its wall.
TEST(Analysis, GpuWorkAtTimeZeroCountsInTheWall) {
  test::TraceBuilder b;
  b.Add(RecordKind::Kernel, "k0", 0, 100'000);
  b.Add(RecordKind::Kernel, "k1", 200'000, 300'000);
  kprof::Run run;
  run.processes.push_back(b.t);
  Analysis an = Analyze(BuildTimeline(run));
  EXPECT_EQ(an.summary.gpu_busy_ns, 200'000u);
  EXPECT_EQ(an.summary.wall_ns, 300'000u);
  EXPECT_LE(an.summary.utilisation, 1.0);
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

// API time is the union of each thread's calls, also when a trace lists them out of order.
TEST(Analysis, ApiTimeIsTheUnionPerThreadInAnyOrder) {
  test::TraceBuilder b;
  auto call = [&](uint32_t tid, uint64_t s, uint64_t e) {
    b.Add(RecordKind::RuntimeApi, "cudaLaunchKernel", s, e).tid = tid;
  };
  call(1, 5000, 6000);  // thread 1, out of order: [1000,3000) [2000,4000) [5000,6000) -> 4000
  call(1, 1000, 3000);
  call(1, 2000, 4000);
  call(2, 1000, 2000);  // thread 2, in order, overlapping thread 1: counted on its own -> 1500
  call(2, 1500, 2500);
  kprof::Run run;
  run.processes.push_back(b.t);
  EXPECT_EQ(Analyze(BuildTimeline(run)).summary.api_ns, 4000u + 1500u);
}

}  // namespace
}  // namespace kprof
