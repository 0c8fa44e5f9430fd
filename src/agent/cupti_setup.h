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
/// The kinds that record the GPU's work (a graph launched while CUPTI is attached with all of them
/// off faults after cuptiFinalize: attach.cpp).
constexpr uint32_t kGpuWorkKinds = kKindKernel | kKindMemcpy | kKindMemset;

/// Parses "kernel,memcpy,..." ("all" or empty = everything). Unknown words are ignored and
/// reported through `unknown` (the launcher validates the list before the program starts).
uint32_t ParseKinds(const char* list, std::string* unknown);
/// The canonical comma list of a bit set, for the file's meta block.
std::string KindsToString(uint32_t kinds);

/// Logs a failed CUPTI call once per call site to stderr, in words a user can act on:
///   kprof agent: could not <doing>: cuptiActivityDisable returned CUPTI_ERROR_... (21)
/// `doing` says what kprof was doing ("stop kernel records when a capture window closed"),
/// `call` is the call's text (its function name is printed). Returns true on success.
bool CheckCupti(CUptiResult r, const char* call, const char* doing, const char* file, int line);
#define KPROF_CUPTI(call, doing) \
  ::kprof::agent::CheckCupti((call), #call, (doing), __FILE__, __LINE__)
/// Logs a failed call once per call site: "could not <doing>: <function> returned <message>
/// (<code>)".
void LogFailureOnce(const char* call, const char* doing, const char* message, int code,
                    const char* file, int line);

/// CUPTI's clock (cuptiGetTimestamp), 0 when it gives nothing.
inline uint64_t CuptiTimestamp() {
  uint64_t t = 0;
  return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

/// Sets activity attributes (device buffer size, zeroed buffers). Call before enabling kinds.
/// `zeroed_buffers`: the client promises buffers handed to CUPTI are zero-filled;
/// `device_buffer_mb`: CUPTI's device buffer in MiB (0: kprof's default, 4).
bool ConfigureActivityAttributes(bool zeroed_buffers, uint64_t device_buffer_mb = 0);

/// Enables graph-level tracing of CUDA graphs (CUPTI_ACTIVITY_KIND_GRAPH_TRACE: one record per
/// graph launch, none per node) when `kinds` records GPU work. Call once, before CUDA has a
/// context, and never switch it off: CUPTI 13.0 crashes in cuGraphLaunch when an executable
/// graph instantiated without graph-level tracing is launched with it on (on the H200,
/// 2026-11-26: every capture window opened after a graph's instantiation; docs/capture.md), and
/// a graph's tracing cannot be changed after its instantiation. Capture windows keep it on and
/// keep only the launches made inside them (capture.h).
bool EnableGraphTrace(uint32_t kinds);

/// Enables the activity kinds in `kinds` (graph-level tracing aside: EnableGraphTrace);
/// runtime/driver API records are limited to the calls kprof needs (launches, copies, memsets,
/// synchronization, allocation, graph launch, events). Returns false if a required kind could
/// not be enabled. `enabled_api` receives the number of runtime + driver callback ids enabled.
/// How API records are switched on: per callback id (at start), or also through the whole API
/// kinds with the other ids switched off (later, in a capture window: docs/capture.md).
enum class ApiRecords : uint8_t { PerId, Kind };
/// Whether EnableActivityKinds asks CUPTI for the library behind each allocation (default on;
/// KPROF_ALLOC_SOURCE=0 turns it off, to measure what it costs).
void SetAllocationSource(bool on);
bool EnableActivityKinds(uint32_t kinds, int* enabled_api, ApiRecords how = ApiRecords::PerId);

/// Finds the API callback ids kprof records (by name, once; EnableActivityKinds does it on its
/// first call otherwise), so that enabling them later (a capture window) is only the enabling.
/// Returns how many there are.
size_t PrepareApiRecords();

/// Disables what EnableActivityKinds enabled, API records included (a capture window closing;
/// the device records and graph-level tracing stay on).
void DisableActivityKinds(uint32_t kinds, ApiRecords how = ApiRecords::PerId);

/// True when this runtime/driver API name is one kprof records.
bool IsTracedApiName(const char* name);

}  // namespace kprof::agent
