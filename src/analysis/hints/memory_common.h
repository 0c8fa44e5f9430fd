// What the memory rules (memory-leak, allocator-fragmentation, activation-memory) share: the
// PyTorch layer's findings at exit for each process and device, and their pricing in bytes.
#pragma once

#include <vector>

#include "analysis/hints/rule.h"
#include "kprof/memory.h"

namespace kprof::hints {

/// A memory hint below this share of the peak it is taken from is not emitted.
inline constexpr double kMemoryEmitPct = 5.0;
/// Nor below this many bytes (a few MiB of a small program are not worth a change).
inline constexpr int64_t kMemoryEmitBytes = 64ll << 20;

/// The findings written at exit, the largest max_memory_reserved first.
std::vector<const TorchMemory*> TorchAtExit(const RuleContext& c);

/// A fix that costs compute or numerics (recomputation, lower-precision state) is worth it only
/// when memory is short: when the process's driver-level peak on the device is at least this
/// share of the device's memory.
inline constexpr double kShortShare = 0.7;
bool MemoryIsShort(const RuleContext& c, const TorchMemory& t);

/// Fills severity and the bytes' share of `peak` (severity as SeverityForPct of that share);
/// false when below the emit floors.
bool PriceBytes(Hint& h, int64_t bytes, int64_t peak);

}  // namespace kprof::hints
