// Helpers shared by the CPU tests: temporary directories, building in-memory runs, running kprof.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kprof/trace.h"

namespace kprof::test {

/// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kprof-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

/// Builds records into a ProcessTrace.
struct TraceBuilder {
  ProcessTrace t;
  explicit TraceBuilder(uint32_t pid = 100) {
    t.pid = pid;
    t.complete = true;
    t.meta["pid"] = std::to_string(pid);
  }
  Record& Add(RecordKind kind, const std::string& name, uint64_t start, uint64_t end) {
    Record r;
    r.kind = static_cast<uint8_t>(kind);
    r.name = t.strings.Intern(name);
    r.start_ns = start;
    r.end_ns = end;
    r.device = IsGpuKind(kind) ? 0 : kNoDevice;
    t.records.push_back(r);
    return t.records.back();
  }
  /// A runtime API call on `tid` launching a kernel on `stream` (same correlation id).
  void Launch(uint32_t tid, uint64_t api_start, const std::string& kernel, uint64_t k_start,
              uint64_t k_end, uint32_t stream = 7, const std::string& api = "cudaLaunchKernel") {
    uint32_t corr = ++next_corr;
    Record& a = Add(RecordKind::RuntimeApi, api, api_start, api_start + 2000);
    a.tid = tid;
    a.correlation = corr;
    Record& k = Add(RecordKind::Kernel, kernel, k_start, k_end);
    k.tid = stream;
    k.correlation = corr;
    SetKernelLaunch(k, {132, 1, 1}, {256, 1, 1}, 32, 0);
  }
  /// An NVTX push/pop range on `tid`.
  void Range(uint32_t tid, const std::string& name, uint64_t start, uint64_t end) {
    uint32_t id = ++next_marker;
    Record& s = Add(RecordKind::MarkerStart, name, start, start);
    s.tid = tid;
    s.a = id;
    Record& e = Add(RecordKind::MarkerEnd, "", end, end);
    e.tid = tid;
    e.a = id;
  }
  uint32_t next_corr = 0;
  uint32_t next_marker = 0;
};

/// Runs a shell command, returns its exit status and captures stdout+stderr.
struct CommandResult {
  int status = -1;
  std::string output;
};
inline CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

inline std::string Kprof() { return std::string(KPROF_BINARY_DIR) + "/kprof"; }

}  // namespace kprof::test
