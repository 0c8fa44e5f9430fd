// Progress of long work on stderr ("exporting runs/a: 412,000 / 1,000,000 records"), shown only
// when stderr is a terminal, at most every half second, and erased when the work ends so that
// what follows starts on a clean line. Costs one clock read per Update() when enabled and one
// branch when not.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kprof {

class Progress {
 public:
  /// `what` names the work ("exporting out.sqlite"); `unit` the items counted ("records"), or
  /// "MB" when Update() is given bytes (shown in MB).
  /// Shows nothing unless `enabled` (ProgressToTerminal() for the CLI's default).
  Progress(bool enabled, std::string what, std::string unit);
  ~Progress();  ///< erases the line if one was shown
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// `done` of `total` items (total 0 = unknown). Cheap enough to call per item in batches of
  /// a few thousand.
  void Update(uint64_t done, uint64_t total);
  /// Erases the line if one was shown; later Update() calls show it again.
  void Finish();
  bool shown() const { return shown_; }

 private:
  bool enabled_;
  bool shown_ = false;
  std::string what_, unit_;
  std::chrono::steady_clock::time_point start_, last_;
};

/// True when stderr is a terminal (and KPROF_PROGRESS is not "0").
bool ProgressToTerminal();

}  // namespace kprof
