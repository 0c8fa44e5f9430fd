// Publishes events on an op ring the way an op observer does (kprof/op_abi.h): for the agent's
// tests of its rings and its writer.
#pragma once

#include <atomic>

#include "kprof/op_abi.h"

namespace kprof::test {

/// One event on `ring`; false when the ring is full, counted as dropped unless `waits` (the
/// caller tries again once the writer has made room).
inline bool Publish(kprof_op_ring* ring, const kprof_op_event& e, bool waits = false) {
  const uint64_t h = ring->head.load(std::memory_order_relaxed);
  if (h - ring->tail.load(std::memory_order_acquire) >= ring->capacity) {
    if (!waits) ring->dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  ring->events[h & (ring->capacity - 1)] = e;
  ring->head.store(h + 1, std::memory_order_release);
  return true;
}

}  // namespace kprof::test
