// Mapping of Chrome trace events (Kineto's and kprof's) to kprof records: the trace reader
// (chrome_reader.cpp) parses each event into a RawEvent and hands it here. See
// docs/chrome-trace.md for the mapping.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kprof/trace.h"

namespace kprof::chrome {

/// Which optional fields of a RawEvent were present (bits of RawEvent::has).
enum Has : uint32_t {
  kHasPid = 1,
  kHasTs = 2,
  kHasDevice = 4,
  kHasStream = 8,
  kHasMemBytes = 16,
  kHasDeviceType = 32,
  kHasSeq = 64
};

/// One trace event as parsed: strings are views into the parser's buffer or scratch space, valid
/// until the next event is parsed.
struct RawEvent {
  const char* at = nullptr;  ///< the event's first byte in the buffer, for errors
  std::string_view ph, cat, name;
  std::string_view arg_name;  ///< args.name (metadata events)
  uint32_t has = 0;
  bool pid_is_string = false;
  int64_t pid = 0, tid = 0;
  int64_t ts = 0, dur = 0;  ///< ns, relative to baseTimeNanoseconds
  int64_t correlation = 0, device = 0, stream = 0, cbid = 0, bytes = 0;
  int64_t regs = 0, smem = 0;
  int64_t mem_bytes = 0, mem_device = 0, addr = 0, device_type = 0;
  int64_t seq = -1;  ///< args["Sequence number"]: autograd's, of a cpu_op
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
};

/// Append-only record list in fixed chunks: no reallocation spike while reading a large file.
class RecordChunks {
 public:
  void Push(const Record& r);
  size_t size() const { return size_; }
  /// Calls f(record) for each record in order, releasing chunks as they are consumed.
  template <class F>
  void Drain(F&& f) {
    ForEach(f, true);
    chunks_.clear();
    size_ = 0;
    fill_ = 0;
  }
  template <class F>
  void ForEach(F&& f, bool release = false) {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      size_t n = c + 1 == chunks_.size() ? fill_ : kPerChunk;
      for (size_t i = 0; i < n; ++i) f(chunks_[c][i]);
      if (release) chunks_[c].reset();
    }
  }

 private:
  static constexpr size_t kPerChunk = 16384;  // 1 MiB
  std::vector<std::unique_ptr<Record[]>> chunks_;
  size_t fill_ = 0;
  size_t size_ = 0;
};

/// Collects the records of a trace's events and assembles the processes at the end.
class RecordBuilder {
 public:
  explicit RecordBuilder(std::string path) : path_(std::move(path)) {}

  /// Maps one event to a record, or to meta, or ignores it. Throws json::ParseError at the
  /// event when it lacks what its kind needs.
  void Add(const RawEvent& e);
  /// The processes: GPU work given to the process that launched it, times made absolute.
  Run Finish();

  int64_t base_ns = 0;  ///< baseTimeNanoseconds
  int rank = -1;
  std::map<std::string, std::string> top_meta, device_meta;  ///< meta of every process

 private:
  struct PidData {
    int64_t pid = 0;
    RecordChunks records;
  };
  struct MetaEntry {
    int64_t pid;
    std::string key, value;
  };
  struct LinkedRecord {
    int64_t pid;
    Record r;
  };

  uint32_t Intern(std::string_view s);
  PidData& Cpu(int64_t pid);
  void AddMeta(const RawEvent& e);
  void AddMemory(const RawEvent& e, Record& r);
  /// Where a complete event's record goes until Finish.
  enum class Place { Cpu, Gpu, Linked, Unowned, Ignored };
  /// Fills the kind-specific fields of a complete ('X') event's record.
  Place Categorize(const RawEvent& e, Record& r);
  std::vector<uint16_t> GpuOwners();
  uint64_t Absolute(uint64_t rel) const;

  std::string path_;
  std::vector<MetaEntry> pending_meta_;
  StringTable strings_;
  std::deque<std::string> arena_;
  std::unordered_map<std::string_view, uint32_t> intern_;
  uint32_t cpu_op_id_ = 0, user_annotation_id_ = 0;
  std::vector<std::unique_ptr<PidData>> cpu_;
  PidData* last_cpu_ = nullptr;
  RecordChunks gpu_;
  std::vector<LinkedRecord> linked_;
};

}  // namespace kprof::chrome
