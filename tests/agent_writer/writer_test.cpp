// The agent's collection pipeline (src/agent/writer.cpp) without a GPU: the buffer pool, the
// writer thread, the periodic flusher, flushes with a timeout and Finish, driven from several
// threads the way CUPTI drives them. CUPTI itself is a fake defined here (no libcupti is linked):
// application threads request buffers and fill them with kernel records, and the fake completes
// a buffer when it is full or when the program flushes, on the flushing thread as CUPTI does.
// The run file is then read back: every record exactly once. scripts/sanitize.sh thread runs this
// under ThreadSanitizer (docs/reliability.md).
#include <cupti.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/capture.h"
#include "agent/capture_graphs.h"
#include "agent/counters.h"
#include "agent/op_rings.h"
#include "gtest/gtest.h"
#include "kprof/trace.h"
#include "test_util.h"

namespace {
kprof::agent::Agent* g_agent = nullptr;  // a fresh one per test
}  // namespace

namespace kprof::agent {

Agent& A() { return *g_agent; }

bool CheckCupti(CUptiResult r, const char* /*call*/, const char* /*doing*/, const char* /*file*/,
                int /*line*/) {
  return r == CUPTI_SUCCESS;
}

// The counters (counters.cpp) are not asked for in these tests: the writer's calls into them do
// nothing.
void StopCounters(bool) {}
// Nor are capture windows (capture.cpp, tested in agent_capture/).
void EndCapture() {}
// Nor is on-demand capture (on_demand.cpp).
void EndOnDemand() {}
bool AdmitGraphWork(const Record& /*r*/) { return true; }
void NoteKernelTimes(std::vector<std::pair<std::string, uint64_t>>& /*batch*/) {}
ReplayTimes ReplayedKernelTimes(uint32_t /*correlation*/, uint64_t* /*start_ns*/,
                                uint64_t* /*end_ns*/) {
  return ReplayTimes::Unknown;
}

}  // namespace kprof::agent

namespace {

using kprof::agent::A;
using kprof::agent::Agent;

constexpr size_t kStride = sizeof(CUpti_ActivityKernel10);

// The fake CUPTI: one open buffer per application thread (CUPTI keeps one per context/stream).
struct FakeCupti {
  struct Open {
    uint8_t* buf = nullptr;
    size_t size = 0;
    size_t valid = 0;
    uint32_t stream = 0;
  };
  std::mutex mu;  // guards `open` and the buffers' contents until they are completed
  std::map<uint32_t, Open> open;
  std::atomic<uint64_t> dropped{0};

  // An application thread's kernel finished: its record goes into the thread's open buffer.
  void Emit(uint32_t stream, uint32_t correlation) {
    std::lock_guard<std::mutex> lock(mu);
    Open& o = open[stream];
    if (o.buf == nullptr) {
      size_t max_records = 0;
      kprof::agent::BufferRequested(&o.buf, &o.size, &max_records);
      o.valid = 0;
      o.stream = stream;
      if (o.buf == nullptr) {
        ++dropped;
        return;
      }
    }
    CUpti_ActivityKernel10 k;
    std::memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 1000 + correlation;
    k.end = 2000 + correlation;
    k.streamId = stream;
    k.correlationId = correlation;
    k.gridX = k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
    k.name = "kernel";
    std::memcpy(o.buf + o.valid, &k, sizeof(k));
    o.valid += kStride;
    if (o.valid + kStride > o.size) CompleteLocked(o);
  }

  void CompleteLocked(Open& o) {
    if (o.buf == nullptr) return;
    kprof::agent::BufferCompleted(nullptr, o.stream, o.buf, o.size, o.valid);
    o = Open{};
  }

  // cuptiActivityFlushAll: completes every buffer holding records (forced: every buffer).
  void FlushAll(uint32_t flag) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [stream, o] : open) {
      if (o.valid > 0 || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) CompleteLocked(o);
    }
    // The program goes on launching while the file is finished: right after the forced flush,
    // a thread asks for a new buffer, and keeps it.
    if (lend_after_forced_flush && (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) {
      Open& o = open[99];
      size_t max_records = 0;
      if (o.buf == nullptr) kprof::agent::BufferRequested(&o.buf, &o.size, &max_records);
    }
  }
  bool lend_after_forced_flush = false;
};

FakeCupti* g_cupti = nullptr;

}  // namespace

// The CUPTI entry points writer.cpp and convert.cpp call.
extern "C" {
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  g_cupti->FlushAll(flag);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record) {
  uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<uint8_t*>(*record) + kStride;
  if (next + kStride > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext /*ctx*/, uint32_t /*stream*/,
                                                       size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain /*domain*/, uint32_t /*cbid*/,
                                          const char** name) {
  *name = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}
}

namespace {

// Starts the agent's threads as Initialize does (agent.cpp), on a fresh Agent and fake CUPTI.
class AgentWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    g_cupti = new FakeCupti();
    kprof::agent::ops::ResetForTest();
    kprof::agent::g_buffer_bytes = 64 * kStride;  // small buffers: many completions and reuses
    g_agent = new Agent();
    Agent& a = A();
    a.path = dir_ / "kprof.1.kprof";
    ASSERT_TRUE(a.writer.Open(a.path));
    a.writer.WriteMeta({{"pid", "1"}});
    a.flush_period_ms = 2;
    a.attached = true;
    a.active = true;
    a.writer_thread = std::thread(kprof::agent::WriterLoop);
    a.flusher_thread = std::thread(kprof::agent::FlusherLoop);
  }
  void TearDown() override {
    Agent& a = A();
    for (uint8_t* buf : a.ours) std::free(buf);
    delete g_agent;
    g_agent = nullptr;
    delete g_cupti;
    g_cupti = nullptr;
  }

  // `threads` application threads emit `per_thread` kernels each; correlation ids are unique.
  static void Produce(int threads, int per_thread, std::atomic<bool>* go = nullptr) {
    std::vector<std::thread> apps;
    for (int t = 0; t < threads; ++t) {
      apps.emplace_back([t, per_thread, go] {
        while (go != nullptr && !go->load()) std::this_thread::yield();
        for (int i = 0; i < per_thread; ++i) {
          g_cupti->Emit(static_cast<uint32_t>(t + 1),
                        static_cast<uint32_t>(t * per_thread + i + 1));
        }
      });
    }
    for (auto& th : apps) th.join();
  }

  kprof::test::TempDir dir_;
};

TEST_F(AgentWriter, RecordsFromManyThreadsReachTheFileExactlyOnce) {
  constexpr int kThreads = 6, kPerThread = 3000;
  // A signal thread (signals.cpp) flushes and waits for the writer while the program runs.
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    while (!done) {
      kprof::agent::FlushWithTimeout(0, kprof::agent::kSignalFlushTimeoutMs);
      kprof::agent::WaitDrained(kprof::agent::kSignalFlushTimeoutMs);
    }
  });
  Produce(kThreads, kPerThread);
  done = true;
  signal_thread.join();
  kprof::agent::Finish("exit");  // at exit: forced flush, drain, End block
  ASSERT_TRUE(A().finished);

  kprof::ProcessTrace p = kprof::ReadRunFile(A().path);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.meta["exit_reason"], "exit");
  EXPECT_EQ(p.meta.count("displaced"), 0u) << p.meta["displaced_detail"];
  ASSERT_EQ(g_cupti->dropped, 0u);
  std::set<uint32_t> seen;
  for (const kprof::Record& r : p.records) {
    EXPECT_TRUE(seen.insert(r.correlation).second) << "record written twice: " << r.correlation;
    EXPECT_EQ(p.Name(r), "kernel");
  }
  EXPECT_EQ(seen.size(), size_t{kThreads} * kPerThread);
  EXPECT_EQ(p.stats.records_written, size_t{kThreads} * kPerThread);
  EXPECT_LE(A().allocated, kprof::agent::kHardBufferLimit);
}

TEST_F(AgentWriter, OpRangesReachTheFileWithTheirNamesBesideCuptisRecords) {
  // An op observer's thread (kprof/op_abi.h) publishes while kernels complete: the writer takes
  // the ring every kDrainMs, not only when a CUPTI buffer comes.
  constexpr uint32_t kOps = 3 * kprof::agent::ops::kRingEvents;  // more than one ring holds
  const kprof_op_agent* agent = kprof::agent::ops::Table();
  std::thread observer([&] {
    kprof_op_ring* ring = agent->thread_ring();
    uint64_t seen = 0;
    agent->define_name(1, "aten::mm", 8);
    agent->define_name(2, "kprof.module:model|Linear", 25);
    for (uint32_t i = 0; i < kOps; ++i) {
      const kprof_op_event e{10'000ull + 4 * i,
                             10'002ull + 4 * i,
                             i % 2 + 1,
                             0,
                             0,
                             static_cast<uint8_t>(i % 2 ? kKprofOpModule : kKprofOp),
                             0,
                             0};
      while (!kprof_op_room(ring, &seen)) std::this_thread::yield();  // the writer makes room
      kprof_op_publish(ring, e, &seen);
    }
    agent->thread_done(ring);
  });
  Produce(2, 500);
  observer.join();
  kprof::agent::Finish("exit");

  kprof::ProcessTrace p = kprof::ReadRunFile(A().path);
  ASSERT_TRUE(p.complete);
  size_t kernels = 0, ops = 0, modules = 0;
  for (const kprof::Record& r : p.records) {
    if (r.Kind() == kprof::RecordKind::Kernel) ++kernels;
    if (r.Kind() != kprof::RecordKind::Range) continue;
    const std::string& name = p.strings.Get(r.name);
    ops += name == "aten::mm" && p.strings.Get(r.b) == "cpu_op";
    modules += name == "kprof.module:model|Linear" && p.strings.Get(r.b) == "kprof";
    EXPECT_EQ(r.end_ns, r.start_ns + 2);
  }
  EXPECT_EQ(kernels, 1000u);
  EXPECT_EQ(ops, kOps / 2);
  EXPECT_EQ(modules, kOps / 2);
  EXPECT_EQ(p.meta["op_ranges"], std::to_string(kOps));
  EXPECT_EQ(p.meta["op_ranges_dropped"], "0");
  EXPECT_EQ(p.stats.records_written, 1000u + kOps);
}

TEST_F(AgentWriter, FinishWhileApplicationThreadsStillRunLeavesAWholeFile) {
  // exit() on the main thread while other threads still launch kernels: records after the end
  // are lost, but the file is complete and nothing is written twice.
  constexpr int kThreads = 4, kPerThread = 4000;
  std::atomic<bool> go{false};
  std::thread apps([&] { Produce(kThreads, kPerThread, &go); });
  go = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kprof::agent::Finish("exit");
  kprof::agent::Finish("exit");  // idempotent (a signal and atexit)
  apps.join();

  kprof::ProcessTrace p = kprof::ReadRunFile(A().path);
  EXPECT_TRUE(p.complete);
  std::set<uint32_t> seen;
  for (const kprof::Record& r : p.records) EXPECT_TRUE(seen.insert(r.correlation).second);
  EXPECT_LE(seen.size(), size_t{kThreads} * kPerThread);
}

TEST_F(AgentWriter, WorkDoneWhileTheFileIsFinishedIsNotTakenForAnotherClient) {
  // A SIGTERM is handled beside the program, which goes on launching while the file is finished
  // (seen on the H100): CUPTI asks for buffers after the final flush. Those buffers are not
  // returned, and that is no sign of another CUPTI client: the file must not say "displaced".
  g_cupti->lend_after_forced_flush = true;
  for (uint32_t i = 1; i <= 1000; ++i) g_cupti->Emit(1, i);
  kprof::agent::Finish("signal 15");
  kprof::ProcessTrace p = kprof::ReadRunFile(A().path);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.meta.count("displaced"), 0u) << p.meta["displaced_detail"];
  EXPECT_EQ(p.records.size(), 1000u);
}

TEST_F(AgentWriter, NoBufferIsHandedOutOrAwaitedAfterTheEnd) {
  // Found by the test above: after Finish, each buffer request with the pool empty waited 50 ms
  // on the application thread for a writer that had stopped, and the pool grew to the hard cap.
  g_cupti->Emit(1, 1);
  kprof::agent::Finish("exit");
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < 2 * kprof::agent::kHardBufferLimit; ++i) {
    uint8_t* buf = nullptr;
    size_t size = 0, max_records = 0;
    kprof::agent::BufferRequested(&buf, &size, &max_records);
    EXPECT_EQ(buf, nullptr);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_LE(A().allocated, 2u);
}

// A SIGTERM that lands on a thread inside a CUDA call, holding a lock CUPTI's flush needs (here
// the fake CUPTI's lock): the agent must not wait for the flush inside the handler, or the flush
// waits for the handler (seen on the H100 as a 5 s flush timeout that lost the buffers CUPTI
// held). The handler returns, the thread leaves its "CUDA call", the signal thread finishes the
// file and ends the program with SIGTERM. In a child process, which the signal ends.
TEST(AgentSignals, SigtermInsideACudaCallFinishesTheFileAndEndsTheProgram) {
  kprof::test::TempDir dir;
  const std::string path = dir / "kprof.1.kprof";
  constexpr int kRecords = 1000;
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    g_cupti = new FakeCupti();
    kprof::agent::g_buffer_bytes = 64 * kStride;
    g_agent = new Agent();
    Agent& a = A();
    a.path = path;
    if (!a.writer.Open(a.path)) _exit(3);
    a.writer.WriteMeta({{"pid", "1"}});
    a.flush_period_ms = 1000;
    a.attached = true;
    a.pid = getpid();
    a.active = true;
    a.writer_thread = std::thread(kprof::agent::WriterLoop);
    a.flusher_thread = std::thread(kprof::agent::FlusherLoop);
    kprof::agent::InstallSignalHandlers();
    for (uint32_t i = 1; i <= kRecords; ++i) g_cupti->Emit(1, i);
    {
      std::lock_guard<std::mutex> in_cuda_call(g_cupti->mu);
      pthread_kill(pthread_self(), SIGTERM);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::seconds(20));
    _exit(4);  // the signal never ended the program
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(WIFSIGNALED(st)) << "exit status " << (WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
  EXPECT_LT(took, std::chrono::seconds(2)) << "the flush waited for the signal handler";
  kprof::ProcessTrace p = kprof::ReadRunFile(path);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.meta["exit_reason"], "signal 15");
  EXPECT_EQ(p.meta.count("flush_timeout"), 0u);
  EXPECT_EQ(p.records.size(), size_t{kRecords});
}

}  // namespace

// A virtual-memory call's caller (src/agent/callers.cpp): the first return address outside the
// agent (here: this binary, which holds CallerOf), CUPTI and the driver names the shared object;
// with none, the thread's name.
TEST(MemoryCallers, TheFirstFrameOutsideTheAgentNamesTheCaller) {
  using kprof::agent::CallerOf;
  // A libc function no sanitizer intercepts (ASan's runtime takes strlen's place).
  void* in_libc = reinterpret_cast<void*>(&gnu_get_libc_version);
  void* in_self = reinterpret_cast<void*>(&CallerOf);
  const std::string caller = CallerOf({in_self, in_libc}, "worker");
  EXPECT_NE(caller.find("libc.so"), std::string::npos) << caller;
  EXPECT_EQ(caller.front(), '/') << caller;  // a full path
  EXPECT_EQ(CallerOf({in_self}, "NCCL Service 0"), "[thread] NCCL Service 0");
  EXPECT_EQ(CallerOf({}, ""), "");
  EXPECT_EQ(CallerOf({nullptr}, ""), "");
}
