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
  test::Analysed an(std::move(run));
  const std::string path = test::TempPath("hostile.sqlite");
  an.Export(path);
  test::Db db(path);
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
  std::filesystem::remove(path);
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
  test::Analysed an(std::move(run));
  const std::string path = test::TempPath("procs.sqlite");
  an.Export(path);
  test::Db db(path);
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
  std::filesystem::remove(path);
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

}  // namespace
}  // namespace kprof
