// Issue 14, "Writes are safe": every file kprof writes goes through OutputFile (a symlink planted
// at the output path is never followed, an existing file is replaced only with --force, a bad
// path fails before the work), and `kprof run` refuses a run directory that is a symbolic link
// and says so when the directory disappears while the program runs. These run the real kprof
// executable as a user would and check its exit status, its one line on stderr and the files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kprof/cli.h"
#include "kprof/trace.h"
#include "test_util.h"

namespace kprof {
namespace {

namespace fs = std::filesystem;
using test::ReadAll;
using test::RunCommand;
using test::TempDir;
using test::WriteAll;

const std::string kRun = std::string(KPROF_SOURCE_DIR) + "/examples/default-run";
const std::string kDiffRun = std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/train_step";

/// The commands with an output file, each as "kprof ... OPTION " (the path follows).
struct Writer {
  std::string cmd;     ///< the subcommand, as its messages name it
  std::string prefix;  ///< arguments up to the output path
};
std::vector<Writer> Writers(const TempDir& d) {
  const std::string k = test::Kprof();
  return {
      {"report", k + " report " + kRun + " -o " + d / "report.txt" + " --trace "},
      {"report", k + " report " + kRun + " --trace " + d / "t.json" + " -o "},
      {"report", k + " report " + kRun + " -o " + d / "report2.txt" + " --trace "},  // .gz below
      {"diff", k + " diff " + kDiffRun + " " + kDiffRun + " -o "},
      {"check", k + " check " + kRun + " --write-budget " + d / "budget.json" + " -o "},
      {"check", k + " check " + kRun + " -o " + d / "note.txt" + " --write-budget "},
  };
}

/// The output path used for writer `i` (a .gz trace for the third).
std::string OutPath(const TempDir& d, size_t i) {
  return d / ("out" + std::to_string(i) + (i == 2 ? ".json.gz" : ".out"));
}

/// Removes the other outputs of writer `i` that a successful run left, so that the next
/// command's only existing output is the one under test.
void RemoveSideOutputs(const TempDir& d) {
  for (const char* f : {"report.txt", "report2.txt", "t.json", "budget.json", "note.txt"})
    fs::remove(d / f);
}

TEST(SafeWrites, ExistingFileIsKeptWithoutForce) {
  TempDir d;
  const auto writers = Writers(d);
  for (size_t i = 0; i < writers.size(); ++i) {
    const std::string out = OutPath(d, i);
    WriteAll(out, "keep");
    auto r = RunCommand(writers[i].prefix + out);
    EXPECT_EQ(r.status, kExitUsage) << writers[i].prefix;
    EXPECT_EQ(r.output,
              "kprof " + writers[i].cmd + ": " + out + ": already exists (--force overwrites)\n");
    EXPECT_EQ(ReadAll(out), "keep");
    r = RunCommand(writers[i].prefix + out + " --force");
    EXPECT_EQ(r.status, kExitOk) << writers[i].prefix << "\n" << r.output;
    EXPECT_NE(ReadAll(out), "keep");
    EXPECT_FALSE(ReadAll(out).empty());
    RemoveSideOutputs(d);
  }
  // Nothing but the outputs themselves: no temporary file is left behind.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(d.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename().string().rfind("out", 0), 0u) << e.path();
  }
  EXPECT_EQ(entries, writers.size());
}

TEST(SafeWrites, PlantedSymlinkIsNeverFollowed) {
  TempDir d;
  const std::string target = d / "victim";
  const auto writers = Writers(d);
  for (size_t i = 0; i < writers.size(); ++i) {
    WriteAll(target, "victim");
    const std::string out = OutPath(d, i);
    ASSERT_EQ(::symlink(target.c_str(), out.c_str()), 0);
    auto r = RunCommand(writers[i].prefix + out);
    EXPECT_EQ(r.status, kExitUsage) << writers[i].prefix;
    EXPECT_EQ(r.output,
              "kprof " + writers[i].cmd + ": " + out + ": already exists (--force overwrites)\n");
    EXPECT_TRUE(fs::is_symlink(out));
    r = RunCommand(writers[i].prefix + out + " --force");
    EXPECT_EQ(r.status, kExitOk) << writers[i].prefix << "\n" << r.output;
    EXPECT_EQ(ReadAll(target), "victim") << writers[i].prefix;  // not written through
    EXPECT_FALSE(fs::is_symlink(out));                          // replaced by a regular file
    EXPECT_TRUE(fs::is_regular_file(out));
    EXPECT_FALSE(ReadAll(out).empty());
    RemoveSideOutputs(d);
  }
}

TEST(SafeWrites, MissingDirectoryFailsBeforeTheInputsAreRead) {
  TempDir d;
  const std::string out = d / "no/such/out.json";
  auto r = RunCommand(test::Kprof() + " report " + kRun + " --trace " + out);
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output,
            "kprof report: " + out + ": directory " + d / "no/such" + " does not exist\n");
  // The output path is checked first: a missing input is not even looked at.
  r = RunCommand(test::Kprof() + " report " + d / "missing-run" + " -o " + out);
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output,
            "kprof report: " + out + ": directory " + d / "no/such" + " does not exist\n");
  r = RunCommand(test::Kprof() + " diff " + d / "a" + " " + d / "b" + " -o " + out);
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output, "kprof diff: " + out + ": directory " + d / "no/such" + " does not exist\n");
  EXPECT_FALSE(fs::exists(d / "no"));
}

// ---- kprof run -------------------------------------------------------------------------------

/// `kprof run` with `opts`, running a program that creates `marker`: did the program start?
test::CommandResult RunTouching(const std::string& opts, const std::string& marker) {
  return RunCommand(test::Kprof() + " run " + opts + " -- touch " + marker);
}

TEST(SafeWrites, RunRefusesASymlinkAsItsDirectory) {
  TempDir d;
  const std::string real = d / "real", link = d / "run", marker = d / "started";
  fs::create_directories(real);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  for (const std::string& arg : {link, link + "/"}) {
    auto r = RunTouching("-o " + arg, marker);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.output, "kprof run: " + link + ": is a symbolic link; give the directory itself\n");
  }
  EXPECT_FALSE(fs::exists(marker));  // refused before the program started
  EXPECT_TRUE(fs::is_empty(real));
}

TEST(SafeWrites, RunRefusesASymlinkedRepetitionDirectory) {
  TempDir d;
  const std::string real = d / "real", run = d / "run", marker = d / "started";
  fs::create_directories(real);
  fs::create_directories(run);
  ASSERT_EQ(::symlink(real.c_str(), (run + "/rep2").c_str()), 0);
  auto r = RunTouching("--repeat 2 --force -o " + run, marker);
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output,
            "kprof run: " + run + "/rep2: is a symbolic link; give the directory itself\n");
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_TRUE(fs::is_symlink(run + "/rep2"));
  EXPECT_TRUE(fs::is_empty(real));
}

TEST(SafeWrites, RunRefusesAFileAsItsDirectory) {
  TempDir d;
  const std::string file = d / "run", marker = d / "started";
  WriteAll(file, "keep");
  auto r = RunTouching("-o " + file, marker);
  EXPECT_EQ(r.status, kExitUsage);
  EXPECT_EQ(r.output, "kprof run: " + file + ": exists and is not a directory\n");
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_EQ(ReadAll(file), "keep");
}

TEST(SafeWrites, RunChecksTraceAndHtmlBeforeTheProgramStarts) {
  TempDir d;
  const std::string target = d / "victim", marker = d / "started";
  WriteAll(target, "victim");
  for (const std::string opt : {"--trace", "--html"}) {
    const std::string out = d / ("out" + opt);
    ASSERT_EQ(::symlink(target.c_str(), out.c_str()), 0);
    auto r = RunTouching("-o " + d / ("run" + opt) + " " + opt + " " + out, marker);
    EXPECT_EQ(r.status, kExitUsage);
    EXPECT_EQ(r.output, "kprof run: " + out + ": already exists (--force overwrites)\n");
    EXPECT_FALSE(fs::exists(marker)) << opt;
    EXPECT_TRUE(fs::is_symlink(out));
  }
  EXPECT_EQ(ReadAll(target), "victim");
  // The victim and the two links: no run directory, no temporary file.
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()), 3);
}

TEST(SafeWrites, RunDirectoryRemovedWhileTheProgramRan) {
  TempDir d;
  const std::string run = d / "run";
  auto r = RunCommand(test::Kprof() + " run -o " + run + " -- sh -c 'rm -rf " + run + "; exit 3'");
  EXPECT_EQ(r.status, 3);  // the program's own status
  EXPECT_EQ(r.output,
            "kprof run: " + run + " was removed while the program ran: its recording is lost\n");
  // Replaced by another directory of the same name (made before, so another inode): the same.
  r = RunCommand(test::Kprof() + " run -o " + run + " -- sh -c 'mkdir " + run + ".new && rm -rf " +
                 run + " && mv " + run + ".new " + run + "'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.output,
            "kprof run: " + run + " was removed while the program ran: its recording is lost\n");
}

/// A run file without its End block: what a process killed before its exit leaves.
std::string WriteIncomplete(const std::string& path) {
  test::TraceBuilder b(7);
  b.Launch(1, 1000, "k", 2000, 5000);
  b.t.complete = false;
  WriteRunFile(path, b.t);
  return path;
}

const std::string kIncomplete =
    ": incomplete: the process ended without finishing its file (killed?); records up to the "
    "last flush are kept\n";

TEST(SafeWrites, IncompleteFilesAreNamedOnStderr) {
  TempDir d;
  const std::string file = WriteIncomplete(d / "kprof.7.kprof");
  auto r = RunCommand(test::Kprof() + " report " + file + " --format csv -o " + d / "r.csv");
  EXPECT_EQ(r.status, kExitOk);
  EXPECT_EQ(r.output, "kprof report: warning: " + file + kIncomplete);
  // kprof run: a file the program left in the run directory without its End block.
  const std::string run = d / "run";
  r = RunCommand(test::Kprof() + " run --quiet -o " + run + " -- sh -c 'cp " + file +
                 " \"$KPROF_OUTPUT_DIR\"/kprof.7.kprof'");
  EXPECT_EQ(r.status, kExitOk);
  EXPECT_NE(r.output.find("kprof run: warning: " + run + "/kprof.7.kprof" + kIncomplete),
            std::string::npos)
      << r.output;
}

// A process killed inside a write leaves its last block cut short: the warning says so.
TEST(SafeWrites, ATornLastBlockIsSaid) {
  TempDir d;
  const std::string file = WriteIncomplete(d / "kprof.7.kprof");
  const std::string bytes = test::ReadAll(file);
  const std::string torn = d / "kprof.8.kprof";
  test::WriteAll(torn, bytes + bytes.substr(16, 20));  // a block header and 4 payload bytes
  auto r = RunCommand(test::Kprof() + " report " + torn + " --format csv -o " + d / "r.csv");
  EXPECT_EQ(r.status, kExitOk);
  EXPECT_EQ(r.output, "kprof report: warning: " + torn +
                          ": incomplete: the process ended without finishing its file (killed?); "
                          "records up to the last flush are kept (its last block, 20 bytes, was "
                          "cut short and is skipped)\n");
}

}  // namespace
}  // namespace kprof
