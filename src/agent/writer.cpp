// The agent's collection pipeline: CUPTI's buffer callbacks and the pool of activity buffers,
// the writer thread that converts completed buffers and appends them to the file, the periodic
// flusher, flushes with a timeout, and Finish, the end of collection (at exit or on a signal).
#include <cupti.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/agent.h"
#include "agent/capture.h"
#include "agent/capture_graphs.h"
#include "agent/convert.h"
#include "agent/counters.h"
#include "agent/cupti_setup.h"
#include "agent/op_rings.h"
#include "kprof/trace.h"

namespace kprof::agent {

size_t g_buffer_bytes = 2u << 20;

// ---------------------------------------------------------------------------------------------
// CUPTI buffer callbacks (CUPTI's threads; application threads for requests).

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Agent& a = A();
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  std::unique_lock<std::mutex> lock(a.pool_mu);
  // Collection has ended (Finish stopped the writer) while the program still runs CUDA work:
  // drop at once (CUPTI counts it) rather than stall the application 50 ms per request and grow
  // the pool to the hard cap for records nobody will write.
  if (a.pool_closed) return;
  if (a.free_buffers.empty() && a.allocated >= kSoftBufferLimit) {
    // Bounded memory: let the writer catch up a little before growing the pool.
    a.pool_cv.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return !a.free_buffers.empty() || a.pool_closed; });
    if (a.pool_closed) return;
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
  a.lent[buf] = ++a.lendings;
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
    a.lent.erase(buffer);
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

namespace {

void ReturnBuffer(uint8_t* buf) {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.pool_mu);
  a.free_buffers.push_back(buf);
  a.pool_cv.notify_one();
}

// ---------------------------------------------------------------------------------------------
// Writer thread: converts completed buffers and appends blocks to the file.

// Kernels without times: those whose replay has ended get its times; those whose replay is
// still running wait for a later buffer (`last`: none comes, they count as missing).
void TakeReplayedKernels(Agent& a, std::vector<Record>& staging, bool last) {
  size_t kept = 0;
  for (Record& r : a.deferred) {
    switch (ReplayedKernelTimes(r.correlation, &r.start_ns, &r.end_ns)) {
      case ReplayTimes::Known:
        r.flags |= kKernelReplayed;
        staging.push_back(r);
        break;
      case ReplayTimes::Pending:
        if (!last) {
          a.deferred[kept++] = r;
          break;
        }
        [[fallthrough]];
      case ReplayTimes::Unknown:
        ++a.stats.missing_timestamps;
        break;
    }
  }
  a.deferred.resize(kept);
}

void ProcessBuffer(Agent& a, Interner& strings, std::vector<Record>& staging, uint8_t* buf,
                   size_t valid) {
  staging.clear();
  MetaList meta;
  // Kernel GPU time by name, for the counters' top N (only when they choose from the trace):
  // summed by CUPTI's name pointer (the same for a function's records), a string per name and
  // buffer, not per record.
  const bool tally = a.counters_top_from_trace;
  std::unordered_map<const char*, uint64_t> by_name;
  CUpti_Activity* rec = nullptr;
  while (true) {
    CUptiResult r = cuptiActivityGetNextRecord(buf, valid, &rec);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      KPROF_CUPTI(r, "read the next record of a CUPTI buffer (the rest of the buffer is lost)");
      break;
    }
    Record out;
    switch (ConvertRecord(rec, strings, out, meta)) {
      case ConvertResult::Converted:
        // Graphs launched outside capture windows may still be traced: their work goes.
        if (!AdmitGraphWork(out)) break;
        staging.push_back(out);
        if (tally && out.Kind() == RecordKind::Kernel)
          by_name[KernelActivityName(rec)] += out.DurationNs();
        break;
      case ConvertResult::MissingTimestamp:
        // A graph's kernel launched outside the windows (a detachment's forced flush found it
        // running: attach.cpp): not the windows' loss. (Kernels are converted whole first.)
        if (out.Kind() == RecordKind::Kernel && !AdmitGraphWork(out)) break;
        // A kernel replayed for its counters: CUPTI gives it no times; the replay measured them.
        if (out.Kind() == RecordKind::Kernel) {
          a.deferred.push_back(out);
          break;
        }
        ++a.stats.missing_timestamps;
        break;
      case ConvertResult::Meta:
        break;
      case ConvertResult::Skipped:
        ++a.stats.unknown_records;
        break;
    }
  }
  TakeReplayedKernels(a, staging, false);
  // Strings before the records that use them; a crash between blocks leaves a readable file.
  if (tally && !by_name.empty()) {
    std::vector<std::pair<std::string, uint64_t>> times;
    times.reserve(by_name.size());
    for (const auto& [name, ns] : by_name)
      if (name != nullptr) times.emplace_back(name, ns);
    NoteKernelTimes(times);
  }
  auto fresh = strings.TakeNew();
  if (!fresh.empty()) a.writer.WriteStrings(fresh);
  if (!meta.empty()) a.writer.WriteMeta(meta);
  if (!staging.empty()) a.writer.WriteRecords(staging.data(), staging.size());
  a.stats.records_written += staging.size();
  a.stats.buffer_bytes += valid;
  std::memset(buf, 0, valid);  // CUPTI was told buffers arrive zeroed
}

// Writes the records the graph callbacks and the counters made on other threads (graphs.cpp,
// counters.cpp), with the names they carry, and the meta they left.
void WriteSideRecords(Agent& a, Interner& strings) {
  std::vector<Agent::SideRecord> side;
  MetaList meta;
  {
    std::lock_guard<std::mutex> lock(a.side_mu);
    if (a.side.empty() && a.side_meta.empty()) return;
    side.swap(a.side);
    meta.swap(a.side_meta);
  }
  if (a.writer.write_failure() != 0) return;
  if (!meta.empty()) a.writer.WriteMeta(meta);
  if (side.empty()) return;
  std::vector<Record> recs;
  recs.reserve(side.size());
  for (auto& s : side) {
    if (!s.name.empty()) s.rec.name = strings.Intern(s.name);
    if (s.rec.Kind() == RecordKind::DriverApi && (s.rec.flags & kApiMemoryCaller) != 0) {
      const std::string caller = CallerOf(s.frames, s.thread);
      s.rec.e = caller.empty() ? 0 : strings.Intern(caller);
    }
    recs.push_back(s.rec);
  }
  auto fresh = strings.TakeNew();
  if (!fresh.empty()) a.writer.WriteStrings(fresh);
  a.writer.WriteRecords(recs.data(), recs.size());
  a.stats.records_written += recs.size();
}

// Writes what the op observer's rings hold (op_rings.h) as Range records, with their names.
void WriteOpRanges(Agent& a, Interner& strings, std::vector<Record>& staging) {
  staging.clear();
  if (ops::Drain([&](std::string_view s) { return strings.Intern(s); }, staging) == 0) return;
  if (a.writer.write_failure() != 0) return;
  auto fresh = strings.TakeNew();
  if (!fresh.empty()) a.writer.WriteStrings(fresh);
  a.writer.WriteRecords(staging.data(), staging.size());
  a.stats.records_written += staging.size();
}

}  // namespace

void WriterLoop() {
  BlockSignalsInThisThread();
  Agent& a = A();
  Interner strings;
  std::vector<Record> staging;
  staging.reserve(g_buffer_bytes / 32);
  auto last_stats = std::chrono::steady_clock::now();
  std::vector<Record> op_staging;
  while (true) {
    Agent::Pending p{};
    bool buffer = false;
    {
      // Woken by a completed buffer, or every kDrainMs for the op rings (which fill with no
      // CUPTI buffer to announce them).
      std::unique_lock<std::mutex> lock(a.q_mu);
      a.q_cv.wait_for(lock, std::chrono::milliseconds(ops::kDrainMs),
                      [&] { return a.stop_writer || !a.queue.empty(); });
      if (!a.queue.empty()) {
        p = a.queue.front();
        a.queue.pop_front();
        buffer = true;
      } else if (a.stop_writer) {
        break;  // stop requested and drained
      }
    }
    WriteOpRanges(a, strings, op_staging);
    if (!buffer) continue;
    WriteSideRecords(a, strings);
    if (a.writer.write_failure() == 0) {
      ProcessBuffer(a, strings, staging, p.buf, p.valid);
      if (const int err = a.writer.write_failure(); err != 0) {
        // Once: the file is cut back to its last whole block; later buffers are dropped.
        std::fprintf(stderr,
                     "kprof agent: writing %s failed (%s): recording stopped; the file keeps "
                     "the %llu records written before\n",
                     a.path.c_str(), std::strerror(err),
                     static_cast<unsigned long long>(a.writer.records_kept()));
      }
    } else {
      std::memset(p.buf, 0, p.valid);  // dropped unread: CUPTI was told buffers arrive zeroed
    }
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
  WriteSideRecords(a, strings);           // graphs made after the last buffer
  WriteOpRanges(a, strings, op_staging);  // ops ended after it (recording is off by now)
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
    a.flushing = true;  // (before reading flush_paused: see agent.h)
    if (a.flush_paused || !a.attached) {
      a.flushing = false;
      lock.lock();
      continue;
    }
    KPROF_CUPTI(cuptiActivityFlushAll(0),
                "collect CUPTI's completed buffers (records wait for the next flush)");
    // CUPTI keeps asking for buffers without handing full ones back, and holds more than the
    // soft limit: seen on the H100 after kernel replays (--metrics replay), about one buffer
    // per flush, until every request waited and records were dropped. A forced flush hands
    // back the partly filled ones.
    size_t held = 0;
    {
      std::lock_guard<std::mutex> pool(a.pool_mu);
      held = a.lent.size();
    }
    if (held >= kSoftBufferLimit) {
      KPROF_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                  "collect the buffers CUPTI holds (records may be dropped)");
      ++a.forced_flushes;
    }
    a.flushing = false;
    lock.lock();
  }
  a.flusher_done = true;
  a.flusher_cv.notify_all();
}

// Runs cuptiActivityFlushAll on a helper thread and gives up waiting after `timeout_ms`
// (flushes that hang at exit have been reported). Returns true when it finished in time.
bool FlushWithTimeout(uint32_t flag, int timeout_ms) {
  if (!A().attached) return true;  // CUPTI detached (on demand): nothing of it to collect
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto shared = std::make_shared<Shared>();
  std::thread t([shared, flag] {
    BlockSignalsInThisThread();
    KPROF_CUPTI(cuptiActivityFlushAll(flag),
                "collect CUPTI's last buffers (the run may miss its last records)");
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

void PauseFlusher(bool paused) {
  Agent& a = A();
  a.flush_paused = paused;  // (before reading flushing: see agent.h)
  while (paused && a.flushing) std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
  if (!a.active.exchange(false)) {
    // The signal thread is finishing the file (a signal arrived) while the program exits on its
    // own: wait for it, so that the exit does not cut the file short. Not in a forked child,
    // whose parent's Finish is not ours to wait for.
    if (a.finishing && getpid() == a.pid) {
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(3 * kExitFlushTimeoutMs);
      while (!a.finished && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return;
  }
  a.finishing = true;
  // The op observer stops first, told it is the end (so that no window's closing below switches
  // it through PyTorch, whose state exit may have destroyed); the writer takes what it made.
  ops::EndRecording();
  EndOnDemand();       // the control thread stops (on demand); a window it holds open ends
  EndCapture();        // an open window ends here: its record before the final flush
  StopCounters(true);  // the counters' meta (and any last samples), before the final flush
  // The buffers CUPTI holds now: the forced flush must return every one of them. Buffers it asks
  // for later hold work the program goes on doing while the file is finished (a signal is
  // handled beside the program): not written, and no sign of another CUPTI client.
  std::vector<std::pair<uint8_t*, uint64_t>> held;
  {
    std::lock_guard<std::mutex> lock(a.pool_mu);
    held.assign(a.lent.begin(), a.lent.end());
  }
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
  {
    std::lock_guard<std::mutex> lock(a.pool_mu);
    a.pool_closed = true;
    a.pool_cv.notify_all();
  }
  if (drained) {
    a.writer_thread.join();
    // Replayed kernels still kept back: their replays have ended by now (or never will).
    std::vector<Record> late;
    TakeReplayedKernels(a, late, true);
    if (!late.empty() && a.writer.write_failure() == 0) {
      a.writer.WriteRecords(late.data(), late.size());
      a.stats.records_written += late.size();
    }
  } else {
    a.writer_thread.detach();
    a.finished = true;
    return;  // the writer is stuck: leave the file as it is (readable up to its last block)
  }
  size_t outstanding, unreturned = 0;
  {
    std::lock_guard<std::mutex> lock(a.pool_mu);
    outstanding = a.lent.size();
    for (const auto& [buf, lending] : held) {
      auto it = a.lent.find(buf);
      unreturned += it != a.lent.end() && it->second == lending;
    }
  }
  MetaList meta{{"exit_reason", reason}};
  // Only with the subscriber that counts them (agent.cpp): 0 means the process used no GPU.
  if (a.subscriber != nullptr) meta.emplace_back("contexts", std::to_string(a.contexts.load()));
  if (!flushed) {
    meta.emplace_back("flush_timeout", "1");
    meta.emplace_back(
        "flush_timeout_detail",
        "the final flush did not return within " + std::to_string(kExitFlushTimeoutMs) + " ms; " +
            std::to_string(outstanding) + " activity buffer(s) held by CUPTI were not written");
  }
  // Buffers that never came back although the forced flush returned, or buffers that are not
  // ours: another CUPTI client (torch.profiler, a second tool) took over the activity API.
  if ((flushed && unreturned > 0) || a.foreign_buffers > 0) {
    meta.emplace_back("displaced", "1");
    meta.emplace_back("displaced_detail",
                      std::to_string(unreturned) + " activity buffer(s) never returned, " +
                          std::to_string(a.foreign_buffers.load()) +
                          " foreign buffer(s) received; another CUPTI client (such as "
                          "torch.profiler) registered its own activity callbacks");
  }
  if (a.forced_flushes > 0)
    meta.emplace_back("forced_flushes", std::to_string(a.forced_flushes.load()));
  for (auto& kv : ops::Meta()) meta.push_back(std::move(kv));
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

}  // namespace kprof::agent
