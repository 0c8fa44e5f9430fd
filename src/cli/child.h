// Internal to the CLI: running a child process and reading what it writes, with a deadline
// (`kprof doctor`'s probes, `kprof run`'s calibration).
#pragma once

#include <functional>
#include <string>

namespace kprof::cli {

/// What a child process said: its output, or why there is none to trust.
struct ChildAnswer {
  std::string output;
  std::string error;  ///< "" when the child exited 0 in time
  int status = -1;    ///< exit status (when it exited)
};

/// Forks; the child runs `body` with the write end of a pipe (the child exits 0 when `body`
/// returns). Collects what it writes for at most `timeout_s` seconds, then kills it.
ChildAnswer RunInChild(const std::function<void(int fd)>& body, int timeout_s);

}  // namespace kprof::cli
