// UTF-8 decoding and encoding shared by the readers (JSON \u escapes), the report and Chrome
// writers (JSON escaping) and the CI writers (XML escaping): one definition of a valid sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kprof {

/// One decoded character: its code point and its length in bytes (0: not a valid sequence).
struct Utf8Char {
  uint32_t cp = 0;
  size_t len = 0;
};

/// Decodes the UTF-8 sequence starting at s[i] (i < s.size()). Valid means the shortest form of a
/// code point up to U+10FFFF that is not a surrogate; anything else (a stray continuation byte,
/// an overlong form, a truncated sequence) has len 0.
inline Utf8Char DecodeUtf8(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  size_t len = 0;
  uint32_t cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return {};
  }
  if (i + len > s.size()) return {};
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0u) != 0x80u) return {};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {cp, len};
}

/// Appends code point `cp` (at most U+10FFFF) as UTF-8.
inline void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
    return;
  }
  // Lead byte, then continuation bytes of 6 bits each, most significant first.
  const int tail = cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
  constexpr unsigned char kLead[] = {0, 0xC0, 0xE0, 0xF0};
  out.push_back(static_cast<char>(kLead[tail] | (cp >> (6 * tail))));
  for (int k = tail - 1; k >= 0; --k)
    out.push_back(static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F)));
}

/// Calls f(cp, bytes) for each character of `s` in order: a valid sequence (see DecodeUtf8) with
/// its code point and its bytes, an invalid byte as U+FFFD with empty bytes (one call per byte).
template <class F>
inline void ForEachUtf8Char(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = DecodeUtf8(s, i);
    if (c.len == 0) {
      f(uint32_t{0xFFFD}, std::string_view());
      ++i;
    } else {
      f(c.cp, s.substr(i, c.len));
      i += c.len;
    }
  }
}

/// Appends a character as ForEachUtf8Char gives it: its own bytes, or U+FFFD for an invalid one.
inline void AppendChar(std::string& out, uint32_t cp, std::string_view bytes) {
  if (bytes.empty()) {
    AppendUtf8(out, cp);
  } else {
    out.append(bytes);
  }
}

/// `s` with every invalid byte (see DecodeUtf8) replaced by U+FFFD: always valid UTF-8.
inline std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  ForEachUtf8Char(s, [&](uint32_t cp, std::string_view bytes) { AppendChar(out, cp, bytes); });
  return out;
}

/// `s` as text for a terminal or a Markdown table cell: valid UTF-8 (ValidUtf8), on one line,
/// with no character that moves the cursor or changes the terminal: control characters (C0, DEL,
/// C1) and the line and paragraph separators are shown as escapes ("\n", "\r", "\t",
/// "\x1b", "\u2028").
inline std::string DisplayText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  ForEachUtf8Char(s, [&](uint32_t cp, std::string_view bytes) {
    if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[cp >> 4];
      out += kHex[cp & 15];
    } else if (cp == 0x2028 || cp == 0x2029) {
      out += cp == 0x2028 ? "\\u2028" : "\\u2029";
    } else {
      AppendChar(out, cp, bytes);
    }
  });
  return out;
}

}  // namespace kprof
