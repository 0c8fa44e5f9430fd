// Output helpers shared by `kprof diff` and `kprof check`: formats, aligned text tables,
// Markdown/JUnit escaping, writing to a file or stdout.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/compare.h"
#include "kprof/output_file.h"
#include "kprof/trace.h"

namespace kprof::cli {

enum class CiFormat { Table, Json, Markdown, Junit };

inline std::optional<CiFormat> ParseCiFormat(std::string_view s) {
  if (s == "table") return CiFormat::Table;
  if (s == "json") return CiFormat::Json;
  if (s == "md" || s == "markdown") return CiFormat::Markdown;
  if (s == "junit") return CiFormat::Junit;
  return std::nullopt;
}

/// The writers of one diff or check result, one per CiFormat.
struct CiWriters {
  std::function<std::string()> table, json, markdown, junit;
};

/// The result written in `format`.
inline std::string RenderCi(CiFormat format, const CiWriters& w) {
  switch (format) {
    case CiFormat::Table:
      return w.table();
    case CiFormat::Json:
      return w.json();
    case CiFormat::Markdown:
      return w.markdown();
    case CiFormat::Junit:
      return w.junit();
  }
  return {};
}

/// A JUnit document of one test suite; `cases` are its <testcase> elements, indented by four.
inline std::string JunitDocument(std::string_view suite, size_t tests, size_t failures,
                                 size_t skipped, std::string_view cases) {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"{0}\" tests=\"{1}\" failures=\"{2}\">\n"
      "  <testsuite name=\"{0}\" tests=\"{1}\" failures=\"{2}\" errors=\"0\" "
      "skipped=\"{3}\">\n"
      "{4}  </testsuite>\n</testsuites>\n",
      suite, tests, failures, skipped, cases);
}

/// Display width in code points (UTF-8), good enough for names in tables.
inline size_t Columns(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

/// Cuts `s` to `width` code points, ending it with "…" when cut.
inline std::string Shorten(std::string_view s, size_t width) {
  if (width < 2 || Columns(s) <= width) return std::string(s);
  size_t cps = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (cps++ == width - 1) return std::string(s.substr(0, i)) + "\xE2\x80\xA6";
  }
  return std::string(s);
}

/// Replaces control characters (names come from the profiled program) by '?' for terminals.
inline std::string Printable(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
  return out;
}

/// A Markdown table cell: HTML-escaped (no raw HTML/Markdown injection from names), '|'
/// escaped, newlines flattened; `code` wraps it in <code>.
inline std::string MdCell(std::string_view s, bool code = false) {
  std::string esc = XmlEscape(s);
  std::string out;
  for (char c : esc) {
    if (c == '|')
      out += "&#124;";
    else if (c == '`')
      out += "&#96;";
    else if (c == '*' || c == '_' || c == '[' || c == ']' || c == '\\')
      out += std::string("\\") + c;
    else
      out += c;
  }
  if (code) {
    // Inside <code> Markdown emphasis is still parsed by some renderers; the escapes above stay.
    return "<code>" + out + "</code>";
  }
  return out;
}

/// Left-aligned first column(s), right-aligned numbers; two spaces between columns.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> right_align)
      : header_(std::move(header)), right_(std::move(right_align)) {
    right_.resize(header_.size(), false);
  }
  void Add(std::vector<std::string> row) {
    row.resize(header_.size());
    rows_.push_back(std::move(row));
  }
  bool empty() const { return rows_.empty(); }
  std::string Render(std::string_view indent = "  ") const {
    std::vector<size_t> w(header_.size(), 0);
    for (size_t c = 0; c < header_.size(); ++c) w[c] = Columns(header_[c]);
    for (const auto& r : rows_)
      for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], Columns(r[c]));
    std::string out;
    auto line = [&](const std::vector<std::string>& r) {
      std::string l(indent);
      for (size_t c = 0; c < r.size(); ++c) {
        const std::string pad(w[c] - Columns(r[c]), ' ');
        l += right_[c] ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : "");
        if (c + 1 < r.size()) l += "  ";
      }
      while (!l.empty() && l.back() == ' ') l.pop_back();
      out += l + "\n";
    };
    line(header_);
    for (const auto& r : rows_) line(r);
    return out;
  }

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

/// Where a command's result goes: stdout when `path` is empty or "-", else a file written
/// through OutputFile. Made before the work, so that a bad path (a directory, an existing file
/// without --force, a missing directory) fails at once: InputError naming the path.
class ResultOutput {
 public:
  ResultOutput(const std::string& path, bool force) {
    if (!path.empty() && path != "-") file_ = std::make_unique<OutputFile>(path, force);
  }
  /// Writes `text` (once). Throws InputError on a write error.
  void Write(const std::string& text) {
    if (!file_) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return;
    }
    file_->stream().write(text.data(), static_cast<std::streamsize>(text.size()));
    file_->Commit();
  }

 private:
  std::unique_ptr<OutputFile> file_;
};

}  // namespace kprof::cli
