// kprof_gen_hostile: writes a kprof run file whose kernel and NVTX range names are hostile to
// every output format (quotes, backslashes, newlines, control characters, invalid UTF-8,
// `</script>`, `]]>`, pipes, commas, a CSV formula, SQL, a 1 MB name), and prints the names as JSON
// (invalid UTF-8 as \u00XX escapes of its bytes) for the checks of tests/outputs/.
//
//   kprof_gen_hostile OUT.kprof
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "kprof/trace.h"

namespace {

/// The hostile names. Index 0 is the 1 MB one.
std::vector<std::string> Names() {
  return {
      std::string(1'000'000, 'k'),
      "</script><img src=x onerror=alert(1)>",
      "quote\" apostrophe' backslash\\ end",
      "new\nline and\r\ncrlf",
      "tab\there \x01\x02 and \x1b[31mred\x1b[0m",
      "pipe | comma , semicolon ; =HYPERLINK(\"http://x\")",
      std::string("bad \xff\xfe utf8 \xc3\x28 overlong \xc0\xaf end"),
      "]]> <!-- --> &amp; &lt; <b>bold</b>",
      "line\u2028sep\u2029 emoji \U0001F680 \u00fcn\u00efc\u00f6d\u00e9",
      "| --- | `code` *em* [link](http://x)",
      "x'); DROP TABLE StringIds; --",
  };
}

std::string JsonBytes(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kprof_gen_hostile OUT.kprof\n");
    return 2;
  }
  kprof::ProcessTrace t;
  t.pid = 77;
  t.complete = true;
  t.source = argv[1];
  t.meta["device.0.name"] = "NVIDIA H100 80GB HBM3";
  t.meta["device.0.sm_count"] = "132";
  const std::vector<std::string> names = Names();
  uint64_t now = 1'000'000'000;
  uint32_t corr = 0, marker = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    // An NVTX range named like the kernel, a launch inside it, the kernel on stream 7.
    kprof::Record s;
    s.kind = static_cast<uint8_t>(kprof::RecordKind::MarkerStart);
    s.device = kprof::kNoDevice;
    s.start_ns = s.end_ns = now;
    s.name = t.strings.Intern(names[i]);
    s.tid = 1;
    s.a = ++marker;
    t.records.push_back(s);
    kprof::Record api;
    api.kind = static_cast<uint8_t>(kprof::RecordKind::RuntimeApi);
    api.device = kprof::kNoDevice;
    api.correlation = ++corr;
    api.start_ns = now + 1000;
    api.end_ns = now + 4000;
    api.name = t.strings.Intern("cudaLaunchKernel");
    api.tid = 1;
    t.records.push_back(api);
    kprof::Record e = s;
    e.kind = static_cast<uint8_t>(kprof::RecordKind::MarkerEnd);
    e.start_ns = e.end_ns = now + 5000;
    e.name = 0;
    t.records.push_back(e);
    kprof::Record k;
    k.kind = static_cast<uint8_t>(kprof::RecordKind::Kernel);
    k.device = 0;
    k.correlation = corr;
    k.start_ns = now + 6000;
    k.end_ns = now + 6000 + 1000 * (i + 1);
    k.name = t.strings.Intern(names[i]);
    k.tid = 7;
    kprof::SetKernelLaunch(k, {1024, 1, 1}, {256, 1, 1}, 32, 0);
    t.records.push_back(k);
    now += 100'000;
  }
  try {
    std::remove(argv[1]);  // a test tool: replaces an earlier output (WriteRunFile never does)
    kprof::WriteRunFile(argv[1], t);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "kprof_gen_hostile: %s\n", ex.what());
    return 2;
  }
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + JsonBytes(names[i]);
  std::printf("%s]\n", out.c_str());
  return 0;
}
