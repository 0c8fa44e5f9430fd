// Chrome trace JSON writer (PyTorch-profiler conventions; docs/chrome-trace.md): the entry
// points, the sinks (stream or gzip file) and the order of the document. Streaming: the
// document is produced piece by piece into a small buffer that is flushed to the stream or the
// gzip file; no JSON tree is built. Only per-event descriptors (a few words each) are held, to
// sort events by track and keep the slices of each track properly nested.
#include "output/chrome_writer.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>

#include "kprof/output_file.h"

namespace kprof {
namespace chrome {

void ChromeWriter::Write() {
  base_ = BaseTime();
  Header();
  for (uint32_t i = 0; i < run_.processes.size(); ++i) Metadata(i);
  std::vector<Ev> events = CollectEvents();
  Nest(events);
  for (const Ev& e : events) WriteX(e);
  std::vector<Ev>().swap(events);
  for (uint32_t i = 0; i < run_.processes.size(); ++i) {
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

}  // namespace

void WriteChromeTrace(std::ostream& out, const Timeline& timeline) {
  StreamSink sink(out);
  ChromeWriter(sink, timeline).Write();
}

void WriteChromeTrace(OutputFile& out, const Timeline& timeline) {
  if (EndsWith(out.path(), ".gz")) {
    GzipSink sink(out.temp_path(), out.path());
    ChromeWriter(sink, timeline).Write();
    sink.Close();
  } else {
    StreamSink sink(out.stream());
    ChromeWriter(sink, timeline).Write();
  }
  out.Commit();
}

void WriteChromeTrace(const std::string& path, const Timeline& timeline, bool force) {
  OutputFile out(path, force);
  WriteChromeTrace(out, timeline);
}

}  // namespace kprof
