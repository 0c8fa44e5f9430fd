// A small streaming JSON writer for the HTML report's data document: arrays of a million
// numbers are appended without building a DOM. Strings go through AppendJsonString (quotes,
// backslashes, controls, invalid UTF-8, U+2028/U+2029); Finish() then escapes <, > and & so that
// the document can sit inside a <script> element (they only ever occur inside strings).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/output.h"

namespace kprof::html {

class JsonWriter {
 public:
  JsonWriter& Obj() { return Open('{'); }
  JsonWriter& EndObj() { return Close('}'); }
  JsonWriter& Arr() { return Open('['); }
  JsonWriter& EndArr() { return Close(']'); }
  JsonWriter& Key(std::string_view k) {
    Sep();
    AppendJsonString(s_, k);
    s_ += ':';
    after_key_ = true;
    return *this;
  }
  JsonWriter& Str(std::string_view v) {
    Sep();
    AppendJsonString(s_, v);
    return *this;
  }
  JsonWriter& U64(uint64_t v) {
    Sep();
    s_ += fmt::format_int(v).c_str();
    return *this;
  }
  JsonWriter& I64(int64_t v) {
    Sep();
    s_ += fmt::format_int(v).c_str();
    return *this;
  }
  JsonWriter& Dbl(double v) {
    Sep();
    if (std::isfinite(v))
      fmt::format_to(std::back_inserter(s_), "{:.6g}", v);
    else
      s_ += "null";
    return *this;
  }
  JsonWriter& Bool(bool v) {
    Sep();
    s_ += v ? "true" : "false";
    return *this;
  }
  JsonWriter& Null() {
    Sep();
    s_ += "null";
    return *this;
  }
  // Key + value.
  JsonWriter& S(std::string_view k, std::string_view v) { return Key(k).Str(v); }
  JsonWriter& U(std::string_view k, uint64_t v) { return Key(k).U64(v); }
  JsonWriter& I(std::string_view k, int64_t v) { return Key(k).I64(v); }
  JsonWriter& D(std::string_view k, double v) { return Key(k).Dbl(v); }
  JsonWriter& B(std::string_view k, bool v) { return Key(k).Bool(v); }
  template <class T>
  JsonWriter& U64Array(std::string_view k, const std::vector<T>& v) {
    Key(k).Arr();
    for (T x : v) U64(static_cast<uint64_t>(x));
    return EndArr();
  }

  /// The document, with <, > and & as \u escapes (safe inside <script>).
  std::string Finish() &&;

 private:
  JsonWriter& Open(char c) {
    Sep();
    s_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& Close(char c) {
    s_ += c;
    first_.pop_back();
    return *this;
  }
  void Sep() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) s_ += ',';
      first_.back() = false;
    }
  }
  std::string s_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace kprof::html
