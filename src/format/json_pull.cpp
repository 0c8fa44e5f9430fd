// Streaming JSON pull parser: the byte source, the buffer, and the cold paths of the cursor
// (escapes, skipped values, numbers through strtod). See json_pull.h for the design.
#include "format/json_pull.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kprof/trace.h"
#include "kprof/utf8.h"

namespace kprof::json {

// ---- byte source --------------------------------------------------------------------------------

Source::Source(const std::string& path) : path_(path) {
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

Source::~Source() { Close(); }

void Source::Close() {
  if (gz_ != nullptr) gzclose(gz_);
  gz_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

size_t Source::Read(char* dst, size_t n) {
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

uint64_t Source::Consumed() const {
  if (gz_ != nullptr) {
    z_off_t o = gzoffset(gz_);
    return o > 0 ? static_cast<uint64_t>(o) : 0;
  }
  off_t o = ::lseek(fd_, 0, SEEK_CUR);
  return o > 0 ? static_cast<uint64_t>(o) : 0;
}

// ---- cursor: cold paths -----------------------------------------------------------------------

int64_t RoundScaled(const Number& n, double scale) {
  std::string text(n.begin, n.end);
  double d = std::strtod(text.c_str(), nullptr) * scale;
  if (!(d == d)) return 0;
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return std::llround(d);
}

namespace {

// One-letter escapes and the bytes they stand for, position for position.
constexpr std::string_view kEscapeLetters = "\"\\/bfnrt";
constexpr std::string_view kEscapedBytes = "\"\\/\b\f\n\r\t";

}  // namespace

void Cursor::StringRest(std::string* out) {
  for (;;) {
    if (*p == '"') {
      ++p;
      return;
    }
    if (p == end) More();
    if (*p != '\\') Fail(p, "control character in string");
    Escape(out);
    const char* run = p;
    p = ScanString(p);
    if (out != nullptr) out->append(run, static_cast<size_t>(p - run));
  }
}

void Cursor::Escape(std::string* out) {
  const char* esc = p++;
  if (p == end) More();
  if (*p != 'u') {
    size_t i = kEscapeLetters.find(*p);
    if (i == std::string_view::npos) Fail(esc, "invalid escape in string");
    if (out != nullptr) out->push_back(kEscapedBytes[i]);
    ++p;
    return;
  }
  uint32_t cp = Hex4(esc);
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    // High surrogate: a low one must follow, else U+FFFD (and what follows is read on its own).
    uint32_t hi = cp;
    cp = 0xFFFD;
    if (p + 1 >= end) More();
    if (p[1] == '\\') {
      if (p + 2 >= end) More();
      if (p[2] == 'u') {
        const char* high_end = p;
        p += 2;
        uint32_t lo = Hex4(p - 1);
        if (lo >= 0xDC00 && lo <= 0xDFFF)
          cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
        else
          p = high_end;
      }
    }
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    cp = 0xFFFD;
  }
  if (out != nullptr) AppendUtf8(*out, cp);
  ++p;
}

uint32_t Cursor::Hex4(const char* esc) {
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

void Cursor::SkipKey() {
  if (Peek() != '"') Fail(p, "expected object key");
  SkipString();
  Expect(':', "':' after object key");
}

void Cursor::SkipValue() {
  // Bit stack of open containers: 1 = object, 0 = array.
  uint8_t stack[kMaxDepth];  // written before read: no initialisation needed
  size_t depth = 0;
  for (;;) {
    char ch = Peek();
    switch (ch) {
      case '"':
        SkipString();
        break;
      case '{':
      case '[':
        if (depth == kMaxDepth) Fail(p, "nesting too deep");
        stack[depth++] = ch == '{' ? 1 : 0;
        ++p;
        if (Close(ch == '{' ? '}' : ']')) {
          --depth;
          break;
        }
        if (ch == '{') SkipKey();
        continue;  // parse the first member's value
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
        if (ch != '-' && !IsDigit(ch)) Fail(p, "unexpected character");
        Num();
    }
    // After a value: close containers or move to the next member.
    for (;; --depth) {
      if (depth == 0) return;
      bool is_obj = stack[depth - 1] == 1;
      if (!Next(is_obj ? '}' : ']', is_obj ? "expected ',' or '}'" : "expected ',' or ']'")) {
        if (is_obj) SkipKey();
        break;  // next value
      }
    }
  }
}

// ---- stream -----------------------------------------------------------------------------------

Stream::Stream(const std::string& path, const StreamOptions& opts)
    : path_(path), opts_(opts), src_(path), progress_(opts.show_progress, "reading " + path, "MB") {
  buf_.resize(opts_.chunk + 1 + kPad);
  buf_[0] = '\0';
}

void Stream::Error(uint64_t offset, const std::string& what) const {
  throw InputError(path_ + ": byte " + std::to_string(offset) + ": " + what);
}

bool Stream::Begin() {
  // The byte order mark may straddle reads when reads are small.
  while (Fill() && end_ < 3) {
  }
  if (end_ == 0) return false;
  if (end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
  return true;
}

void Stream::End() {
  for (;;) {
    while (pos_ < end_ && IsWs(buf_[pos_])) ++pos_;
    if (pos_ < end_)
      Error(Offset(buf_.data() + pos_), "unexpected data after the end of the JSON document");
    if (!Fill()) return;
  }
}

bool Stream::MemberKey(Cursor& c, bool first, std::string& scratch, std::string& key) {
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
  key.assign(c.String(scratch));
  c.Expect(':', "':' after a key");
  c.SkipWs();  // the value's first byte is part of this step
  return false;
}

namespace {
std::string SizeText(size_t bytes) {
  if (bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}
}  // namespace

bool Stream::Fill() {
  if (eof_) return false;
  size_t keep = end_ - pos_;
  if (pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + pos_, keep);
    base_ += pos_;
    pos_ = 0;
    end_ = keep;
  }
  size_t room = buf_.size() - 1 - kPad - end_;
  if (room == 0 || room < opts_.chunk / 2) {
    if (keep > opts_.max_element)
      Error(base_, "JSON element larger than " + SizeText(opts_.max_element));
    buf_.resize(std::max(buf_.size() * 2, end_ + opts_.chunk + 1 + kPad));
    room = buf_.size() - 1 - kPad - end_;
  }
  size_t got = src_.Read(buf_.data() + end_, std::min(room, opts_.chunk));
  if (got == 0) eof_ = true;
  end_ += got;
  buf_[end_] = '\0';
  ShowProgress();
  return got > 0;
}

void Stream::ShowProgress() { progress_.Update(src_.Consumed(), src_.Total()); }

}  // namespace kprof::json
