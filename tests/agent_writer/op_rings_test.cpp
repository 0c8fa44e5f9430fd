// kprof's own op ranges in the agent (src/agent/op_rings.cpp) without PyTorch: a stand-in
// observer written against the same seam (kprof/op_abi.h) as the real one (src/pytorch/
// kprof_ops.cpp), threads that publish events while the writer takes them, names defined while
// they run, full rings, ended threads, switching, and the clock offset. scripts/sanitize.sh
// thread runs these under ThreadSanitizer.
#include "agent/op_rings.h"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kprof/op_abi.h"
#include "kprof/record.h"

namespace {

namespace ops = kprof::agent::ops;
using kprof::Record;
using kprof::RecordKind;

// A writer thread's string table: ids from 1 in order of first use.
struct Strings {
  std::map<std::string, uint32_t, std::less<>> ids;
  std::vector<std::string> texts{""};
  uint32_t Intern(std::string_view s) {
    auto it = ids.find(s);
    if (it != ids.end()) return it->second;
    texts.emplace_back(s);
    return ids[std::string(s)] = static_cast<uint32_t>(texts.size() - 1);
  }
};

// Publishes as the observer does (kprof_op_publish); `waits`: until the writer has made room.
bool Publish(kprof_op_ring* ring, const kprof_op_event& e, bool waits = false) {
  thread_local uint64_t seen = 0;
  if (waits)
    while (!kprof_op_room(ring, &seen)) std::this_thread::yield();
  return kprof_op_publish(ring, e, &seen);
}

size_t DrainInto(Strings& strings, std::vector<Record>& out) {
  return ops::Drain([&](std::string_view s) { return strings.Intern(s); }, out);
}

std::string MetaOf(const std::string& key) {
  for (const auto& [k, v] : ops::Meta())
    if (k == key) return v;
  return "";
}

class OpRings : public ::testing::Test {
 protected:
  void SetUp() override { ops::ResetForTest(); }
  void TearDown() override { ops::ResetForTest(); }
};

TEST_F(OpRings, EventsOfManyThreadsAreTakenOnceEachWithTheirNamesWhileTheyRun) {
  const kprof_op_agent* agent = ops::Table();
  ASSERT_EQ(agent->abi, kKprofOpAbi);
  constexpr int kThreads = 4;
  constexpr uint32_t kPerThread = 20000;  // under a ring's capacity between two drains
  std::atomic<int> running{kThreads};
  std::atomic<uint32_t> next_id{1};
  std::vector<uint32_t> tids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      kprof_op_ring* ring = agent->thread_ring();
      ASSERT_NE(ring, nullptr);
      tids[static_cast<size_t>(t)] = ring->tid;
      EXPECT_EQ(ring->tid, static_cast<uint32_t>(pthread_self()));
      uint32_t name = 0;
      for (uint32_t i = 0; i < kPerThread; ++i) {
        if (i % 1000 == 0) {  // a new name now and then, defined before its first event
          name = next_id.fetch_add(1);
          const std::string text = "op" + std::to_string(t) + "." + std::to_string(i / 1000);
          agent->define_name(name, text.data(), static_cast<uint32_t>(text.size()));
        }
        const uint64_t begin = 1'000'000ull * static_cast<uint64_t>(t + 1) + 2 * i;
        const uint32_t seq1 = i % 7;  // sequence number + 1 (0: none)
        const kprof_op_event e{begin, begin + 1, name, seq1, uint16_t(i % 3), kKprofOp, 0, 0};
        Publish(ring, e, true);  // (full: waits for the writer)
      }
      agent->thread_done(ring);
      --running;
    });
  }
  Strings strings;
  std::vector<Record> out;
  while (running > 0) DrainInto(strings, out);
  for (auto& th : threads) th.join();
  DrainInto(strings, out);
  DrainInto(strings, out);  // nothing left, and the ended threads' rings are gone

  ASSERT_EQ(out.size(), size_t{kThreads} * kPerThread);
  std::map<uint32_t, std::set<uint64_t>> begins;  // per thread
  for (const Record& r : out) {
    ASSERT_EQ(r.Kind(), RecordKind::Range);
    EXPECT_EQ(r.device, kprof::kNoDevice);
    const size_t t = static_cast<size_t>(r.start_ns / 1'000'000ull - 1);
    ASSERT_LT(t, size_t{kThreads});
    EXPECT_EQ(r.tid, tids[t]);
    const uint64_t i = (r.start_ns - 1'000'000ull * (t + 1)) / 2;
    EXPECT_TRUE(begins[r.tid].insert(i).second) << "taken twice";
    EXPECT_EQ(r.end_ns, r.start_ns + 1);
    EXPECT_EQ(strings.texts.at(r.name), "op" + std::to_string(t) + "." + std::to_string(i / 1000));
    EXPECT_EQ(strings.texts.at(r.b), "cpu_op");
    EXPECT_EQ(r.c, i % 3 + 1);  // depth + 1
    EXPECT_EQ(r.d, i % 7);
  }
  EXPECT_EQ(MetaOf("op_ranges"), std::to_string(kThreads * kPerThread));
  EXPECT_EQ(MetaOf("op_ranges_dropped"), "0");
  EXPECT_EQ(MetaOf("op_ranges_unnamed"), "");
}

TEST_F(OpRings, AFullRingDropsAndCountsAndTheKindsGoToTheirDomains) {
  const kprof_op_agent* agent = ops::Table();
  kprof_op_ring* ring = agent->thread_ring();
  ASSERT_EQ(ring->capacity, ops::kRingEvents);
  agent->define_name(1, "x", 1);
  const uint8_t kinds[] = {kKprofOp, kKprofOpBackward, kKprofOpUser, kKprofOpModule, kKprofOpMark};
  uint64_t published = 0;
  for (uint32_t i = 0; i < ops::kRingEvents + 10; ++i)
    published += Publish(ring, {i + 1u, i + 1u, 1, 0, 0, kinds[i % 5], 0, 0});
  EXPECT_EQ(published, ops::kRingEvents);
  Strings strings;
  std::vector<Record> out;
  EXPECT_EQ(DrainInto(strings, out), ops::kRingEvents);
  EXPECT_EQ(MetaOf("op_ranges_dropped"), "10");
  const char* domains[] = {"cpu_op", "cpu_op", "user_annotation", "kprof", "kprof"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].flags, kinds[i]);
    EXPECT_EQ(strings.texts.at(out[i].b), domains[i]);
  }
  // Room again once taken.
  EXPECT_TRUE(Publish(ring, {1, 2, 1, 0, 0, kKprofOp, 0, 0}));
  EXPECT_EQ(DrainInto(strings, out), 1u);
}

TEST_F(OpRings, TimesMoveOntoCuptisClockAndAnEndBeforeItsBeginIsHeld) {
  ops::SetClockOffset(-500, 40);
  const kprof_op_agent* agent = ops::Table();
  kprof_op_ring* ring = agent->thread_ring();
  agent->define_name(7, "aten::mm", 8);
  ASSERT_TRUE(Publish(ring, {10'000, 10'900, 7, 4, 0, kKprofOp, 0, 0}));  // sequence number 3
  ASSERT_TRUE(Publish(ring, {20'000, 19'000, 7, 0, 0, kKprofOp, 0, 0}));  // clock stepped back
  ASSERT_TRUE(Publish(ring, {100, 200, 8, 0, 0, kKprofOp, 0, 0}));        // never defined
  Strings strings;
  std::vector<Record> out;
  ASSERT_EQ(DrainInto(strings, out), 3u);
  EXPECT_EQ(out[0].start_ns, 9'500u);
  EXPECT_EQ(out[0].end_ns, 10'400u);
  EXPECT_EQ(strings.texts.at(out[0].name), "aten::mm");
  EXPECT_EQ(out[0].d, 4u);
  EXPECT_EQ(out[1].end_ns, out[1].start_ns);
  EXPECT_EQ(out[2].start_ns, 0u);  // an offset larger than the time stops at 0
  EXPECT_EQ(out[2].name, 0u);
  EXPECT_EQ(MetaOf("op_ranges_unnamed"), "1");
}

TEST_F(OpRings, TheOffsetIsTheMiddleOfTheTightestBracket) {
  static std::atomic<int> calls{0};
  calls = 0;
  // A CUPTI clock 1 s ahead of CLOCK_REALTIME; the first reading fails (CUPTI not attached).
  const auto cupti = +[]() -> uint64_t {
    if (calls++ == 0) return 0;
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec + 1'000'000'000ull;
  };
  ASSERT_TRUE(ops::TakeClockOffset(cupti));
  // The observer is needed for the meta to say it; the offset itself is within its bracket.
  struct Fake {
    static void Bind(const kprof_op_agent*) {}
    static void Enable(int) {}
    static const char* Describe() { return "fake"; }
  };
  static const kprof_op_observer observer = {kKprofOpAbi, &Fake::Bind, &Fake::Enable,
                                             &Fake::Describe};
  ops::Table()->observer_ready(&observer);
  const int64_t offset = std::stoll(MetaOf("op_clock_offset_ns"));
  const int64_t spread = std::stoll(MetaOf("op_clock_spread_ns"));
  EXPECT_GT(spread, 0);
  EXPECT_LE(std::llabs(offset - 1'000'000'000ll), spread);
  EXPECT_FALSE(ops::TakeClockOffset(+[]() -> uint64_t { return 0; }));
}

// A stand-in observer: what the agent asked of it.
struct FakeObserver {
  static inline std::mutex mu;
  static inline std::vector<int> enables;
  static inline const kprof_op_agent* bound = nullptr;
  static void Bind(const kprof_op_agent* a) { bound = a; }
  static void Enable(int on) {
    std::lock_guard<std::mutex> lock(mu);
    enables.push_back(on);
  }
  static const char* Describe() { return "a stand-in observer"; }
  static const kprof_op_observer* Table() {
    static const kprof_op_observer t = {kKprofOpAbi, &Bind, &Enable, &Describe};
    return &t;
  }
};

TEST_F(OpRings, TheObserverRecordsWhileTheAgentDoesWhicheverComesFirst) {
  FakeObserver::enables.clear();
  FakeObserver::bound = nullptr;
  // Ready before the agent records: bound, not enabled until recording starts.
  ops::Table()->observer_ready(FakeObserver::Table());
  EXPECT_EQ(FakeObserver::bound, ops::Table());
  EXPECT_TRUE(FakeObserver::enables.empty());
  ops::SetRecording(true);
  ops::SetRecording(true);  // no change: not told again
  ops::SetRecording(false);
  EXPECT_EQ(FakeObserver::enables, (std::vector<int>{1, 0}));
  EXPECT_EQ(MetaOf("op_observer"), "a stand-in observer");

  // The end: told kKprofOpEnd once; a window's closing after it (EndCapture) switches nothing.
  ops::SetRecording(true);
  ops::EndRecording();
  ops::SetRecording(false);
  ops::SetRecording(true);
  ops::EndRecording();
  EXPECT_EQ(FakeObserver::enables, (std::vector<int>{1, 0, 1, kKprofOpEnd}));

  // Ready while the agent records (torch imported after CUDA started): enabled at once.
  ops::ResetForTest();
  FakeObserver::enables.clear();
  ops::SetRecording(true);
  ops::Table()->observer_ready(FakeObserver::Table());
  EXPECT_EQ(FakeObserver::enables, (std::vector<int>{1}));

  // An observer of another ABI is refused, and said so.
  ops::ResetForTest();
  FakeObserver::enables.clear();
  static const kprof_op_observer other = {kKprofOpAbi + 1, &FakeObserver::Bind,
                                          &FakeObserver::Enable, &FakeObserver::Describe};
  ops::SetRecording(true);
  ops::Table()->observer_ready(&other);
  EXPECT_TRUE(FakeObserver::enables.empty());
  EXPECT_NE(MetaOf("op_observer_refused").find("ABI 2"), std::string::npos);
  EXPECT_EQ(MetaOf("op_observer"), "");
}

TEST_F(OpRings, NoRingNoWork) {
  EXPECT_FALSE(ops::Active());
  Strings strings;
  std::vector<Record> out;
  EXPECT_EQ(DrainInto(strings, out), 0u);
  EXPECT_TRUE(ops::Meta().empty());
}

}  // namespace
