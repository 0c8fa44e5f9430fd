// A thread of the agent's own that runs a round of work every period, and at once when woken
// (PM sampling's decoding thread: counters_sampling.cpp). No CUPTI here: the thread contract is
// tested under ThreadSanitizer (tests/agent_writer/periodic_thread_test.cpp).
//
// Thread contract:
// - Wake, Stopping and Stop may be called from any thread, at the same time as each other and
//   as a round; the round runs only on the thread this object owns, one at a time, and never
//   after Stop has returned Joined.
// - Wake starts the thread on its first call; a Wake after Stop was asked does nothing.
// - Stop(false) asks the thread to end after the round under way and returns at once (it is
//   called where waiting could hang: a context's destruction). Stop(true) also waits for it, up
//   to a timeout, then joins it; a thread that did not end in time is detached, so the object
//   must outlive it (the agent's are never destroyed). Only the first Stop(true) waits.
// - In a forked child, which has no copy of the thread, Stop does nothing and touches no lock
//   (the child's copy of the mutex may be held by the thread it does not have).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kprof::agent {

class PeriodicThread {
 public:
  PeriodicThread(std::chrono::milliseconds period, std::function<void()> round);
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;
  /// Joins a thread still running (Stop(true) with no timeout): only for objects that can be
  /// destroyed, in tests.
  ~PeriodicThread();

  /// Asks for a round now, starting the thread if it is not running yet. False once Stop was
  /// asked (no round comes).
  bool Wake();
  bool Stopping();

  enum class Stopped {
    NotRunning,  // no thread in this process, or already stopped
    Asked,       // Stop(false): asked to end, not waited for
    Joined,      // ended and joined
    TimedOut,    // did not end in time: detached
  };
  Stopped Stop(bool wait, std::chrono::milliseconds timeout);

 private:
  void Loop();

  const std::chrono::milliseconds period_;
  const std::function<void()> round_;
  // The process that started the thread, read before mu_ is taken (see the contract).
  std::atomic<pid_t> pid_{0};
  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::thread thread_;
  bool woken_ = false;     // a round is asked for now
  bool stop_ = false;      // Stop was asked
  bool ended_ = false;     // the loop left
  bool finished_ = false;  // a Stop(true) waited (joined or detached)
};

}  // namespace kprof::agent
