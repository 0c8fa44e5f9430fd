// kprof/utf8.h: the one definition of a valid UTF-8 sequence the readers and writers share.
#include "kprof/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace kprof {
namespace {

TEST(Utf8, DecodesEveryLengthAtItsBoundaries) {
  for (uint32_t cp : {0x00u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFDu, 0xFFFFu,
                      0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(s, cp);
    const Utf8Char c = DecodeUtf8(s, 0);
    EXPECT_EQ(c.cp, cp);
    EXPECT_EQ(c.len, s.size());
    EXPECT_EQ(s.size(), cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u);
  }
}

TEST(Utf8, RejectsWhatIsNotAValidSequence) {
  for (const std::string& bad : {std::string("\x80"),              // stray continuation
                                 std::string("\xC0\x80"),          // overlong NUL
                                 std::string("\xE0\x80\xAF"),      // overlong '/'
                                 std::string("\xED\xA0\x80"),      // surrogate U+D800
                                 std::string("\xF4\x90\x80\x80"),  // above U+10FFFF
                                 std::string("\xF8\x88\x80\x80"),  // 5-byte lead
                                 std::string("\xE2\x82"),          // truncated
                                 std::string("\xC3\x28")})         // bad continuation
    EXPECT_EQ(DecodeUtf8(bad, 0).len, 0u) << static_cast<int>(static_cast<unsigned char>(bad[0]));
}

TEST(Utf8, DecodesInsideALongerString) {
  const std::string s =
      "a\xE2\x82\xAC"
      "b";  // a € b
  EXPECT_EQ(DecodeUtf8(s, 1).cp, 0x20ACu);
  EXPECT_EQ(DecodeUtf8(s, 1).len, 3u);
  EXPECT_EQ(DecodeUtf8(s, 2).len, 0u);  // a continuation byte on its own
  EXPECT_EQ(DecodeUtf8(s, 4).cp, static_cast<uint32_t>('b'));
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

TEST(Utf8Text, ValidUtf8ReplacesEachInvalidByte) {
  EXPECT_EQ(ValidUtf8("ok \xc3\xbc"), "ok \xc3\xbc");
  EXPECT_EQ(ValidUtf8("a\xff\xfe"
                      "b"),
            "a\xef\xbf\xbd\xef\xbf\xbd"
            "b");
  EXPECT_EQ(ValidUtf8("\xc3\x28"), "\xef\xbf\xbd(");             // truncated sequence
  EXPECT_EQ(ValidUtf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong '/'
}

TEST(Utf8Text, DisplayTextIsOneLineWithoutControlCharacters) {
  EXPECT_EQ(DisplayText("a\nb\r\nc\td"), "a\\nb\\r\\nc\\td");
  EXPECT_EQ(DisplayText("\x1b[31mred\x7f"), "\\x1b[31mred\\x7f");
  EXPECT_EQ(DisplayText("\xc2\x85 C1"), "\\x85 C1");  // NEL, a C1 control
  EXPECT_EQ(DisplayText("x\xe2\x80\xa8y\xe2\x80\xa9z"), "x\\u2028y\\u2029z");
  EXPECT_EQ(DisplayText("bad\xff"), "bad\xef\xbf\xbd");
  EXPECT_EQ(DisplayText("plain \xf0\x9f\x9a\x80 \\ \""), "plain \xf0\x9f\x9a\x80 \\ \"");
  const std::string once = DisplayText("a\n\x01\xff");
  EXPECT_EQ(DisplayText(once), once);  // idempotent: safe to apply twice
}

}  // namespace
}  // namespace kprof
