// kprof's own op ranges: see op_rings.h.
#include "agent/op_rings.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "agent/thread_id.h"
#include "kprof/on_demand.h"

namespace kprof::agent::ops {
namespace {

struct Ring {
  kprof_op_ring* ring;
  bool done;  // its thread has ended: freed once emptied
};

// Leaked on purpose, like the agent's state (they must outlive static destructors that run at
// exit). Three locks: the program's threads take the first two, alone (at a thread's first event,
// at a new name); the third is held while the observer is bound (which defines its names: the
// second inside the third, never the reverse) and switched (which takes the observer's lock and
// PyTorch's own lock of its callbacks). A thread inside an op can take the third: a user scope's
// NVTX push that opens a --capture nvtx:NAME window switches the observer from its callback; no
// op path holds the third or the observer's lock before, so no cycle.
std::mutex& g_rings_mu = *new std::mutex();  // g_rings
std::vector<Ring>& g_rings = *new std::vector<Ring>();
std::mutex& g_names_mu = *new std::mutex();  // g_new_names
std::vector<std::pair<uint32_t, std::string>>& g_new_names =
    *new std::vector<std::pair<uint32_t, std::string>>();
std::mutex& g_mu = *new std::mutex();  // the observer, g_recording, g_ended, g_offset_set
const kprof_op_observer* g_observer = nullptr;
uint32_t g_refused_abi = 0;  // an observer of another ABI offered itself
bool g_recording = false;
bool g_ended = false;  // EndRecording: nothing switches the observer again
std::atomic<bool> g_active{false};
std::atomic<int64_t> g_offset{0};
std::atomic<uint64_t> g_offset_spread{0};
bool g_offset_set = false;  // (under g_mu)

// The writer's own (Drain is called by one thread at a time).
std::vector<uint32_t>& g_file_ids = *new std::vector<uint32_t>();  // observer id -> string id
uint32_t g_domains[3] = {0, 0, 0};                                 // cpu_op, user_annotation, kprof
uint64_t g_written = 0, g_dropped = 0, g_unnamed = 0;

kprof_op_ring* ThreadRing() {
  auto* r = new (std::nothrow) kprof_op_ring();
  if (r == nullptr) return nullptr;
  // Value-initialised: every page touched here, once, rather than at each event's first use.
  r->events = new (std::nothrow) kprof_op_event[kRingEvents]();
  if (r->events == nullptr) {
    delete r;
    return nullptr;
  }
  r->capacity = kRingEvents;
  r->tid = CuptiThreadId();  // as CUPTI names this thread in its API records
  std::lock_guard<std::mutex> lock(g_rings_mu);
  g_rings.push_back({r, false});
  g_active = true;
  return r;
}

void ThreadDone(kprof_op_ring* ring) {
  std::lock_guard<std::mutex> lock(g_rings_mu);
  for (Ring& r : g_rings)
    if (r.ring == ring) r.done = true;
}

void DefineName(uint32_t id, const char* text, uint32_t length) {
  if (id == 0 || text == nullptr) return;
  std::lock_guard<std::mutex> lock(g_names_mu);
  g_new_names.emplace_back(id, std::string(text, length));
}

void ObserverReady(const kprof_op_observer* observer);

const kprof_op_agent kTable = {kKprofOpAbi, &ThreadRing, &ThreadDone, &DefineName, &ObserverReady};

void ObserverReady(const kprof_op_observer* observer) {
  if (observer == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (observer->abi != kKprofOpAbi) {
    g_refused_abi = observer->abi;
    return;
  }
  if (g_observer == observer || g_ended) return;
  g_observer = observer;
  observer->bind(&kTable);
  if (g_recording) observer->enable(1);
}

uint32_t Domain(uint8_t kind, const std::function<uint32_t(std::string_view)>& intern) {
  // PyTorch's own trace categories for its ops and user scopes (chrome-trace.md), so that kprof's
  // Chrome traces show them as PyTorch's profiler does; kprof's layer in its own.
  const int slot = kind == kKprofOp || kind == kKprofOpBackward ? 0 : kind == kKprofOpUser ? 1 : 2;
  static constexpr std::string_view kNames[3] = {kCpuOpDomain, "user_annotation", "kprof"};
  if (g_domains[slot] == 0) g_domains[slot] = intern(kNames[slot]);
  return g_domains[slot];
}

uint64_t Shift(uint64_t t, int64_t by) {
  if (by >= 0) {
    const auto u = static_cast<uint64_t>(by);
    return t > std::numeric_limits<uint64_t>::max() - u ? std::numeric_limits<uint64_t>::max()
                                                        : t + u;
  }
  const auto u = static_cast<uint64_t>(-(by + 1)) + 1;
  return t > u ? t - u : 0;
}

}  // namespace

const kprof_op_agent* Table() { return &kTable; }

void SetRecording(bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ended || g_recording == on) return;
  g_recording = on;
  if (g_observer != nullptr) g_observer->enable(on ? 1 : 0);
}

void EndRecording() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ended) return;
  g_ended = true;
  g_recording = false;
  if (g_observer != nullptr) g_observer->enable(kKprofOpEnd);
}

void SetClockOffset(int64_t ns, uint64_t spread_ns) {
  g_offset = ns;
  g_offset_spread = spread_ns;
  std::lock_guard<std::mutex> lock(g_mu);
  g_offset_set = true;
}

bool TakeClockOffset(uint64_t (*cupti_now)()) {
  int64_t best = 0;
  uint64_t best_spread = std::numeric_limits<uint64_t>::max();
  for (int i = 0; i < 7; ++i) {
    const uint64_t w0 = ondemand::WallNs();  // CLOCK_REALTIME, the observer's clock
    const uint64_t c = cupti_now();
    const uint64_t w1 = ondemand::WallNs();
    if (c == 0 || w1 < w0 || w1 - w0 >= best_spread) continue;
    best_spread = w1 - w0;
    best = static_cast<int64_t>(c) - static_cast<int64_t>(w0 + (w1 - w0) / 2);
  }
  if (best_spread == std::numeric_limits<uint64_t>::max()) return false;
  SetClockOffset(best, best_spread);
  return true;
}

void FindObserver() {
  // An observer loaded before the agent (torch imported before CUDA started) exports its table
  // globally; one loaded later finds the agent itself (observer_ready).
  auto fn = reinterpret_cast<kprof_op_observer_fn>(dlsym(RTLD_DEFAULT, "kprof_op_observer_v1"));
  if (fn != nullptr) ObserverReady(fn());
}

bool Active() { return g_active.load(std::memory_order_relaxed); }

size_t Drain(const std::function<uint32_t(std::string_view)>& intern, std::vector<Record>& out) {
  if (!Active()) return 0;
  std::vector<Ring> rings;
  {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    rings = g_rings;
  }
  // Heads first, names after: a name is defined before the events that use it are published, so
  // every event up to these heads has its name among those taken below.
  std::vector<uint64_t> heads(rings.size());
  for (size_t i = 0; i < rings.size(); ++i)
    heads[i] = rings[i].ring->head.load(std::memory_order_acquire);
  std::vector<std::pair<uint32_t, std::string>> names;
  {
    std::lock_guard<std::mutex> lock(g_names_mu);
    names.swap(g_new_names);
  }
  for (const auto& [id, text] : names) {
    if (id >= g_file_ids.size()) g_file_ids.resize(static_cast<size_t>(id) + 1, 0);
    g_file_ids[id] = intern(text);
  }
  const int64_t offset = g_offset.load(std::memory_order_relaxed);
  const size_t before = out.size();
  std::vector<kprof_op_ring*> emptied;
  for (size_t i = 0; i < rings.size(); ++i) {
    kprof_op_ring* ring = rings[i].ring;
    const uint64_t mask = ring->capacity - 1;
    uint64_t t = ring->tail.load(std::memory_order_relaxed);
    for (; t < heads[i]; ++t) {
      const kprof_op_event& e = ring->events[t & mask];
      Record r;
      r.kind = static_cast<uint8_t>(RecordKind::Range);
      r.flags = e.kind;
      r.device = kNoDevice;
      r.start_ns = Shift(e.begin_ns, offset);
      r.end_ns = Shift(std::max(e.begin_ns, e.end_ns), offset);
      r.name = e.name < g_file_ids.size() ? g_file_ids[e.name] : 0;
      g_unnamed += r.name == 0;
      r.tid = ring->tid;
      r.b = Domain(e.kind, intern);
      r.c = static_cast<uint32_t>(e.depth) + 1;
      r.d = e.seq1;
      out.push_back(r);
    }
    ring->tail.store(t, std::memory_order_release);
    if (rings[i].done) emptied.push_back(ring);
  }
  if (!emptied.empty()) {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    for (kprof_op_ring* ring : emptied) {
      g_dropped += ring->dropped.load(std::memory_order_relaxed);
      std::erase_if(g_rings, [&](const Ring& r) { return r.ring == ring; });
      delete[] ring->events;
      delete ring;
    }
  }
  g_written += out.size() - before;
  return out.size() - before;
}

std::vector<std::pair<std::string, std::string>> Meta() {
  std::vector<std::pair<std::string, std::string>> m;
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(g_rings_mu);
    dropped = g_dropped;
    for (const Ring& r : g_rings) dropped += r.ring->dropped.load(std::memory_order_relaxed);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  // Asked now rather than when it bound: it may bind before the layer has told it its torch.
  if (g_observer != nullptr) {
    const char* d = g_observer->describe != nullptr ? g_observer->describe() : nullptr;
    m.emplace_back("op_observer", d != nullptr ? d : "");
  }
  if (g_refused_abi != 0)
    m.emplace_back("op_observer_refused", "an op observer of ABI " + std::to_string(g_refused_abi) +
                                              " (the agent's: " + std::to_string(kKprofOpAbi) +
                                              ")");
  if (g_observer != nullptr || g_written > 0) {
    m.emplace_back("op_ranges", std::to_string(g_written));
    m.emplace_back("op_ranges_dropped", std::to_string(dropped));
  }
  if (g_unnamed > 0) m.emplace_back("op_ranges_unnamed", std::to_string(g_unnamed));
  if (g_observer != nullptr && g_offset_set) {
    m.emplace_back("op_clock_offset_ns", std::to_string(g_offset.load()));
    m.emplace_back("op_clock_spread_ns", std::to_string(g_offset_spread.load()));
  }
  return m;
}

void ResetForTest() {
  std::scoped_lock lock(g_rings_mu, g_names_mu, g_mu);
  for (Ring& r : g_rings) {
    delete[] r.ring->events;
    delete r.ring;
  }
  g_rings.clear();
  g_new_names.clear();
  g_observer = nullptr;
  g_refused_abi = 0;
  g_recording = false;
  g_ended = false;
  g_active = false;
  g_offset = 0;
  g_offset_spread = 0;
  g_offset_set = false;
  g_file_ids.clear();
  std::fill(std::begin(g_domains), std::end(g_domains), 0u);
  g_written = g_dropped = g_unnamed = 0;
}

}  // namespace kprof::agent::ops

/// The agent's side of the op observers' seam (kprof/op_abi.h), found by an observer loaded after
/// the agent (dlopen of CUDA_INJECTION64_PATH with RTLD_NOLOAD, then dlsym).
extern "C" __attribute__((visibility("default"))) const kprof_op_agent* kprof_op_agent_v1() {
  return kprof::agent::ops::Table();
}
