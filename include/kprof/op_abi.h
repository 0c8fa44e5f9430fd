// The seam between kprof's agent and an op observer running inside the profiled program (the
// PyTorch layer's RecordFunction observer, src/pytorch/kprof_ops.cpp; docs/pytorch.md "Op ranges
// without NVTX"): what the observer writes for one op, the per-thread ring it writes into, and
// the table of functions each side exports. The observer is compiled on the user's machine
// against the torch the program imported, from a copy of this header next to its source, so this
// file includes nothing of kprof's and keeps a plain layout: bump kKprofOpAbi on any change.
//
// One ring per thread, one writer (the thread: kprof_op_publish) and one reader (the agent's
// writer thread):
//   thread:  h = head (relaxed); if h - tail >= capacity: dropped++ and skip; events[h & mask]
//            = e; head = h + 1 (release)
//   agent:   h = head (acquire); read events[tail .. h); tail = h (release)
// Times are CLOCK_REALTIME nanoseconds; the agent moves them onto CUPTI's clock.
#pragma once

#include <atomic>
#include <cstdint>

extern "C" {

inline constexpr uint32_t kKprofOpAbi = 1;

/// What an event stands for (kprof_op_event::kind).
enum KprofOpKind : uint8_t {
  kKprofOp = 0,          ///< an operator (aten::addmm), or any RecordFunction but those below
  kKprofOpBackward = 1,  ///< an autograd node run in the backward pass (AddmmBackward0)
  kKprofOpUser = 2,      ///< a user scope (torch.profiler.record_function, Inductor's kernels)
  kKprofOpModule = 3,    ///< a range of kprof's own layer ("kprof.module:NAME|Class")
  kKprofOpMark = 4,      ///< an instant of kprof's own layer ("kprof.pytorch:...")
};

/// kprof_op_observer::enable's argument: recording stops for good, the process ending. The
/// observer stops without calling into PyTorch, whose thread-local state exit may have destroyed.
inline constexpr int kKprofOpEnd = 2;

/// One completed range on the ring's thread (32 bytes).
struct kprof_op_event {
  uint64_t begin_ns;
  uint64_t end_ns;
  uint32_t name;   ///< the observer's id of its name (kprof_op_agent::define_name)
  uint32_t seq1;   ///< autograd's sequence number (RecordFunction::seqNr) + 1, 0 for none
  uint16_t depth;  ///< the observer's ranges open around it on its thread when it began
  uint8_t kind;    ///< KprofOpKind
  uint8_t reserved;
  uint32_t pad;
};
static_assert(sizeof(kprof_op_event) == 32, "kprof_op_event is part of the ABI");

/// A thread's ring (made by the agent: kprof_op_agent::thread_ring).
struct kprof_op_ring {
  uint32_t capacity;  ///< events; a power of two
  uint32_t tid;       ///< the thread's id as CUPTI writes it (pthread_self, low 32 bits)
  kprof_op_event* events;
  alignas(64) std::atomic<uint64_t> head;  ///< events published (the thread)
  alignas(64) std::atomic<uint64_t> tail;  ///< events taken (the agent)
  std::atomic<uint64_t> dropped;           ///< events the thread found no room for
};

/// Whether `ring` has room for one more event, as its thread sees it: `tail_seen` is the thread's
/// copy of the tail, read again only when the ring looks full.
inline bool kprof_op_room(kprof_op_ring* ring, uint64_t* tail_seen) {
  const uint64_t h = ring->head.load(std::memory_order_relaxed);
  if (h - *tail_seen < ring->capacity) return true;
  *tail_seen = ring->tail.load(std::memory_order_acquire);
  return h - *tail_seen < ring->capacity;
}

/// Publishes `e` on `ring` (its own thread only); false, counted as dropped, when it is full.
inline bool kprof_op_publish(kprof_op_ring* ring, const kprof_op_event& e, uint64_t* tail_seen) {
  if (!kprof_op_room(ring, tail_seen)) {
    ring->dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const uint64_t h = ring->head.load(std::memory_order_relaxed);
  ring->events[h & (ring->capacity - 1)] = e;
  ring->head.store(h + 1, std::memory_order_release);
  return true;
}

struct kprof_op_observer;

/// What the agent offers (kprof_op_agent_v1, exported by libkprof_agent.so).
struct kprof_op_agent {
  uint32_t abi;  ///< kKprofOpAbi
  /// The calling thread's ring, made at its first call; null when the agent has none to give.
  kprof_op_ring* (*thread_ring)();
  /// The ring's thread is ending: the agent takes what is left and frees it.
  void (*thread_done)(kprof_op_ring* ring);
  /// Names the observer's id `id` (ids from 1, each defined once, before any event uses it).
  void (*define_name)(uint32_t id, const char* text, uint32_t length);
  /// The observer is loaded: the agent enables it whenever it records (now, if it does).
  void (*observer_ready)(const kprof_op_observer* observer);
};

/// What an observer offers (kprof_op_observer_v1, exported by the observer's library).
struct kprof_op_observer {
  uint32_t abi;  ///< kKprofOpAbi
  /// Binds it to the agent (before any enable): its rings and names come from there.
  void (*bind)(const kprof_op_agent* agent);
  /// Recording starts (1) or stops (0, or kKprofOpEnd at the process's end); called from any
  /// thread, never concurrently.
  void (*enable)(int on);
  /// A line naming it, for the run's meta ("PyTorch RecordFunction observer, torch 2.11.0").
  const char* (*describe)();
};

using kprof_op_agent_fn = const kprof_op_agent* (*)();
using kprof_op_observer_fn = const kprof_op_observer* (*)();

}  // extern "C"
