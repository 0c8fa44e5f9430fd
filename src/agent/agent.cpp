// The kprof agent: loaded into the profiled process by the CUDA driver (CUDA_INJECTION64_PATH)
// and by NVTX (NVTX_INJECTION64_PATH). It captures CUPTI activity records, converts them to
// kprof records on its own writer thread and streams them to one file per process. It does
// nothing else: no analysis, no JSON, no formatting inside the profiled process.
//
// Rules (someone else's process): no exception escapes, no exit(), every CUPTI call checked; a
// failure disables collection and the program runs on.

#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "agent/convert.h"
#include "agent/cupti_setup.h"
#include "kprof/trace.h"

#define KPROF_EXPORT extern "C" __attribute__((visibility("default")))

namespace kprof::agent {
namespace {

size_t g_buffer_bytes = 2u << 20;        // one CUPTI activity buffer (KPROF_BUFFER_MB; set at init)
constexpr size_t kSoftBufferLimit = 8;   // buffers in flight before the app thread waits
constexpr size_t kHardBufferLimit = 32;  // beyond this CUPTI drops records (counted)
constexpr int kExitFlushTimeoutMs = 5000;  // guard against flushes that hang at exit
constexpr int kSignalFlushTimeoutMs = 3000;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string FirstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    std::string v = Env(n);
    if (!v.empty()) return v;
  }
  return "";
}

uint32_t OsThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

void BlockSignalsInThisThread() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Global state. Deliberately leaked: it must outlive static destructors that run at exit.
struct Agent {
  std::mutex init_mu;
  bool initialized = false;
  std::atomic<bool> active{false};    // collecting
  std::atomic<bool> finished{false};  // Finish() ran
  uint32_t kinds = kKindAll;
  std::string path;
  FileWriter writer;  // writer thread only (and Finish, after the writer thread stopped)

  // Buffer pool.
  std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::vector<uint8_t*> free_buffers;
  std::unordered_set<uint8_t*> ours;  // every buffer kprof allocated
  size_t outstanding = 0;             // handed to CUPTI, not yet returned
  size_t allocated = 0;

  // Completed buffers waiting for the writer.
  struct Pending {
    uint8_t* buf;
    size_t valid;
  };
  std::mutex q_mu;
  std::condition_variable q_cv;
  std::deque<Pending> queue;
  bool stop_writer = false;
  uint64_t enqueued = 0, processed = 0;  // guarded by q_mu
  std::condition_variable drained_cv;

  std::thread writer_thread;
  std::thread flusher_thread;
  std::mutex flusher_mu;
  std::condition_variable flusher_cv;
  bool stop_flusher = false;
  bool flusher_done = false;  // guarded by flusher_mu
  pid_t pid = 0;              // the process that initialised the agent (not a forked child)
  int flush_period_ms = 1000;

  // Counters (writer thread, except dropped which CUPTI reports on its thread).
  CollectionStats stats;
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> foreign_buffers{0};
  std::atomic<uint64_t> flushes{0};
  std::atomic<uint64_t> buffers_completed{0};
  std::atomic<uint64_t> last_completed_ns{0};

  std::string subscriber_error;
  CUpti_SubscriberHandle subscriber = nullptr;

  // Signal plumbing: the handler writes the signal number to sig_pipe[1]; the signal thread
  // flushes and answers on ack_pipe[1].
  int sig_pipe[2] = {-1, -1};
  int ack_pipe[2] = {-1, -1};
  std::thread signal_thread;
  struct sigaction old_actions[65] = {};
};

Agent& A() {
  static Agent* agent = new Agent();  // leaked on purpose
  return *agent;
}

// ---------------------------------------------------------------------------------------------
// CUPTI buffer callbacks (CUPTI's threads; application threads for requests).

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Agent& a = A();
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  std::unique_lock<std::mutex> lock(a.pool_mu);
  if (a.free_buffers.empty() && a.allocated >= kSoftBufferLimit) {
    // Bounded memory: let the writer catch up a little before growing the pool.
    a.pool_cv.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return !a.free_buffers.empty(); });
  }
  uint8_t* buf = nullptr;
  if (!a.free_buffers.empty()) {
    buf = a.free_buffers.back();
    a.free_buffers.pop_back();
  } else if (a.allocated < kHardBufferLimit) {
    buf = static_cast<uint8_t*>(std::aligned_alloc(8, g_buffer_bytes));
    if (buf == nullptr) return;           // CUPTI drops these records; they are counted
    std::memset(buf, 0, g_buffer_bytes);  // zeroed (CUPTI told so) and pre-faulted
    a.ours.insert(buf);
    ++a.allocated;
  } else {
    return;  // records dropped and counted by CUPTI
  }
  ++a.outstanding;
  *buffer = buf;
  *size = g_buffer_bytes;
}

void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                              size_t valid) {
  Agent& a = A();
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) {
    a.dropped += dropped;
  }
  {
    std::lock_guard<std::mutex> lock(a.pool_mu);
    if (buffer == nullptr || a.ours.count(buffer) == 0) {
      ++a.foreign_buffers;  // not ours: another CUPTI client registered buffer callbacks
      return;
    }
    --a.outstanding;
  }
  ++a.buffers_completed;
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  a.last_completed_ns = now;
  std::lock_guard<std::mutex> lock(a.q_mu);
  a.queue.push_back({buffer, valid});
  ++a.enqueued;
  a.q_cv.notify_one();
}

void ReturnBuffer(uint8_t* buf) {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.pool_mu);
  a.free_buffers.push_back(buf);
  a.pool_cv.notify_one();
}

// ---------------------------------------------------------------------------------------------
// Writer thread: converts completed buffers and appends blocks to the file.

void ProcessBuffer(Agent& a, Interner& strings, std::vector<Record>& staging, uint8_t* buf,
                   size_t valid) {
  staging.clear();
  MetaList meta;
  CUpti_Activity* rec = nullptr;
  while (true) {
    CUptiResult r = cuptiActivityGetNextRecord(buf, valid, &rec);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      KPROF_CUPTI(r);
      break;
    }
    Record out;
    switch (ConvertRecord(rec, strings, out, meta)) {
      case ConvertResult::Converted:
        staging.push_back(out);
        break;
      case ConvertResult::MissingTimestamp:
        ++a.stats.missing_timestamps;
        break;
      case ConvertResult::Meta:
        break;
      case ConvertResult::Skipped:
        ++a.stats.unknown_records;
        break;
    }
  }
  // Strings before the records that use them; a crash between blocks leaves a readable file.
  auto fresh = strings.TakeNew();
  if (!fresh.empty()) a.writer.WriteStrings(fresh);
  if (!meta.empty()) a.writer.WriteMeta(meta);
  if (!staging.empty()) a.writer.WriteRecords(staging.data(), staging.size());
  a.stats.records_written += staging.size();
  a.stats.buffer_bytes += valid;
  std::memset(buf, 0, valid);  // CUPTI was told buffers arrive zeroed
}

void WriterLoop() {
  BlockSignalsInThisThread();
  Agent& a = A();
  Interner strings;
  std::vector<Record> staging;
  staging.reserve(g_buffer_bytes / 32);
  auto last_stats = std::chrono::steady_clock::now();
  while (true) {
    Agent::Pending p{};
    {
      std::unique_lock<std::mutex> lock(a.q_mu);
      a.q_cv.wait(lock, [&] { return a.stop_writer || !a.queue.empty(); });
      if (a.queue.empty()) break;  // stop requested and drained
      p = a.queue.front();
      a.queue.pop_front();
    }
    ProcessBuffer(a, strings, staging, p.buf, p.valid);
    ReturnBuffer(p.buf);
    // Stats now and then, so that a file cut short still reports drops seen so far.
    auto now = std::chrono::steady_clock::now();
    if (now - last_stats > std::chrono::seconds(1)) {
      a.stats.dropped_records = a.dropped;
      a.writer.WriteStats(a.stats);
      last_stats = now;
    }
    std::lock_guard<std::mutex> lock(a.q_mu);
    ++a.processed;
    a.drained_cv.notify_all();
  }
}

// Periodic flush: completed buffers reach the file even when they are not full, so a crash
// loses at most one period.
void FlusherLoop() {
  BlockSignalsInThisThread();
  Agent& a = A();
  std::unique_lock<std::mutex> lock(a.flusher_mu);
  while (!a.stop_flusher) {
    a.flusher_cv.wait_for(lock, std::chrono::milliseconds(a.flush_period_ms));
    if (a.stop_flusher || !a.active) break;
    lock.unlock();
    KPROF_CUPTI(cuptiActivityFlushAll(0));
    lock.lock();
  }
  a.flusher_done = true;
  a.flusher_cv.notify_all();
}

// Runs cuptiActivityFlushAll on a helper thread and gives up waiting after `timeout_ms`
// (flushes that hang at exit have been reported). Returns true when it finished in time.
bool FlushWithTimeout(uint32_t flag, int timeout_ms) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto shared = std::make_shared<Shared>();
  std::thread t([shared, flag] {
    BlockSignalsInThisThread();
    KPROF_CUPTI(cuptiActivityFlushAll(flag));
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->done = true;
    shared->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(shared->mu);
  bool ok = shared->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                [&] { return shared->done; });
  lock.unlock();
  if (ok) {
    t.join();
  } else {
    t.detach();
  }
  A().flushes++;
  return ok;
}

// Waits until the writer has processed everything enqueued so far.
bool WaitDrained(int timeout_ms) {
  Agent& a = A();
  std::unique_lock<std::mutex> lock(a.q_mu);
  uint64_t target = a.enqueued;
  return a.drained_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return a.processed >= target; });
}

// Ends collection: forced flush, drain, final stats and End block. Idempotent.
void Finish(const std::string& reason) {
  Agent& a = A();
  if (!a.active.exchange(false)) return;
  bool flushed = FlushWithTimeout(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, kExitFlushTimeoutMs);
  {
    std::lock_guard<std::mutex> lock(a.flusher_mu);
    a.stop_flusher = true;
    a.flusher_cv.notify_all();
  }
  // A periodic flush stuck inside CUPTI must not keep the program from exiting.
  bool flusher_stopped;
  {
    std::unique_lock<std::mutex> lock(a.flusher_mu);
    flusher_stopped = a.flusher_cv.wait_for(lock, std::chrono::milliseconds(kExitFlushTimeoutMs),
                                            [&] { return a.flusher_done; });
  }
  if (a.flusher_thread.joinable()) {
    if (flusher_stopped) {
      a.flusher_thread.join();
    } else {
      a.flusher_thread.detach();
    }
  }
  bool drained = WaitDrained(kExitFlushTimeoutMs);
  {
    std::lock_guard<std::mutex> lock(a.q_mu);
    a.stop_writer = true;
    a.q_cv.notify_all();
  }
  if (drained) {
    a.writer_thread.join();
  } else {
    a.writer_thread.detach();
    return;  // the writer is stuck: leave the file as it is (readable up to its last block)
  }
  size_t outstanding;
  {
    std::lock_guard<std::mutex> lock(a.pool_mu);
    outstanding = a.outstanding;
  }
  MetaList meta{{"exit_reason", reason}};
  if (!flushed) meta.emplace_back("flush_timeout", "1");
  // Buffers handed to CUPTI that never came back after a forced flush, or buffers that are
  // not ours: another CUPTI client (torch.profiler, a second tool) took over the activity API.
  if (outstanding > 0 || a.foreign_buffers > 0) {
    meta.emplace_back("displaced", "1");
    meta.emplace_back("displaced_detail",
                      std::to_string(outstanding) + " activity buffer(s) never returned, " +
                          std::to_string(a.foreign_buffers.load()) +
                          " foreign buffer(s) received; another CUPTI client (such as "
                          "torch.profiler) registered its own activity callbacks");
  }
  a.writer.WriteMeta(meta);
  a.stats.dropped_records = a.dropped;
  a.stats.buffers_completed = a.buffers_completed;
  a.stats.flushes = a.flushes;
  a.stats.foreign_buffers = a.foreign_buffers;
  a.stats.write_errors = a.writer.errors();
  a.writer.WriteStats(a.stats);
  a.writer.Close();
  a.finished = true;
}

void AtExit() { Finish("exit"); }

// ---------------------------------------------------------------------------------------------
// Signals: flush what we have, then let the program's own handling (or the default) proceed.

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
    struct sigaction& old = a.old_actions[sig];
    bool program_handles = (old.sa_flags & SA_SIGINFO)
                               ? old.sa_sigaction != nullptr
                               : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN);
    if (program_handles) {
      // The program decides what happens next (Python raises KeyboardInterrupt, ...): only
      // flush; the exit path finishes the file.
      FlushWithTimeout(0, kSignalFlushTimeoutMs);
      WaitDrained(kSignalFlushTimeoutMs);
    } else if (old.sa_handler != SIG_IGN) {
      Finish("signal " + std::to_string(sig));
    }
    unsigned char ack = 1;
    ssize_t w = write(a.ack_pipe[1], &ack, 1);
    (void)w;
  }
}

void OnSignal(int sig, siginfo_t* info, void* ctx) {
  int saved_errno = errno;
  Agent& a = A();
  // A child forked without exec inherits this handler and the pipes, but not the threads:
  // only the process that started the agent talks to its signal thread.
  if (a.active && a.sig_pipe[1] >= 0 && getpid() == a.pid) {
    unsigned char s = static_cast<unsigned char>(sig);
    if (write(a.sig_pipe[1], &s, 1) == 1) {
      struct pollfd pfd = {a.ack_pipe[0], POLLIN, 0};
      int timeout = kExitFlushTimeoutMs + kSignalFlushTimeoutMs;
      if (poll(&pfd, 1, timeout) > 0) {
        unsigned char ack;
        ssize_t r = read(a.ack_pipe[0], &ack, 1);
        (void)r;
      }
    }
  }
  struct sigaction& old = a.old_actions[sig];
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

void InstallSignalHandlers() {
  Agent& a = A();
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

// ---------------------------------------------------------------------------------------------
// Callbacks: context destruction flushes (the context's records go away with it).

void CUPTIAPI OnCallback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* /*data*/) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    if (A().active) {
      KPROF_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      A().flushes++;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Meta data written at start.

std::string ReadCmdline() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

std::string CuptiPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "";
}

MetaList StartMeta(const std::string& rank) {
  Agent& a = A();
  MetaList m;
  m.emplace_back("pid", std::to_string(getpid()));
  m.emplace_back("ppid", std::to_string(getppid()));
  if (!rank.empty()) m.emplace_back("rank", rank);
  std::string local_rank =
      FirstEnv({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"});
  if (!local_rank.empty()) m.emplace_back("local_rank", local_rank);
  std::string world = FirstEnv({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  if (!world.empty()) m.emplace_back("world_size", world);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.emplace_back("hostname", host);
  m.emplace_back("cmdline", ReadCmdline());
  uint64_t ts = 0;
  KPROF_CUPTI(cuptiGetTimestamp(&ts));
  m.emplace_back("start_time_ns", std::to_string(ts));
  m.emplace_back("clock", "cupti");
  uint32_t cupti_version = 0;
  if (KPROF_CUPTI(cuptiGetVersion(&cupti_version))) {
    m.emplace_back("cupti_version", std::to_string(cupti_version));
  }
  int driver = 0;
  if (cuDriverGetVersion(&driver) == CUDA_SUCCESS) {
    m.emplace_back("driver_version", std::to_string(driver));
  }
  // The runtime is the application's (static or shared); ask it only if it is visible.
  using RtVersionFn = int (*)(int*);
  if (auto fn = reinterpret_cast<RtVersionFn>(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion"))) {
    int rt = 0;
    if (fn(&rt) == 0) m.emplace_back("runtime_version", std::to_string(rt));
  }
  m.emplace_back("cupti_path", CuptiPath());
  m.emplace_back("kinds", KindsToString(a.kinds));
  m.emplace_back("agent_version", "0.1.0");
  m.emplace_back("agent_tid", std::to_string(OsThreadId()));
  if (!a.subscriber_error.empty()) m.emplace_back("subscriber_error", a.subscriber_error);
  return m;
}

// ---------------------------------------------------------------------------------------------

int Initialize() {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.init_mu);
  if (a.initialized) return 1;
  a.initialized = true;

  std::string dir = Env("KPROF_OUTPUT_DIR");
  if (dir.empty()) dir = ".";
  std::string unknown;
  a.kinds = ParseKinds(std::getenv("KPROF_KINDS"), &unknown);
  if (!unknown.empty()) {
    std::fprintf(stderr, "kprof agent: ignoring unknown KPROF_KINDS entries: %s\n",
                 unknown.c_str());
  }
  if (std::string mb = Env("KPROF_BUFFER_MB"); !mb.empty()) {
    long v = std::atol(mb.c_str());
    if (v >= 1 && v <= 256) g_buffer_bytes = static_cast<size_t>(v) << 20;
  }
  if (std::string p = Env("KPROF_FLUSH_MS"); !p.empty()) {
    a.flush_period_ms = std::max(10, std::atoi(p.c_str()));
  }
  std::string rank = FirstEnv({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  mkdir(dir.c_str(), 0755);  // usually made by the launcher; EEXIST is fine
  a.path = dir + "/kprof." + (rank.empty() ? "" : "rank" + rank + ".") + std::to_string(getpid()) +
           ".kprof";

  // Subscribe for the context-destroy flush. Failure (another subscriber, nsys, ...) is noted;
  // the activity API works without a subscriber.
  CUpti_SubscriberParams params{};
  params.structSize = sizeof(CUpti_SubscriberParams);
  params.subscriberName = "kprof";
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  CUptiResult sr = cuptiSubscribe_v2(&a.subscriber, OnCallback, nullptr, &params);
  if (sr == CUPTI_SUCCESS) {
    KPROF_CUPTI(cuptiEnableCallback(1, a.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                    CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
  } else {
    const char* msg = nullptr;
    cuptiGetResultString(sr, &msg);
    a.subscriber_error =
        std::string(msg != nullptr ? msg : "cuptiSubscribe failed") +
        (old_name[0] != '\0' ? std::string(" (existing subscriber: ") + old_name + ")"
                             : std::string());
    std::fprintf(stderr, "kprof agent: %s\n", a.subscriber_error.c_str());
  }

  if (!a.writer.Open(a.path)) {
    std::fprintf(stderr, "kprof agent: cannot create %s: %s; not recording\n", a.path.c_str(),
                 std::strerror(errno));
    return 1;  // never fail the program's CUDA initialisation
  }
  a.writer.WriteMeta(StartMeta(rank));

  // Pre-fault two buffers off the hot path.
  for (int i = 0; i < 2; ++i) {
    auto* buf = static_cast<uint8_t*>(std::aligned_alloc(8, g_buffer_bytes));
    if (buf == nullptr) break;
    std::memset(buf, 0, g_buffer_bytes);
    a.ours.insert(buf);
    a.free_buffers.push_back(buf);
    ++a.allocated;
  }

  bool ok = ConfigureActivityAttributes(/*zeroed_buffers=*/true);
  ok &= KPROF_CUPTI(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted));
  int apis = 0;
  ok &= EnableActivityKinds(a.kinds, &apis);
  MetaList setup{{"api_callbacks_enabled", std::to_string(apis)}};
  if (!ok) setup.emplace_back("agent_error", "CUPTI activity setup failed; see stderr");
  a.writer.WriteMeta(setup);
  a.pid = getpid();
  // A child forked without exec has no writer, flusher or signal thread: it records nothing
  // (CUDA is not usable there either) and must not finish the parent's file at its exit.
  pthread_atfork(nullptr, nullptr, [] { A().active = false; });
  a.active = true;
  a.writer_thread = std::thread(WriterLoop);
  a.flusher_thread = std::thread(FlusherLoop);
  InstallSignalHandlers();
  std::atexit(AtExit);
  return 1;
}

}  // namespace
}  // namespace kprof::agent

/// Called by the CUDA driver while it initialises (CUDA_INJECTION64_PATH). Idempotent.
KPROF_EXPORT int InitializeInjection(void) {
  try {
    return kprof::agent::Initialize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kprof agent: initialisation failed: %s; not recording\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "kprof agent: initialisation failed; not recording\n");
  }
  return 1;
}

/// Called by each NVTX instance at its first NVTX call (NVTX_INJECTION64_PATH names this
/// library). Forwards to the libcupti this process actually uses: the copy the agent is bound
/// to, which is PyTorch's own copy when PyTorch loaded one first (libraries resolve by soname).
KPROF_EXPORT int InitializeInjectionNvtx2(const void* get_export_table) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) == 0 || info.dli_fname == nullptr) {
    std::fprintf(stderr, "kprof agent: cannot locate libcupti for NVTX\n");
    return 0;
  }
  void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    std::fprintf(stderr, "kprof agent: dlopen(%s) for NVTX failed: %s\n", info.dli_fname,
                 dlerror());
    return 0;
  }
  using InitFn = int (*)(const void*);
  auto fn = reinterpret_cast<InitFn>(dlsym(handle, "InitializeInjectionNvtx2"));
  if (fn == nullptr) {
    std::fprintf(stderr, "kprof agent: %s has no NVTX injection entry\n", info.dli_fname);
    return 0;
  }
  return fn(get_export_table);
}
