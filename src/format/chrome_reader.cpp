// Streaming reader of Chrome trace JSON (PyTorch profiler / Kineto traces, and kprof's own
// Chrome output), plain or gzip. See docs/chrome-trace.md for the mapping to kprof records.
//
// The document is pulled through the JSON parser of json_pull.h: the top-level members one step
// each, then each element of "traceEvents" on its own into a flat RawEvent (string_views into the
// buffer, or into a small scratch area when a string has escapes), which chrome_records.cpp
// converts to a Record before the next element is read. Memory is the records, not the file.
#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/chrome_records.h"
#include "format/json_pull.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

using chrome::RawEvent;
using json::Cursor;
using json::IsDigit;

/// Integer fields of a trace event's "args", by key.
struct IntArg {
  std::string_view key;
  int64_t RawEvent::*field;
  uint32_t has;
};
constexpr IntArg kIntArgs[] = {{"correlation", &RawEvent::correlation, 0},
                               {"stream", &RawEvent::stream, chrome::kHasStream},
                               {"device", &RawEvent::device, chrome::kHasDevice},
                               {"bytes", &RawEvent::bytes, 0},
                               {"cbid", &RawEvent::cbid, 0},
                               {"registers per thread", &RawEvent::regs, 0},
                               {"shared memory", &RawEvent::smem, 0},
                               {"Bytes", &RawEvent::mem_bytes, chrome::kHasMemBytes},
                               {"Device Id", &RawEvent::mem_device, 0},
                               {"Device Type", &RawEvent::device_type, chrome::kHasDeviceType},
                               {"Addr", &RawEvent::addr, 0},
                               {"Sequence number", &RawEvent::seq, chrome::kHasSeq}};

/// Fails with "WHAT is not TYPE" at the cursor.
[[noreturn]] void NotA(const Cursor& c, std::string_view what, const char* type) {
  c.Fail(c.p, std::string(what) + " is not " + type);
}
std::string Quoted(std::string_view field) { return "\"" + std::string(field) + "\""; }

/// A number (the cursor before it); `field` names it in the error.
json::Number NumberValue(Cursor& c, std::string_view field) {
  char ch = c.Peek();
  if (ch != '-' && !IsDigit(ch)) NotA(c, Quoted(field), "a number");
  return c.Num();
}

/// An integer field; null reads as absent (0).
int64_t IntValue(Cursor& c, std::string_view field) {
  if (c.Peek() == 'n') {
    c.Literal("null");
    return 0;
  }
  return json::ToInt(NumberValue(c, field));
}

std::string_view StrValue(Cursor& c, std::string_view field, std::string& scratch) {
  if (c.Peek() != '"') NotA(c, Quoted(field), "a string");
  return c.String(scratch);
}

class ChromeReader {
 public:
  ChromeReader(const std::string& path, const ChromeReadOptions& opts)
      : path_(path), stream_(path, OptionsOf(opts)), records_(path) {}

  Run Read() {
    stream_.Parse([&] { Document(); });
    return records_.Finish();
  }

 private:
  static json::StreamOptions OptionsOf(const ChromeReadOptions& opts) {
    json::StreamOptions o;
    o.show_progress = opts.show_progress;
    return o;
  }

  // --- document structure ---
  void Document() {
    if (!stream_.Begin()) throw InputError(path_ + ": empty file");
    char first = stream_.Step([](Cursor& c) { return c.Peek(); });
    if (first == '[') {
      top_is_array_ = true;
      EventArray();
    } else if (first == '{') {
      stream_.Members(key_scratch_, [&](const std::string& key) { TopMember(key); });
    } else {
      stream_.Step([](Cursor& c) { c.Fail(c.p, "not a Chrome trace: expected '{' or '['"); });
    }
    stream_.End();
    if (!saw_events_ && !top_is_array_)
      throw InputError(path_ + ": not a Chrome trace: no \"traceEvents\" array");
  }

  void TopMember(const std::string& key) {
    if (key == "traceEvents") {
      stream_.Step([](Cursor& c) {
        if (c.Peek() != '[') NotA(c, "\"traceEvents\"", "an array");
      });
      saw_events_ = true;
      EventArray();
    } else if (key == "baseTimeNanoseconds") {
      records_.base_ns = stream_.Step(
          [](Cursor& c) { return json::ToInt(NumberValue(c, "baseTimeNanoseconds")); });
    } else if (key == "deviceProperties") {
      stream_.Step([&](Cursor& c) { DeviceProperties(c); });
    } else if (key == "distributedInfo") {
      stream_.Step([&](Cursor& c) {
        for (auto& [k, v] : FlatObject(c, "\"distributedInfo\"")) {
          records_.top_meta["distributed." + k] = v;
          if (k == "rank") records_.rank = static_cast<int>(std::strtol(v.c_str(), nullptr, 10));
          // As kprof's agent records WORLD_SIZE (docs/format.md, "Meta keys").
          if (k == "world_size") records_.top_meta["world_size"] = v;
        }
      });
    } else {
      // Other scalars are kept as meta "chrome.<key>"; anything else is skipped.
      stream_.Step([&](Cursor& c) {
        if (auto v = ScalarText(c)) records_.top_meta["chrome." + key] = std::move(*v);
      });
    }
  }

  /// The text of a string or a number; other values are skipped.
  std::optional<std::string> ScalarText(Cursor& c) {
    char ch = c.Peek();
    if (ch == '"') return std::string(c.String(value_scratch_));
    if (ch == '-' || IsDigit(ch)) return std::string(c.Num().Text());
    c.SkipValue();
    return std::nullopt;
  }

  /// Parses an object of scalars (nested values skipped) into key/value text pairs.
  std::vector<std::pair<std::string, std::string>> FlatObject(Cursor& c, std::string_view what) {
    std::vector<std::pair<std::string, std::string>> out;
    if (c.Peek() != '{') NotA(c, what, "an object");
    c.Object(key_scratch_, "expected ',' or '}'", [&](std::string_view key) {
      std::string k(key);
      if (auto v = ScalarText(c)) out.emplace_back(std::move(k), std::move(*v));
    });
    return out;
  }

  void DeviceProperties(Cursor& c) {
    if (c.Peek() != '[') NotA(c, "\"deviceProperties\"", "an array");
    c.Array("expected ',' or ']'", [&](size_t index) {
      auto kv = FlatObject(c, "a \"deviceProperties\" element");
      std::string id = std::to_string(index), major, minor;
      for (auto& [k, v] : kv)
        if (k == "id") id = v;
      std::string pre = "device." + id + ".";
      auto& meta = records_.device_meta;
      for (auto& [k, v] : kv) {
        if (k == "name") meta[pre + "name"] = v;
        if (k == "numSms") meta[pre + "sm_count"] = v;
        if (k == "totalGlobalMem") meta[pre + "memory_bytes"] = v;
        if (k == "computeMajor") major = v;
        if (k == "computeMinor") minor = v;
      }
      if (!major.empty()) meta[pre + "cc"] = major + "." + (minor.empty() ? "0" : minor);
    });
  }

  void EventArray() {
    stream_.Elements(
        "expected ',' or ']' after a trace event", [&](Cursor& c) { ParseEvent(c); },
        [&] { records_.Add(ev_); });
  }

  // --- one trace event ---
  void Dim(Cursor& c, std::array<int64_t, 3>& out, std::string_view field) {
    if (c.Peek() != '[') NotA(c, Quoted(field), "an array");
    out = {1, 1, 1};
    c.Array("expected ',' or ']'", [&](size_t i) {
      int64_t v = IntValue(c, field);
      if (i < 3) out[i] = v;
    });
  }

  void ArgsMember(Cursor& c, std::string_view k) {
    RawEvent& e = ev_;
    // Most args (shapes, types...) are skipped unparsed.
    for (const IntArg& a : kIntArgs) {
      if (k == a.key) {
        e.*a.field = IntValue(c, a.key);
        e.has |= a.has;
        return;
      }
    }
    if (k == "grid" || k == "block") {
      Dim(c, k == "grid" ? e.grid : e.block, k);
    } else if (k == "name" && c.Peek() == '"') {
      e.arg_name = c.String(arg_name_scratch_);
    } else {
      c.SkipValue();
    }
  }

  void EventMember(Cursor& c, std::string_view k) {
    RawEvent& e = ev_;
    if (k == "ph") {
      e.ph = StrValue(c, "ph", ph_scratch_);
    } else if (k == "ts" || k == "dur") {
      int64_t v = json::ToThousandths(NumberValue(c, k));  // microseconds to nanoseconds
      (k == "ts" ? e.ts : e.dur) = v;
      if (k == "ts") e.has |= chrome::kHasTs;
    } else if (k == "pid" || k == "tid") {
      int64_t v = 0;
      bool named = c.Peek() == '"';
      if (named)
        c.SkipString();  // named tracks ("Spans", "Traces"): not kprof data
      else
        v = IntValue(c, k);
      if (k == "pid") {
        e.pid = v;
        e.pid_is_string = named;
        e.has |= chrome::kHasPid;
      } else {
        e.tid = v;
      }
    } else if (k == "cat") {
      e.cat = StrValue(c, "cat", cat_scratch_);
    } else if (k == "name") {
      e.name = StrValue(c, "name", name_scratch_);
    } else if (k == "args") {
      if (c.Peek() != '{') return c.SkipValue();  // args of another type: ignored
      c.Object(key_scratch_, "expected ',' or '}'",
               [&](std::string_view key) { ArgsMember(c, key); });
    } else {
      c.SkipValue();
    }
  }

  /// Parses one element of traceEvents into ev_.
  void ParseEvent(Cursor& c) {
    ev_ = RawEvent{};
    if (c.Peek() != '{') NotA(c, "trace event", "an object");
    ev_.at = c.p;
    c.Object(key_scratch_, "expected ',' or '}' in a trace event",
             [&](std::string_view key) { EventMember(c, key); });
  }

  std::string path_;
  json::Stream stream_;
  chrome::RecordBuilder records_;
  bool saw_events_ = false;
  bool top_is_array_ = false;

  std::string key_scratch_, value_scratch_, ph_scratch_, cat_scratch_, name_scratch_,
      arg_name_scratch_;
  RawEvent ev_;
};

}  // namespace

Run ReadChromeTrace(const std::string& path, const ChromeReadOptions& opts) {
  ChromeReader reader(path, opts);
  return reader.Read();
}

}  // namespace kprof
