// main() for the fuzz targets in the normal build (no libFuzzer): runs the target over every file
// of the given corpus directories (or files) and reports counts; the ctest tests labelled "fuzz"
// replay the seed corpus and the regressions this way (docs/fuzzing.md). A target's own output
// goes to /dev/null; an exception other than InputError, or a crash, names the input and fails.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int g_report_fd = 2;              // the real stderr, kept while the target's output is muted
char g_current[4096] = "(none)";  // the input being replayed, for the crash message

void Say(const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(g_report_fd, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

extern "C" void OnCrash(int sig) {
  const char* what = "fuzz replay: crash (signal) on input ";
  (void)!::write(g_report_fd, what, std::strlen(what));
  (void)!::write(g_report_fd, g_current, std::strlen(g_current));
  (void)!::write(g_report_fd, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (std::filesystem::is_directory(argv[i], ec)) {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::recursive_directory_iterator(argv[i], ec))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.')
          files.push_back(std::filesystem::absolute(e.path()).string());
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (std::filesystem::is_regular_file(argv[i], ec)) {
      inputs.push_back(std::filesystem::absolute(argv[i]).string());  // targets may chdir
    }  // a missing directory (no regressions yet) replays nothing
  }
  g_report_fd = ::dup(2);
  const int null_fd = ::open("/dev/null", O_WRONLY);
  if (g_report_fd < 0 || null_fd < 0) return 2;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, OnCrash);

  // KPROF_FUZZ_VERBOSE=1: the target's own output stays on the terminal.
  const char* v = std::getenv("KPROF_FUZZ_VERBOSE");
  const bool verbose = v != nullptr && std::strcmp(v, "0") != 0;
  size_t failures = 0, bytes = 0;
  for (const auto& path : inputs) {
    std::ifstream f(path, std::ios::binary);
    const std::vector<char> data{std::istreambuf_iterator<char>(f), {}};
    bytes += data.size();
    std::snprintf(g_current, sizeof g_current, "%s", path.c_str());
    std::fflush(stdout);
    if (!verbose) {
      ::dup2(null_fd, 1);
      ::dup2(null_fd, 2);
    }
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    } catch (const std::exception& e) {
      ++failures;
      Say("fuzz replay: " + path + ": uncaught exception: " + e.what() + "\n");
    } catch (...) {
      ++failures;
      Say("fuzz replay: " + path + ": uncaught exception of an unknown type\n");
    }
  }
  ::dup2(g_report_fd, 2);
  Say("fuzz replay: " + std::to_string(inputs.size()) + " inputs (" + std::to_string(bytes) +
      " bytes), " + std::to_string(failures) + " failed\n");
  return failures == 0 && !inputs.empty() ? 0 : 1;
}
