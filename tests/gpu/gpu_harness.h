// Helpers shared by the GPU tests (gpu_test.cpp, fault_test.cpp): GPU detection, paths of the
// build and source trees, running kprof and programs with their output captured.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kprof::gpu_test {

inline bool HaveGpu() {
  static const bool have = [] {
    if (const char* f = std::getenv("KPROF_FORCE_NO_GPU"); f && *f) return false;
    return access("/dev/nvidiactl", F_OK) == 0 && access("/dev/nvidia0", F_OK) == 0;
  }();
  return have;
}

#define REQUIRE_GPU()                                                \
  do {                                                               \
    if (!HaveGpu()) GTEST_SKIP() << "no NVIDIA GPU on this machine"; \
  } while (0)

inline std::string Bin(const std::string& rel) { return std::string(KPROF_BINARY_DIR) + "/" + rel; }
inline std::string Src(const std::string& rel) { return std::string(KPROF_SOURCE_DIR) + "/" + rel; }

inline std::string FreshDir(const std::string& name) {
  std::string dir = Bin("gpu-test-runs/" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(std::filesystem::path(dir).parent_path());
  return dir;
}

struct Result {
  int status = -1;  // exit code as a shell reports it
  std::string out;  // stdout + stderr
};

// Starts argv with stdout+stderr going to gpu-test-runs/last.log.
inline pid_t Spawn(const std::vector<std::string>& argv) {
  const std::string log = Bin("gpu-test-runs/last.log");
  std::filesystem::create_directories(Bin("gpu-test-runs"));
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits for a Spawn()ed process: its status as a shell reports it and its output.
inline Result Wait(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  Result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream f(Bin("gpu-test-runs/last.log"));
  std::stringstream ss;
  ss << f.rdbuf();
  r.out = ss.str();
  return r;
}

// Runs argv with stdout+stderr captured; optionally sends `sig` to it after `delay_ms`.
inline Result Exec(const std::vector<std::string>& argv, int sig = 0, int delay_ms = 0) {
  const pid_t pid = Spawn(argv);
  if (sig != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, sig);
  }
  return Wait(pid);
}

/// kprof run -o DIR --quiet OPTIONS... -- PROGRAM...
inline Result KprofWith(const std::string& dir, const std::vector<std::string>& options,
                        const std::vector<std::string>& program) {
  std::vector<std::string> argv = {Bin("kprof"), "run", "-o", dir, "--quiet"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return Exec(argv);
}

inline Result Kprof(const std::string& dir, const std::vector<std::string>& program) {
  return KprofWith(dir, {}, program);
}

inline std::string Python() {
  for (const char* p : {"/opt/torch/.venv/bin/python3", "/usr/bin/python3"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "python3";
}

inline bool HaveTorch() {
  return Exec({Python(), "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"})
             .status == 0;
}

}  // namespace kprof::gpu_test
