// The SQLite export on built runs and through the CLI: hostile strings stay data, several
// processes keep apart, short names, output path errors, and a PyTorch trace cross-checked
// against PyTorch's own per-kernel totals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kprof/cli.h"
#include "sqlite_test_util.h"
#include "test_util.h"

namespace kprof {
namespace {

TEST(SqliteExport, HostileStringsRoundTripAsData) {
  const std::vector<std::string> hostile = {
      "it's \"quoted\"",
      "'); DROP TABLE StringIds; --",
      "\x01\x02\t\r\n\x1b[31m control",
      std::string("bad utf8 \xff\xfe \xc3\x28 \xed\xa0\x80 end"),
      std::string(1 << 20, 'k'),  // 1 MB name
      "%s %n %x ? ?1 :name @p $v",
  };
  test::TraceBuilder b(4242);
  uint64_t t = 1'000'000;
  for (const std::string& name : hostile) {
    b.Range(1, name, t, t + 50'000);
    b.Launch(1, t + 1'000, name, t + 10'000, t + 20'000);
    t += 100'000;
  }
  kprof::Run run;
  run.processes.push_back(std::move(b.t));
  test::Exported out(std::move(run), "hostile.sqlite");
  test::Db& db = *out.db;
  for (const std::string& name : hostile) {
    SCOPED_TRACE(name.substr(0, 40));
    // The exact bytes, found by a bound parameter.
    EXPECT_EQ(db.Query("SELECT id FROM StringIds WHERE value = ?", {name}).size(), 1u);
    const auto k = db.Query(
        "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = "
        "k.demangledName WHERE s.value = ?",
        {name});
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0][0].s, name);
    const auto r = db.Query("SELECT text FROM NVTX_EVENTS WHERE text = ?", {name});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0][0].s, name);
    EXPECT_EQ(db.Query("SELECT name FROM KPROF_KERNELS WHERE name = ?", {name}).size(), 1u);
  }
  // Nothing was executed: every table is still there.
  EXPECT_EQ(db.Int("SELECT COUNT(*) FROM sqlite_master WHERE name = 'StringIds'"), 1);
  EXPECT_EQ(db.Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"),
            static_cast<int64_t>(hostile.size()));
}

TEST(SqliteExport, ProcessesKeepTheirGlobalIds) {
  kprof::Run run;
  for (uint32_t pid : {100u, 200u}) {
    test::TraceBuilder b(pid);
    b.t.rank = static_cast<int>(pid / 100 - 1);
    b.Range(7, "step", 1'000 * pid, 1'000 * pid + 9'000);
    b.Launch(7, 1'000 * pid + 100, "gemm", 1'000 * pid + 2'000, 1'000 * pid + 5'000);
    run.processes.push_back(std::move(b.t));
  }
  test::Exported out(std::move(run), "procs.sqlite");
  test::Db& db = *out.db;
  const auto rows = db.Query(
      "SELECT k.globalPid / 0x1000000 % 0x1000000, r.globalTid % 0x1000000 FROM "
      "CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = "
      "k.correlationId AND r.globalTid / 0x1000000 = k.globalPid / 0x1000000 ORDER BY 1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].i, 100);
  EXPECT_EQ(rows[1][0].i, 200);
  EXPECT_EQ(rows[0][1].i, 7);
  EXPECT_EQ(db.Int("SELECT COUNT(DISTINCT globalTid) FROM NVTX_EVENTS"), 2);
  EXPECT_EQ(db.Int("SELECT COUNT(*) FROM KPROF_PROCESSES WHERE rank IS NOT NULL"), 2);
  // One session start for the run: the earliest record of any process.
  EXPECT_EQ(db.Int("SELECT MIN(start) FROM NVTX_EVENTS"), 0);
  EXPECT_EQ(db.Int("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"), 100'000);
}

TEST(SqliteExport, KernelShortNameIsTheBaseName) {
  EXPECT_EQ(KernelShortName("void at::native::vectorized_elementwise_kernel<4, "
                            "at::native::FillFunctor<float>, std::array<char*, 1> >(int, "
                            "at::native::FillFunctor<float>, std::array<char*, 1>)"),
            "vectorized_elementwise_kernel");
  EXPECT_EQ(KernelShortName("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                            "at::native::(anonymous namespace)::TensorListMetadata<1> >(int)"),
            "multi_tensor_apply_kernel");
  EXPECT_EQ(KernelShortName("vector_add(float const*, float const*, float*, int)"), "vector_add");
  EXPECT_EQ(KernelShortName("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>("
                            "cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)"),
            "Kernel2");
  EXPECT_EQ(KernelShortName("triton_poi_fused_add_0"), "triton_poi_fused_add_0");
  EXPECT_EQ(KernelShortName("(unnamed)"), "(unnamed)");
  EXPECT_EQ(KernelShortName(""), "");
}

/// Runs CmdExport, returns its exit code and what it wrote on stderr.
std::pair<int, std::string> Export(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStderr();
  const int rc = CmdExport(args);
  return {rc, ::testing::internal::GetCapturedStderr()};
}

TEST(SqliteExportCli, BadOutputsAreOneLineErrors) {
  test::TempDir dir;
  const std::string run = std::string(KPROF_SOURCE_DIR) + "/examples/default-run";
  auto expect_error = [&](const std::vector<std::string>& args, const std::string& what) {
    auto [rc, err] = Export(args);
    EXPECT_EQ(rc, kExitUsage) << err;
    EXPECT_NE(err.find("kprof export: "), std::string::npos) << err;
    EXPECT_NE(err.find(what), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  };
  expect_error({run, "--sqlite", dir.path()}, dir.path() + ": is a directory");
  expect_error({run, "--sqlite", dir / "missing/x.sqlite"}, "does not exist");
  expect_error({run}, "--sqlite");
  expect_error({dir / "nope", "--sqlite", dir / "y.sqlite"}, "nope");
  EXPECT_FALSE(std::filesystem::exists(dir / "y.sqlite"));

  // An existing file is kept without --force and replaced with it.
  const std::string out = dir / "run.sqlite";
  test::WriteAll(out, "precious");
  expect_error({run, "--sqlite", out}, out + ": already exists (--force overwrites)");
  EXPECT_EQ(test::ReadAll(out), "precious");
  auto [rc, err] = Export({run, "--sqlite", out, "--force"});
  ASSERT_EQ(rc, kExitOk) << err;
  test::Db db(out);
  EXPECT_EQ(db.Int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), 3720);
  // No temporary file is left behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST(SqliteExportCli, UnwritableDirectoryIsAnError) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root writes anywhere";
  }
  test::TempDir dir;
  std::filesystem::permissions(
      dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  auto [rc, err] = Export(
      {std::string(KPROF_SOURCE_DIR) + "/examples/default-run", "--sqlite", dir / "x.sqlite"});
  EXPECT_EQ(rc, kExitUsage);
  EXPECT_NE(err.find("cannot create"), std::string::npos) << err;
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
}

// A PyTorch profiler trace exports too, and SQL over it gives PyTorch's own per-kernel figures
// (mlp_train_free.key_averages.json, recorded with the trace): same kernels, same counts, same
// totals within 0.1% or 1 us (PyTorch rounds to microseconds).
TEST(SqliteExportKineto, KernelTotalsMatchPyTorchKeyAverages) {
  const std::string dir = std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/kineto";
  std::ifstream f(dir + "/mlp_train_free.key_averages.json");
  ASSERT_TRUE(f.good());
  std::map<std::string, std::pair<int64_t, double>> torch;  // name -> count, total us
  for (const auto& e : nlohmann::json::parse(f)) {
    if (e.at("device_type") != "DeviceType.CUDA") continue;
    const std::string name = e.at("name");
    if (name.rfind("Memcpy ", 0) == 0 || name.rfind("Memset ", 0) == 0) continue;
    torch[name].first += e.at("count").get<int64_t>();
    torch[name].second += e.at("device_total_us").get<double>();
  }
  ASSERT_FALSE(torch.empty());
  test::TempDir tmp;
  const std::string out = tmp / "kineto.sqlite";
  auto [rc, err] = Export({dir + "/mlp_train_free.trace.json.gz", "--sqlite", out});
  ASSERT_EQ(rc, kExitOk) << err;
  test::Db db(out);
  const auto rows = db.Query(
      "SELECT s.value AS name, SUM(k.end - k.start) AS total, COUNT(*) AS n FROM "
      "CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY name "
      "ORDER BY total DESC");
  ASSERT_EQ(rows.size(), torch.size());
  for (const auto& row : rows) {
    SCOPED_TRACE(row[0].s);
    auto it = torch.find(row[0].s);
    ASSERT_NE(it, torch.end());
    EXPECT_EQ(row[2].i, it->second.first);
    const double expected_ns = it->second.second * 1000.0;
    EXPECT_NEAR(static_cast<double>(row[1].i), expected_ns, std::max(1000.0, expected_ns * 0.001));
  }
}

// Device memory by owner (docs/memory.md) from the recording of a PyTorch program that ran out
// of memory (tests/gpu/scripts/oom_torch.py on an H200): its peak, its two failed cudaMalloc
// calls and the PyTorch layer's two payloads (at the OOM error and at exit), as
// `kprof report --by memory --format json` gives them.
class SqliteMemory : public ::testing::Test {
 protected:
  void Open(const std::string& fixture) {
    an_ = std::make_unique<test::Analysed>(
        ReadInputs({std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/" + fixture}));
    path_ = test::TempPath(fixture + ".sqlite");
    an_->Export(path_);
    db_ = std::make_unique<test::Db>(path_);
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove(path_);
  }
  /// The owners of state `id` in `view`, in their order: name, liveBytes.
  std::vector<std::pair<std::string, int64_t>> Owners(int64_t id, const std::string& view) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& r : db_->Query("SELECT name, liveBytes, position FROM KPROF_MEMORY_OWNERS "
                                    "WHERE stateId = ? AND view = "
                                    "? ORDER BY position",
                                    {std::to_string(id), view})) {
      EXPECT_EQ(r[2].i, static_cast<int64_t>(out.size()));
      out.emplace_back(r[0].s, r[1].i);
    }
    return out;
  }
  std::unique_ptr<test::Analysed> an_;
  std::string path_;
  std::unique_ptr<test::Db> db_;
};

constexpr int64_t kOomPid = 725;
constexpr int64_t kOomPeak = 1650950915;     // 1.54 GiB
constexpr int64_t kOomAsked = 148849557504;  // 138.63 GiB

TEST_F(SqliteMemory, OutOfMemoryPeakAndFailures) {
  Open("memory_oom_torch");
  const auto states = db_->Query(
      "SELECT id, globalPid, pid, rank, deviceId, moment, timestamp, liveBytes, capacityBytes, "
      "range, torchMoment, torchMatched, partial, failedCall, requestedBytes, errorCode FROM "
      "KPROF_MEMORY_STATES ORDER BY id");
  ASSERT_EQ(states.size(), 3u);               // the peak, then the two failures in time order
  const int64_t kOomCapacity = 150109880320;  // the H200's 139.80 GiB
  for (size_t i = 0; i < 3; ++i) {
    const test::Row& r = states[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(r[0].i, static_cast<int64_t>(i));
    EXPECT_EQ(r[1].i, kOomPid << 24);
    EXPECT_EQ(r[2].i, kOomPid);
    EXPECT_EQ(r[3].type, SQLITE_NULL);  // no rank
    EXPECT_EQ(r[4].i, 0);
    EXPECT_EQ(r[5].s, i == 0 ? "peak" : "failure");
    EXPECT_EQ(r[8].i, kOomCapacity);
    EXPECT_EQ(r[11].i, 1);  // joined with a PyTorch moment
    EXPECT_EQ(r[12].i, 0);  // no capture windows
  }
  // The peak, 6.833 s into the run, in no range; the allocator's allocated peak took it.
  EXPECT_EQ(states[0][6].i, 6833001251);
  EXPECT_EQ(states[0][7].i, kOomPeak);
  EXPECT_EQ(states[0][9].type, SQLITE_NULL);
  EXPECT_EQ(states[0][10].s, "allocated_peak");
  EXPECT_EQ(states[0][13].type, SQLITE_NULL);
  EXPECT_EQ(states[0][14].type, SQLITE_NULL);
  EXPECT_EQ(states[0][15].type, SQLITE_NULL);
  // The first failure held what the peak held; the retry after the allocator released its cache
  // held 982.5 MiB, the OOM observer's moment.
  EXPECT_EQ(states[1][6].i, 6848654636);
  EXPECT_EQ(states[1][7].i, kOomPeak);
  EXPECT_EQ(states[1][10].s, "allocated_peak");
  EXPECT_EQ(states[2][6].i, 6865175897);
  EXPECT_EQ(states[2][7].i, 1030193923);
  EXPECT_EQ(states[2][10].s, "oom");
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(states[i][9].s, "aten::empty");
    EXPECT_EQ(states[i][13].s, "cudaMalloc");
    EXPECT_EQ(states[i][14].i, kOomAsked);
    EXPECT_EQ(states[i][15].i, 2);  // out of memory
  }

  // Every owner, not the report's five: each view adds up to the state's bytes.
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_MEMORY_OWNERS"), (4 + 9 + 7) * 2 + 4 + 7 + 5);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM (SELECT s.id, o.view FROM KPROF_MEMORY_STATES s JOIN "
                     "KPROF_MEMORY_OWNERS o ON o.stateId = s.id GROUP BY s.id, o.view HAVING "
                     "SUM(o.liveBytes) = s.liveBytes)"),
            9);
  const std::vector<std::pair<std::string, int64_t>> by_owner = {
      {"optimizer state (PyTorch)", 537001984},
      {"gradients (PyTorch)", 268500992},
      {"other tensors (PyTorch)", 268500992},
      {"parameters (PyTorch)", 268500992},
      {"cuBLAS (libcublas.so.13)", 134481920},
      {"cached, unused (PyTorch caching allocator)", 97189376},
      {"activations (PyTorch)", 76546560},
      {"static memory (module globals) of libtorch_cuda.so", 227955},
      {"static memory (module globals) of libcublasLt.so.13", 144}};
  EXPECT_EQ(Owners(0, "owner"), by_owner);
  const auto by_library = Owners(0, "library");
  ASSERT_EQ(by_library.size(), 4u);
  EXPECT_EQ(by_library[0], std::make_pair(std::string("PyTorch caching allocator (libc10_cuda.so)"),
                                          int64_t{1516240896}));
  const auto by_range = Owners(0, "range");
  ASSERT_EQ(by_range.size(), 7u);
  EXPECT_EQ(by_range[0], std::make_pair(std::string("aten::empty_strided"), int64_t{1075838976}));
  EXPECT_EQ(by_range[6], std::make_pair(std::string("(no range)"), int64_t{228099}));
  // At the retry the allocator held 16 of the 28 segments it had made.
  const auto made = db_->Query(
      "SELECT name, liveAllocations, madeAllocations FROM KPROF_MEMORY_OWNERS WHERE stateId = 2 "
      "AND view = 'library' AND position = 0");
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0][0].s, "PyTorch caching allocator (libc10_cuda.so)");
  EXPECT_EQ(made[0][1].i, 16);
  EXPECT_EQ(made[0][2].i, 28);
  // PyTorch's categories and its cached bytes are exactly the allocator's share.
  EXPECT_EQ(db_->Int("SELECT SUM(liveBytes) FROM KPROF_MEMORY_OWNERS WHERE stateId = 0 AND view = "
                     "'owner' AND (name LIKE '%(PyTorch)' OR name LIKE 'cached, unused%')"),
            1516240896);

  // The ten largest live allocations at each state: 64 MiB blocks of the allocator.
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_MEMORY_LIVE"), 30);
  const auto live = db_->Query(
      "SELECT bytes, address, timestamp, owner, range, variable FROM KPROF_MEMORY_LIVE WHERE "
      "stateId = 0 ORDER BY rowid LIMIT 1");
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0][0].i, 67108864);
  EXPECT_EQ(live[0][1].i, 140425969008640);  // 0x7fb778000000
  EXPECT_EQ(live[0][2].i, 6787266329);
  EXPECT_EQ(live[0][3].s, "PyTorch caching allocator (libc10_cuda.so)");
  EXPECT_EQ(live[0][4].s, "aten::empty_strided");
  EXPECT_EQ(live[0][5].type, SQLITE_NULL);
}

TEST_F(SqliteMemory, OutOfMemoryPyTorchPayloads) {
  Open("memory_oom_torch");
  const auto torch = db_->Query(
      "SELECT id, globalPid, pid, rank, deviceId, whenWritten, timestamp, maxAllocated, "
      "maxReserved, allocated, reserved, inactiveSplit, requested, replayedMaxAllocated, "
      "replayedMaxReserved, complete, entries, windows, unrecordedSteps, optimizerSteps, "
      "backwardPasses, allocConf FROM KPROF_PYTORCH_MEMORY ORDER BY id");
  ASSERT_EQ(torch.size(), 2u);  // in time order: at the OOM error, at exit
  const int64_t at[] = {6978588407, 7114326407};
  for (size_t i = 0; i < 2; ++i) {
    const test::Row& r = torch[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(r[1].i, kOomPid << 24);
    EXPECT_EQ(r[2].i, kOomPid);
    EXPECT_EQ(r[3].type, SQLITE_NULL);
    EXPECT_EQ(r[4].i, 0);
    EXPECT_EQ(r[5].s, i == 0 ? "oom" : "exit");
    EXPECT_EQ(r[6].i, at[i]);
    EXPECT_EQ(r[7].i, 1419051520);
    EXPECT_EQ(r[8].i, 1516240896);
    EXPECT_EQ(r[9].i, 882049536);
    EXPECT_EQ(r[10].i, 895483904);
    EXPECT_EQ(r[11].i, 13434368);
    EXPECT_EQ(r[12].i, i == 0 ? kOomAsked : 0);
    EXPECT_EQ(r[13].i, 1419051520);
    EXPECT_EQ(r[14].i, 1516240896);
    EXPECT_EQ(r[15].i, 1);
    EXPECT_EQ(r[16].i, i == 0 ? 259 : 260);
    EXPECT_EQ(r[17].i, 0);
    EXPECT_EQ(r[18].i, 0);
    EXPECT_EQ(r[19].i, 2);
    EXPECT_EQ(r[20].i, 4);
    EXPECT_EQ(r[21].type, SQLITE_NULL);  // PYTORCH_CUDA_ALLOC_CONF unset
  }
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_PYTORCH_MEMORY_MOMENTS WHERE torchId = 0"), 10);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_PYTORCH_MEMORY_MOMENTS WHERE torchId = 1"), 10);
  const auto peak = db_->Query(
      "SELECT timestamp, allocated, reserved, parameters, gradients, optimizerState, activations, "
      "other FROM KPROF_PYTORCH_MEMORY_MOMENTS WHERE torchId = 0 AND kind = 'allocated_peak'");
  ASSERT_EQ(peak.size(), 1u);
  const std::vector<int64_t> want = {6787276407, 1419051520, 1516240896, 268500992,
                                     268500992,  537001984,  76546560,   268500992};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(peak[0][i].i, want[i]) << i;
  // At the error the gradients and other tensors were gone.
  const auto oom = db_->Query(
      "SELECT allocated, gradients, other FROM KPROF_PYTORCH_MEMORY_MOMENTS WHERE torchId = 0 "
      "AND kind = 'oom'");
  ASSERT_EQ(oom.size(), 1u);
  EXPECT_EQ(oom[0][0].i, 882049536);
  EXPECT_EQ(oom[0][1].i, 0);
  EXPECT_EQ(oom[0][2].i, 0);
}

// The example query of docs/sqlite.md: what held the memory at each peak, by owner.
TEST_F(SqliteMemory, PeakByOwnerQueryOfTheDocs) {
  Open("memory_torch_train");
  const auto rows = db_->Query(
      "SELECT s.pid, s.deviceId, s.liveBytes, o.name, o.liveBytes, "
      "ROUND(100.0 * o.liveBytes / s.liveBytes, 1) AS pct "
      "FROM KPROF_MEMORY_STATES s JOIN KPROF_MEMORY_OWNERS o ON o.stateId = s.id "
      "WHERE s.moment = 'peak' "
      "AND o.view = CASE WHEN s.torchMatched THEN 'owner' ELSE 'library' END "
      "ORDER BY s.liveBytes DESC, o.position");
  ASSERT_EQ(rows.size(), 10u);
  int64_t sum = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r[0].i, 785);
    EXPECT_EQ(r[2].i, 1380473160);
    sum += r[4].i;
  }
  EXPECT_EQ(sum, 1380473160);
  EXPECT_EQ(rows[0][3].s, "activations (PyTorch)");
  EXPECT_EQ(rows[0][4].i, 610308608);
  EXPECT_DOUBLE_EQ(rows[0][5].d, 44.2);
  EXPECT_EQ(rows[1][3].s, "cached, unused (PyTorch caching allocator)");
  EXPECT_EQ(rows[1][4].i, 242813952);
  EXPECT_EQ(db_->Query("SELECT range, torchMoment FROM KPROF_MEMORY_STATES")[0][0].s,
            "aten::_log_softmax_backward_data");
  EXPECT_EQ(db_->Query("SELECT range, torchMoment FROM KPROF_MEMORY_STATES")[0][1].s,
            "reserved_peak");
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_MEMORY_STATES WHERE moment = 'failure'"), 0);
  // One payload, at exit, with its three moments; the moment the peak took.
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_PYTORCH_MEMORY WHERE whenWritten = 'exit'"), 1);
  EXPECT_EQ(db_->Int("SELECT COUNT(*) FROM KPROF_PYTORCH_MEMORY_MOMENTS"), 3);
  EXPECT_EQ(db_->Int("SELECT activations FROM KPROF_PYTORCH_MEMORY_MOMENTS m JOIN "
                     "KPROF_MEMORY_STATES s ON m.kind = s.torchMoment"),
            610308608);
  // The exact join: the payload and the moment's position in it.
  const auto joined = db_->Query(
      "SELECT m.kind, m.activations FROM KPROF_MEMORY_STATES s JOIN "
      "KPROF_PYTORCH_MEMORY_MOMENTS m ON m.torchId = s.torchId AND m.position = "
      "s.torchMomentPosition WHERE s.moment = 'peak'");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0][0].s, "reserved_peak");
  EXPECT_EQ(joined[0][1].i, 610308608);
}

// An analysis of the memory view (kprof report --by memory), and kprof export's (the op view with
// every memory owner), keep every owner already: the export writes it as it is (one summary), and
// the tables are those of the default analysis, row for row.
TEST_F(SqliteMemory, MemoryViewAnalysisGivesTheSameTables) {
  Open("memory_oom_torch");
  AnalysisOptions view, every;
  view.by = GroupBy::Memory;
  every.every_memory_owner = true;
  for (const AnalysisOptions& opts : {view, every}) {
    SCOPED_TRACE(opts.every_memory_owner ? "every owner" : "memory view");
    const Analysis uncut = Analyze(an_->timeline, opts);
    EXPECT_EQ(uncut.memory.top, SIZE_MAX);
    ASSERT_EQ(uncut.memory.peaks.at(0).by_owner.size(), 9u);
    const std::string path = test::TempPath("memory_view.sqlite");
    SqliteExportOptions o;
    o.force = true;
    WriteSqlite(path, an_->timeline, uncut, an_->hints, o);
    test::Db other(path);
    const char* tables[] = {"KPROF_MEMORY_STATES", "KPROF_MEMORY_OWNERS", "KPROF_MEMORY_LIVE",
                            "KPROF_PYTORCH_MEMORY", "KPROF_PYTORCH_MEMORY_MOMENTS"};
    for (const char* table : tables) {
      SCOPED_TRACE(table);
      const std::string sql = std::string("SELECT * FROM ") + table + " ORDER BY rowid";
      const auto a = db_->Query(sql), b = other.Query(sql);
      ASSERT_EQ(a.size(), b.size());
      ASSERT_FALSE(a.empty());
      for (size_t i = 0; i < a.size(); ++i)
        for (size_t k = 0; k < a[i].size(); ++k) {
          EXPECT_EQ(a[i][k].type, b[i][k].type);
          EXPECT_EQ(a[i][k].i, b[i][k].i);
          EXPECT_EQ(a[i][k].s, b[i][k].s);
        }
    }
    std::filesystem::remove(path);
  }
}

// A process's first three failures and its last are described; the others are rows with
// liveBytes NULL and nothing beneath them. A failure on an unknown device has deviceId NULL.
TEST(SqliteExportMemory, UndescribedFailuresAreRowsWithoutOwners) {
  test::TraceBuilder b(321);
  b.t.rank = 3;
  b.t.meta["device.0.memory_bytes"] = std::to_string(int64_t{1} << 30);
  const uint32_t corr = ++b.next_corr;
  Record& api = b.Add(RecordKind::RuntimeApi, "cudaMalloc", 990, 1010);
  api.tid = 1;
  api.correlation = corr;
  Record& m = b.Add(RecordKind::MemAlloc, "/opt/app/bin/trainer", 1000, 1000);
  m.device = 0;
  m.correlation = corr;
  m.bytes = 4096;
  m.a = 0x10000;
  m.c = static_cast<uint32_t>(MemKind::Device);
  for (uint64_t i = 0; i < 6; ++i) {
    Record& f = b.Add(RecordKind::MemAllocFailed, "cudaMalloc", 2000 + 100 * i, 2000 + 100 * i);
    f.tid = 1;
    f.bytes = 1000 + i;
    f.b = 2;
    f.c = static_cast<uint32_t>(MemKind::Device);
    f.d = i == 4 ? 0xFFFFFFFFu : 0;
  }
  kprof::Run run;
  run.processes.push_back(std::move(b.t));
  test::Exported out(std::move(run), "failures.sqlite");
  test::Db& db = *out.db;
  const auto rows = db.Query(
      "SELECT moment, rank, deviceId, liveBytes, capacityBytes, requestedBytes, timestamp, "
      "(SELECT COUNT(*) FROM KPROF_MEMORY_OWNERS o WHERE o.stateId = s.id) FROM "
      "KPROF_MEMORY_STATES s ORDER BY id");
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0][0].s, "peak");
  EXPECT_EQ(rows[0][3].i, 4096);
  EXPECT_EQ(rows[0][4].i, int64_t{1} << 30);
  EXPECT_EQ(rows[0][7].i, 2);  // by library and by range
  for (size_t i = 1; i < 7; ++i) {
    SCOPED_TRACE(i);
    const bool described = i <= 3 || i == 6;
    EXPECT_EQ(rows[i][0].s, "failure");
    EXPECT_EQ(rows[i][1].i, 3);
    EXPECT_EQ(rows[i][2].type, i == 5 ? SQLITE_NULL : SQLITE_INTEGER);
    EXPECT_EQ(rows[i][3].type, described ? SQLITE_INTEGER : SQLITE_NULL);
    if (described) {
      EXPECT_EQ(rows[i][3].i, 4096);
    }
    EXPECT_EQ(rows[i][5].i, static_cast<int64_t>(999 + i));
    EXPECT_EQ(rows[i][6].i,
              static_cast<int64_t>(2000 + 100 * (i - 1)) - 990);  // session start: 990
    EXPECT_EQ(rows[i][7].i, described ? 2 : 0);
  }
  EXPECT_EQ(db.Int("SELECT COUNT(*) FROM KPROF_PYTORCH_MEMORY"), 0);
}

}  // namespace
}  // namespace kprof
