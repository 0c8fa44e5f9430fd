// Internal to the output library: the Chrome trace writer, whose parts live in several files
// (chrome_writer.cpp drives it; chrome_metadata.cpp, chrome_events.cpp, chrome_slices.cpp and
// chrome_process_events.cpp write the pieces). Holds the event model, the sink the document
// streams to, and the writer with its JSON emitting primitives.
#pragma once

#include <charconv>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kprof/output.h"

namespace kprof::chrome {

/// Where the document goes: a stream or a gzip file (chrome_writer.cpp).
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Write(const char* data, size_t n) = 0;
};

enum class EvType : uint8_t {
  Kernel,
  Memcpy,
  Memset,
  GpuRange,       // GpuRange record of the input
  GpuAnnotation,  // an NVTX / user range projected onto a stream
  Runtime,
  Driver,
  Sync,
  CpuOp,
  UserRange,  // Range record not from cpu_op / python_function, or an NVTX start/end pair
  PythonFunc,
  Overhead,
  Graph,  // a CUDA graph launch traced as a whole (GraphLaunch)
};

/// One complete ("X") event to write: where it goes and what it shows.
struct Ev {
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  const Record* rec = nullptr;
  uint32_t proc = 0;
  EvType type = EvType::Kernel;
  bool gpu_track = false;  ///< a Sync placed on a stream's track (no API call of its own)
};

/// The attribution of the run's GPU work to ranges (for the projected annotations), computed on
/// first use; one serves the writers of all the per-rank traces of a run.
class Attribution {
 public:
  explicit Attribution(const Timeline& timeline) : timeline_(timeline) {}
  const std::vector<Attributed>& Get() {
    if (!done_) {
      all_ = Attribute(timeline_);
      done_ = true;
    }
    return all_;
  }

 private:
  const Timeline& timeline_;
  std::vector<Attributed> all_;
  bool done_ = false;
};

/// Writes the run of a timeline as a Chrome trace into a Sink; one use per instance.
class ChromeWriter {
 public:
  /// `shared`: an Attribution of the same timeline to use (else the writer makes its own).
  ChromeWriter(Sink& sink, const Timeline& timeline, const ChromeTraceOptions& opts = {},
               Attribution* shared = nullptr)
      : sink_(sink),
        timeline_(timeline),
        run_(*timeline.run),
        only_(opts.process),
        own_attribution_(timeline),
        attribution_(shared != nullptr ? *shared : own_attribution_) {
    if (only_ >= 0 && static_cast<size_t>(only_) >= run_.processes.size())
      throw InputError("Chrome trace: no process " + std::to_string(only_) + " in the run");
    out_.reserve(2u << 20);
  }

  void Write();

 private:
  // --- low level ---
  void Raw(std::string_view s) {
    out_.append(s);
    if (out_.size() >= (1u << 20)) Flush();
  }
  void Flush() {
    sink_.Write(out_.data(), out_.size());
    out_.clear();
  }
  void Int(int64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    out_.append(b, static_cast<size_t>(r.ptr - b));
  }
  void UInt(uint64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    out_.append(b, static_cast<size_t>(r.ptr - b));
  }
  /// Nanoseconds as microseconds with three decimals (exact).
  void Micros(uint64_t ns) {
    UInt(ns / 1000);
    char frac[4] = {'.', static_cast<char>('0' + ns / 100 % 10),
                    static_cast<char>('0' + ns / 10 % 10), static_cast<char>('0' + ns % 10)};
    out_.append(frac, 4);
  }
  void Ts(uint64_t abs_ns) { Micros(abs_ns > base_ ? abs_ns - base_ : 0); }
  void Str(std::string_view s) { AppendJsonString(out_, s); }
  /// `, "pid": P, "tid": T, "ts": X`: where an event is.
  void PidTidTs(int64_t pid, int64_t tid, uint64_t abs_ns) {
    Raw(", \"pid\": ");
    Int(pid);
    Raw(", \"tid\": ");
    Int(tid);
    Raw(", \"ts\": ");
    Ts(abs_ns);
  }
  /// Starts a new element of traceEvents.
  void Begin() {
    if (!first_event_) out_.append(",\n");
    first_event_ = false;
    if (out_.size() >= (1u << 20)) Flush();
  }

  uint64_t BaseTime() const;
  void Header();
  /// "distributedInfo": {...}, (nothing when it has no rank).
  void Distributed(const DistributedInfo& info);

  /// Is process i written: every process of a merged trace, the one of a per-rank trace.
  bool Wanted(uint32_t i) const { return only_ < 0 || i == static_cast<uint32_t>(only_); }
  /// Track id of a stream: the stream for the first process (and for the one process of a
  /// per-rank trace); offset for the others so that streams of different processes on one
  /// device do not share a track.
  int64_t StreamTrack(uint32_t proc, uint32_t stream) const {
    if (only_ >= 0) proc = 0;
    return static_cast<int64_t>(stream) + static_cast<int64_t>(proc) * 1000000;
  }

  void MetaEvent(const char* name, int64_t pid, int64_t tid, std::string_view key,
                 std::string_view value, bool value_is_number);
  void Metadata(uint32_t i);

  std::vector<Ev> CollectEvents();
  /// Adds one gpu_user_annotation per (user range, device, stream): the span from the first to
  /// the last GPU activity attributed to the range on that stream.
  void Project(std::vector<Ev>& ev, const std::vector<bool>& project);
  /// Sorts events by track and start, and clamps partial overlaps so that the slices of each
  /// track nest (clock jitter between API records can produce overlaps of a few ns).
  static void Nest(std::vector<Ev>& ev);

  const std::string& KernelName(const ProcessTrace& p, uint32_t proc, uint32_t id);
  void WriteX(const Ev& e);
  void GpuArgs(const Record& r, uint32_t proc);

  /// ac2g flow arrows from each launching API call to its GPU work.
  void Flows(uint32_t i);
  /// Device memory: PyTorch-style "[memory]" instants (read back by kprof) and a counter track.
  void Memory(uint32_t i);
  /// NVTX marks as thread-scoped instant events.
  void Instants(uint32_t i);
  /// Capture windows (docs/capture.md): a slice each, cat "kprof_capture", on the thread that
  /// opened it, named by what opened it ("nvtx:step"); read back as CaptureWindow records.
  void Windows(uint32_t i);
  /// PM sampling: a counter track per device and metric, on the GPU's process.
  void Counters(uint32_t i);

  Sink& sink_;
  const Timeline& timeline_;
  const Run& run_;
  const int only_;  ///< the one process of a per-rank trace, -1 for all
  Attribution own_attribution_;
  Attribution& attribution_;
  std::string out_;
  uint64_t base_ = 0;
  bool first_event_ = true;
  std::set<uint16_t> devices_named_;
  std::vector<std::unordered_map<uint32_t, const Record*>> api_by_corr_;
  std::unordered_map<uint32_t, std::unordered_map<uint32_t, std::string>> demangled_;
  uint64_t flow_ids_ = 0;  // one flow per GPU activity, numbered across processes
};

}  // namespace kprof::chrome
