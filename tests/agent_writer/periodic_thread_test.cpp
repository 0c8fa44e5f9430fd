// PM sampling's decoding thread (src/agent/periodic_thread.h) without CUPTI: rounds every period
// and when woken, never two at once and none after a stop; wakes from many threads racing a
// stop; a stop that times out on a stuck round; a forked child that has no thread. Built into
// the agent writer's test binary, which scripts/sanitize.sh thread runs under ThreadSanitizer.
#include "agent/periodic_thread.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kprof::agent {
namespace {

using std::chrono::milliseconds;
using Stopped = PeriodicThread::Stopped;

constexpr milliseconds kLong{3'600'000};  // a period that never comes in a test

// Waits up to 10 s for `done`.
template <typename F>
bool WaitFor(F done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(AgentPeriodicThread, WakeRunsARoundAtOnceAndStopEndsThem) {
  std::atomic<int> rounds{0};
  PeriodicThread t(kLong, [&] { ++rounds; });
  EXPECT_EQ(t.Stop(true, milliseconds(1000)), Stopped::NotRunning);  // nothing started yet
  ASSERT_TRUE(t.Wake());
  ASSERT_TRUE(WaitFor([&] { return rounds >= 1; }));
  ASSERT_TRUE(t.Wake());
  ASSERT_TRUE(WaitFor([&] { return rounds >= 2; }));
  EXPECT_FALSE(t.Stopping());
  EXPECT_EQ(t.Stop(true, milliseconds(5000)), Stopped::Joined);
  EXPECT_TRUE(t.Stopping());
  const int after = rounds;
  EXPECT_FALSE(t.Wake());
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(rounds, after);
  EXPECT_EQ(t.Stop(true, milliseconds(5000)), Stopped::NotRunning);  // only the first waits
}

TEST(AgentPeriodicThread, RoundsComeEveryPeriodUnwoken) {
  std::atomic<int> rounds{0};
  PeriodicThread t(milliseconds(2), [&] { ++rounds; });
  ASSERT_TRUE(t.Wake());
  EXPECT_TRUE(WaitFor([&] { return rounds >= 5; }));
  EXPECT_EQ(t.Stop(true, milliseconds(5000)), Stopped::Joined);
}

// Eight threads wake it and change what the rounds read while a ninth stops it, first without
// waiting (a context's destruction), then waiting (the exit). Rounds never overlap, and none
// runs once the waiting stop returned.
TEST(AgentPeriodicThread, ManyThreadsWakeWhileItStops) {
  for (int trial = 0; trial < 20; ++trial) {
    std::mutex mu;
    std::vector<int> shared;  // under mu: what the program's threads add and rounds read
    std::atomic<int> in_round{0}, overlaps{0}, rounds{0};
    long seen = 0;  // written by rounds only
    PeriodicThread t(milliseconds(1), [&] {
      if (in_round.fetch_add(1) != 0) ++overlaps;
      {
        std::lock_guard<std::mutex> lock(mu);
        seen += static_cast<long>(shared.size());
      }
      ++rounds;
      in_round.fetch_sub(1);
    });
    std::atomic<bool> go{false};
    std::vector<std::thread> wakers;
    for (int w = 0; w < 8; ++w)
      wakers.emplace_back([&, w] {
        while (!go) std::this_thread::yield();
        for (int i = 0; i < 300; ++i) {
          {
            std::lock_guard<std::mutex> lock(mu);
            shared.push_back(w);
          }
          t.Wake();
        }
      });
    go = true;
    std::this_thread::sleep_for(std::chrono::microseconds(100 * trial));
    const Stopped asked = t.Stop(false, milliseconds(0));
    const Stopped joined = t.Stop(true, milliseconds(5000));
    // A stop before any wake started the thread finds none; else the first asks, the second joins.
    if (asked == Stopped::NotRunning) {
      EXPECT_NE(joined, Stopped::TimedOut);
    } else {
      EXPECT_EQ(asked, Stopped::Asked);
      EXPECT_EQ(joined, Stopped::Joined);
    }
    const int after = rounds;
    for (auto& w : wakers) w.join();
    if (joined == Stopped::Joined) {
      std::this_thread::sleep_for(milliseconds(5));
      EXPECT_EQ(rounds, after) << "a round ran after the stop returned";
      EXPECT_GE(seen, 0);  // read after the join: the rounds' writes happened before it
    }
    EXPECT_EQ(overlaps, 0);
    t.Stop(true, milliseconds(5000));  // joins a thread a late wake started, if any
  }
}

// A round that does not return: the waiting stop gives up after its timeout and detaches the
// thread, which ends once the round returns. The object outlives it (leaked, as the agent's).
TEST(AgentPeriodicThread, AStuckRoundTimesTheStopOut) {
  static std::atomic<bool> release{false};
  static std::atomic<bool> entered{false};
  static auto* t = new PeriodicThread(kLong, [] {
    entered = true;
    while (!release) std::this_thread::sleep_for(milliseconds(1));
  });
  ASSERT_TRUE(t->Wake());
  ASSERT_TRUE(WaitFor([] { return entered.load(); }));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(t->Stop(true, milliseconds(50)), Stopped::TimedOut);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
  EXPECT_EQ(t->Stop(true, milliseconds(50)), Stopped::NotRunning);
  EXPECT_FALSE(t->Wake());
  release = true;
}

// A forked child has no copy of the thread: its stop returns at once, taking no lock.
TEST(AgentPeriodicThread, AForkedChildHasNoThreadToStop) {
  std::atomic<int> rounds{0};
  PeriodicThread t(kLong, [&] { ++rounds; });
  ASSERT_TRUE(t.Wake());
  ASSERT_TRUE(WaitFor([&] { return rounds >= 1; }));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(t.Stop(true, milliseconds(100)) == Stopped::NotRunning ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(t.Stop(true, milliseconds(5000)), Stopped::Joined);
}

}  // namespace
}  // namespace kprof::agent
