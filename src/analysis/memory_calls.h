// The calls behind device memory (src/analysis/memory.cpp, docs/memory.md "Who made it"): the
// virtual-memory calls kprof recorded with their callers (record.h kApiMemoryCaller), and the
// failed allocation calls the program retried with success.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kprof/trace.h"

namespace kprof::memory_calls {

/// The address of a MemAlloc/MemFree record (a, b).
inline uint64_t Address(const Record& r) {
  return static_cast<uint64_t>(r.a) | static_cast<uint64_t>(r.b) << 32;
}
/// The address a virtual-memory call mapped (c, d; 0 for cuMemCreate).
inline uint64_t MappedAddress(const Record& r) {
  return static_cast<uint64_t>(r.c) | static_cast<uint64_t>(r.d) << 32;
}

/// The caller kprof found for a virtual-memory call (a string id; 0 = none or not such a call).
uint32_t CallerOf(const Record& r);
/// Whether `caller` is a shared object's path (not "[thread] NAME", the fallback).
bool IsLibrary(const std::string& caller);
/// The owner of memory made by a virtual-memory call whose caller kprof found: the library's
/// name, or for a caller known only by its thread, that thread (NCCL names its threads).
std::string CallerOwner(const std::string& caller);

/// The virtual-memory calls of one process that mapped an address, per address in time order.
/// Each names the first allocation CUPTI recorded at its address after it began (CUPTI stamps
/// the memory at the access call that follows the mapping: 0.2 ms later on the H200), once, and
/// within kMapToRecordNs: memory made at the address later, after the mapping was released, is
/// not given to it, nor memory made there before it.
class Mappings {
 public:
  static constexpr uint64_t kMapToRecordNs = 1'000'000'000;
  explicit Mappings(const ProcessTrace& p);
  /// The mapping call that made `alloc` (a MemAlloc record), claimed; null when none. Calls for
  /// one address must come in time order.
  const Record* Claim(const Record& alloc);

 private:
  struct Calls {
    std::vector<const Record*> calls;  // by start_ns
    size_t next = 0;                   // the first not yet claimed nor passed over
  };
  std::unordered_map<uint64_t, Calls> by_address_;
};

/// The successful calls of the names that failed, by thread and name: whether a failure was
/// retried with success (FailedAllocation::retried). Names compare without CUPTI's version
/// suffix (cuMemAlloc_v2 is cuMemAlloc).
class Retries {
 public:
  Retries(const ProcessTrace& p, const std::vector<const Record*>& failed);
  bool Succeeded(const Record& failure) const;

 private:
  const ProcessTrace* p_ = nullptr;
  std::unordered_map<std::string, std::vector<uint64_t>> ok_;  // "tid:name" -> starts
};

}  // namespace kprof::memory_calls
