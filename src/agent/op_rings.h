// kprof's own op ranges (docs/pytorch.md "Op ranges without NVTX"): the rings an op observer
// inside the program writes into (kprof/op_abi.h), the names it defines, when it records, and the
// writer thread's taking of what the rings hold, as Range records. No CUPTI here: the agent moves
// the times onto CUPTI's clock with an offset it measures (SetClockOffset); the rings are tested
// on the CPU (tests/agent_writer, under ThreadSanitizer too).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kprof/op_abi.h"
#include "kprof/record.h"

namespace kprof::agent::ops {

/// Events per ring (one ring a thread, 32 bytes an event: 1 MiB). The writer takes them every
/// kDrainMs, so a thread may make up to capacity / kDrainMs events a millisecond without loss.
inline constexpr uint32_t kRingEvents = 1u << 15;
inline constexpr int kDrainMs = 50;

/// The table kprof_op_agent_v1 returns (also to tests).
const kprof_op_agent* Table();

/// Recording starts or stops (the agent's start, each capture window): the observer, once there,
/// is enabled while it records.
void SetRecording(bool on);
/// Recording stops for good (the agent's end, at exit or on a signal): the observer is told
/// kKprofOpEnd and stops without calling into PyTorch.
void EndRecording();
/// CUPTI's clock less CLOCK_REALTIME, added to every event's times, and the bracket it was
/// measured in (MeasureClockOffset), for the meta.
void SetClockOffset(int64_t ns, uint64_t spread_ns);
/// Measures that offset and sets it: the tightest of a few (wall, CUPTI, wall) readings, whose
/// bracket is kept as its spread (the offset's uncertainty is half of it). False, and nothing
/// set, when `cupti_now` gave nothing (0: CUPTI not attached).
bool TakeClockOffset(uint64_t (*cupti_now)());
/// Looks for an observer loaded before the agent (its exported kprof_op_observer_v1).
void FindObserver();

/// Whether any thread has a ring (the writer, which wakes every kDrainMs, has work).
bool Active();
/// The writer thread (one at a time): every ring's events since the last call, as Range records
/// (kprof's format, docs/format.md) appended to `out`, their names interned with `intern` first.
/// Rings of ended threads are freed once emptied. Returns the number of records appended.
size_t Drain(const std::function<uint32_t(std::string_view)>& intern, std::vector<Record>& out);
/// What the end writes to the meta: ranges written and dropped, and the observer's description
/// (empty when no observer ever bound). After the writer thread has stopped (it reads the
/// writer's counts).
std::vector<std::pair<std::string, std::string>> Meta();

/// Tests: forget every ring, name and observer.
void ResetForTest();

}  // namespace kprof::agent::ops
