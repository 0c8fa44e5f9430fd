// The id CUPTI writes into marker and API records of a thread by default (pthread_self, truncated
// to 32 bits): records the agent makes itself on a thread (graph nodes, capture windows, the op
// observer's ranges) must carry it to match the NVTX and API records of the same thread. No CUPTI
// here, for the agent's CUPTI-free parts (op_rings.cpp).
#pragma once

#include <pthread.h>

#include <cstdint>

namespace kprof::agent {

inline uint32_t CuptiThreadId() { return static_cast<uint32_t>(pthread_self()); }

}  // namespace kprof::agent
