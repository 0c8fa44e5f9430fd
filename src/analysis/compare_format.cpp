// The values diff and check read and print: durations, fractions, sizes and hint severities
// parsed from options and budget files; signed durations, percentages and metric values
// formatted for tables; XML escaping for JUnit and Markdown output.
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "analysis/compare_internal.h"
#include "kprof/compare.h"
#include "kprof/utf8.h"

namespace kprof {

namespace compare_detail {

uint64_t CeilToU64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 1.8e19) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(std::ceil(v));
}

std::string FormatCount(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.1f}", v);
}

}  // namespace compare_detail

namespace {

using compare_detail::CeilToU64;
using compare_detail::FormatCount;

std::optional<std::pair<double, std::string_view>> SplitNumber(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty() || s.front() == '-' || s.front() == '+') return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string_view unit(ptr, static_cast<size_t>(s.data() + s.size() - ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return std::make_pair(v, unit);
}

std::optional<uint64_t> ScaleToU64(double v, double scale) {
  const double x = std::round(v * scale);
  if (!(x >= 0) || x >= 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(x);
}

/// The code point of the UTF-8 sequence at s[i] (0xFFFD when invalid); advances i past it (by
/// one byte when invalid).
uint32_t NextCodePoint(std::string_view s, size_t& i) {
  const Utf8Char c = DecodeUtf8(s, i);
  if (c.len == 0) {
    ++i;
    return 0xFFFD;
  }
  i += c.len;
  return c.cp;
}

}  // namespace

std::optional<uint64_t> ParseDurationNs(std::string_view s) {
  auto num = SplitNumber(s);
  if (!num) return std::nullopt;
  const auto [v, unit] = *num;
  double scale = 0;
  if (unit.empty() || unit == "ns")
    scale = 1;
  else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs")  // us, micro sign, mu
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else
    return std::nullopt;
  return ScaleToU64(v, scale);
}

std::optional<double> ParseFraction(std::string_view s) {
  auto num = SplitNumber(s);
  if (!num) return std::nullopt;
  const auto [v, unit] = *num;
  if (unit == "%") return v / 100;
  if (unit.empty() && v <= 1) return v;  // "5" is ambiguous (5%? 500%?): write 5% or 0.05
  return std::nullopt;
}

std::optional<uint64_t> ParseBytes(std::string_view s) {
  auto num = SplitNumber(s);
  if (!num) return std::nullopt;
  const auto [v, unit_sv] = *num;
  std::string unit(unit_sv);
  if (!unit.empty() && (unit[0] == 'k')) unit[0] = 'K';
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},         {"KB", 1e3},      {"MB", 1e6},         {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
  };
  for (const auto& [name, scale] : kUnits)
    if (unit == name) return ScaleToU64(v, scale);
  return std::nullopt;
}

std::optional<int> ParseHintSeverity(std::string_view s) {
  if (s == "none") return kNoHintAllowed;
  for (auto sev : {Severity::Info, Severity::Warning, Severity::Critical})
    if (s == SeverityName(sev)) return static_cast<int>(sev);
  return std::nullopt;
}

std::string FormatSignedDuration(double ns) {
  const double a = std::fabs(ns);
  if (a < 0.5) return "0 ns";
  return (ns < 0 ? "-" : "+") + FormatDuration(static_cast<uint64_t>(std::llround(a)));
}

std::string FormatPercent(double fraction) {
  if (std::isinf(fraction)) return fraction > 0 ? "new" : "gone";
  if (std::isnan(fraction)) return "n/a";
  return fmt::format("{:+.1f}%", fraction * 100);
}

std::string FormatMetric(double value, MetricKind kind) {
  const uint64_t rounded = CeilToU64(std::round(value));
  switch (kind) {
    case MetricKind::Time:
      return FormatDuration(rounded);
    case MetricKind::Count:
      return FormatCount(value);
    case MetricKind::Bytes:
    case MetricKind::Memory:
      return FormatBytes(rounded);
  }
  return "?";
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = NextCodePoint(s, i);
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        // XML 1.0 forbids other C0 controls and U+FFFE/U+FFFF even as character references.
        AppendUtf8(out, cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF ? 0xFFFD : cp);
    }
  }
  return out;
}

}  // namespace kprof
