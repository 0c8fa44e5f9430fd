// The page around the data: src/output/html/report.html with the CSS, the scripts and the data
// document in place of its @KPROF_...@ markers, filled in one pass (a marker-like text inside
// the data is never expanded). The assets are compiled in (cmake/embed_assets.cmake).
#include <string>
#include <string_view>

#include "kprof/html.h"
#include "kprof/utf8.h"
#include "kprof_html_assets.h"

namespace kprof {
namespace {

template <size_t N>
void WriteChunks(std::ostream& out, const std::string_view (&chunks)[N]) {
  for (auto c : chunks) out << c;
}

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  ForEachUtf8Char(s, [&](uint32_t cp, std::string_view bytes) {
    if (cp == '&')
      out += "&amp;";
    else if (cp == '<')
      out += "&lt;";
    else if (cp == '>')
      out += "&gt;";
    else if (cp == '"')
      out += "&quot;";
    else if (cp == '\'')
      out += "&#39;";
    else if (cp < 0x20 || cp == 0x7F)
      out += ' ';
    else
      AppendChar(out, cp, bytes);  // invalid UTF-8 as U+FFFD
  });
  return out;
}

void WriteHtmlPage(std::ostream& out, const std::string& title, const std::string& data) {
  std::string tmpl;
  for (auto c : html::assets::kReportHtml) tmpl += c;
  // The title is data too: escaped, its invalid UTF-8 replaced, its length bounded.
  const std::string safe_title =
      HtmlEscape(title.size() > 200 ? title.substr(0, 200) + "..." : title);
  size_t at = 0;
  while (at < tmpl.size()) {
    const size_t m = tmpl.find("@KPROF_", at);
    if (m == std::string::npos) {
      out << std::string_view(tmpl).substr(at);
      break;
    }
    out << std::string_view(tmpl).substr(at, m - at);
    const size_t end = tmpl.find('@', m + 1);
    const std::string_view key = std::string_view(tmpl).substr(m, end + 1 - m);
    if (key == "@KPROF_TITLE@")
      out << safe_title;
    else if (key == "@KPROF_CSS@")
      WriteChunks(out, html::assets::kReportCss);
    else if (key == "@KPROF_TIMELINE_JS@")
      WriteChunks(out, html::assets::kTimelineJs);
    else if (key == "@KPROF_JS@")
      WriteChunks(out, html::assets::kReportJs);
    else if (key == "@KPROF_DATA@")
      out << data;
    else
      out << key;
    at = end + 1;
  }
}

std::string HtmlPageData(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"kprof-data\">";
  const size_t b = page.find(open);
  if (b == std::string::npos) return {};
  const size_t e = page.find("</script>", b + open.size());
  if (e == std::string::npos) return {};
  return page.substr(b + open.size(), e - b - open.size());
}

}  // namespace kprof
