// JSON string escaping (AppendJsonString, declared in kprof/output.h) for the Chrome trace:
// escapes quotes, backslashes and controls, replaces invalid UTF-8 and escapes U+2028/U+2029.
#include <cstdint>
#include <string>
#include <string_view>

#include "kprof/output.h"
#include "kprof/utf8.h"

namespace kprof {

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;  // start of the pending run of bytes copied as they are
  size_t i = 0;
  auto flush = [&](size_t upto) { out.append(s.data() + run, upto - run); };
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t n = DecodeUtf8(s, i).len;
      if (n == 3 && c == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
          (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
           static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
        // U+2028 / U+2029: valid JSON but line terminators for JavaScript; escape them.
        flush(i);
        out.append(static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029");
        i += 3;
        run = i;
        continue;
      }
      if (n != 0) {
        i += n;
        continue;
      }
      flush(i);
      out.append("\\ufffd");
      ++i;
      run = i;
      continue;
    }
    flush(i);
    if (c == '"') {
      out.append("\\\"");
    } else if (c == '\\') {
      out.append("\\\\");
    } else {
      char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, 6);
    }
    ++i;
    run = i;
  }
  flush(i);
  out.push_back('"');
}

}  // namespace kprof
