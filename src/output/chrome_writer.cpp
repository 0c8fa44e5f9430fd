// Chrome trace JSON writer (PyTorch-profiler conventions; docs/chrome-trace.md): the entry
// points, the sinks (stream or gzip file), the order of the document, and the per-rank traces of
// --trace-dir (a file per process, for Holistic Trace Analysis). Streaming: the document is
// produced piece by piece into a small buffer that is flushed to the stream or the gzip file; no
// JSON tree is built. Only per-event descriptors (a few words each) are held, to sort events by
// track and keep the slices of each track properly nested.
#include "output/chrome_writer.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/output_file.h"

namespace kprof {
namespace chrome {

void ChromeWriter::Write() {
  base_ = BaseTime();
  Header();
  for (uint32_t i = 0; i < run_.processes.size(); ++i)
    if (Wanted(i)) Metadata(i);
  std::vector<Ev> events = CollectEvents();
  Nest(events);
  for (const Ev& e : events) WriteX(e);
  std::vector<Ev>().swap(events);
  for (uint32_t i = 0; i < run_.processes.size(); ++i) {
    if (!Wanted(i)) continue;
    Flows(i);
    Memory(i);
    Instants(i);
    Windows(i);
    Counters(i);
  }
  Raw("\n]}\n");
  Flush();
}

}  // namespace chrome

namespace {

namespace fs = std::filesystem;
using chrome::ChromeWriter;
using chrome::Sink;

// ---- output sinks -----------------------------------------------------------------------------

class StreamSink : public Sink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}
  void Write(const char* data, size_t n) override {
    out_.write(data, static_cast<std::streamsize>(n));
  }

 private:
  std::ostream& out_;
};

class GzipSink : public Sink {
 public:
  /// Writes `file`; messages name `path` (the destination that `file` is renamed to).
  GzipSink(const std::string& file, const std::string& path) : path_(path) {
    gz_ = gzopen(file.c_str(), "wb6");
    if (gz_ == nullptr) throw InputError(path + ": cannot open for writing");
    gzbuffer(gz_, 1u << 18);
  }
  ~GzipSink() override {
    if (gz_ != nullptr) gzclose(gz_);
  }
  GzipSink(const GzipSink&) = delete;
  GzipSink& operator=(const GzipSink&) = delete;
  void Write(const char* data, size_t n) override {
    while (n > 0) {
      auto chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      if (gzwrite(gz_, data, chunk) != static_cast<int>(chunk))
        throw InputError(path_ + ": write error");
      data += chunk;
      n -= chunk;
    }
  }
  void Close() {
    int rc = gzclose(gz_);
    gz_ = nullptr;
    if (rc != Z_OK) throw InputError(path_ + ": write error");
  }

 private:
  std::string path_;
  gzFile gz_ = nullptr;
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

void WriteTo(OutputFile& out, const Timeline& timeline, const ChromeTraceOptions& opts,
             chrome::Attribution* shared) {
  if (EndsWith(out.path(), ".gz")) {
    GzipSink sink(out.temp_path(), out.path());
    ChromeWriter(sink, timeline, opts, shared).Write();
    sink.Close();
  } else {
    StreamSink sink(out.stream());
    ChromeWriter(sink, timeline, opts, shared).Write();
  }
  out.Commit();
}

// ---- per-rank traces (--trace-dir) ------------------------------------------------------------

constexpr std::string_view kRankTraceSuffix = ".pt.trace.json";

/// Digits, then optionally "-" and digits (the number of a name two processes would share).
bool IsNumberWithCopy(std::string_view s) {
  auto digits = [](std::string_view d) {
    return !d.empty() &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const size_t dash = s.find('-');
  if (dash == std::string_view::npos) return digits(s);
  return digits(s.substr(0, dash)) && digits(s.substr(dash + 1));
}

/// The per-rank traces in `dir` (files and links, not directories), by name.
std::vector<std::string> RankTracesIn(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    std::error_code type_ec;
    if (IsRankTraceName(name) && !e.is_directory(type_ec)) names.push_back(std::move(name));
  }
  if (ec) throw InputError(dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

void WriteChromeTrace(std::ostream& out, const Timeline& timeline, const ChromeTraceOptions& opts) {
  StreamSink sink(out);
  ChromeWriter(sink, timeline, opts).Write();
}

void WriteChromeTrace(OutputFile& out, const Timeline& timeline, const ChromeTraceOptions& opts) {
  WriteTo(out, timeline, opts, nullptr);
}

void WriteChromeTrace(const std::string& path, const Timeline& timeline, bool force,
                      const ChromeTraceOptions& opts) {
  OutputFile out(path, force);
  WriteChromeTrace(out, timeline, opts);
}

std::vector<RankTraceFile> RankTraceFiles(const Run& run) {
  bool any_rank = false;
  for (const auto& p : run.processes) any_rank = any_rank || p.rank >= 0;
  std::vector<RankTraceFile> files;
  std::set<std::string> taken;
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const ProcessTrace& p = run.processes[i];
    if (any_rank && p.rank < 0) continue;
    const std::string stem = any_rank
                                 ? "rank" + std::to_string(p.rank) + "." + std::to_string(p.pid)
                                 : "pid" + std::to_string(p.pid);
    std::string name = stem + std::string(kRankTraceSuffix);
    for (int copy = 2; !taken.insert(name).second; ++copy)
      name = stem + "-" + std::to_string(copy) + std::string(kRankTraceSuffix);
    files.push_back({i, std::move(name)});
  }
  return files;
}

bool IsRankTraceName(std::string_view name) {
  if (!name.ends_with(kRankTraceSuffix)) return false;
  std::string_view stem = name.substr(0, name.size() - kRankTraceSuffix.size());
  if (stem.starts_with("pid")) return IsNumberWithCopy(stem.substr(3));
  if (!stem.starts_with("rank")) return false;
  stem.remove_prefix(4);
  const size_t dot = stem.find('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view rank = stem.substr(0, dot);
  return !rank.empty() &&
         std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         IsNumberWithCopy(stem.substr(dot + 1));
}

void CheckRankTraceDir(const std::string& dir, bool force) {
  if (dir.empty()) throw InputError("--trace-dir: the path is empty");
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) throw InputError(dir + ": not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      throw InputError(dir + ": cannot write (" + std::strerror(errno) + ")");
    if (!force) {
      const std::vector<std::string> old = RankTracesIn(dir);
      if (!old.empty())
        throw InputError((fs::path(dir) / old.front()).string() +
                         ": already exists (--force overwrites)");
    }
    return;
  }
  // Missing: it will be made in its nearest existing parent, which must be a writable directory.
  fs::path up = fs::path(dir).lexically_normal();
  if (!up.empty() && !up.has_filename()) up = up.parent_path();  // "a/b/" -> "a/b"
  while (true) {
    up = up.has_parent_path() ? up.parent_path() : fs::path(".");
    const auto ust = fs::status(up, ec);
    if (!fs::exists(ust)) continue;
    if (!fs::is_directory(ust))
      throw InputError(dir + ": cannot create (" + up.string() + " is not a directory)");
    if (::access(up.c_str(), W_OK | X_OK) != 0)
      throw InputError(dir + ": cannot create (" + std::strerror(errno) + ")");
    return;
  }
}

std::vector<std::string> WriteRankTraces(const std::string& dir, const Timeline& timeline,
                                         bool force) {
  CheckRankTraceDir(dir, force);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create (" + ec.message() + ")");
  const std::vector<RankTraceFile> files = RankTraceFiles(*timeline.run);
  // Every file's place is checked (and its temporary file made) before the first is written.
  std::vector<std::unique_ptr<OutputFile>> outs;
  std::set<std::string> ours;
  for (const RankTraceFile& f : files) {
    outs.push_back(std::make_unique<OutputFile>((fs::path(dir) / f.name).string(), force));
    ours.insert(f.name);
  }
  chrome::Attribution attribution(timeline);
  std::vector<std::string> written;
  for (size_t k = 0; k < files.size(); ++k) {
    ChromeTraceOptions opts;
    opts.process = static_cast<int>(files[k].process);
    WriteTo(*outs[k], timeline, opts, &attribution);
    written.push_back(outs[k]->path());
    outs[k].reset();
  }
  // --force: the per-rank traces of another run would be read with this one's (by HTA and by
  // kprof report DIR).
  if (force) {
    for (const std::string& name : RankTracesIn(dir)) {
      if (ours.count(name)) continue;
      const std::string path = (fs::path(dir) / name).string();
      if (::unlink(path.c_str()) != 0)
        throw InputError(path + ": cannot remove (" + std::strerror(errno) + ")");
    }
  }
  return written;
}

}  // namespace kprof
