// Streaming reader of Chrome trace JSON (PyTorch profiler / Kineto traces, and kprof's own
// Chrome output), plain or gzip. See docs/chrome-trace.md for the mapping to kprof records.
//
// Design: the input is read in chunks into one buffer. The parser is a hand-written pull parser
// over contiguous memory; it never builds a tree of the document. Each element of "traceEvents"
// is parsed on its own into a flat RawEvent (string_views into the buffer, or into a small scratch
// area when a string has escapes), converted to a Record, and forgotten. When the parser reaches
// the end of the buffered data in the middle of an element it throws NeedMore; the driver then
// keeps the element's bytes, reads more input behind them and parses the element again. This
// happens once per buffer refill, so its cost is negligible, and the element parsers stay simple
// (no suspended state). A '\0' sentinel after the data lets the hot loops (strings, digits,
// whitespace) run without bounds checks: they stop at the sentinel and then test for the end.
//
// Hostile input: every path reports an InputError "PATH: byte N: problem"; nesting is tracked
// with an explicit bounded stack (no recursion); an element larger than kMaxElement is refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kprof/trace.h"

namespace kprof {
namespace {

constexpr size_t kReadChunk = 4u << 20;     // bytes asked from the source per read
constexpr size_t kMaxElement = 64u << 20;   // largest single JSON element accepted
constexpr size_t kMaxDepth = 256;           // deepest nesting accepted inside an element
constexpr size_t kRecordsPerChunk = 16384;  // records per storage chunk (1 MiB)
constexpr size_t kPad = 16;  // readable bytes after the sentinel (word-at-a-time string scan)

/// Thrown by the element parsers when they need bytes past the end of the buffered data.
struct NeedMore {};

/// A parse error at a position in the buffer; converted to InputError with the absolute offset.
struct ParseError {
  const char* at;
  std::string what;
};

// ---- byte source: plain file or gzip stream ---------------------------------------------------

class Source {
 public:
  explicit Source(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) == 0) total_ = static_cast<uint64_t>(st.st_size);
    unsigned char magic[2] = {0, 0};
    ssize_t n = ::pread(fd_, magic, 2, 0);
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
      int dup = ::dup(fd_);
      gz_ = dup >= 0 ? gzdopen(dup, "rb") : nullptr;
      if (gz_ == nullptr) {
        if (dup >= 0) ::close(dup);
        Close();
        throw InputError(path + ": cannot open gzip stream");
      }
      gzbuffer(gz_, 1u << 18);
    }
  }
  ~Source() { Close(); }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  /// Reads up to n bytes; 0 at the end of the input. Throws InputError on I/O or gzip errors.
  size_t Read(char* dst, size_t n) {
    if (gz_ != nullptr) {
      int want = static_cast<int>(std::min<size_t>(n, 1u << 30));
      int got = gzread(gz_, dst, static_cast<unsigned>(want));
      if (got < 0) {
        int err = 0;
        const char* msg = gzerror(gz_, &err);
        throw InputError(path_ + ": gzip error: " + (msg != nullptr ? msg : "unknown"));
      }
      if (got == 0) {
        int err = 0;
        gzerror(gz_, &err);
        if (err != Z_OK && err != Z_STREAM_END)
          throw InputError(path_ + ": gzip error: corrupted or truncated stream");
      }
      return static_cast<size_t>(got);
    }
    for (;;) {
      ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) throw InputError(path_ + ": read error: " + std::strerror(errno));
    }
  }
  /// Bytes of the file consumed so far (compressed bytes for gzip), for progress.
  uint64_t Consumed() const {
    if (gz_ != nullptr) {
      z_off_t o = gzoffset(gz_);
      return o > 0 ? static_cast<uint64_t>(o) : 0;
    }
    off_t o = ::lseek(fd_, 0, SEEK_CUR);
    return o > 0 ? static_cast<uint64_t>(o) : 0;
  }
  uint64_t Total() const { return total_; }

 private:
  void Close() {
    if (gz_ != nullptr) gzclose(gz_);
    gz_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string path_;
  int fd_ = -1;
  gzFile gz_ = nullptr;
  uint64_t total_ = 0;
};

// ---- small JSON helpers over contiguous memory ------------------------------------------------

inline bool IsWs(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }
inline bool IsDigit(char ch) { return ch >= '0' && ch <= '9'; }

/// Skips string content up to the first quote, backslash or control byte, 8 bytes at a time.
/// Needs 8 readable bytes past any position before the sentinel (the buffer has kPad).
inline const char* ScanString(const char* q) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  for (;;) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    uint64_t quote = w ^ (kOnes * '"');
    uint64_t bslash = w ^ (kOnes * '\\');
    uint64_t hit =
        ((quote - kOnes) & ~quote) | ((bslash - kOnes) & ~bslash) | ((w - kOnes * 0x20) & ~w);
    hit &= kHigh;
    if (hit != 0) return q + (__builtin_ctzll(hit) >> 3);
    q += 8;
  }
}

/// A JSON number as scanned: its text and the pieces needed to convert it exactly.
struct Number {
  const char* begin = nullptr;
  const char* end = nullptr;
  bool negative = false;
  bool simple = true;          ///< no exponent and the integer part fits in 64 bits
  uint64_t int_part = 0;       ///< integer digits (valid when simple)
  const char* frac = nullptr;  ///< first fraction digit, null when none
  const char* frac_end = nullptr;
  bool has_exp = false;
};

struct Cursor {
  const char* p;
  const char* end;  // *end == '\0' (sentinel)

  [[noreturn]] void Fail(const char* at, std::string what) const {
    throw ParseError{at, std::move(what)};
  }
  void More() const { throw NeedMore{}; }

  void SkipWs() {
    for (;;) {
      while (IsWs(*p)) ++p;
      if (p == end) More();
      return;
    }
  }
  char Peek() {
    SkipWs();
    return *p;
  }
  void Expect(char ch, const char* what) {
    SkipWs();
    if (*p != ch) Fail(p, std::string("expected ") + what);
    ++p;
  }

  /// Parses a string (cursor on the opening quote). Returns a view into the buffer when the
  /// string has no escapes, else into `scratch` (decoded).
  std::string_view String(std::string& scratch) {
    const char* start = ++p;  // after the quote
    for (;;) {
      // Fast scan: stop on quote, backslash or any control byte (the sentinel is '\0').
      p = ScanString(p);
      if (*p == '"') {
        std::string_view v(start, static_cast<size_t>(p - start));
        ++p;
        return v;
      }
      if (p == end) More();
      if (*p == '\\') break;
      Fail(p, "control character in string");
    }
    // Slow path: decode escapes into scratch.
    scratch.assign(start, static_cast<size_t>(p - start));
    for (;;) {
      char ch = *p;
      if (ch == '"') {
        ++p;
        return scratch;
      }
      if (p == end) More();
      if (static_cast<unsigned char>(ch) < 0x20) Fail(p, "control character in string");
      if (ch != '\\') {
        scratch.push_back(ch);
        ++p;
        continue;
      }
      const char* esc = p;
      ++p;
      if (p == end) More();
      switch (*p) {
        case '"':
          scratch.push_back('"');
          break;
        case '\\':
          scratch.push_back('\\');
          break;
        case '/':
          scratch.push_back('/');
          break;
        case 'b':
          scratch.push_back('\b');
          break;
        case 'f':
          scratch.push_back('\f');
          break;
        case 'n':
          scratch.push_back('\n');
          break;
        case 'r':
          scratch.push_back('\r');
          break;
        case 't':
          scratch.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = Hex4(esc);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // High surrogate: a low one must follow, else U+FFFD.
            if (p + 1 >= end) More();
            if (p[1] == '\\') {
              if (p + 2 >= end) More();
              if (p[2] == 'u') {
                const char* save = p;
                p += 2;
                uint32_t lo = Hex4(p - 1);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                  cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                  p = save;
                  cp = 0xFFFD;
                }
              } else {
                cp = 0xFFFD;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = 0xFFFD;
          }
          AppendUtf8(scratch, cp);
          break;
        }
        default:
          Fail(esc, "invalid escape in string");
      }
      ++p;
    }
  }

  /// Reads the 4 hex digits after "\u" (p on 'u'); leaves p on the last digit.
  uint32_t Hex4(const char* esc) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      ++p;
      if (p >= end) More();
      char ch = *p;
      uint32_t d;
      if (ch >= '0' && ch <= '9') {
        d = static_cast<uint32_t>(ch - '0');
      } else if (ch >= 'a' && ch <= 'f') {
        d = static_cast<uint32_t>(ch - 'a' + 10);
      } else if (ch >= 'A' && ch <= 'F') {
        d = static_cast<uint32_t>(ch - 'A' + 10);
      } else {
        Fail(esc, "invalid \\u escape in string");
      }
      v = v * 16 + d;
    }
    return v;
  }

  static void AppendUtf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  /// Skips a string without decoding (cursor on the opening quote), validating escapes.
  void SkipString() {
    ++p;
    for (;;) {
      p = ScanString(p);
      if (*p == '"') {
        ++p;
        return;
      }
      if (p == end) More();
      if (*p != '\\') Fail(p, "control character in string");
      const char* esc = p;
      ++p;
      if (p == end) More();
      char ch = *p;
      if (ch == 'u') {
        Hex4(esc);
      } else if (ch != '"' && ch != '\\' && ch != '/' && ch != 'b' && ch != 'f' && ch != 'n' &&
                 ch != 'r' && ch != 't') {
        Fail(esc, "invalid escape in string");
      }
      ++p;
    }
  }

  /// Scans a number (cursor on '-' or a digit) following the JSON grammar.
  Number Num() {
    Number n;
    n.begin = p;
    if (*p == '-') {
      n.negative = true;
      ++p;
    }
    if (p == end) More();
    if (!IsDigit(*p)) Fail(n.begin, "invalid number");
    if (*p == '0') {
      ++p;
    } else {
      uint64_t v = 0;
      while (IsDigit(*p)) {
        auto d = static_cast<uint64_t>(*p - '0');
        if (v > (UINT64_MAX - d) / 10) n.simple = false;  // overflow: converted via strtod
        v = v * 10 + d;
        ++p;
      }
      n.int_part = v;
    }
    if (p == end) More();
    if (*p == '.') {
      ++p;
      n.frac = p;
      while (IsDigit(*p)) ++p;
      if (p == end) More();
      if (p == n.frac) Fail(n.begin, "invalid number");
      n.frac_end = p;
    }
    if (*p == 'e' || *p == 'E') {
      n.has_exp = true;
      n.simple = false;
      ++p;
      if (p == end) More();
      if (*p == '+' || *p == '-') ++p;
      if (p == end) More();
      const char* e = p;
      while (IsDigit(*p)) ++p;
      if (p == end) More();
      if (p == e) Fail(n.begin, "invalid number");
    }
    n.end = p;
    return n;
  }

  void Literal(std::string_view word) {
    const char* start = p;
    for (char ch : word) {
      if (p == end) More();
      if (*p != ch) Fail(start, "invalid literal");
      ++p;
    }
  }

  /// Skips any value, iteratively, validating its structure.
  void SkipValue() {
    // Bit stack of open containers: 1 = object, 0 = array.
    uint8_t stack[kMaxDepth];  // written before read: no initialisation needed
    size_t depth = 0;
    for (;;) {
      char ch = Peek();
      bool closed_any = false;
      switch (ch) {
        case '"':
          SkipString();
          break;
        case '{':
        case '[': {
          if (depth == kMaxDepth) Fail(p, "nesting too deep");
          stack[depth++] = ch == '{' ? 1 : 0;
          ++p;
          char next = Peek();
          if (next == (ch == '{' ? '}' : ']')) {
            ++p;
            --depth;
            break;
          }
          if (ch == '{') {
            if (next != '"') Fail(p, "expected object key");
            SkipString();
            Expect(':', "':' after object key");
          }
          continue;  // parse the first member's value
        }
        case 't':
          Literal("true");
          break;
        case 'f':
          Literal("false");
          break;
        case 'n':
          Literal("null");
          break;
        default:
          if (ch == '-' || IsDigit(ch)) {
            Num();
            break;
          }
          Fail(p, "unexpected character");
      }
      (void)closed_any;
      // After a value: close containers or move to the next member.
      for (;;) {
        if (depth == 0) return;
        char sep = Peek();
        bool is_obj = stack[depth - 1] == 1;
        if (sep == ',') {
          ++p;
          if (is_obj) {
            if (Peek() != '"') Fail(p, "expected object key");
            SkipString();
            Expect(':', "':' after object key");
          }
          break;  // next value
        }
        if (sep == (is_obj ? '}' : ']')) {
          ++p;
          --depth;
          continue;
        }
        Fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
  }
};

/// Converts a JSON number to int64 (rounding non-integers, saturating).
int64_t ToInt(const Number& n) {
  if (n.simple && n.frac == nullptr && n.int_part <= uint64_t{INT64_MAX}) {
    auto v = static_cast<int64_t>(n.int_part);
    return n.negative ? -v : v;
  }
  std::string text(n.begin, n.end);
  double d = std::strtod(text.c_str(), nullptr);
  if (!(d == d)) return 0;
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return std::llround(d);
}

/// Converts a number of microseconds to integer nanoseconds, exactly for plain decimals
/// (the first three fraction digits, rounded half away from zero by the fourth).
int64_t MicrosToNs(const Number& n) {
  if (n.simple && n.int_part < 9'000'000'000'000'000ULL / 1000) {
    uint64_t ns = n.int_part * 1000;
    if (n.frac != nullptr) {
      const char* f = n.frac;
      uint64_t scale = 100;
      for (int i = 0; i < 3; ++i, scale /= 10) {
        if (f < n.frac_end) ns += static_cast<uint64_t>(*f++ - '0') * scale;
      }
      if (f < n.frac_end && *f >= '5') ++ns;
    }
    auto v = static_cast<int64_t>(ns);
    return n.negative ? -v : v;
  }
  std::string text(n.begin, n.end);
  double d = std::strtod(text.c_str(), nullptr) * 1000.0;
  if (!(d == d)) return 0;
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return std::llround(d);
}

// ---- one trace event --------------------------------------------------------------------------

enum Has : uint32_t {
  kHasPid = 1u << 0,
  kHasTid = 1u << 1,
  kHasTs = 1u << 2,
  kHasDur = 1u << 3,
  kHasCorrelation = 1u << 4,
  kHasDevice = 1u << 5,
  kHasStream = 1u << 6,
  kHasCbid = 1u << 7,
  kHasBytes = 1u << 8,
  kHasMemBytes = 1u << 9,
  kHasMemDevice = 1u << 10,
  kHasAddr = 1u << 11,
  kHasDeviceType = 1u << 12,
};

struct RawEvent {
  std::string_view ph, cat, name;
  std::string_view arg_name;  ///< args.name (metadata events)
  uint32_t has = 0;
  bool pid_is_string = false;
  int64_t pid = 0, tid = 0;
  int64_t ts = 0, dur = 0;  ///< ns, relative to baseTimeNanoseconds
  int64_t correlation = 0, device = 0, stream = 0, cbid = 0, bytes = 0;
  int64_t regs = 0, smem = 0;
  int64_t mem_bytes = 0, mem_device = 0, addr = 0, device_type = 0;
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
};

// ---- record storage ---------------------------------------------------------------------------

/// Append-only record list in fixed chunks: no reallocation spike while reading a large file.
class RecordChunks {
 public:
  void Push(const Record& r) {
    if (chunks_.empty() || fill_ == kRecordsPerChunk) {
      chunks_.push_back(std::make_unique<Record[]>(kRecordsPerChunk));
      fill_ = 0;
    }
    chunks_.back()[fill_++] = r;
    ++size_;
  }
  size_t size() const { return size_; }
  /// Calls f(record) for each record in order, releasing chunks as they are consumed.
  template <class F>
  void Drain(F&& f) {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      size_t n = c + 1 == chunks_.size() ? fill_ : kRecordsPerChunk;
      for (size_t i = 0; i < n; ++i) f(chunks_[c][i]);
      chunks_[c].reset();
    }
    chunks_.clear();
    size_ = 0;
    fill_ = 0;
  }
  template <class F>
  void ForEach(F&& f) const {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      size_t n = c + 1 == chunks_.size() ? fill_ : kRecordsPerChunk;
      for (size_t i = 0; i < n; ++i) f(chunks_[c][i]);
    }
  }

 private:
  std::vector<std::unique_ptr<Record[]>> chunks_;
  size_t fill_ = 0;
  size_t size_ = 0;
};

struct PidData {
  int64_t pid = 0;
  RecordChunks records;
  std::map<std::string, std::string> meta;
};

CopyKind CopyKindFromName(std::string_view name) {
  if (name.find("HtoD") != std::string_view::npos) return CopyKind::HtoD;
  if (name.find("DtoH") != std::string_view::npos) return CopyKind::DtoH;
  if (name.find("DtoD") != std::string_view::npos) return CopyKind::DtoD;
  if (name.find("HtoH") != std::string_view::npos) return CopyKind::HtoH;
  if (name.find("PtoP") != std::string_view::npos) return CopyKind::PtoP;
  return CopyKind::Unknown;
}

MemKind MemKindFromName(std::string_view s) {
  if (s == "Pageable") return MemKind::Pageable;
  if (s == "Pinned") return MemKind::Pinned;
  if (s == "Device") return MemKind::Device;
  if (s == "Array") return MemKind::Array;
  if (s == "Managed") return MemKind::Managed;
  if (s == "DeviceStatic" || s == "Device Static") return MemKind::DeviceStatic;
  if (s == "ManagedStatic" || s == "Managed Static") return MemKind::ManagedStatic;
  return MemKind::Unknown;
}

/// "Memcpy HtoD (Pageable -> Device)" -> (Pageable, Device).
std::pair<MemKind, MemKind> MemKindsFromName(std::string_view name) {
  size_t open = name.find('(');
  size_t arrow = name.find("->");
  size_t close = name.rfind(')');
  if (open == std::string_view::npos || arrow == std::string_view::npos ||
      close == std::string_view::npos || !(open < arrow && arrow < close))
    return {MemKind::Unknown, MemKind::Unknown};
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  return {MemKindFromName(trim(name.substr(open + 1, arrow - open - 1))),
          MemKindFromName(trim(name.substr(arrow + 2, close - arrow - 2)))};
}

SyncKind SyncKindFromName(std::string_view name) {
  if (name == "Event Sync") return SyncKind::EventSynchronize;
  if (name == "Stream Wait Event") return SyncKind::StreamWaitEvent;
  if (name == "Stream Sync") return SyncKind::StreamSynchronize;
  if (name == "Context Sync") return SyncKind::ContextSynchronize;
  return SyncKind::Unknown;
}

OverheadKind OverheadKindFromName(std::string_view name) {
  if (name == "Buffer Flush") return OverheadKind::BufferFlush;
  if (name == "Instrumentation") return OverheadKind::Instrumentation;
  if (name == "Resource") return OverheadKind::Resource;
  if (name == "Runtime Triggered Module Loading")
    return OverheadKind::RuntimeTriggeredModuleLoading;
  if (name == "Lazy Function Loading") return OverheadKind::LazyFunctionLoading;
  if (name == "Command Buffer Full") return OverheadKind::CommandBufferFull;
  if (name == "Activity Buffer Request") return OverheadKind::ActivityBufferRequest;
  if (name == "UVM Activity Init") return OverheadKind::UvmActivityInit;
  if (name == "Driver Compiler") return OverheadKind::DriverCompiler;
  return OverheadKind::Unknown;
}

uint32_t U32(int64_t v) {
  if (v < 0) return 0;
  if (v > int64_t{UINT32_MAX}) return UINT32_MAX;
  return static_cast<uint32_t>(v);
}
uint16_t U16(int64_t v) {
  if (v < 0 || v >= kNoDevice) return kNoDevice;
  return static_cast<uint16_t>(v);
}

// ---- the reader -------------------------------------------------------------------------------

class ChromeReader {
 public:
  ChromeReader(const std::string& path, const ChromeReadOptions& opts)
      : path_(path), opts_(opts), src_(path) {
    buf_.resize(kReadChunk + 1 + kPad);
    buf_[0] = '\0';
    last_progress_ = std::chrono::steady_clock::now();
  }

  Run Read() {
    try {
      Document();
    } catch (const ParseError& e) {
      throw InputError(path_ + ": byte " + std::to_string(Offset(e.at)) + ": " + e.what);
    }
    if (progress_shown_) std::fprintf(stderr, "\n");
    return Finish();
  }

 private:
  // --- buffer management ---
  uint64_t Offset(const char* at) const { return base_ + static_cast<uint64_t>(at - buf_.data()); }

  /// Keeps [pos_, end_), reads more behind it. Returns false at the end of the input.
  bool Fill() {
    if (eof_) return false;
    size_t keep = end_ - pos_;
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, keep);
      base_ += pos_;
      pos_ = 0;
      end_ = keep;
    }
    size_t room = buf_.size() - 1 - kPad - end_;
    if (room < kReadChunk / 2) {
      if (keep > kMaxElement)
        throw InputError(path_ + ": byte " + std::to_string(base_) +
                         ": JSON element larger than 64 MiB");
      buf_.resize(std::max(buf_.size() * 2, end_ + kReadChunk + 1 + kPad));
      room = buf_.size() - 1 - kPad - end_;
    }
    size_t got = src_.Read(buf_.data() + end_, room);
    if (got == 0) eof_ = true;
    end_ += got;
    buf_[end_] = '\0';
    Progress();
    return got > 0;
  }

  void Progress() {
    if (!opts_.show_progress) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_progress_ < std::chrono::milliseconds(500)) return;
    last_progress_ = now;
    progress_shown_ = true;
    std::fprintf(stderr, "\rreading %s: %.0f / %.0f MB", path_.c_str(),
                 static_cast<double>(src_.Consumed()) / 1e6,
                 static_cast<double>(src_.Total()) / 1e6);
    std::fflush(stderr);
  }

  /// Runs `f` on a cursor at the current position; on NeedMore, reads more and retries. On
  /// success the position moves past what `f` consumed.
  template <class F>
  auto Step(F&& f) {
    for (;;) {
      Cursor c{buf_.data() + pos_, buf_.data() + end_};
      try {
        if constexpr (std::is_void_v<decltype(f(c))>) {
          f(c);
          pos_ = static_cast<size_t>(c.p - buf_.data());
          return;
        } else {
          auto r = f(c);
          pos_ = static_cast<size_t>(c.p - buf_.data());
          return r;
        }
      } catch (const NeedMore&) {
        if (!Fill()) {
          throw InputError(path_ + ": byte " + std::to_string(base_ + end_) +
                           ": unexpected end of input (truncated file?)");
        }
      }
    }
  }

  // --- document structure ---
  void Document() {
    Fill();
    if (end_ == 0) throw InputError(path_ + ": empty file");
    if (end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
    char first = Step([](Cursor& c) { return c.Peek(); });
    if (first == '[') {
      top_is_array_ = true;
      EventArray();
    } else if (first == '{') {
      TopObject();
    } else {
      Step([](Cursor& c) { c.Fail(c.p, "not a Chrome trace: expected '{' or '['"); });
    }
    // Only whitespace may follow.
    for (;;) {
      while (pos_ < end_ && IsWs(buf_[pos_])) ++pos_;
      if (pos_ < end_) {
        throw InputError(path_ + ": byte " + std::to_string(Offset(buf_.data() + pos_)) +
                         ": unexpected data after the end of the JSON document");
      }
      if (!Fill()) break;
    }
    if (!saw_events_ && !top_is_array_)
      throw InputError(path_ + ": not a Chrome trace: no \"traceEvents\" array");
  }

  void TopObject() {
    Step([](Cursor& c) { c.Expect('{', "'{'"); });
    bool first = true;
    for (;;) {
      // Key (or the end of the object).
      std::string key;
      bool done = Step([&](Cursor& c) {
        char ch = c.Peek();
        if (ch == '}') {
          ++c.p;
          return true;
        }
        if (!first) {
          if (ch != ',') c.Fail(c.p, "expected ',' or '}' in the top-level object");
          ++c.p;
          ch = c.Peek();
        }
        if (ch != '"') c.Fail(c.p, "expected a key in the top-level object");
        key = std::string(c.String(key_scratch_));
        c.Expect(':', "':' after a key");
        c.SkipWs();
        return false;
      });
      if (done) return;
      first = false;
      if (key == "traceEvents") {
        if (Step([](Cursor& c) { return c.Peek(); }) != '[')
          Step([](Cursor& c) { c.Fail(c.p, "\"traceEvents\" is not an array"); });
        saw_events_ = true;
        EventArray();
      } else if (key == "baseTimeNanoseconds") {
        base_ns_ = Step([](Cursor& c) {
          char ch = c.Peek();
          if (ch != '-' && !IsDigit(ch)) c.Fail(c.p, "\"baseTimeNanoseconds\" is not a number");
          return ToInt(c.Num());
        });
      } else if (key == "deviceProperties") {
        DeviceProperties();
      } else if (key == "distributedInfo") {
        Step([&](Cursor& c) {
          auto kv = FlatObject(c, "\"distributedInfo\"");
          for (auto& [k, v] : kv) {
            top_meta_["distributed." + k] = v;
            if (k == "rank") rank_ = static_cast<int>(std::strtol(v.c_str(), nullptr, 10));
          }
        });
      } else {
        // Other scalars are kept as meta "chrome.<key>"; anything else is skipped.
        Step([&](Cursor& c) {
          char ch = c.Peek();
          if (ch == '"') {
            top_meta_["chrome." + key] = std::string(c.String(value_scratch_));
          } else if (ch == '-' || IsDigit(ch)) {
            Number n = c.Num();
            top_meta_["chrome." + key] = std::string(n.begin, n.end);
          } else {
            c.SkipValue();
          }
        });
      }
    }
  }

  /// Parses an object of scalars (nested values skipped) into key/value text pairs.
  std::vector<std::pair<std::string, std::string>> FlatObject(Cursor& c, const char* what) {
    std::vector<std::pair<std::string, std::string>> out;
    if (c.Peek() != '{') c.Fail(c.p, std::string(what) + " is not an object");
    ++c.p;
    if (c.Peek() == '}') {
      ++c.p;
      return out;
    }
    for (;;) {
      if (c.Peek() != '"') c.Fail(c.p, "expected object key");
      std::string k(c.String(key_scratch_));
      c.Expect(':', "':' after object key");
      char ch = c.Peek();
      if (ch == '"') {
        out.emplace_back(std::move(k), std::string(c.String(value_scratch_)));
      } else if (ch == '-' || IsDigit(ch)) {
        Number n = c.Num();
        out.emplace_back(std::move(k), std::string(n.begin, n.end));
      } else {
        c.SkipValue();
      }
      char sep = c.Peek();
      ++c.p;
      if (sep == '}') return out;
      if (sep != ',') c.Fail(c.p - 1, "expected ',' or '}'");
    }
  }

  void DeviceProperties() {
    Step([&](Cursor& c) {
      if (c.Peek() != '[') c.Fail(c.p, "\"deviceProperties\" is not an array");
      ++c.p;
      if (c.Peek() == ']') {
        ++c.p;
        return;
      }
      size_t index = 0;
      for (;;) {
        auto kv = FlatObject(c, "a \"deviceProperties\" element");
        std::string id = std::to_string(index), major, minor;
        for (auto& [k, v] : kv)
          if (k == "id") id = v;
        std::string pre = "device." + id + ".";
        for (auto& [k, v] : kv) {
          if (k == "name") device_meta_[pre + "name"] = v;
          if (k == "numSms") device_meta_[pre + "sm_count"] = v;
          if (k == "totalGlobalMem") device_meta_[pre + "memory_bytes"] = v;
          if (k == "computeMajor") major = v;
          if (k == "computeMinor") minor = v;
        }
        if (!major.empty()) device_meta_[pre + "cc"] = major + "." + (minor.empty() ? "0" : minor);
        ++index;
        char sep = c.Peek();
        ++c.p;
        if (sep == ']') return;
        if (sep != ',') c.Fail(c.p - 1, "expected ',' or ']'");
      }
    });
  }

  void EventArray() {
    Step([](Cursor& c) { c.Expect('[', "'['"); });
    if (Step([](Cursor& c) {
          if (c.Peek() == ']') {
            ++c.p;
            return true;
          }
          return false;
        }))
      return;
    for (;;) {
      // One element plus its separator, atomically (re-parsed whole if the buffer runs out).
      bool last = Step([&](Cursor& c) {
        ParseEvent(c);
        char sep = c.Peek();
        if (sep == ']') {
          ++c.p;
          return true;
        }
        if (sep != ',') c.Fail(c.p, "expected ',' or ']' after a trace event");
        ++c.p;
        return false;
      });
      Convert();
      if (last) return;
    }
  }

  static int64_t IntValue(Cursor& c, const char* field) {
    char ch = c.Peek();
    if (ch != '-' && !IsDigit(ch)) {
      if (ch == 'n') {  // null: treated as absent (0)
        c.Literal("null");
        return 0;
      }
      c.Fail(c.p, std::string("\"") + field + "\" is not a number");
    }
    return ToInt(c.Num());
  }

  std::string_view StrValue(Cursor& c, const char* field, std::string& scratch) {
    if (c.Peek() != '"') c.Fail(c.p, std::string("\"") + field + "\" is not a string");
    return c.String(scratch);
  }

  void Dim(Cursor& c, std::array<int64_t, 3>& out, const char* field) {
    if (c.Peek() != '[') c.Fail(c.p, std::string("\"") + field + "\" is not an array");
    ++c.p;
    out = {1, 1, 1};
    if (c.Peek() == ']') {
      ++c.p;
      return;
    }
    for (size_t i = 0;; ++i) {
      int64_t v = IntValue(c, field);
      if (i < 3) out[i] = v;
      char sep = c.Peek();
      ++c.p;
      if (sep == ']') return;
      if (sep != ',') c.Fail(c.p - 1, "expected ',' or ']'");
    }
  }

  void ParseArgs(Cursor& c) {
    if (c.Peek() != '{') {
      c.SkipValue();  // args of another type: ignored
      return;
    }
    ++c.p;
    if (c.Peek() == '}') {
      ++c.p;
      return;
    }
    RawEvent& e = ev_;
    for (;;) {
      if (c.Peek() != '"') c.Fail(c.p, "expected object key");
      std::string_view k = c.String(key_scratch_);
      c.Expect(':', "':' after object key");
      c.SkipWs();
      // Dispatch on the key; most args (shapes, types...) are skipped unparsed.
      if (k == "correlation") {
        e.correlation = IntValue(c, "correlation");
        e.has |= kHasCorrelation;
      } else if (k == "stream") {
        e.stream = IntValue(c, "stream");
        e.has |= kHasStream;
      } else if (k == "device") {
        e.device = IntValue(c, "device");
        e.has |= kHasDevice;
      } else if (k == "bytes") {
        e.bytes = IntValue(c, "bytes");
        e.has |= kHasBytes;
      } else if (k == "cbid") {
        e.cbid = IntValue(c, "cbid");
        e.has |= kHasCbid;
      } else if (k == "grid") {
        Dim(c, e.grid, "grid");
      } else if (k == "block") {
        Dim(c, e.block, "block");
      } else if (k == "registers per thread") {
        e.regs = IntValue(c, "registers per thread");
      } else if (k == "shared memory") {
        e.smem = IntValue(c, "shared memory");
      } else if (k == "name" && c.Peek() == '"') {
        e.arg_name = c.String(arg_name_scratch_);
      } else if (k == "Bytes") {
        e.mem_bytes = IntValue(c, "Bytes");
        e.has |= kHasMemBytes;
      } else if (k == "Device Id") {
        e.mem_device = IntValue(c, "Device Id");
        e.has |= kHasMemDevice;
      } else if (k == "Device Type") {
        e.device_type = IntValue(c, "Device Type");
        e.has |= kHasDeviceType;
      } else if (k == "Addr") {
        e.addr = IntValue(c, "Addr");
        e.has |= kHasAddr;
      } else {
        c.SkipValue();
      }
      char sep = c.Peek();
      ++c.p;
      if (sep == '}') return;
      if (sep != ',') c.Fail(c.p - 1, "expected ',' or '}'");
    }
  }

  /// Parses one element of traceEvents into ev_.
  void ParseEvent(Cursor& c) {
    ev_ = RawEvent{};
    if (c.Peek() != '{') c.Fail(c.p, "trace event is not an object");
    event_at_ = c.p;
    ++c.p;
    if (c.Peek() == '}') {
      ++c.p;
      return;
    }
    RawEvent& e = ev_;
    for (;;) {
      if (c.Peek() != '"') c.Fail(c.p, "expected object key");
      std::string_view k = c.String(key_scratch_);
      c.Expect(':', "':' after object key");
      c.SkipWs();
      if (k.size() == 2 && k == "ph") {
        e.ph = StrValue(c, "ph", ph_scratch_);
      } else if (k == "ts" || k == "dur") {
        char ch = c.Peek();
        if (ch != '-' && !IsDigit(ch)) c.Fail(c.p, "\"" + std::string(k) + "\" is not a number");
        int64_t v = MicrosToNs(c.Num());
        if (k == "ts") {
          e.ts = v;
          e.has |= kHasTs;
        } else {
          e.dur = v;
          e.has |= kHasDur;
        }
      } else if (k == "pid" || k == "tid") {
        char ch = c.Peek();
        int64_t v = 0;
        bool str = false;
        if (ch == '"') {
          c.SkipString();  // named tracks ("Spans", "Traces"): not kprof data
          str = true;
        } else {
          v = IntValue(c, k == "pid" ? "pid" : "tid");
        }
        if (k == "pid") {
          e.pid = v;
          e.pid_is_string = str;
          e.has |= kHasPid;
        } else {
          e.tid = v;
          e.has |= kHasTid;
        }
      } else if (k == "cat") {
        e.cat = StrValue(c, "cat", cat_scratch_);
      } else if (k == "name") {
        e.name = StrValue(c, "name", name_scratch_);
      } else if (k == "args") {
        ParseArgs(c);
      } else {
        c.SkipValue();
      }
      char sep = c.Peek();
      ++c.p;
      if (sep == '}') return;
      if (sep != ',') c.Fail(c.p - 1, "expected ',' or '}' in a trace event");
    }
  }

  // --- conversion ---
  uint32_t Intern(std::string_view s) {
    if (s.empty()) return 0;
    auto it = intern_.find(s);
    if (it != intern_.end()) return it->second;
    uint32_t id = strings_.Intern(s);
    const std::string& stored = arena_.emplace_back(s);
    intern_.emplace(std::string_view(stored), id);
    return id;
  }

  PidData& Cpu(int64_t pid) {
    if (last_cpu_ != nullptr && last_cpu_->pid == pid) return *last_cpu_;
    for (auto& p : cpu_) {
      if (p->pid == pid) return *(last_cpu_ = p.get());
    }
    cpu_.push_back(std::make_unique<PidData>());
    cpu_.back()->pid = pid;
    return *(last_cpu_ = cpu_.back().get());
  }

  [[noreturn]] void EventError(const std::string& what) { throw ParseError{event_at_, what}; }

  void Convert() {
    const RawEvent& e = ev_;
    if (e.ph.size() != 1) {
      if (e.ph.empty() && !(e.has & kHasTs) && e.cat.empty() && e.name.empty()) return;  // {}
      if (e.ph.empty()) EventError("trace event without \"ph\"");
      return;  // unknown phases are ignored
    }
    const char ph = e.ph[0];
    if (ph == 'M') {
      if (e.pid_is_string || !(e.has & kHasPid)) return;
      if (e.name == "process_name" && !e.arg_name.empty()) {
        pending_meta_.push_back({e.pid, "process_name", std::string(e.arg_name)});
      } else if (e.name == "thread_name" && !e.arg_name.empty()) {
        pending_meta_.push_back(
            {e.pid, "thread." + std::to_string(e.tid) + ".name", std::string(e.arg_name)});
      }
      return;
    }
    if (ph != 'X' && ph != 'i' && ph != 'I') return;  // flows (ac2g), counters, B/E: ignored
    if (e.pid_is_string) return;                      // "Spans"/"Traces" tracks
    if (!(e.has & kHasTs)) EventError("trace event without \"ts\"");
    if (e.dur < 0) EventError("negative \"dur\"");

    Record r;
    r.start_ns = static_cast<uint64_t>(e.ts);  // relative; the base is added at the end
    r.end_ns = static_cast<uint64_t>(e.dur > INT64_MAX - e.ts ? INT64_MAX : e.ts + e.dur);
    r.correlation = U32(e.correlation);
    r.device = kNoDevice;

    if (ph != 'X') {
      if (e.cat == "cpu_instant_event" && e.name == "[memory]" && (e.has & kHasMemBytes) &&
          (!(e.has & kHasDeviceType) || e.device_type == 1) && e.mem_bytes != 0) {
        r.kind = static_cast<uint8_t>(e.mem_bytes > 0 ? RecordKind::MemAlloc : RecordKind::MemFree);
        r.end_ns = r.start_ns;
        r.device = U16(e.mem_device);
        r.bytes = static_cast<uint64_t>(e.mem_bytes > 0 ? e.mem_bytes : -e.mem_bytes);
        auto addr = static_cast<uint64_t>(e.addr);
        r.a = static_cast<uint32_t>(addr);
        r.b = static_cast<uint32_t>(addr >> 32);
        r.c = static_cast<uint32_t>(MemKind::Device);
        r.tid = static_cast<uint32_t>(e.tid);
        r.correlation = 0;
        Cpu(e.pid).records.Push(r);
      }
      return;
    }

    std::string_view cat = e.cat;
    enum class Place { Cpu, Gpu, Linked, Unowned } place = Place::Cpu;
    if (cat == "kernel") {
      r.kind = static_cast<uint8_t>(RecordKind::Kernel);
      SetKernelLaunch(r, {U32(e.grid[0]), U32(e.grid[1]), U32(e.grid[2])},
                      {U32(e.block[0]), U32(e.block[1]), U32(e.block[2])}, U32(e.regs),
                      U32(e.smem));
      place = Place::Gpu;
    } else if (cat == "gpu_memcpy") {
      r.kind = static_cast<uint8_t>(RecordKind::Memcpy);
      r.flags = static_cast<uint8_t>(CopyKindFromName(e.name));
      auto [src, dst] = MemKindsFromName(e.name);
      r.a = static_cast<uint32_t>(src);
      r.b = static_cast<uint32_t>(dst);
      r.bytes = static_cast<uint64_t>(std::max<int64_t>(e.bytes, 0));
      place = Place::Gpu;
    } else if (cat == "gpu_memset") {
      r.kind = static_cast<uint8_t>(RecordKind::Memset);
      auto [k, unused] = MemKindsFromName(e.name);
      (void)unused;
      // "Memset (Device)": one kind in parentheses.
      size_t open = e.name.find('('), close = e.name.rfind(')');
      if (open != std::string_view::npos && close != std::string_view::npos && open < close)
        k = MemKindFromName(e.name.substr(open + 1, close - open - 1));
      r.b = static_cast<uint32_t>(k);
      r.bytes = static_cast<uint64_t>(std::max<int64_t>(e.bytes, 0));
      place = Place::Gpu;
    } else if (cat == "gpu_user_annotation") {
      r.kind = static_cast<uint8_t>(RecordKind::GpuRange);
      r.b = Intern("user_annotation");
      place = Place::Gpu;
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      r.kind = static_cast<uint8_t>(cat == "cuda_runtime" ? RecordKind::RuntimeApi
                                                          : RecordKind::DriverApi);
      r.a = U32(e.cbid);
      r.tid = static_cast<uint32_t>(e.tid);
    } else if (cat == "cuda_sync") {
      r.kind = static_cast<uint8_t>(RecordKind::Sync);
      r.flags = static_cast<uint8_t>(SyncKindFromName(e.name));
      r.a = U32(e.stream);
      r.tid = 0;
      if (e.has & kHasDevice) r.device = U16(e.device);
      place = Place::Linked;
    } else if (cat == "cpu_op" || cat == "user_annotation") {
      r.kind = static_cast<uint8_t>(RecordKind::Range);
      r.b = cat == "cpu_op" ? DomainCpuOp() : DomainUserAnnotation();
      r.tid = static_cast<uint32_t>(e.tid);
    } else if (cat == "overhead") {
      r.kind = static_cast<uint8_t>(RecordKind::Overhead);
      r.a = static_cast<uint32_t>(OverheadKindFromName(e.name));
      r.tid = static_cast<uint32_t>(e.tid);
      place = e.pid < 0 ? Place::Unowned : Place::Cpu;
    } else {
      return;  // python_function, Trace spans, unknown categories: not used by kprof
    }
    r.name = Intern(e.name);

    if (place == Place::Gpu) {
      r.device = U16((e.has & kHasDevice) ? e.device : e.pid);
      r.tid = U32((e.has & kHasStream) ? e.stream : e.tid);
      gpu_.Push(r);
      return;
    }
    if (place == Place::Unowned) {
      gpu_.Push(r);
      return;
    }
    if (place == Place::Linked) {
      // A sync drawn on a CPU process's track stays there; one on a device track is linked by
      // correlation like GPU work. Which pids are CPU processes is only known at the end.
      linked_.push_back({e.pid, r});
      return;
    }
    Cpu(e.pid).records.Push(r);
  }

  uint32_t DomainCpuOp() {
    if (cpu_op_id_ == 0) cpu_op_id_ = Intern("cpu_op");
    return cpu_op_id_;
  }
  uint32_t DomainUserAnnotation() {
    if (user_annotation_id_ == 0) user_annotation_id_ = Intern("user_annotation");
    return user_annotation_id_;
  }

  uint64_t Absolute(uint64_t rel) const {
    int64_t v = static_cast<int64_t>(rel);
    if (v < 0 && base_ns_ < -v) return 0;
    return static_cast<uint64_t>(v + base_ns_);
  }

  Run Finish() {
    // Syncs on a CPU process's track go to it; the others are handled like GPU work.
    for (auto& [pid, r] : linked_) {
      bool cpu_pid = false;
      for (auto& p : cpu_)
        if (p->pid == pid) cpu_pid = true;
      if (cpu_pid)
        Cpu(pid).records.Push(r);
      else
        gpu_.Push(r);
    }
    linked_.clear();
    linked_.shrink_to_fit();

    Run run;
    if (cpu_.empty()) Cpu(0);  // GPU-only or empty trace: one anonymous process
    const size_t np = cpu_.size();

    // Owner of each GPU record: the only process, or the one whose API call has the same
    // correlation id (the latest such call starting no later than the GPU work), else the first.
    std::vector<uint16_t> owner;
    if (np > 1) {
      std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint16_t>>> by_corr;
      for (size_t i = 0; i < np; ++i) {
        cpu_[i]->records.ForEach([&](const Record& r) {
          if (r.correlation != 0 &&
              (r.Kind() == RecordKind::RuntimeApi || r.Kind() == RecordKind::DriverApi))
            by_corr[r.correlation].emplace_back(r.start_ns, static_cast<uint16_t>(i));
        });
      }
      owner.reserve(gpu_.size());
      gpu_.ForEach([&](const Record& r) {
        uint16_t o = 0;
        auto it = r.correlation != 0 ? by_corr.find(r.correlation) : by_corr.end();
        if (it != by_corr.end()) {
          const auto& cands = it->second;
          o = cands.front().second;
          int64_t best = INT64_MIN;
          for (auto& [t, idx] : cands) {
            auto ts = static_cast<int64_t>(t);
            if (ts <= static_cast<int64_t>(r.start_ns) && ts > best) {
              best = ts;
              o = idx;
            }
          }
        }
        owner.push_back(o);
      });
    }

    std::vector<size_t> counts(np, 0);
    for (size_t i = 0; i < np; ++i) counts[i] = cpu_[i]->records.size();
    if (np == 1) {
      counts[0] += gpu_.size();
    } else {
      for (uint16_t o : owner) ++counts[o];
    }

    run.processes.resize(np);
    for (size_t i = 0; i < np; ++i) {
      ProcessTrace& p = run.processes[i];
      p.source = path_;
      p.pid = static_cast<uint32_t>(cpu_[i]->pid);
      p.rank = rank_;
      p.complete = true;
      p.records.reserve(counts[i]);
      cpu_[i]->records.Drain([&](const Record& r) { p.records.push_back(r); });
    }
    size_t gi = 0;
    gpu_.Drain([&](const Record& r) {
      size_t o = np == 1 ? 0 : owner[gi];
      ++gi;
      run.processes[o].records.push_back(r);
    });
    owner.clear();
    owner.shrink_to_fit();

    for (size_t i = 0; i < np; ++i) {
      ProcessTrace& p = run.processes[i];
      for (Record& r : p.records) {
        r.start_ns = Absolute(r.start_ns);
        r.end_ns = Absolute(r.end_ns);
      }
      p.stats.records_written = p.records.size();
      p.meta = top_meta_;
      for (auto& [k, v] : device_meta_) p.meta[k] = v;
      p.meta["format"] = "chrome";
      for (auto& m : pending_meta_)
        if (m.pid == cpu_[i]->pid) p.meta[m.key] = m.value;
      // The string table is shared by all processes (ids are the same); the last one takes it.
      if (i + 1 == np)
        p.strings = std::move(strings_);
      else
        p.strings = strings_;
    }
    return run;
  }

  struct MetaEntry {
    int64_t pid;
    std::string key, value;
  };
  struct LinkedRecord {
    int64_t pid;
    Record r;
  };

  std::string path_;
  ChromeReadOptions opts_;
  Source src_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  uint64_t base_ = 0;  // absolute offset of buf_[0]
  bool eof_ = false;
  bool saw_events_ = false;
  bool top_is_array_ = false;
  std::chrono::steady_clock::time_point last_progress_;
  bool progress_shown_ = false;

  std::string key_scratch_, value_scratch_, ph_scratch_, cat_scratch_, name_scratch_,
      arg_name_scratch_;
  RawEvent ev_;
  const char* event_at_ = nullptr;

  int64_t base_ns_ = 0;
  int rank_ = -1;
  std::map<std::string, std::string> top_meta_, device_meta_;
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

}  // namespace

Run ReadChromeTrace(const std::string& path, const ChromeReadOptions& opts) {
  ChromeReader reader(path, opts);
  return reader.Read();
}

}  // namespace kprof
