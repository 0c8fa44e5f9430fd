// Benchmark (issue 8, docs/benchmarks.md): the Chrome trace reader's hand-written pull parser
// against simdjson's On-Demand API, at the same bounded memory.
//
// Both paths stream the file through one 4 MiB buffer and hand every trace event, as a
// chrome::RawEvent, to the same mapping (chrome::RecordBuilder), so the difference is the JSON
// parsing alone. On-Demand wants a padded buffer holding whole documents, so the simdjson path
// finds each event object's extent with a light scan (quotes, escapes and brackets, 8 bytes at a
// time, or 32 with AVX2) and parses either each event as its own document ("simdjson-event") or a
// batch of consecutive events as one array document ("simdjson-batch", the bytes around the batch
// briefly overwritten with '[' and ']'). Top-level keys other than traceEvents and
// baseTimeNanoseconds are skipped: they hold no records.
//
// usage: kprof_bench_simdjson MODE TRACE.json
//   MODE: hand, scan, simdjson-event, simdjson-batch, simdjson-validated or check
// Prints one line: mode, events, records, seconds (wall and CPU), MB/s, events/s, peak RSS
// (VmHWM) in MB. "scan" times the light scan alone (KPROF_BENCH_SCAN=swar: without AVX2);
// "check" reads with every path and compares the records and their names.
#include <immintrin.h>
#include <simdjson.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/chrome_records.h"
#include "format/json_pull.h"
#include "kprof/trace.h"

#define KPROF_STR2(x) #x
#define KPROF_STR(x) KPROF_STR2(x)

namespace kprof {
namespace {

namespace od = simdjson::ondemand;
using chrome::RawEvent;

constexpr size_t kChunk = 4u << 20;
constexpr size_t kBatch = 256u << 10;
constexpr size_t kPad = simdjson::SIMDJSON_PADDING + 8;  // a batch's ']' may take the first byte

/// First quote, bracket ({ } [ ]) or NUL at or after q, 8 bytes at a time.
const char* NextStructural(const char* q) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  for (;;) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    uint64_t folded = w | (kOnes * 0x20);  // '[' -> '{', ']' -> '}'
    uint64_t quote = w ^ (kOnes * '"');
    uint64_t open = folded ^ (kOnes * '{');
    uint64_t close = folded ^ (kOnes * '}');
    uint64_t hit = ((quote - kOnes) & ~quote) | ((open - kOnes) & ~open) |
                   ((close - kOnes) & ~close) | ((w - kOnes) & ~w);
    hit &= kHigh;
    if (hit != 0) return q + (__builtin_ctzll(hit) >> 3);
    q += 8;
  }
}

/// End of the object or array at p (past its closing bracket), or null when the data ends
/// first. Only quotes, escapes and brackets are looked at: simdjson validates the rest.
const char* ContainerEnd(const char* p, const char* end) {
  int depth = 0;
  for (;;) {
    p = NextStructural(p);
    if (p >= end) return nullptr;
    char ch = *p++;
    if (ch == '"') {
      for (;;) {
        p = json::ScanString(p);
        if (p >= end) return nullptr;
        if (*p == '"') break;
        p += *p == '\\' ? 2 : 1;
      }
      ++p;
    } else if (ch == '{' || ch == '[') {
      ++depth;
    } else if ((ch == '}' || ch == ']') && --depth == 0) {
      return p;
    }
  }
}

/// ContainerEnd 32 bytes at a time: a bit mask of the quotes, backslashes and brackets of each
/// block, walked bit by bit with the in-string state. Needs 32 readable bytes past `end`.
__attribute__((target("avx2,bmi"))) const char* ContainerEndAvx2(const char* p, const char* end) {
  const __m256i quote = _mm256_set1_epi8('"'), bslash = _mm256_set1_epi8('\\');
  const __m256i fold = _mm256_set1_epi8(0x20);  // '[' -> '{', ']' -> '}'
  const __m256i open = _mm256_set1_epi8('{'), close = _mm256_set1_epi8('}');
  int depth = 0;
  bool in_string = false, skip_first = false;
  for (const char* block = p; block < end; block += 32) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block));
    __m256i folded = _mm256_or_si256(v, fold);
    __m256i hits = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, bslash)),
        _mm256_or_si256(_mm256_cmpeq_epi8(folded, open), _mm256_cmpeq_epi8(folded, close)));
    auto bits = static_cast<uint32_t>(_mm256_movemask_epi8(hits));
    if (skip_first) bits &= ~1u;  // escaped by the block before
    skip_first = false;
    while (bits != 0) {
      int i = __builtin_ctz(bits);
      bits &= bits - 1;
      const char* q = block + i;
      if (q >= end) return nullptr;
      char ch = *q;
      if (in_string) {
        if (ch == '"') {
          in_string = false;
        } else if (ch == '\\') {
          if (i == 31)
            skip_first = true;
          else
            bits &= ~(1u << (i + 1));
        }
      } else if (ch == '"') {
        in_string = true;
      } else if (ch == '{' || ch == '[') {
        ++depth;
      } else if ((ch == '}' || ch == ']') && --depth == 0) {
        return q + 1;
      }
    }
  }
  return nullptr;
}

/// The AVX2 scan where the CPU has it, unless KPROF_BENCH_SCAN=swar.
bool UseAvx2() {
  const char* scan = std::getenv("KPROF_BENCH_SCAN");
  return __builtin_cpu_supports("avx2") && (scan == nullptr || std::strcmp(scan, "swar") != 0);
}

const char* SkipWs(const char* p) {
  while (json::IsWs(*p)) ++p;
  return p;
}

/// A number's text converted like the hand-written reader does (exact decimal microseconds).
json::Number NumberAt(std::string_view token, const char* end) {
  json::Cursor c{token.data(), end};
  return c.Num();
}

class SimdReader {
 public:
  /// Scan: the light scan alone (events counted, none parsed); Event: one On-Demand document
  /// per event; Batch: one per batch of events.
  /// Validated: Batch, and every value On-Demand skips is also checked with the hand-written
  /// parser's SkipValue, as the reader checks every byte (On-Demand does not validate what it
  /// skips: `"x": tru` passes).
  enum class Mode { Scan, Event, Batch, Validated };

  SimdReader(const std::string& path, Mode mode)
      : path_(path), mode_(mode), src_(path), records_(path) {
    buf_.resize(kChunk + kPad);
    // Sized once, before the records: growing it later frees a large block, which raises
    // glibc's mmap threshold so that the record chunks stay in the heap (peak RSS x2 in Finish).
    if (parser_.allocate(2 * kBatch) != simdjson::SUCCESS) throw std::bad_alloc();
  }

  Run Read() {
    Fill();
    const char* p = SkipWs(Data() + pos_);
    if (*p == '[') {
      pos_ = static_cast<size_t>(p - Data()) + 1;
      Events();
    } else if (*p == '{') {
      pos_ = static_cast<size_t>(p - Data()) + 1;
      TopMembers();
    } else {
      throw InputError(path_ + ": not a Chrome trace");
    }
    return records_.Finish();
  }
  uint64_t events() const { return events_; }

 private:
  char* Data() { return buf_.data(); }
  const char* End(const char* p, const char* end) const {
    return avx2_ ? ContainerEndAvx2(p, end) : ContainerEnd(p, end);
  }

  /// Keeps [pos_, end_) and reads more behind it; false at the end of the input.
  bool Fill() {
    if (eof_) return false;
    size_t from = pos_ > 0 ? pos_ - 1 : 0;  // the byte before pos_ stays: a batch's '[' goes there
    std::memmove(Data(), Data() + from, end_ - from);
    pos_ -= from;
    end_ -= from;
    if (buf_.size() - kPad - end_ < kChunk / 2) buf_.resize(buf_.size() * 2);
    size_t got = src_.Read(Data() + end_, buf_.size() - kPad - end_);
    eof_ = got == 0;
    end_ += got;
    std::memset(Data() + end_, 0, kPad);  // sentinel for the scans
    return got > 0;
  }

  /// Makes at least `n` bytes available from pos_ (fewer only at the end of the input).
  void Want(size_t n) {
    while (end_ - pos_ < n && Fill()) {
    }
  }

  void TopMembers() {
    for (;;) {
      Want(1u << 20);  // keys and small values; the event array is read in its own loop
      const char* end = Data() + end_;
      const char* p = SkipWs(Data() + pos_);
      if (*p == ',') p = SkipWs(p + 1);
      if (*p != '"') return;  // '}' (what follows is not checked here)
      const char* key_end = ScalarEnd(p, end);
      std::string_view key(p + 1, static_cast<size_t>(key_end - p - 2));
      p = SkipWs(SkipWs(key_end) + 1);  // past ':'
      pos_ = static_cast<size_t>(p - Data());
      if (key == "traceEvents") {
        ++pos_;  // '['
        Events();
        continue;
      }
      const char* value_end = (*p == '{' || *p == '[') ? End(p, end) : ScalarEnd(p, end);
      if (value_end == nullptr) throw InputError(path_ + ": top-level value over 1 MiB");
      if (key == "baseTimeNanoseconds") records_.base_ns = json::ToInt(NumberAt({p, 0}, end));
      pos_ = static_cast<size_t>(value_end - Data());
    }
  }

  /// End of the string or other scalar at p.
  static const char* ScalarEnd(const char* p, const char* end) {
    if (*p == '"') {
      for (++p;; ++p) {
        p = json::ScanString(p);
        if (p >= end || *p == '"') return p + 1;
        if (*p == '\\') ++p;
      }
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && !json::IsWs(*p)) ++p;
    return p;
  }

  /// The elements of the event array (pos_ after its '['), batch by batch.
  void Events() {
    std::vector<std::pair<size_t, size_t>> extents;  // each event's start and end offsets
    for (;;) {
      extents.clear();
      const char* end = Data() + end_;
      const char* p = Data() + pos_;
      for (;;) {
        p = SkipWs(p);
        if (*p == ',') p = SkipWs(p + 1);
        if (p >= end || *p != '{') break;
        const char* e = End(p, end);
        if (e == nullptr) break;
        extents.emplace_back(static_cast<size_t>(p - Data()), static_cast<size_t>(e - Data()));
        p = e;
        if (extents.back().second - extents.front().first >= kBatch) break;
      }
      bool closed = p < end && *p == ']';
      if (!extents.empty()) Parse(extents);
      if (closed) {
        pos_ = static_cast<size_t>(p - Data()) + 1;
        return;
      }
      if (!extents.empty()) {
        pos_ = extents.back().second;
      } else if (!Fill()) {
        throw InputError(path_ + ": truncated event array");
      }
    }
  }

  void Parse(const std::vector<std::pair<size_t, size_t>>& extents) {
    const char* limit = Data() + buf_.size();
    if (mode_ == Mode::Scan) {
      events_ += extents.size();
      return;
    }
    if (mode_ == Mode::Event) {
      for (auto [b, e] : extents) {
        const char* at = Data() + b;
        od::document doc = parser_.iterate(
            simdjson::padded_string_view(at, e - b, static_cast<size_t>(limit - at)));
        Event(doc.get_object(), Data() + e);
      }
      return;
    }
    char* open = Data() + extents.front().first - 1;  // a '[', ',' or space: always there
    char* close = Data() + extents.back().second;
    char saved_open = *open, saved_close = *close;
    *open = '[';
    *close = ']';
    od::document doc = parser_.iterate(simdjson::padded_string_view(
        open, static_cast<size_t>(close + 1 - open), static_cast<size_t>(limit - open)));
    for (od::value ev : doc.get_array()) Event(ev.get_object(), close);
    *open = saved_open;
    *close = saved_close;
  }

  static int64_t Int(od::value v, const char* end) {
    od::json_type type = v.type();
    if (type == od::json_type::null) return 0;
    int64_t x;
    if (v.get_int64().get(x) == simdjson::SUCCESS) return x;
    return json::ToInt(NumberAt(v.raw_json_token(), end));
  }

  static od::json_type Type(od::value& v) { return v.type(); }
  static bool IsString(od::value& v) { return Type(v) == od::json_type::string; }

  static void Dim(od::value v, std::array<int64_t, 3>& out, const char* end) {
    size_t i = 0;
    for (od::value x : v.get_array()) {
      int64_t n = Int(x, end);
      if (i++ < 3) out[i - 1] = n;
    }
  }

  void Args(od::object args, RawEvent& e, const char* end) {
    for (od::field f : args) {
      simdjson::ondemand::raw_json_string k = f.key();
      od::value v = f.value();
      if (k == "correlation") {
        e.correlation = Int(v, end);
      } else if (k == "stream") {
        e.stream = Int(v, end);
        e.has |= chrome::kHasStream;
      } else if (k == "device") {
        e.device = Int(v, end);
        e.has |= chrome::kHasDevice;
      } else if (k == "bytes") {
        e.bytes = Int(v, end);
      } else if (k == "cbid") {
        e.cbid = Int(v, end);
      } else if (k == "grid") {
        Dim(v, e.grid, end);
      } else if (k == "block") {
        Dim(v, e.block, end);
      } else if (k == "registers per thread") {
        e.regs = Int(v, end);
      } else if (k == "shared memory") {
        e.smem = Int(v, end);
      } else if (k == "name" && IsString(v)) {
        e.arg_name = v.get_string();
      } else if (k == "Bytes") {
        e.mem_bytes = Int(v, end);
        e.has |= chrome::kHasMemBytes;
      } else if (k == "Device Id") {
        e.mem_device = Int(v, end);
      } else if (k == "Device Type") {
        e.device_type = Int(v, end);
        e.has |= chrome::kHasDeviceType;
      } else if (k == "Addr") {
        e.addr = Int(v, end);
      } else {
        Validate(v, end);
      }
    }
  }

  void Validate(od::value& v, const char* end) const {
    if (mode_ != Mode::Validated) return;
    json::Cursor c{v.raw_json_token().data(), end};
    c.SkipValue();
  }

  void Event(od::object obj, const char* end) {
    RawEvent e;
    for (od::field f : obj) {
      simdjson::ondemand::raw_json_string k = f.key();
      od::value v = f.value();
      if (k == "ph") {
        e.ph = v.get_string();
      } else if (k == "ts") {
        e.ts = json::ToThousandths(NumberAt(v.raw_json_token(), end));
        e.has |= chrome::kHasTs;
      } else if (k == "dur") {
        e.dur = json::ToThousandths(NumberAt(v.raw_json_token(), end));
      } else if (k == "pid") {
        e.pid_is_string = IsString(v);
        if (!e.pid_is_string) e.pid = Int(v, end);
        e.has |= chrome::kHasPid;
      } else if (k == "tid") {
        if (!IsString(v)) e.tid = Int(v, end);
      } else if (k == "cat") {
        e.cat = v.get_string();
      } else if (k == "name") {
        e.name = v.get_string();
      } else if (k == "args" && Type(v) == od::json_type::object) {
        Args(v.get_object(), e, end);
      } else {
        Validate(v, end);
      }
    }
    records_.Add(e);
    ++events_;
  }

  std::string path_;
  Mode mode_;
  bool avx2_ = UseAvx2();
  json::Source src_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  od::parser parser_;
  chrome::RecordBuilder records_;
  uint64_t events_ = 0;
};

/// User and system time of this process so far: less disturbed than wall time on a shared
/// machine.
double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double PeakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

size_t CountRecords(const Run& run) {
  size_t n = 0;
  for (const auto& p : run.processes) n += p.records.size();
  return n;
}

bool SameRecords(const Run& a, const Run& b) {
  if (a.processes.size() != b.processes.size()) return false;
  for (size_t i = 0; i < a.processes.size(); ++i) {
    const ProcessTrace& p = a.processes[i];
    const ProcessTrace& q = b.processes[i];
    if (p.records.size() != q.records.size()) return false;
    for (size_t j = 0; j < p.records.size(); ++j) {
      if (std::memcmp(&p.records[j], &q.records[j], sizeof(Record)) != 0) return false;
      if (p.Name(p.records[j]) != q.Name(q.records[j])) return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  using Mode = SimdReader::Mode;
  const std::vector<std::pair<std::string, Mode>> kModes = {
      {"scan", Mode::Scan},
      {"simdjson-event", Mode::Event},
      {"simdjson-batch", Mode::Batch},
      {"simdjson-validated", Mode::Validated}};
  std::string mode = argc == 3 ? argv[1] : "", path = argc == 3 ? argv[2] : "";
  auto it = std::find_if(kModes.begin(), kModes.end(), [&](auto& m) { return m.first == mode; });
  if (mode != "hand" && mode != "check" && it == kModes.end()) {
    std::fprintf(stderr, "usage: %s MODE TRACE.json (see the top of %s)\n", argv[0], __FILE__);
    return 2;
  }
  if (mode == "check") {
    Run hand = ReadChromeTrace(path);
    for (auto [name, m] : kModes) {
      if (m == Mode::Scan) continue;
      Run simd = SimdReader(path, m).Read();
      std::printf("%s: %s (%zu records)\n", name.c_str(),
                  SameRecords(hand, simd) ? "same records" : "DIFFERENT", CountRecords(simd));
    }
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  Run run;
  uint64_t events = 0;
  if (mode == "hand") {
    run = ReadChromeTrace(path);
  } else {
    SimdReader reader(path, it->second);
    run = reader.Read();
    events = reader.events();
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double rss = PeakRssMb();
  double cpu = CpuSeconds();
  if (events == 0) {
    // The hand-written reader does not count events: count them with the light scan (untimed).
    SimdReader counter(path, Mode::Scan);
    counter.Read();
    events = counter.events();
  }
  double mb = static_cast<double>(json::Source(path).Total()) / 1e6;
  // Stage 1 (structure) runs the kernel chosen at run time; stage 2 (On-Demand iteration,
  // strings, numbers) the one compiled in.
  std::printf(
      "%s events=%llu records=%zu s=%.3f cpu_s=%.3f MB/s=%.0f Mevents/s=%.3f peak_rss_MB=%.0f "
      "(scan: %s, simdjson stage 1: %s, stage 2: %s)\n",
      mode.c_str(), static_cast<unsigned long long>(events), CountRecords(run), s, cpu, mb / s,
      static_cast<double>(events) / s / 1e6, rss, UseAvx2() ? "avx2" : "swar",
      simdjson::get_active_implementation()->name().c_str(),
      KPROF_STR(SIMDJSON_BUILTIN_IMPLEMENTATION));
  return 0;
}

}  // namespace
}  // namespace kprof

int main(int argc, char** argv) {
  try {
    return kprof::Main(argc, argv);
  } catch (const kprof::json::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
