// Helpers shared by the Chrome trace tests: temporary files and gzip reading.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include "kprof/trace.h"

namespace kprof::test {

inline std::string FixtureDir() { return std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/kineto"; }

/// A fresh directory under the system temp dir, removed with its content at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kprof-chrome-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& content) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  size_t n = std::fwrite(content.data(), 1, content.size(), f);
  if (std::fclose(f) != 0 || n != content.size()) throw std::runtime_error("cannot write " + path);
}

inline std::string ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot read " + path);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

/// Content of a gzip (or plain) file, decompressed with zlib.
inline std::string ReadGzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(gz);
  if (n < 0) throw std::runtime_error("gzip error in " + path);
  return out;
}

inline std::map<RecordKind, size_t> CountKinds(const Run& run) {
  std::map<RecordKind, size_t> counts;
  for (const auto& p : run.processes)
    for (const Record& r : p.records) ++counts[r.Kind()];
  return counts;
}

}  // namespace kprof::test
