// Signals: on SIGINT, SIGTERM, SIGSEGV and the like the agent flushes what it has (or finishes
// the file when the signal will end the program), then lets the program's own handling or the
// default action proceed. The handler only talks to a signal thread through a pipe.
//
// The thread a signal interrupts may be inside a CUDA call, holding locks that CUPTI's flush
// needs: a handler that waits there for a flush waits for itself (measured on the H100: a
// SIGTERM to a program launching flat out timed the forced flush out after 5 s and lost the
// buffers it held). So for the asynchronous signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) the
// handler never waits: with the default action the signal thread finishes the file and then
// raises the signal again with the default action restored; with the program's own handler it
// flushes beside the program, which goes on at once. Only faults of the interrupted thread
// itself (SIGSEGV, SIGBUS, SIGABRT), after which that thread cannot go on, wait in the handler.
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "agent/agent.h"

namespace kprof::agent {

namespace {
// KPROF_AGENT_BACKTRACE=1: a fault's stack on stderr first, and SIGUSR2 sent to any thread of
// the program prints that thread's stack (for debugging the agent, a hang above all, where no
// debugger is at hand; docs/reliability.md).
// Read once before the handlers are installed (the handler reads this, not the knobs).
bool g_backtrace = false;

void PrintStack(int /*sig*/) {
  int saved_errno = errno;
  char head[64];
  const int n = std::snprintf(head, sizeof head, "kprof agent: stack of thread %ld:\n",
                              static_cast<long>(gettid()));
  ssize_t w = write(STDERR_FILENO, head, static_cast<size_t>(n));
  (void)w;
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  errno = saved_errno;
}
}  // namespace

void BlockSignalsInThisThread() {
  sigset_t all;
  sigfillset(&all);
  if (Knobs().backtrace) sigdelset(&all, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

namespace {

bool ProgramHandles(const struct sigaction& old) {
  return (old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != nullptr
                                     : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN);
}

// Faults of the interrupted thread: it cannot go on, so the handler waits for the flush there.
bool Synchronous(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT; }

void SignalThreadLoop() {
  BlockSignalsInThisThread();
  Agent& a = A();
  while (true) {
    unsigned char sig = 0;
    ssize_t n = read(a.sig_pipe[0], &sig, 1);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    const struct sigaction& old = a.old_actions[sig];
    if (ProgramHandles(old)) {
      // The program decides what happens next (Python raises KeyboardInterrupt, ...): only
      // flush; the exit path finishes the file.
      FlushWithTimeout(0, kSignalFlushTimeoutMs);
      WaitDrained(kSignalFlushTimeoutMs);
    } else if (old.sa_handler != SIG_IGN) {
      Finish("signal " + std::to_string(sig));
      if (!Synchronous(sig)) {
        // The handler returned at once; now end the program as the signal would have.
        sigaction(sig, &old, nullptr);
        kill(getpid(), sig);
      }
    }
    if (Synchronous(sig)) {
      unsigned char ack = 1;
      ssize_t w = write(a.ack_pipe[1], &ack, 1);
      (void)w;
    }
  }
}

void OnSignal(int sig, siginfo_t* info, void* ctx) {
  int saved_errno = errno;
  if (g_backtrace && Synchronous(sig)) {
    void* frames[64];
    const int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
  }
  Agent& a = A();
  struct sigaction& old = a.old_actions[sig];
  // A child forked without exec inherits this handler and the pipes, but not the threads:
  // only the process that started the agent talks to its signal thread.
  const bool ours = a.active && a.sig_pipe[1] >= 0 && getpid() == a.pid;
  if (ours) {
    unsigned char s = static_cast<unsigned char>(sig);
    if (write(a.sig_pipe[1], &s, 1) == 1) {
      if (Synchronous(sig)) {
        struct pollfd pfd = {a.ack_pipe[0], POLLIN, 0};
        int timeout = kExitFlushTimeoutMs + kSignalFlushTimeoutMs;
        if (poll(&pfd, 1, timeout) > 0) {
          unsigned char ack;
          ssize_t r = read(a.ack_pipe[0], &ack, 1);
          (void)r;
        }
      } else if (!ProgramHandles(old) && old.sa_handler != SIG_IGN) {
        errno = saved_errno;
        return;  // the signal thread finishes the file and raises the signal again
      }
    }
  }
  errno = saved_errno;
  if (old.sa_flags & SA_SIGINFO) {
    if (old.sa_sigaction != nullptr) old.sa_sigaction(sig, info, ctx);
    return;
  }
  if (old.sa_handler == SIG_IGN) return;
  if (old.sa_handler != SIG_DFL && old.sa_handler != nullptr) {
    old.sa_handler(sig);
    return;
  }
  // Default action: restore it and re-raise (for SIGSEGV/SIGBUS returning re-executes the
  // faulting instruction, which now takes the default action).
  sigaction(sig, &old, nullptr);
  if (sig != SIGSEGV && sig != SIGBUS) raise(sig);
}

}  // namespace

void InstallSignalHandlers() {
  Agent& a = A();
  g_backtrace = Knobs().backtrace;
  if (g_backtrace) {  // loads libgcc's unwinder now, not in the handler
    void* frame = nullptr;
    backtrace(&frame, 1);
    struct sigaction sa {};
    sa.sa_handler = PrintStack;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, nullptr);
  }
  if (pipe2(a.sig_pipe, O_CLOEXEC) != 0 || pipe2(a.ack_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "kprof agent: pipe failed: %s; no flush on signals\n",
                 std::strerror(errno));
    return;
  }
  a.signal_thread = std::thread(SignalThreadLoop);
  a.signal_thread.detach();
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS}) {
    struct sigaction sa {};
    sa.sa_sigaction = OnSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, &a.old_actions[sig]) != 0) {
      std::fprintf(stderr, "kprof agent: sigaction(%d) failed: %s\n", sig, std::strerror(errno));
    }
  }
}

}  // namespace kprof::agent
