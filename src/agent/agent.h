// Internal to the agent: its global state and limits, and the entry points its parts call
// across files: agent.cpp (injection, start-up), writer.cpp (activity buffers, the writer and
// flusher threads, the end of collection) and signals.cpp (flush on fatal signals).
//
// Rules (someone else's process): no exception escapes, no exit(), every CUPTI call checked; a
// failure disables collection and the program runs on.
#pragma once

#include <cupti.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/cupti_setup.h"
#include "agent/thread_id.h"
#include "kprof/agent_config.h"
#include "kprof/record.h"
#include "kprof/trace.h"

namespace kprof::agent {

extern size_t g_buffer_bytes;            // one CUPTI activity buffer (KPROF_BUFFER_MB; set at init)
constexpr size_t kSoftBufferLimit = 8;   // buffers in flight before the app thread waits
constexpr size_t kHardBufferLimit = 32;  // beyond this CUPTI drops records (counted)
constexpr int kExitFlushTimeoutMs = 5000;  // guard against flushes that hang at exit
constexpr int kSignalFlushTimeoutMs = 3000;

// ---------------------------------------------------------------------------------------------
// Global state. Deliberately leaked: it must outlive static destructors that run at exit.
struct Agent {
  std::mutex init_mu;
  bool initialized = false;
  std::atomic<bool> active{false};  // collecting
  // CUPTI is attached to the process (on demand, only from a request to the end of its window;
  // otherwise from start-up on). No CUPTI call may be made while it is not: any call attaches it.
  std::atomic<bool> attached{false};
  bool on_demand = false;  // KPROF_CAPTURE=on-demand (on_demand.cpp)
  // CUPTI attached only around the windows (kprof/agent_config.h DormantCapture): on demand, or
  // --capture nvtx:NAME (its program's threads attach as a window opens, on_demand.cpp detaches).
  bool dormant = false;
  std::atomic<bool> finishing{false};  // Finish() started (in this process)
  std::atomic<bool> finished{false};   // Finish() ran to its end (or gave up on a stuck writer)
  uint32_t kinds = kKindAll;
  std::string path;
  FileWriter writer;  // writer thread only (and Finish, after the writer thread stopped)

  // Buffer pool.
  std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::vector<uint8_t*> free_buffers;
  std::unordered_set<uint8_t*> ours;  // every buffer kprof allocated
  // Buffers handed to CUPTI and not yet returned, each with the number of its lending (a buffer
  // comes back and is lent again).
  std::unordered_map<uint8_t*, uint64_t> lent;
  // Writer thread: kernel records without times whose replay had not ended (counters.h).
  std::vector<Record> deferred;
  std::atomic<uint64_t> forced_flushes{0};  // by the flusher, CUPTI holding too many buffers
  // The flusher holds off (CUPTI being detached): it sets `flushing` before it reads `paused`,
  // the detacher sets `paused` before it reads `flushing` (both sequentially consistent).
  std::atomic<bool> flush_paused{false}, flushing{false};
  // CUDA contexts created in this process: 0 at the end for a process that loaded CUDA but ran
  // nothing on a GPU (a launcher such as torchrun's, which counts the devices).
  std::atomic<uint64_t> contexts{0};
  uint64_t lendings = 0;
  size_t allocated = 0;
  bool pool_closed = false;  // the writer has stopped: no buffer comes back, none is handed out

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

  // CUDA graphs (graphs.cpp): the mode, and the records the graph resource callbacks make on
  // the application's threads, waiting for the writer (which interns their names).
  bool graph_level = true;  // KPROF_GRAPH_TRACE: graph (one record per launch) | node
  std::string pytorch;      // KPROF_PYTORCH: what kprof run asked Python programs to add
  std::string self_cost;    // KPROF_SELF_COST: kprof's cost per event here, for the meta
  struct SideRecord {
    Record rec;
    std::string name;  // kernel name of a GraphNode record, interned by the writer
    // A virtual-memory call's (record.h kApiMemoryCaller): the calling thread's name and its
    // stack's return addresses, named by the writer into rec.e (CallerOf).
    std::string thread;
    std::vector<void*> frames;
  };
  std::mutex side_mu;
  std::vector<SideRecord> side;
  std::vector<std::pair<std::string, std::string>> side_meta;  // meta from other threads

  bool counters_top_from_trace = false;  // replay picks the top N kernels from the trace so far
  std::string subscriber_error;
  CUpti_SubscriberHandle subscriber = nullptr;

  // Signal plumbing: the handler writes the signal number to sig_pipe[1]; the signal thread
  // flushes and answers on ack_pipe[1].
  int sig_pipe[2] = {-1, -1};
  int ack_pipe[2] = {-1, -1};
  std::thread signal_thread;
  struct sigaction old_actions[65] = {};
};

Agent& A();

/// The diagnosis and measurement knobs (kprof/agent_config.h), read from the environment once
/// (knobs.cpp).
const DiagnosticKnobs& Knobs();

// writer.cpp
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t size,
                              size_t valid);
void WriterLoop();
void FlusherLoop();
bool FlushWithTimeout(uint32_t flag, int timeout_ms);
bool WaitDrained(int timeout_ms);
void Finish(const std::string& reason);
void AtExit();

/// Holds the periodic flusher off (and waits for a flush in progress), or lets it go on.
void PauseFlusher(bool paused);

// agent.cpp: kprof's subscriber (the context-destroy flush, contexts, graphs); false when CUPTI
// refused it (another subscriber, nsys, ...: noted in subscriber_error; the activity API works
// without one).
bool Subscribe();
/// The record buffers handed to CUPTI, with their attributes: false when CUPTI refused them;
/// `configured`: whether it took the attributes too.
bool HandBuffers(bool* configured);
/// On demand, CUPTI gets NVTX from kprof's own handlers (nvtx_shim.h); otherwise true at once.
bool HandNvtxToCupti();

// attach.cpp: CUPTI attached and detached again (on demand: around each window).
/// The on-demand part of kprof's callback (detaching, closing at a synchronization, graph
/// launches seen): true when the callback was that.
bool OnAttachCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
/// Closes the open on-demand window at the program's next successful synchronization (its work
/// is then done: graph nodes still running when their window closed got the end times of a later
/// launch). False when none came within `timeout_ms` or `stop` was set: the window is open still.
bool CloseAtSync(int timeout_ms, const std::atomic<bool>& stop);
/// Subscribes kprof's callback, hands CUPTI the record buffers and enables the device records;
/// false (with `why`) when CUPTI refused.
bool AttachCupti(std::string* why);
/// Everything recorded goes to the file, then CUPTI is detached (cuptiFinalize, at the exit of
/// the program's next successful synchronization: CUPTI allows it only in an API callback, and
/// work still in flight must not outlive CUPTI). False when none came within `timeout_ms` or
/// `stop` was set: the detachment then happens at the next one.
/// Graph launches under way on other threads are waited for, and wait in turn (attach.cpp).
bool DetachCupti(int timeout_ms, const std::atomic<bool>& stop);
/// How many graph launches on other threads waited for a detachment.
uint64_t LaunchesThatWaitedForDetachment();
/// A detachment still waiting for a synchronization is called off (the process is ending).
void CancelDetach();
/// How many times CUPTI was detached so far.
uint64_t Detachments();
/// How many AttachCupti calls succeeded so far (attaching, or finding CUPTI attached).
uint64_t AttachRequests();

// on_demand.cpp
/// Starts the control thread of an on-demand run: its presence in RUN_DIR/control, and the
/// requests of kprof capture. False (with a line on stderr) when the folder cannot be used.
bool StartOnDemand(const std::string& run_dir, const std::string& rank);
/// Starts the control thread of a dormant --capture nvtx:NAME run: it detaches CUPTI after each
/// window and stops kprof's NVTX handlers after the last. False (with a line on stderr) when no
/// thread could be made (CUPTI then stays attached after a window).
bool StartDormant();
/// Starts the control thread of a dormant --delay run: it attaches CUPTI and opens the window
/// `delay_ms` after the program's first primary context, closes it after `duration_ms` (0: at
/// the process's end) and detaches CUPTI. False (with a line on stderr) when no thread was made.
bool StartDelayed(uint64_t delay_ms, uint64_t duration_ms);
/// A window of a dormant run closed: the control thread detaches CUPTI now rather than at its
/// next look (20 ms).
void WakeControl();
/// Stops the control thread (a window it holds open is closed as ended with the process) and
/// says the process has ended. Idempotent.
void EndOnDemand();

// graphs.cpp
/// Enables the graph resource callbacks on `subscriber` (per callback id).
bool EnableGraphCallbacks(CUpti_SubscriberHandle subscriber);
/// Handles a graph resource callback (CUPTI_CB_DOMAIN_RESOURCE); false for any other cbid.
bool OnGraphCallback(CUpti_CallbackId cbid, const void* data);

// memory_calls.cpp
/// Enables the callbacks of the allocation calls on `subscriber` (per callback id).
bool EnableAllocationCallbacks(CUpti_SubscriberHandle subscriber);
/// An allocation call's callback: its failure becomes a MemAllocFailed record, and a
/// virtual-memory call made outside the runtime a DriverApi record naming its caller; false for
/// any other call.
bool OnAllocationCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
/// The shared object that made a call, from its stack's return addresses: the first outside the
/// agent, CUPTI and the driver; else "[thread] NAME" (`thread` not empty); else "".
std::string CallerOf(const std::vector<void*>& frames, const std::string& thread);

// signals.cpp
void BlockSignalsInThisThread();
void InstallSignalHandlers();

}  // namespace kprof::agent
