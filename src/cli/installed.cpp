// See installed.h.
#include "cli/installed.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <system_error>

namespace fs = std::filesystem;

namespace kprof::cli {
namespace {

/// The first readable of `beside` (paths relative to the kprof executable's folder), made
/// canonical; "" when none.
std::string FindInstalled(std::initializer_list<const char*> beside) {
  const std::string dir = SelfDir();
  for (const char* rel : beside)
    if (const std::string c = dir + "/" + rel; ::access(c.c_str(), R_OK) == 0)
      return fs::weakly_canonical(c).string();
  return "";
}

}  // namespace

std::string SelfDir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

std::string FindPythonDir() {
  if (const char* env = std::getenv("KPROF_PYTHON_DIR"); env && *env) return env;
  const std::string file =
      FindInstalled({"python/sitecustomize.py", "../share/kprof/python/sitecustomize.py"});
  return file.empty() ? file : fs::path(file).parent_path().string();
}

std::string FindCalibrator() {
  return FindInstalled({"kprof-calibrate", "../libexec/kprof/kprof-calibrate"});
}

std::string FindAgent(bool* from_env) {
  if (from_env != nullptr) *from_env = false;
  if (const char* env = std::getenv("KPROF_AGENT"); env && *env) {
    if (from_env != nullptr) *from_env = true;
    return env;
  }
  return FindInstalled({"libkprof_agent.so", "../lib/libkprof_agent.so"});
}

}  // namespace kprof::cli
