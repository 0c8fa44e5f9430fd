// ReadInputs: what `kprof report`/`diff`/`check` accept — kprof run files, run directories and
// Chrome trace JSON (plain or gzip), detected from the content, never from the file name.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "kprof/progress.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

namespace fs = std::filesystem;

enum class Content { Empty, Kprof, Gzip, Json, Unknown };

Content Sniff(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(path + ": " + std::strerror(errno));
  unsigned char buf[64];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  if (n == 0) return Content::Empty;
  if (n >= 8 && std::memcmp(buf, kFileMagic, 8) == 0) return Content::Kprof;
  if (n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) return Content::Gzip;
  size_t i = 0;
  if (n >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF) i = 3;  // UTF-8 BOM
  while (i < n && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) ++i;
  if (i < n && (buf[i] == '{' || buf[i] == '[')) return Content::Json;
  return Content::Unknown;
}

void AddFile(Run& run, const std::string& path, bool show_progress) {
  switch (Sniff(path)) {
    case Content::Empty:
      throw InputError(path + ": empty file");
    case Content::Kprof:
      run.processes.push_back(ReadRunFile(path, show_progress));
      return;
    case Content::Gzip:
    case Content::Json: {
      ChromeReadOptions opts;
      opts.show_progress = show_progress;
      Run r = ReadChromeTrace(path, opts);
      for (auto& p : r.processes) run.processes.push_back(std::move(p));
      return;
    }
    case Content::Unknown:
      throw InputError(path + ": not a kprof run file or Chrome trace JSON");
  }
}

/// A Chrome trace by its name, in a directory (*.json, *.json.gz; *.pt.trace.json among them).
/// A file given by name is read whatever its name.
bool IsChromeTraceName(std::string_view name) {
  return (name.ends_with(".json") && name.size() > 5) ||
         (name.ends_with(".json.gz") && name.size() > 8);
}

}  // namespace

uint32_t RepNumber(std::string_view name) {
  if (name.size() < 4 || name.size() > 12 || name.substr(0, 3) != "rep") return 0;
  uint32_t n = 0;
  for (char c : name.substr(3)) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  return n;
}

Run ReadInputs(const std::vector<std::string>& paths) {
  Run run;
  if (paths.empty()) throw InputError("no input files given");
  const bool progress = ProgressToTerminal();
  for (const auto& path : paths) {
    std::error_code ec;
    auto st = fs::status(path, ec);
    if (ec || !fs::exists(st)) throw InputError(path + ": no such file or directory");
    if (!fs::is_directory(st)) {
      // Inputs are sniffed, then read again from the start: a pipe cannot be.
      if (!fs::is_regular_file(st))
        throw InputError(path +
                         ": not a regular file (a pipe or device?); save it to a file first");
      AddFile(run, path, progress);
      continue;
    }
    std::vector<std::string> files, traces, reps;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const auto name = e.path().filename().string();
      if (e.is_regular_file() && e.path().extension() == ".kprof") files.push_back(e.path());
      if (e.is_regular_file() && IsChromeTraceName(name)) traces.push_back(e.path());
      if (e.is_directory() && RepNumber(name) > 0) reps.push_back(name);
    }
    if (ec) throw InputError(path + ": " + ec.message());
    // Run files first; a directory without any is one of Chrome traces (kprof's --trace-dir,
    // torch.profiler's tensorboard_trace_handler on every rank): each file its processes.
    if (files.empty()) files = std::move(traces);
    if (files.empty()) {
      if (!reps.empty())
        throw InputError(path + ": holds " + std::to_string(reps.size()) +
                         " repeated runs (rep1...); name one, e.g. " + path +
                         "/rep1, or compare "
                         "them with kprof diff");
      throw InputError(path +
                       ": no kprof run files (*.kprof) or Chrome traces (*.json, *.json.gz) in "
                       "this directory");
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) AddFile(run, f, progress);
  }
  return run;
}

}  // namespace kprof
