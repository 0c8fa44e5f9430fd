// See periodic_thread.h.
#include "agent/periodic_thread.h"

#include <unistd.h>

#include <utility>

#include "agent/agent.h"

namespace kprof::agent {

PeriodicThread::PeriodicThread(std::chrono::milliseconds period, std::function<void()> round)
    : period_(period), round_(std::move(round)) {}

PeriodicThread::~PeriodicThread() { Stop(true, std::chrono::milliseconds::max()); }

bool PeriodicThread::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return false;
  woken_ = true;
  if (!thread_.joinable()) {
    pid_ = getpid();
    thread_ = std::thread([this] { Loop(); });
  }
  cv_.notify_all();
  return true;
}

bool PeriodicThread::Stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

void PeriodicThread::Loop() {
  BlockSignalsInThisThread();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, period_, [&] { return stop_ || woken_; });
    if (stop_) break;
    woken_ = false;
    lock.unlock();
    round_();
    lock.lock();
  }
  ended_ = true;
  cv_.notify_all();
}

PeriodicThread::Stopped PeriodicThread::Stop(bool wait, std::chrono::milliseconds timeout) {
  if (pid_ != getpid()) return Stopped::NotRunning;
  bool ended = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (finished_ || !thread_.joinable()) return Stopped::NotRunning;
    stop_ = true;
    cv_.notify_all();
    if (!wait) return Stopped::Asked;
    // (wait_for with milliseconds::max() overflows the clock: wait without a deadline.)
    if (timeout == std::chrono::milliseconds::max()) {
      cv_.wait(lock, [&] { return ended_; });
      ended = true;
    } else {
      ended = cv_.wait_for(lock, timeout, [&] { return ended_; });
    }
    finished_ = true;
  }
  if (!ended) {
    thread_.detach();
    return Stopped::TimedOut;
  }
  thread_.join();
  return Stopped::Joined;
}

}  // namespace kprof::agent
