// OutputFile: the checks before writing and the write-then-rename, on a scratch directory.
#include "kprof/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "kprof/trace.h"

namespace fs = std::filesystem;
namespace kprof {
namespace {

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kprof-outfile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  static std::string Slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  static std::string ErrorOf(const std::string& path, bool force) {
    try {
      OutputFile f(path, force);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  size_t Entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, WritesOnlyOnCommit) {
  const std::string p = (dir_ / "r.html").string();
  {
    OutputFile f(p, false);
    f.stream() << "hello";
    EXPECT_FALSE(fs::exists(p));  // nothing at the destination until complete
    EXPECT_TRUE(fs::exists(f.temp_path()));
    f.Commit();
  }
  EXPECT_EQ(Slurp(p), "hello");
  EXPECT_EQ(Entries(), 1u);  // the temporary name is gone
}

TEST_F(OutputFileTest, AbandonedWriteLeavesNothing) {
  const std::string p = (dir_ / "r.html").string();
  {
    OutputFile f(p, false);
    f.stream() << "half";
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(Entries(), 0u);
}

TEST_F(OutputFileTest, RefusesExistingFileWithoutForce) {
  const std::string p = (dir_ / "r.html").string();
  std::ofstream(p) << "old";
  EXPECT_EQ(ErrorOf(p, false), p + ": already exists (--force overwrites)");
  EXPECT_EQ(Slurp(p), "old");
  OutputFile f(p, true);
  f.stream() << "new";
  f.Commit();
  EXPECT_EQ(Slurp(p), "new");
}

TEST_F(OutputFileTest, RefusesDirectoryAndMissingParent) {
  EXPECT_EQ(ErrorOf(dir_.string(), true), dir_.string() + ": is a directory");
  const std::string missing = (dir_ / "no" / "r.html").string();
  EXPECT_EQ(ErrorOf(missing, true),
            missing + ": directory " + (dir_ / "no").string() + " does not exist");
  EXPECT_EQ(ErrorOf("", true), "output path is empty");
}

TEST_F(OutputFileTest, ReplacesAPlantedSymlinkInsteadOfWritingThroughIt) {
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "precious";
  const std::string p = (dir_ / "r.html").string();
  fs::create_symlink(victim, p);
  EXPECT_EQ(ErrorOf(p, false), p + ": already exists (--force overwrites)");
  OutputFile f(p, true);
  f.stream() << "report";
  f.Commit();
  EXPECT_EQ(Slurp(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(p));
  EXPECT_EQ(Slurp(p), "report");
}

TEST_F(OutputFileTest, UnwritableDirectoryIsOneLine) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  const std::string p = (dir_ / "r.html").string();
  EXPECT_EQ(ErrorOf(p, false), p + ": cannot create (Permission denied)");
}

TEST_F(OutputFileTest, UnwritableForRootTooIsOneLine) {
  // /proc refuses new files even to root: the error names the path and the reason.
  const std::string e = ErrorOf("/proc/kprof-report.html", false);
  EXPECT_EQ(e.rfind("/proc/kprof-report.html: cannot create (", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST_F(OutputFileTest, CreatedFileHasTheUsualMode) {
  const std::string p = (dir_ / "r.html").string();
  OutputFile f(p, false);
  f.stream() << "x";
  f.Commit();
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

// A device or a FIFO is a stream, not a file to replace: `-o /dev/null` writes into it (no
// --force, no temporary file next to it), and the device node stays what it was.
TEST_F(OutputFileTest, DeviceAndFifoAreWrittenInPlace) {
  {
    OutputFile f("/dev/null", false);
    EXPECT_EQ(f.temp_path(), "/dev/null");
    f.stream() << "discarded";
    f.Commit();
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));

  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = Slurp(fifo); });
  {
    OutputFile f(fifo, false);
    f.stream() << "through the pipe";
    f.Commit();
  }
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(Entries(), 1u);
}

}  // namespace
}  // namespace kprof
