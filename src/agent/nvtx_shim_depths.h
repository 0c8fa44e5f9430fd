// Internal to kprof's NVTX handlers (nvtx_shim.cpp, which alone includes it): each thread's push
// depths and the filter of pushes while a range is watched (nvtx_shim.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace kprof::agent::nvtx_shim::depths {

// Depths are kept while CUPTI gets the calls (a window is open only then); each thread's start
// again at each hand-over (a CUPTI given NVTX anew saw none of the ranges open before).
inline std::atomic<uint64_t> g_generation{1};

// Not attached, only pushes and starts of this name reach the sink (null: all); the others are
// counted (without a locked instruction: threads pushing at once may lose a count), striped by
// the thread's stack address so that threads pushing at once do not share a cache line.
inline std::atomic<const char*> g_name{nullptr};
constexpr int kStripes = 16;
struct alignas(64) Stripe {
  std::atomic<uint64_t> n{0};
};
inline Stripe g_unwatched[kStripes];

// Each thread's push depth per domain since the last hand-over (null: the default domain), and
// how many of those pushes went to CUPTI. Kept only while forwarding: a watched range before
// costs a push its name's comparison and a pop nothing.
struct Depth {
  const void* domain;
  int depth;
  int forwarded;
};
// (plain arrays: no destructor runs at the thread's exit, when NVTX may still be called; a thread
// with more domains shares the last entry between them)
constexpr int kDomainsPerThread = 16;
// One thread-local object, reached once per call: in a library loaded by dlopen each thread-local
// variable costs a __tls_get_addr call (four of them per push and pop made the pair 110 ns).
struct ThreadDepths {
  Depth depths[kDomainsPerThread];
  int domains;
  uint64_t generation;
};
inline thread_local ThreadDepths t_thread;

inline Depth& DepthOf(const void* domain) {
  // (The atomic first: GCC takes the thread-local's address again after one.)
  const uint64_t g = g_generation.load(std::memory_order_relaxed);
  ThreadDepths& t = t_thread;
  if (t.generation != g) {
    t.domains = 0;
    t.generation = g;
  }
  for (int i = 0; i < t.domains; ++i)
    if (t.depths[i].domain == domain) return t.depths[i];
  if (t.domains == kDomainsPerThread) return t.depths[kDomainsPerThread - 1];
  t.depths[t.domains] = {domain, 0, 0};
  return t.depths[t.domains++];
}

// Whether a push or start of `text`, not attached, goes to the sink (else it is counted).
inline __attribute__((always_inline)) bool Named(const char* text) {
  const char* name = g_name.load(std::memory_order_relaxed);
  if (name == nullptr || (text != nullptr && text[0] == name[0] && std::strcmp(text, name) == 0))
    return true;
  const int here = 0;
  std::atomic<uint64_t>& n =
      g_unwatched[(reinterpret_cast<uintptr_t>(&here) >> 23) % kStripes].n;  // stacks 8 MiB apart
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return false;
}

}  // namespace kprof::agent::nvtx_shim::depths
