// CUPTI setup shared by the kprof agent and the benchmark's floor agent (scripts/bench), so that
// both enable exactly the same activity kinds and API filters: the overhead figure then separates
// CUPTI's own cost from kprof's.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace kprof::agent {

/// What to record (KPROF_KINDS, comma-separated). Bit set.
enum KindBits : uint32_t {
  kKindKernel = 1u << 0,
  kKindMemcpy = 1u << 1,
  kKindMemset = 1u << 2,
  kKindSync = 1u << 3,
  kKindRuntime = 1u << 4,
  kKindDriver = 1u << 5,
  kKindNvtx = 1u << 6,
  kKindMemory = 1u << 7,
  kKindOverhead = 1u << 8,
  kKindAll = (1u << 9) - 1,
};

/// Parses "kernel,memcpy,..." ("all" or empty = everything). Unknown words are ignored and
/// reported through `unknown` (the launcher validates the list before the program starts).
uint32_t ParseKinds(const char* list, std::string* unknown);
/// The canonical comma list of a bit set, for the file's meta block.
std::string KindsToString(uint32_t kinds);

/// Logs a failed CUPTI call once per call site to stderr; returns true on success.
bool CheckCupti(CUptiResult r, const char* call, const char* file, int line);
#define KPROF_CUPTI(call) ::kprof::agent::CheckCupti((call), #call, __FILE__, __LINE__)
/// Logs a failed call once per call site (`message` and `code` describe the failure).
void LogFailureOnce(const char* call, const char* message, int code, const char* file, int line);

/// Sets activity attributes (device buffer size, zeroed buffers). Call before enabling kinds.
/// `zeroed_buffers`: the client promises buffers handed to CUPTI are zero-filled.
bool ConfigureActivityAttributes(bool zeroed_buffers);

/// Enables the activity kinds in `kinds`; runtime/driver API records are limited to the calls
/// kprof needs (launches, copies, memsets, synchronization, allocation, graph launch, events).
/// Returns false if a required kind could not be enabled. `enabled_api` receives the number of
/// runtime + driver callback ids enabled. `graph_level`: CUDA graph launches are recorded as one
/// record each (CUPTI_ACTIVITY_KIND_GRAPH_TRACE), not node by node (CUPTI then writes no
/// kernel, copy or memset record for work inside a graph).
/// How API records are switched on: per callback id (at start), or also through the whole API
/// kinds with the other ids switched off (later, in a capture window: docs/capture.md).
enum class ApiRecords : uint8_t { PerId, Kind };
bool EnableActivityKinds(uint32_t kinds, int* enabled_api, bool graph_level = false,
                         ApiRecords how = ApiRecords::PerId);

/// Finds the API callback ids kprof records (by name, once; EnableActivityKinds does it on its
/// first call otherwise), so that enabling them later (a capture window) is only the enabling.
/// Returns how many there are.
size_t PrepareApiRecords();

/// Disables what EnableActivityKinds enabled, API records included (a capture window closing;
/// the device records stay on).
void DisableActivityKinds(uint32_t kinds, bool graph_level = false,
                          ApiRecords how = ApiRecords::PerId);

/// True when this runtime/driver API name is one kprof records.
bool IsTracedApiName(const char* name);

}  // namespace kprof::agent
