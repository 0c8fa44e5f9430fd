// Internal to the output library: fitting program-given names into the columns of the terminal
// table, and escaping them for Markdown (report.cpp, report_distributed.cpp).
#pragma once

#include <string>

#include "kprof/utf8.h"

namespace kprof::report_text {

/// Display columns of a UTF-8 string (code points).
inline size_t Columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

/// Cuts a display name to `width` columns (counting UTF-8 code points), ending it with "…".
inline std::string Fit(const std::string& raw, size_t width) {
  const std::string s = DisplayText(raw);  // one line, no control characters, valid UTF-8
  if (width < 2 || Columns(s) <= width) return s;
  size_t cps = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (cps++ == width - 1) return s.substr(0, i) + "…";
  }
  return s;
}

/// Like Fit, but keeps the end of the name: "…/examples/train_mlp.py:47".
inline std::string FitTail(const std::string& raw, size_t width) {
  const std::string s = DisplayText(raw);
  const size_t cols = Columns(s);
  if (width < 2 || cols <= width) return s;
  size_t skip = cols - (width - 1), cps = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (cps++ == skip) return "…" + s.substr(i);
  }
  return s;
}

inline std::string Pad(const std::string& s, size_t width) {
  size_t n = Columns(s);
  return n >= width ? s : s + std::string(width - n, ' ');
}

/// A name as Markdown text: its display text with the characters Markdown gives a meaning
/// backslash-escaped (a table cell stays one cell).
inline std::string Md(const std::string& raw) {
  std::string o;
  for (char c : DisplayText(raw)) {  // one line, no control characters, valid UTF-8
    if (c == '|' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>' || c == '[' ||
        c == ']' || c == '\\' || c == '&')
      o += '\\';
    if (c == '\n' || c == '\r') {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o;
}

}  // namespace kprof::report_text
