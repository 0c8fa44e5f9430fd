// Acceptance cross-check: kprof's kernel view of a PyTorch profiler trace agrees with PyTorch's
// own key_averages() figures for the same run (mlp_train_free.key_averages.json, written by
// scripts/record_fixtures.sh next to the trace): same kernels, same call counts, same total GPU
// time within 0.1% or 1 us.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "chrome_test_util.h"
#include "kprof/analysis.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

struct TorchKernel {
  uint64_t count = 0;
  double device_total_us = 0;
};

/// PyTorch keys events by name; kernels are the DeviceType.CUDA entries that are not memory
/// operations (PyTorch lists "Memcpy ..." and "Memset ..." among them too).
std::map<std::string, TorchKernel> TorchKernels(const std::string& path) {
  std::ifstream f(path);
  nlohmann::json doc = nlohmann::json::parse(f);
  std::map<std::string, TorchKernel> out;
  for (const auto& e : doc) {
    if (e.at("device_type") != "DeviceType.CUDA") continue;
    std::string name = e.at("name");
    if (name.rfind("Memcpy ", 0) == 0 || name.rfind("Memset ", 0) == 0) continue;
    TorchKernel& k = out[name];
    k.count += e.at("count").get<uint64_t>();
    k.device_total_us += e.at("device_total_us").get<double>();
  }
  return out;
}

TEST(KinetoCrossCheck, KernelViewMatchesPyTorchKeyAverages) {
  const std::string dir = test::FixtureDir();
  auto torch = TorchKernels(dir + "/mlp_train_free.key_averages.json");
  ASSERT_FALSE(torch.empty());

  kprof::Run run = ReadChromeTrace(dir + "/mlp_train_free.trace.json.gz");
  AnalysisOptions opts;
  opts.by = GroupBy::Kernel;
  Analysis an = Analyze(BuildTimeline(run), opts);

  ASSERT_EQ(an.kernels.size(), torch.size());
  uint64_t total_calls = 0;
  for (const KernelRow& k : an.kernels) {
    SCOPED_TRACE(k.name);
    auto it = torch.find(k.name);
    ASSERT_NE(it, torch.end()) << "kernel not in PyTorch's key averages";
    EXPECT_EQ(k.stat.count, it->second.count);
    const double expected_ns = it->second.device_total_us * 1000.0;
    const double tolerance = std::max(1000.0, expected_ns * 0.001);
    EXPECT_NEAR(static_cast<double>(k.stat.total_ns), expected_ns, tolerance);
    total_calls += k.stat.count;
  }
  EXPECT_EQ(total_calls, an.summary.kernels);
  // The kernel view (rows) lists the same kernels with the same calls.
  ASSERT_EQ(an.rows.size(), torch.size());
  for (const GroupRow& row : an.rows) {
    auto it = torch.find(row.key);
    ASSERT_NE(it, torch.end()) << row.key;
    EXPECT_EQ(row.calls, it->second.count) << row.key;
  }
}

// The acceptance as users run it: `kprof report TRACE --by kernel --format json`, read back.
TEST(KinetoCrossCheck, CliJsonKernelRowsMatchPyTorchKeyAverages) {
  const std::string dir = test::FixtureDir();
  auto torch = TorchKernels(dir + "/mlp_train_free.key_averages.json");
  ASSERT_FALSE(torch.empty());
  const std::string json_path = ::testing::TempDir() + "/kineto_kernels.json";
  const std::string cmd = std::string(KPROF_BINARY_DIR) + "/kprof report " + dir +
                          "/mlp_train_free.trace.json.gz --by kernel --format json --force -o " +
                          json_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(json_path);
  nlohmann::json doc = nlohmann::json::parse(f);
  ASSERT_EQ(doc.at("schema"), "kprof.summary");
  ASSERT_EQ(doc.at("view"), "kernel");
  const auto& rows = doc.at("rows");
  ASSERT_EQ(rows.size(), torch.size());
  for (const auto& row : rows) {
    std::string name = row.at("key");
    SCOPED_TRACE(name);
    auto it = torch.find(name);
    ASSERT_NE(it, torch.end()) << "kernel not in PyTorch's key averages";
    EXPECT_EQ(row.at("calls").get<uint64_t>(), it->second.count);
    const double expected_ns = it->second.device_total_us * 1000.0;
    EXPECT_NEAR(row.at("gpu_ns").get<double>(), expected_ns, std::max(1000.0, expected_ns * 0.001));
  }
}

}  // namespace
}  // namespace kprof
