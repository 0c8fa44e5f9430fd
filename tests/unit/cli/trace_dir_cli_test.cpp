// `kprof report ... --trace-dir DIR` (docs/cli.md): one Chrome trace per rank, its line on
// stderr, the refusal to replace existing traces without --force (one line naming the file,
// exit 2), and `kprof report DIR` reading such a directory back. Runs the real kprof executable.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "kprof/cli.h"
#include "kprof/trace.h"
#include "test_util.h"

namespace kprof {
namespace {

namespace fs = std::filesystem;
using test::RunCommand;
using test::TempDir;

/// A run directory of two ranks (pids 501 and 502), each with two kernels on GPU `rank`.
std::string TwoRankRun(const TempDir& d) {
  const std::string dir = d / "run";
  fs::create_directories(dir);
  for (int rank = 0; rank < 2; ++rank) {
    test::TraceBuilder b(static_cast<uint32_t>(501 + rank));
    b.t.rank = rank;
    b.t.meta["world_size"] = "2";
    const uint64_t t0 = 1'000'000'000 + static_cast<uint64_t>(rank) * 1000;
    b.Launch(10, t0, "gemm_kernel", t0 + 5'000, t0 + 20'000);
    b.Launch(10, t0 + 30'000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 35'000, t0 + 60'000,
             20);
    for (Record& r : b.t.records)
      if (IsGpuKind(r.Kind())) r.device = static_cast<uint16_t>(rank);
    WriteRunFile(
        dir + "/kprof.rank" + std::to_string(rank) + "." + std::to_string(501 + rank) + ".kprof",
        b.t);
  }
  return dir;
}

TEST(TraceDirCli, WritesOneTracePerRankAndRefusesToReplaceWithoutForce) {
  TempDir d;
  const std::string run = TwoRankRun(d);
  const std::string out = d / "traces";
  const std::string cmd = test::Kprof() + " report " + run + " -o /dev/null --trace-dir " + out;
  auto r = RunCommand(cmd);
  ASSERT_EQ(r.status, kExitOk) << r.output;
  EXPECT_EQ(r.output, "kprof: 2 per-rank Chrome traces written to " + out + "\n");
  EXPECT_TRUE(fs::is_regular_file(out + "/rank0.501.pt.trace.json"));
  EXPECT_TRUE(fs::is_regular_file(out + "/rank1.502.pt.trace.json"));

  // Again: refused, one line naming the file, nothing changed.
  const auto before = fs::last_write_time(out + "/rank0.501.pt.trace.json");
  r = RunCommand(cmd);
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output, "kprof report: " + out +
                          "/rank0.501.pt.trace.json: already exists (--force overwrites)\n");
  EXPECT_EQ(fs::last_write_time(out + "/rank0.501.pt.trace.json"), before);

  r = RunCommand(cmd + " --force");
  EXPECT_EQ(r.status, kExitOk) << r.output;
  EXPECT_EQ(r.output, "kprof: 2 per-rank Chrome traces written to " + out + "\n");
  size_t entries = 0;  // no temporary file left behind
  for (const auto& e : fs::directory_iterator(out)) {
    ++entries;
    EXPECT_EQ(e.path().extension(), ".json") << e.path();
  }
  EXPECT_EQ(entries, 2u);

  // The directory reads back as the two-rank run: the same kernels per rank.
  r = RunCommand(test::Kprof() + " report " + out + " --format csv --by kernel");
  ASSERT_EQ(r.status, kExitOk) << r.output;
  const auto orig = RunCommand(test::Kprof() + " report " + run + " --format csv --by kernel");
  ASSERT_EQ(orig.status, kExitOk) << orig.output;
  EXPECT_EQ(r.output, orig.output);
  r = RunCommand(test::Kprof() + " report " + out + " --format json");
  ASSERT_EQ(r.status, kExitOk);
  EXPECT_NE(r.output.find("\"rank\": 1"), std::string::npos);
}

TEST(TraceDirCli, BadPlacesFailBeforeTheWork) {
  TempDir d;
  const std::string run = TwoRankRun(d);
  test::WriteAll(d / "file", "x");
  auto r = RunCommand(test::Kprof() + " report " + run + " -o /dev/null --trace-dir " + d / "file");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output, "kprof report: " + d / "file" + ": not a directory\n");
  // Checked before the inputs are read: a missing input is not what fails first.
  r = RunCommand(test::Kprof() + " report " + d / "missing" + " --trace-dir " + d / "file");
  EXPECT_EQ(r.output, "kprof report: " + d / "file" + ": not a directory\n");
}

TEST(TraceDirCli, DirectoryWithoutRunsOrTraces) {
  TempDir d;
  fs::create_directories(d / "empty");
  auto r = RunCommand(test::Kprof() + " report " + d / "empty");
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output, "kprof report: " + d / "empty" +
                          ": no kprof run files (*.kprof) or Chrome traces (*.json, *.json.gz) in "
                          "this directory\n");
}

}  // namespace
}  // namespace kprof
