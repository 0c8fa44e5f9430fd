// The JSON pull parser on its own (src/format/json_pull.h): tokens of every type, escapes, numbers,
// tokens split across reads, and hostile input (truncation at every offset, deep nesting, control
// and NUL bytes, invalid UTF-8, garbage, huge strings), which must end in one InputError line
// naming the file and the byte, never in a crash or a hang.
#include "format/json_pull.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kprof/trace.h"
#include "test_util.h"

namespace kprof {
namespace {

using json::Cursor;

/// A string as the dump writes it: quotes, backslashes and control bytes escaped, other bytes
/// as they are.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(ch));
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

/// Re-serializes one value with the cursor's primitives: no whitespace, strings decoded,
/// numbers as their text.
void Dump(Cursor& c, std::string& out) {
  std::string scratch;
  char ch = c.Peek();
  if (ch == '{') {
    out += '{';
    c.Object(scratch, "expected ',' or '}'", [&](std::string_view key) {
      if (out.back() != '{') out += ',';
      out += Quote(key) + ":";
      Dump(c, out);
    });
    out += '}';
  } else if (ch == '[') {
    out += '[';
    c.Array("expected ',' or ']'", [&](size_t i) {
      if (i > 0) out += ',';
      Dump(c, out);
    });
    out += ']';
  } else if (ch == '"') {
    out += Quote(c.String(scratch));
  } else if (ch == 't' || ch == 'f' || ch == 'n') {
    std::string_view word = ch == 't' ? "true" : ch == 'f' ? "false" : "null";
    c.Literal(word);
    out += word;
  } else if (ch == '-' || json::IsDigit(ch)) {
    out += c.Num().Text();
  } else {
    c.Fail(c.p, "unexpected character");
  }
}

class JsonPull : public ::testing::Test {
 protected:
  /// Writes `doc` to a file and parses it as one step; returns the dump.
  std::string Parse(const std::string& doc, size_t chunk = json::StreamOptions().chunk,
                    size_t max_element = json::StreamOptions().max_element) {
    test::WriteAll(path_, doc);
    return ParseFile(chunk, max_element);
  }
  std::string ParseFile(size_t chunk = json::StreamOptions().chunk,
                        size_t max_element = json::StreamOptions().max_element) {
    json::StreamOptions opts;
    opts.chunk = chunk;
    opts.max_element = max_element;
    json::Stream s(path_, opts);
    std::string out;
    s.Parse([&] {
      if (!s.Begin()) throw InputError(path_ + ": empty file");
      s.Step([&](Cursor& c) {
        out.clear();  // the step runs again when it needs more input
        Dump(c, out);
      });
      s.End();
    });
    return out;
  }
  /// The InputError of parsing `doc`, or "" when it parses.
  std::string Error(const std::string& doc, size_t chunk = json::StreamOptions().chunk,
                    size_t max_element = json::StreamOptions().max_element) {
    try {
      Parse(doc, chunk, max_element);
      return "";
    } catch (const InputError& e) {
      return e.what();
    }
  }
  /// The InputError of skipping `doc` as one value, or "" when it is valid.
  std::string Skip(const std::string& doc) {
    test::WriteAll(path_, doc);
    json::Stream s(path_);
    try {
      s.Parse([&] {
        s.Begin();
        s.Step([](Cursor& c) { c.SkipValue(); });
        s.End();
      });
      return "";
    } catch (const InputError& e) {
      return e.what();
    }
  }
  std::string At(size_t byte, const std::string& what) const {
    return path_ + ": byte " + std::to_string(byte) + ": " + what;
  }

  test::TempDir dir_;
  std::string path_ = dir_ / "doc.json";
};

const std::string kEveryType =
    R"({"s":"x","n":-1.5e+3,"i":12345,"t":true,"f":false,"z":null,"a":[1,[],{},[[0]]],)"
    R"("o":{"k":"v","e":""},"d":0.25,"E":1E-7})";

TEST_F(JsonPull, TokensOfEveryType) {
  EXPECT_EQ(Parse(kEveryType), kEveryType);
  EXPECT_EQ(Parse(" \n\t{ \"s\" : \"x\" ,\r\n \"a\" : [ 1 , true , null ] }  \n"),
            R"({"s":"x","a":[1,true,null]})");
  for (const char* scalar : {"0", "-0", "7", "\"\"", "true", "false", "null", "[]", "{}"})
    EXPECT_EQ(Parse(std::string(scalar) + "\n"), scalar);
}

TEST_F(JsonPull, StringsWithoutEscapesAreViewsIntoTheBuffer) {
  test::WriteAll(path_, R"(["plain", "esc\n"])");
  json::Stream s(path_);
  s.Parse([&] {
    ASSERT_TRUE(s.Begin());
    s.Step([&](Cursor& c) {
      std::string scratch = "untouched";
      c.Expect('[', "'['");
      c.SkipWs();
      std::string_view plain = c.String(scratch);
      EXPECT_EQ(plain, "plain");
      EXPECT_EQ(scratch, "untouched");
      EXPECT_FALSE(c.Next(']', "sep"));
      c.SkipWs();
      std::string_view esc = c.String(scratch);
      EXPECT_EQ(esc, "esc\n");
      EXPECT_EQ(esc.data(), scratch.data());
      EXPECT_TRUE(c.Next(']', "sep"));
    });
    s.End();
  });
}

TEST_F(JsonPull, Escapes) {
  auto decoded = [&](const std::string& body) {
    std::string dump = Parse("\"" + body + "\"");
    return dump;
  };
  EXPECT_EQ(decoded(R"(\"\\\/\b\f\n\r\t)"), Quote("\"\\/\b\f\n\r\t"));
  EXPECT_EQ(decoded(R"(a\u0041\u00e9\u20AC)"), Quote("aA\xC3\xA9\xE2\x82\xAC"));
  EXPECT_EQ(decoded(R"(\ud83d\ude00!)"), Quote("\xF0\x9F\x98\x80!"));  // surrogate pair
  EXPECT_EQ(decoded(R"(\uDBFF\uDFFF)"), Quote("\xF4\x8F\xBF\xBF"));    // U+10FFFF
  EXPECT_EQ(decoded(R"(\ud800x)"), Quote("\xEF\xBF\xBDx"));            // lone high
  EXPECT_EQ(decoded(R"(\udc00)"), Quote("\xEF\xBF\xBD"));              // lone low
  EXPECT_EQ(decoded(R"(\ud800\u0041)"), Quote("\xEF\xBF\xBD"
                                              "A"));           // high, not low
  EXPECT_EQ(decoded(R"(\ud800\n)"), Quote("\xEF\xBF\xBD\n"));  // high, other escape
  EXPECT_EQ(decoded(R"(\u0000)"), Quote(std::string(1, '\0')));
  EXPECT_EQ(Parse(R"({"k\u0020ey":["\u00e9",{"\t":1}]})"),
            "{\"k ey\":[\"\xC3\xA9\",{\"\\u0009\":1}]}");
  EXPECT_EQ(Error(R"(["ab\q"])"), At(4, "invalid escape in string"));
  EXPECT_EQ(Error(R"(["\u12G4"])"), At(2, "invalid \\u escape in string"));
  EXPECT_EQ(Error(R"(["\ud800\u12G4"])"), At(8, "invalid \\u escape in string"));
  EXPECT_EQ(Error("[\"a\nb\"]"), At(3, "control character in string"));
  // Skipped strings are validated like decoded ones.
  EXPECT_EQ(Skip(R"(["\ud800\uZZZZ"])"), At(8, "invalid \\u escape in string"));
  EXPECT_EQ(Skip(R"(["ab\q"])"), At(4, "invalid escape in string"));
  EXPECT_EQ(Skip("[\"a\nb\"]"), At(3, "control character in string"));
  EXPECT_EQ(Skip(R"(["\ud83d\ude00", "\"\\\/\b\f\n\r\t"])"), "");
}

int64_t IntOf(const std::string& text, bool thousandths = false) {
  std::string buf = text + ",";      // a number ends at the first byte that cannot continue it
  buf.append(1 + json::kPad, '\0');  // sentinel and padding, as the stream provides
  Cursor c{buf.data(), buf.data() + text.size() + 1};
  json::Number n = c.Num();
  EXPECT_EQ(n.Text(), text);
  return thousandths ? json::ToThousandths(n) : json::ToInt(n);
}

TEST(JsonNumbers, Conversions) {
  EXPECT_EQ(IntOf("0"), 0);
  EXPECT_EQ(IntOf("-0"), 0);
  EXPECT_EQ(IntOf("9223372036854775807"), INT64_MAX);  // 19 digits, exact
  EXPECT_EQ(IntOf("-9223372036854775807"), -INT64_MAX);
  EXPECT_EQ(IntOf("1234567890123456789"), 1234567890123456789);
  EXPECT_EQ(IntOf("9223372036854775808"), INT64_MAX);  // saturated
  EXPECT_EQ(IntOf("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(IntOf("123456789012345678901234567890"), INT64_MAX);
  EXPECT_EQ(IntOf("1e3"), 1000);
  EXPECT_EQ(IntOf("1.5E+2"), 150);
  EXPECT_EQ(IntOf("-2.5"), -3);  // half away from zero
  EXPECT_EQ(IntOf("2.4999"), 2);
  EXPECT_EQ(IntOf("1e400"), INT64_MAX);
  EXPECT_EQ(IntOf("-1e400"), INT64_MIN);
  EXPECT_EQ(IntOf("5e-324"), 0);
  // Thousandths: exact from the decimal text, rounded by the fourth fraction digit.
  EXPECT_EQ(IntOf("4476703214413.097", true), 4476703214413097);
  EXPECT_EQ(IntOf("1.2345", true), 1235);
  EXPECT_EQ(IntOf("1.2344999", true), 1234);
  EXPECT_EQ(IntOf("-1.0005", true), -1001);
  EXPECT_EQ(IntOf("0.0004", true), 0);
  EXPECT_EQ(IntOf("7", true), 7000);
  EXPECT_EQ(IntOf("1e-3", true), 1);
  EXPECT_EQ(IntOf("1.5e3", true), 1500000);
  EXPECT_EQ(IntOf("9223372036854775807", true), INT64_MAX);
}

TEST_F(JsonPull, InvalidNumbers) {
  EXPECT_EQ(Error("[1.]"), At(1, "invalid number"));
  EXPECT_EQ(Error("[-]"), At(1, "invalid number"));
  EXPECT_EQ(Error("[-a]"), At(1, "invalid number"));
  EXPECT_EQ(Error("[1e]"), At(1, "invalid number"));
  EXPECT_EQ(Error("[1e+]"), At(1, "invalid number"));
  EXPECT_EQ(Error("[01]"), At(2, "expected ',' or ']'"));
  EXPECT_EQ(Error("[.5]"), At(1, "unexpected character"));
  EXPECT_EQ(Error("[+1]"), At(1, "unexpected character"));
  EXPECT_EQ(Error("01"), At(1, "unexpected data after the end of the JSON document"));
}

TEST_F(JsonPull, Structure) {
  EXPECT_EQ(Error("[1 2]"), At(3, "expected ',' or ']'"));
  EXPECT_EQ(Error("[1,]"), At(3, "unexpected character"));
  EXPECT_EQ(Error("{\"a\" 1}"), At(5, "expected ':' after object key"));
  EXPECT_EQ(Error("{1:2}"), At(1, "expected object key"));
  EXPECT_EQ(Error("{\"a\":1,}"), At(7, "expected object key"));
  EXPECT_EQ(Error("[tru]"), At(1, "invalid literal"));
  EXPECT_EQ(Error("[nul]"), At(1, "invalid literal"));
  EXPECT_EQ(Error("{} x"), At(3, "unexpected data after the end of the JSON document"));
  EXPECT_EQ(Error(""), path_ + ": empty file");
  EXPECT_EQ(Error("  \n "), At(4, "unexpected end of input (truncated file?)"));
  EXPECT_EQ(Parse("\xEF\xBB\xBF[1]"), "[1]");  // byte order mark
  EXPECT_EQ(Parse("\xEF\xBB\xBF[1]", 1), "[1]");
  EXPECT_EQ(Error("\xEF\xBB[1]"), At(0, "unexpected character"));
}

TEST_F(JsonPull, TokensSplitAcrossReads) {
  const std::string doc =
      " {\"long key with \\\"escapes\\\" \\u00e9\\ud83d\\ude00\": [1.25e-3, -12345678901234567890,"
      " true, false, null, \"" +
      std::string(300, 'x') + "\", {\"\": []}], \"n\": 0.5}\n";
  const std::string whole = Parse(doc);
  EXPECT_EQ(whole.substr(0, 7), "{\"long ");
  for (size_t chunk = 1; chunk <= 40; ++chunk) EXPECT_EQ(Parse(doc, chunk), whole) << chunk;
  for (size_t chunk : {64, 100, 333, 1000}) EXPECT_EQ(Parse(doc, chunk), whole) << chunk;
  // The same through gzip.
  gzFile gz = gzopen(path_.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, doc.data(), static_cast<unsigned>(doc.size()));
  gzclose(gz);
  EXPECT_EQ(ParseFile(), whole);
  EXPECT_EQ(ParseFile(3), whole);
}

TEST_F(JsonPull, TruncationAtEveryOffset) {
  const std::string doc = kEveryType;
  for (size_t chunk : {size_t{1}, size_t{7}, json::StreamOptions().chunk}) {
    EXPECT_EQ(Error("", chunk), path_ + ": empty file");
    for (size_t n = 1; n < doc.size(); ++n)
      EXPECT_EQ(Error(doc.substr(0, n), chunk), At(n, "unexpected end of input (truncated file?)"))
          << "chunk " << chunk << ", cut at " << n;
  }
  // A truncated gzip stream is an error too, at whatever point zlib notices.
  const std::string big = "[" + std::string(100000, ' ') + kEveryType + "]";
  gzFile gz = gzopen(path_.c_str(), "wb");
  gzwrite(gz, big.data(), static_cast<unsigned>(big.size()));
  gzclose(gz);
  std::string gz_bytes = test::ReadAll(path_);
  for (size_t n = 1; n < gz_bytes.size(); n += 7) {
    test::WriteAll(path_, gz_bytes.substr(0, n));
    try {
      ParseFile();
      ADD_FAILURE() << "gzip cut at " << n << " parsed";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path_ + ": ", 0), 0u) << e.what();
    }
  }
}

TEST_F(JsonPull, DeepNesting) {
  const size_t max = Cursor::kMaxDepth;
  EXPECT_EQ(Skip(std::string(max, '[') + std::string(max, ']')), "");
  EXPECT_EQ(Skip("{\"a\":" + std::string(max - 1, '[') + std::string(max - 1, ']') + "}"), "");
  EXPECT_EQ(Skip(std::string(max + 1, '[') + std::string(max + 1, ']')),
            At(max, "nesting too deep"));
  EXPECT_EQ(Skip(std::string(100000, '[') + std::string(100000, ']')), At(max, "nesting too deep"));
  EXPECT_EQ(Skip(std::string(100000, '[')), At(max, "nesting too deep"));
}

TEST_F(JsonPull, ControlAndNulBytes) {
  EXPECT_EQ(Error(std::string("[\"a\0b\"]", 7)), At(3, "control character in string"));
  EXPECT_EQ(Error(std::string("[1,\0]", 5)), At(3, "unexpected character"));
  EXPECT_EQ(Error(std::string("\0", 1)), At(0, "unexpected character"));
  EXPECT_EQ(Error(std::string("[1]\0", 4)),
            At(3, "unexpected data after the end of the JSON document"));
  EXPECT_EQ(Error("[\"\x1f\"]"), At(2, "control character in string"));
  EXPECT_EQ(Error("[\"unterminated]"), At(15, "unexpected end of input (truncated file?)"));
  EXPECT_EQ(Error("[\"unterminated\\"), At(15, "unexpected end of input (truncated file?)"));
}

TEST_F(JsonPull, InvalidUtf8) {
  // Outside strings any byte that is not JSON is an error.
  EXPECT_EQ(Error("[\xff]"), At(1, "unexpected character"));
  EXPECT_EQ(Error("\xc3\xa9"), At(0, "unexpected character"));
  // Inside strings bytes are passed through as they are: the parser never splits a string on a
  // byte >= 0x80, so invalid sequences cannot confuse it, and names in traces stay as written.
  const std::string bad = "\xff\xfe\xc3(\xe2\x82\xed\xa0\x80\xf8\x88\x80\x80\x80\xc0\xaf";
  EXPECT_EQ(Parse("[\"" + bad + "\"]"), "[" + Quote(bad) + "]");
  EXPECT_EQ(Parse("[\"" + bad + "\\n\"]", 1), "[" + Quote(bad + "\n") + "]");
}

TEST_F(JsonPull, GarbageIsAnErrorOrAValue) {
  std::mt19937 rng(4242);
  const char kJsonish[] = "{}[]\",:\\ 0-.eEtrufalsn\x01\xff";
  for (int i = 0; i < 400; ++i) {
    std::string doc(1 + rng() % 64, '\0');
    for (char& ch : doc)
      ch = i % 2 ? static_cast<char>(rng()) : kJsonish[rng() % (sizeof kJsonish - 1)];
    try {
      Parse(doc, 1 + rng() % 9);
    } catch (const InputError& e) {
      std::string what = e.what();
      EXPECT_EQ(what.rfind(path_ + ": ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST_F(JsonPull, HugeStrings) {
  const size_t mib = 1u << 20;
  const std::string big(3 * mib, 'a');
  EXPECT_EQ(Parse("[\"" + big + "\"]", 64 * 1024, 4 * mib).size(), big.size() + 4);
  EXPECT_EQ(Error("[\"" + big + "\"]", 64 * 1024, mib), At(0, "JSON element larger than 1 MiB"));
}

TEST_F(JsonPull, ElementsAndMembersStepOneAtATime) {
  // 20 MB of elements read with a 4 KiB buffer: each step holds one element only.
  std::string doc = "{\"first\": 1, \"items\": [";
  const std::string item = R"({"name": "a name", "values": [1, 2.5, -3e2, "x\ty"]})";
  const size_t count = 20'000'000 / item.size();
  for (size_t i = 0; i < count; ++i) doc += (i ? ",\n" : "") + item;
  doc += "], \"last\": \"z\"}";
  test::WriteAll(path_, doc);
  json::StreamOptions opts;
  opts.chunk = 4096;
  json::Stream s(path_, opts);
  std::vector<std::string> keys;
  size_t items = 0;
  std::string scratch, dump;
  s.Parse([&] {
    ASSERT_TRUE(s.Begin());
    s.Members(scratch, [&](const std::string& key) {
      keys.push_back(key);
      if (key != "items") return s.Step([&](Cursor& c) { c.SkipValue(); });
      s.Elements(
          "expected ',' or ']' after an item",
          [&](Cursor& c) {
            dump.clear();
            Dump(c, dump);
          },
          [&] {
            EXPECT_EQ(dump, R"({"name":"a name","values":[1,2.5,-3e2,"x\u0009y"]})");
            ++items;
          });
    });
    s.End();
  });
  EXPECT_EQ(keys, (std::vector<std::string>{"first", "items", "last"}));
  EXPECT_EQ(items, count);
  EXPECT_LT(s.BufferBytes(), 16u * 1024);
  EXPECT_EQ(Error("{\"a\": [1 2]}"), At(9, "expected ',' or ']'"));
}

TEST_F(JsonPull, TopLevelMemberErrors) {
  auto members = [&](const std::string& doc) -> std::string {
    test::WriteAll(path_, doc);
    json::Stream s(path_);
    std::string scratch;
    try {
      s.Parse([&] {
        s.Begin();
        s.Members(scratch, [&](const std::string&) { s.Step([](Cursor& c) { c.SkipValue(); }); });
        s.End();
      });
      return "";
    } catch (const InputError& e) {
      return e.what();
    }
  };
  EXPECT_EQ(members("{\"a\": 1, \"b\": [2]}"), "");
  EXPECT_EQ(members("{ }"), "");
  EXPECT_EQ(members("{\"a\": 1,}"), At(8, "expected a key in the top-level object"));
  EXPECT_EQ(members("{\"a\" 1}"), At(5, "expected ':' after a key"));
  EXPECT_EQ(members("{\"a\": 1 \"b\": 2}"), At(8, "expected ',' or '}' in the top-level object"));
  EXPECT_EQ(members("{\"a\":"), At(5, "unexpected end of input (truncated file?)"));
  EXPECT_EQ(members("[]"), At(0, "expected '{'"));
}

}  // namespace
}  // namespace kprof
