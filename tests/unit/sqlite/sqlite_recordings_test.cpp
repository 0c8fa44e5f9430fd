// The SQLite export of every real recording (the bundled default run and each run under
// tests/fixtures/gpu/): SQL written for Nsight Systems' export returns kprof's own views, and
// every table holds exactly the run's records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kprof/memory.h"
#include "sqlite_test_util.h"

namespace kprof {
namespace {

const std::string kSource = KPROF_SOURCE_DIR;

std::vector<std::string> Recordings() {
  std::vector<std::string> out = {"examples/default-run"};
  std::vector<std::string> gpu;
  for (const auto& d : std::filesystem::directory_iterator(kSource + "/tests/fixtures/gpu")) {
    const std::string name = d.path().filename().string();
    if (name == "diff") {  // a directory of runs: each one
      for (const auto& r : std::filesystem::directory_iterator(d.path()))
        gpu.push_back("tests/fixtures/gpu/diff/" + r.path().filename().string() + "/rep1");
    } else {
      gpu.push_back("tests/fixtures/gpu/" + name);
    }
  }
  std::sort(gpu.begin(), gpu.end());
  out.insert(out.end(), gpu.begin(), gpu.end());
  return out;
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class SqliteRecording : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    an_ = std::make_unique<test::Analysed>(ReadInputs({kSource + "/" + GetParam()}));
    path_ = test::TempPath(CaseName({GetParam(), 0}) + ".sqlite");
    an_->Export(path_);
    db_ = std::make_unique<test::Db>(path_);
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove(path_);
  }
  std::unique_ptr<test::Analysed> an_;
  std::string path_;
  std::unique_ptr<test::Db> db_;
};

// The kernel summary exactly as an nsys user writes it against `nsys export --type sqlite`.
// kprof's kernel view groups by the demangled name, which is what demangledName holds.
TEST_P(SqliteRecording, NsysKernelSummaryQueryEqualsKernelView) {
  const auto rows = db_->Query(
      "SELECT s.value AS name, SUM(k.end - k.start) AS total, COUNT(*) AS n, "
      "AVG(k.end - k.start) AS avg FROM CUPTI_ACTIVITY_KIND_KERNEL k "
      "JOIN StringIds s ON s.id = k.demangledName GROUP BY name ORDER BY total DESC");
  const auto& kernels = an_->analysis.kernels;
  ASSERT_EQ(rows.size(), kernels.size());
  std::map<std::string, const KernelRow*> by_name;
  for (const KernelRow& k : kernels) by_name[k.name] = &k;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& name = rows[i][0].s;
    SCOPED_TRACE(name);
    // Same order of totals (names of equal totals may come in either order).
    EXPECT_EQ(static_cast<uint64_t>(rows[i][1].i), kernels[i].stat.total_ns);
    auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end());
    const Stat& s = it->second->stat;
    EXPECT_EQ(static_cast<uint64_t>(rows[i][1].i), s.total_ns);
    EXPECT_EQ(static_cast<uint64_t>(rows[i][2].i), s.count);
    // kprof's mean is the integer quotient (rounded down); SQL's AVG is the real quotient.
    EXPECT_EQ(static_cast<uint64_t>(std::floor(rows[i][3].d)), s.mean_ns);
  }
  // Grouped by shortName, the counts add up to the same kernels.
  EXPECT_EQ(db_->Int("SELECT SUM(n) FROM (SELECT COUNT(*) AS n FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                     "JOIN StringIds s ON s.id = k.shortName GROUP BY s.value)"),
            static_cast<int64_t>(an_->analysis.summary.kernels));
}

TEST_P(SqliteRecording, EveryTableHoldsTheRunsRecords) {
  std::map<RecordKind, int64_t> n;
  int64_t ranges = 0;
  for (const ProcessTrace& p : an_->run.processes)
    for (const Record& r : p.records) ++n[r.Kind()];
  for (const ProcessTimeline& t : an_->timeline.processes)
    ranges += static_cast<int64_t>(t.index.ranges.size());
  const RunSummary& S = an_->analysis.summary;
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), n[RecordKind::Kernel]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"), n[RecordKind::Memcpy]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"), n[RecordKind::Memset]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 0"),
            n[RecordKind::RuntimeApi]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1"),
            n[RecordKind::DriverApi]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
            n[RecordKind::Sync]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS"),
            n[RecordKind::MemAlloc] + n[RecordKind::MemFree]);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)"), ranges);
  EXPECT_EQ(ranges, static_cast<int64_t>(S.nvtx_ranges));
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 34"),
            n[RecordKind::MarkerInstant]);
  EXPECT_EQ(
      static_cast<uint64_t>(db_->Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")),
      S.syncs);

  // Bytes per direction, with CUPTI's copy kinds (1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP).
  const std::pair<CopyKind, int> kinds[] = {{CopyKind::HtoD, 1},
                                            {CopyKind::DtoH, 2},
                                            {CopyKind::DtoD, 8},
                                            {CopyKind::HtoH, 9},
                                            {CopyKind::PtoP, 10}};
  for (const auto& [kind, id] : kinds) {
    const std::string where =
        " FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = " + std::to_string(id);
    EXPECT_EQ(static_cast<uint64_t>(db_->Int("SELECT IFNULL(SUM(bytes), 0)" + where)),
              S.memcpy_bytes[static_cast<size_t>(kind)])
        << CopyKindName(static_cast<uint8_t>(kind));
    EXPECT_EQ(static_cast<uint64_t>(db_->Int("SELECT COUNT(*)" + where)),
              S.memcpy_count[static_cast<size_t>(kind)]);
  }
  EXPECT_EQ(static_cast<uint64_t>(
                db_->Int("SELECT IFNULL(SUM(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMSET")),
            S.memset_bytes);

  // Times are ns from the session start, which TARGET_INFO_SESSION_START_TIME holds.
  EXPECT_EQ(
      static_cast<uint64_t>(db_->Int("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")),
      S.start_ns);
  if (S.kernels > 0) {
    EXPECT_GE(db_->Int("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 0);
    EXPECT_LE(static_cast<uint64_t>(db_->Int("SELECT MAX(end) FROM CUPTI_ACTIVITY_KIND_KERNEL")),
              S.wall_ns);
  }
  // Every process's rows carry its globalPid; pids decode with nsys's arithmetic.
  for (const ProcessTrace& p : an_->run.processes) {
    const int64_t kernels = db_->Int(
        "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid / 0x1000000 % 0x1000000 "
        "= " +
        std::to_string(p.pid));
    EXPECT_EQ(kernels, std::count_if(p.records.begin(), p.records.end(), [](const Record& r) {
                return r.Kind() == RecordKind::Kernel;
              }));
  }
}

TEST_P(SqliteRecording, KprofTablesEqualTheViewsAndHints) {
  const Analysis& an = an_->analysis;
  const auto ops = db_->Query(
      "SELECT name, calls, gpu_ns, gpu_projected_ns, cpu_ns, kernels, memcpys, memsets, bytes, "
      "mem_delta_bytes FROM KPROF_OPS ORDER BY id");
  ASSERT_EQ(ops.size(), an.ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const GroupRow& g = an.ops[i];
    SCOPED_TRACE(g.key);
    EXPECT_EQ(ops[i][0].s, g.key);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][1].i), g.calls);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][2].i), g.gpu_ns);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][3].i), g.gpu_projected_ns);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][4].i), g.cpu_ns);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][5].i), g.kernels);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][6].i), g.memcpys);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][7].i), g.memsets);
    EXPECT_EQ(static_cast<uint64_t>(ops[i][8].i), g.bytes);
    EXPECT_EQ(ops[i][9].i, g.mem_delta_bytes);
    EXPECT_EQ(static_cast<size_t>(db_->Int("SELECT COUNT(*) FROM KPROF_OP_KERNELS WHERE op_id = " +
                                           std::to_string(i))),
              g.kernel_rows.size());
  }
  const auto hints = db_->Query(
      "SELECT rule, severity, title, est_saving_ns, evidence FROM KPROF_HINTS ORDER BY id");
  ASSERT_EQ(hints.size(), an_->hints.size());
  for (size_t i = 0; i < hints.size(); ++i) {
    const Hint& h = an_->hints[i];
    EXPECT_EQ(hints[i][0].s, h.id);
    EXPECT_EQ(hints[i][1].s, SeverityName(h.severity));
    EXPECT_EQ(hints[i][2].s, h.summary);
    EXPECT_EQ(static_cast<uint64_t>(hints[i][3].i), h.est_saving_ns);
    EXPECT_EQ(static_cast<size_t>(std::count(hints[i][4].s.begin(), hints[i][4].s.end(), '\n')) +
                  (h.evidence.empty() ? 0 : 1),
              h.evidence.size());
  }
  EXPECT_EQ(static_cast<size_t>(db_->Int("SELECT COUNT(*) FROM KPROF_KERNELS")), an.kernels.size());
  EXPECT_EQ(static_cast<size_t>(db_->Int("SELECT COUNT(*) FROM KPROF_RANGES")), an.ranges.size());
  EXPECT_EQ(static_cast<size_t>(db_->Int("SELECT COUNT(*) FROM KPROF_PROCESSES")),
            an_->run.processes.size());
  EXPECT_EQ(static_cast<uint64_t>(
                db_->Int("SELECT CAST(value AS INTEGER) FROM KPROF_META WHERE key = 'wall_ns'")),
            an.summary.wall_ns);
  size_t gaps = 0;
  for (const ProcessTimeline& t : an_->timeline.processes) gaps += t.gaps.size();
  EXPECT_EQ(static_cast<size_t>(db_->Int("SELECT COUNT(*) FROM KPROF_GAPS")), gaps);
  // KPROF_KERNELS.nameId joins the kernel table's demangledName.
  EXPECT_EQ(static_cast<uint64_t>(db_->Int(
                "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN KPROF_KERNELS v ON "
                "v.nameId = k.demangledName")),
            an.summary.kernels);
}

// The memory tables hold the memory summary with every owner (the analysis keeps the five
// largest of each list unless asked for the memory view): states, their owners in order, their
// largest allocations, the PyTorch layer's payloads and moments.
TEST_P(SqliteRecording, MemoryTablesHoldTheMemorySummary) {
  const MemorySummary m = SummarizeMemory(an_->timeline, SIZE_MAX);
  std::vector<const MemoryState*> states;
  for (const MemoryState& s : m.peaks) states.push_back(&s);
  for (const FailedAllocation& f : m.failures) states.push_back(&f.state);
  const auto rows = db_->Query(
      "SELECT id, moment, timestamp, liveBytes, pid, deviceId FROM KPROF_MEMORY_STATES ORDER BY "
      "id");
  ASSERT_EQ(rows.size(), states.size());
  const uint64_t base = an_->analysis.summary.start_ns;
  for (size_t i = 0; i < rows.size(); ++i) {
    const MemoryState& s = *states[i];
    const bool peak = i < m.peaks.size();
    const bool described = peak || m.failures[i - m.peaks.size()].described;
    SCOPED_TRACE(i);
    EXPECT_EQ(rows[i][1].s, peak ? "peak" : "failure");
    EXPECT_EQ(rows[i][2].i, static_cast<int64_t>(s.t_ns - base));
    EXPECT_EQ(rows[i][3].type, described ? SQLITE_INTEGER : SQLITE_NULL);
    if (described) {
      EXPECT_EQ(rows[i][3].i, s.live_bytes);
    }
    EXPECT_EQ(rows[i][4].i, s.pid);
    EXPECT_EQ(rows[i][5].type, s.device == kNoDevice ? SQLITE_NULL : SQLITE_INTEGER);
    if (s.device != kNoDevice) {
      EXPECT_EQ(rows[i][5].i, s.device);
    }
    const std::string id = std::to_string(rows[i][0].i);
    const std::pair<const char*, const std::vector<MemoryOwner>*> views[] = {
        {"library", &s.by_library}, {"owner", &s.by_owner}, {"range", &s.by_range}};
    for (const auto& [view, owners] : views) {
      const auto o = db_->Query(
          "SELECT name, liveBytes, liveAllocations, madeAllocations FROM KPROF_MEMORY_OWNERS "
          "WHERE stateId = ? AND view = ? ORDER BY position",
          {id, view});
      ASSERT_EQ(o.size(), owners->size()) << view;
      int64_t sum = 0;
      for (size_t k = 0; k < o.size(); ++k) {
        EXPECT_EQ(o[k][0].s, (*owners)[k].name);
        EXPECT_EQ(o[k][1].i, (*owners)[k].live_bytes);
        EXPECT_EQ(static_cast<uint64_t>(o[k][2].i), (*owners)[k].live_allocations);
        EXPECT_EQ(static_cast<uint64_t>(o[k][3].i), (*owners)[k].allocations);
        sum += o[k][1].i;
      }
      // Every live allocation has one library and one range.
      if (described && std::string(view) != "owner") {
        EXPECT_EQ(sum, s.live_bytes) << view;
      }
    }
    EXPECT_EQ(static_cast<size_t>(
                  db_->Int("SELECT COUNT(*) FROM KPROF_MEMORY_LIVE WHERE stateId = " + id)),
              s.largest.size());
  }
  const auto torch =
      db_->Query("SELECT id, whenWritten, maxAllocated FROM KPROF_PYTORCH_MEMORY ORDER BY id");
  ASSERT_EQ(torch.size(), m.torch.size());
  for (size_t i = 0; i < torch.size(); ++i) {
    EXPECT_EQ(torch[i][1].s, m.torch[i].when);
    EXPECT_EQ(torch[i][2].i, m.torch[i].max_allocated);
    EXPECT_EQ(static_cast<size_t>(
                  db_->Int("SELECT COUNT(*) FROM KPROF_PYTORCH_MEMORY_MOMENTS WHERE torchId = " +
                           std::to_string(torch[i][0].i))),
              m.torch[i].moments.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Recordings, SqliteRecording, ::testing::ValuesIn(Recordings()), CaseName);

}  // namespace
}  // namespace kprof
