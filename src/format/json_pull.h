// Streaming JSON pull parser over a file (plain or gzip) with bounded memory. It knows JSON only:
// the Chrome trace reader (chrome_reader.cpp) is built on it.
//
// Design: the input is read in chunks into one buffer. A Cursor walks contiguous memory and never
// builds a tree of the document; callers pull tokens and keep only what they need. The document
// is consumed in steps (Stream::Step): a step parses one piece (an array element, an object
// member). When a step reaches the end of the buffered data it throws NeedMore; the stream then
// keeps the step's bytes, reads more input behind them and runs the step again. This happens once
// per buffer refill, so its cost is negligible, and parsing code stays simple (no suspended
// state). A '\0' sentinel after the data lets the hot loops (strings, digits, whitespace) run
// without bounds checks: they stop at the sentinel and then test for the end.
//
// Hostile input: every error is an InputError "PATH: byte N: problem"; nesting is tracked with an
// explicit bounded stack (no recursion); a step larger than StreamOptions::max_element is refused.
// Bytes inside strings are passed through as they are (UTF-8 is not validated), as JSON text is
// only ever split on ASCII bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kprof/progress.h"

struct gzFile_s;

namespace kprof::json {

/// Thrown by cursors when they need bytes past the end of the buffered data.
struct NeedMore {};

/// A parse error at a position in the buffer; the stream reports it with the absolute offset.
struct ParseError {
  const char* at;
  std::string what;
};

inline bool IsWs(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }
inline bool IsDigit(char ch) { return ch >= '0' && ch <= '9'; }

/// Readable bytes after the sentinel, so that ScanString may read a whole word past any byte.
constexpr size_t kPad = 16;

/// Skips string content up to the first quote, backslash or control byte, 8 bytes at a time.
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

  std::string_view Text() const { return {begin, static_cast<size_t>(end - begin)}; }
};

/// The number through strtod, times `scale`, rounded and saturated to int64 (NaN gives 0).
int64_t RoundScaled(const Number& n, double scale);

/// The number as int64: non-integers rounded half away from zero, out-of-range values saturated.
inline int64_t ToInt(const Number& n) {
  if (n.simple && n.frac == nullptr && n.int_part <= uint64_t{INT64_MAX}) {
    auto v = static_cast<int64_t>(n.int_part);
    return n.negative ? -v : v;
  }
  return RoundScaled(n, 1.0);
}

/// The number times 1000 as int64, exact for plain decimals (the first three fraction digits,
/// rounded half away from zero by the fourth); other forms go through strtod.
inline int64_t ToThousandths(const Number& n) {
  if (n.simple && n.int_part < 9'000'000'000'000'000ULL / 1000) {
    uint64_t v = n.int_part * 1000;
    if (n.frac != nullptr) {
      const char* f = n.frac;
      uint64_t scale = 100;
      for (int i = 0; i < 3; ++i, scale /= 10) {
        if (f < n.frac_end) v += static_cast<uint64_t>(*f++ - '0') * scale;
      }
      if (f < n.frac_end && *f >= '5') ++v;
    }
    auto s = static_cast<int64_t>(v);
    return n.negative ? -s : s;
  }
  return RoundScaled(n, 1000.0);
}

/// Pulls tokens from buffered data [p, end) followed by a '\0' sentinel and kPad readable bytes.
/// Every method that may run past the data throws NeedMore; malformed JSON throws ParseError.
struct Cursor {
  const char* p;
  const char* end;  // *end == '\0' (sentinel)

  /// Deepest nesting SkipValue accepts.
  static constexpr size_t kMaxDepth = 256;

  [[noreturn]] void Fail(const char* at, std::string what) const {
    throw ParseError{at, std::move(what)};
  }
  [[noreturn]] void More() const { throw NeedMore{}; }

  void SkipWs() {
    while (IsWs(*p)) ++p;
    if (p == end) More();
  }
  /// The next non-whitespace byte, not consumed.
  char Peek() {
    SkipWs();
    return *p;
  }
  void Expect(char ch, const char* what) {
    SkipWs();
    if (*p != ch) Fail(p, std::string("expected ") + what);
    ++p;
  }
  /// Consumes `close` when it is next (an empty object or array).
  bool Close(char close) {
    if (Peek() != close) return false;
    ++p;
    return true;
  }
  /// Consumes a ',' (false: another value follows) or `close` (true); else fails with `error`.
  bool Next(char close, const char* error) {
    if (Close(close)) return true;
    if (*p != ',') Fail(p, error);
    ++p;
    return false;
  }

  /// Parses a string (cursor on the opening quote). Returns a view into the buffer when the
  /// string has no escapes, else into `scratch` (decoded).
  std::string_view String(std::string& scratch) {
    const char* start = ++p;
    p = ScanString(p);
    if (*p == '"') return {start, static_cast<size_t>(p++ - start)};
    scratch.assign(start, static_cast<size_t>(p - start));
    StringRest(&scratch);
    return scratch;
  }
  /// Skips a string without decoding it (cursor on the opening quote), validating its escapes.
  void SkipString() {
    p = ScanString(p + 1);
    if (*p == '"') {
      ++p;
      return;
    }
    StringRest(nullptr);
  }
  /// Reads an object key and the ':' after it (cursor before the key).
  std::string_view Key(std::string& scratch) {
    if (Peek() != '"') Fail(p, "expected object key");
    std::string_view key = String(scratch);
    Expect(':', "':' after object key");
    return key;
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
      n.frac = ++p;
      DigitsAfter(n.begin);
      n.frac_end = p;
    }
    if (*p == 'e' || *p == 'E') {
      n.simple = false;
      ++p;
      if (p == end) More();
      if (*p == '+' || *p == '-') ++p;
      DigitsAfter(n.begin);
    }
    n.end = p;
    return n;
  }

  /// Consumes `word` (true, false, null).
  void Literal(std::string_view word) {
    const char* start = p;
    for (char ch : word) {
      if (p == end) More();
      if (*p != ch) Fail(start, "invalid literal");
      ++p;
    }
  }

  /// Skips any value, iteratively, validating its structure.
  void SkipValue();

  /// Parses the members of an object (cursor on '{'): member(key) is called with the cursor
  /// before the member's value, which it must consume. `sep_error` reports a bad separator.
  template <class F>
  void Object(std::string& key_scratch, const char* sep_error, F&& member) {
    ++p;
    if (Close('}')) return;
    do {
      member(Key(key_scratch));
    } while (!Next('}', sep_error));
  }
  /// Parses the elements of an array (cursor on '['): element(index) must consume one value.
  template <class F>
  void Array(const char* sep_error, F&& element) {
    ++p;
    if (Close(']')) return;
    size_t index = 0;
    do {
      element(index++);
    } while (!Next(']', sep_error));
  }

 private:
  /// One or more digits (cursor on the first); `number` is where the number began.
  void DigitsAfter(const char* number) {
    const char* first = p;
    while (IsDigit(*p)) ++p;
    if (p == end) More();
    if (p == first) Fail(number, "invalid number");
  }
  /// Skips an object key and the ':' after it.
  void SkipKey();
  /// The rest of a string after a backslash or control byte (cursor on it), appended to `out`
  /// decoded when it is not null.
  void StringRest(std::string* out);
  /// One escape sequence (cursor on the backslash), appended to `out` when it is not null.
  void Escape(std::string* out);
  /// The 4 hex digits after "\u" (cursor on 'u'); leaves the cursor on the last digit.
  uint32_t Hex4(const char* esc);
};

/// Limits of a Stream; the defaults are the product's, tests shrink them.
struct StreamOptions {
  size_t chunk = 4u << 20;  ///< bytes asked from the file per read
  /// Largest step accepted. Checked when the buffer must grow, which it does by doubling: a
  /// step of up to about twice this size may pass.
  size_t max_element = 64u << 20;
  bool show_progress = false;  ///< "reading PATH: N / TOTAL MB" on stderr every 0.5 s
};

/// Byte source: a plain file or a gzip stream (recognised by its magic bytes).
class Source {
 public:
  explicit Source(const std::string& path);
  ~Source();
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  /// Reads up to n bytes; 0 at the end of the input. Throws InputError on I/O or gzip errors.
  size_t Read(char* dst, size_t n);
  /// Bytes of the file consumed so far (compressed bytes for gzip), for progress.
  uint64_t Consumed() const;
  uint64_t Total() const { return total_; }

 private:
  void Close();
  std::string path_;
  int fd_ = -1;
  gzFile_s* gz_ = nullptr;
  uint64_t total_ = 0;
};

/// A JSON document read from a file, step by step, in bounded memory.
class Stream {
 public:
  explicit Stream(const std::string& path, const StreamOptions& opts = {});

  /// Runs `document` (which parses the whole document through this stream), turning parse
  /// errors into InputError "PATH: byte N: what" and ending the progress line.
  template <class F>
  void Parse(F&& document) {
    try {
      document();
    } catch (const ParseError& e) {
      Error(Offset(e.at), e.what);
    }
    progress_.Finish();
  }

  /// Reads the first bytes and skips a UTF-8 byte order mark. False when the input is empty.
  bool Begin();
  /// Checks that only whitespace follows the document.
  void End();

  /// Runs f(cursor) at the current position; on NeedMore, reads more and runs it again. On
  /// success the position moves past what f consumed and f's result is returned.
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
        if (!Fill()) Error(base_ + end_, "unexpected end of input (truncated file?)");
      }
    }
  }

  /// Parses an array element by element, one step each, so that only one element is buffered:
  /// parse(cursor) consumes an element; done() runs once it and its separator are parsed.
  template <class F, class G>
  void Elements(const char* sep_error, F&& parse, G&& done) {
    Step([](Cursor& c) { c.Expect('[', "'['"); });
    if (Step([](Cursor& c) { return c.Close(']'); })) return;
    for (;;) {
      bool last = Step([&](Cursor& c) {
        parse(c);
        return c.Next(']', sep_error);
      });
      done();
      if (last) return;
    }
  }

  /// Parses the top-level object member by member: member(key) gets the key and must consume
  /// the value in steps of its own.
  template <class F>
  void Members(std::string& key_scratch, F&& member) {
    Step([](Cursor& c) { c.Expect('{', "'{'"); });
    bool first = true;
    std::string key;
    for (;;) {
      bool done = Step([&](Cursor& c) { return MemberKey(c, first, key_scratch, key); });
      if (done) return;
      first = false;
      member(key);
    }
  }

  /// Absolute offset in the (uncompressed) input of a byte in the buffer.
  uint64_t Offset(const char* at) const { return base_ + static_cast<uint64_t>(at - buf_.data()); }
  /// Throws InputError "PATH: byte OFFSET: what".
  [[noreturn]] void Error(uint64_t offset, const std::string& what) const;
  /// Size of the buffer: what the stream holds in memory, whatever the size of the input.
  size_t BufferBytes() const { return buf_.size(); }

 private:
  static bool MemberKey(Cursor& c, bool first, std::string& scratch, std::string& key);
  /// Keeps [pos_, end_), reads more behind it. Returns false at the end of the input.
  bool Fill();
  void ShowProgress();

  std::string path_;
  StreamOptions opts_;
  Source src_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  uint64_t base_ = 0;  // absolute offset of buf_[0]
  bool eof_ = false;
  kprof::Progress progress_;
};

}  // namespace kprof::json
