#include "kprof/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kprof {
namespace {

/// 1234567 -> "1,234,567".
std::string Grouped(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

Progress::Progress(bool enabled, std::string what, std::string unit)
    : enabled_(enabled),
      what_(std::move(what)),
      unit_(std::move(unit)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { Finish(); }

void Progress::Finish() {
  if (!shown_) return;
  shown_ = false;
  std::fputs("\r\033[K", stderr);  // erase the progress line
  std::fflush(stderr);
}

void Progress::Update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // Quick work shows nothing: the first line comes after half a second.
  if (now - last_ < std::chrono::milliseconds(500)) return;
  last_ = now;
  shown_ = true;
  if (unit_ == "MB") {  // bytes, shown in MB
    done /= 1'000'000;
    total /= 1'000'000;
  }
  std::string line = "\r\033[K" + what_ + ": " + Grouped(done);
  if (total > 0) {
    line += " / " + Grouped(total) + " " + unit_;
    char pct[16];
    std::snprintf(pct, sizeof pct, " (%.0f%%)",
                  100.0 * static_cast<double>(done) / static_cast<double>(total));
    line += pct;
  } else {
    line += " " + unit_;
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

bool ProgressToTerminal() {
  const char* env = std::getenv("KPROF_PROGRESS");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return ::isatty(2) != 0;
}

}  // namespace kprof
