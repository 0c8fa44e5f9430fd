// See child.h.
#include "cli/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace kprof::cli {

ChildAnswer RunInChild(const std::function<void(int fd)>& body, int timeout_s) {
  ChildAnswer a;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    a.error = std::string("pipe: ") + std::strerror(errno);
    return a;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    a.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return a;
  }
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      if (n < 0) a.error = std::string("poll: ") + std::strerror(errno);
      break;
    }
    char buf[4096];
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // end of file: the child closed its end (exited or exec'd and exited)
    a.output.append(buf, static_cast<size_t>(got));
  }
  ::close(fds[0]);
  if (timed_out || !a.error.empty()) ::kill(pid, SIGKILL);
  int st = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &st, 0);
  } while (w < 0 && errno == EINTR);
  if (timed_out) {
    a.error = "did not answer within " + std::to_string(timeout_s) + " s";
  } else if (!a.error.empty()) {  // poll failed: the error says so
  } else if (w < 0) {
    a.error = std::string("waitpid: ") + std::strerror(errno);
  } else if (WIFSIGNALED(st)) {
    a.error =
        "crashed (signal " + std::to_string(WTERMSIG(st)) + ": " + ::strsignal(WTERMSIG(st)) + ")";
  } else if (WIFEXITED(st)) {
    a.status = WEXITSTATUS(st);
    if (a.status != 0) a.error = "exited with status " + std::to_string(a.status);
  }
  return a;
}

}  // namespace kprof::cli
