// Bottleneck hints: rules over an analysed run that name a problem, show the evidence, bound
// what it costs and give the fix. Catalogue and thresholds: docs/hints.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/analysis.h"

namespace kprof {

enum class Severity { Info = 0, Warning = 1, Critical = 2 };
const char* SeverityName(Severity s);  ///< "info", "warning", "critical"

/// Where part of a hint's estimate lies on the run's timeline: `fraction` of the wall-clock
/// interval [start_ns, end_ns) is what the hint's fix would remove (1 for idle time, waits and
/// host calls; less for GPU work a fix makes faster: 15/16 of an FP32 GEMM). A hint's claims add
/// up to its estimate (before it is capped at the run). EstimateJoint reads them.
struct SavingClaim {
  uint64_t start_ns = 0, end_ns = 0;
  double fraction = 1;
};

struct Hint {
  std::string id;  ///< stable rule id, e.g. "launch-bound"
  Severity severity = Severity::Info;
  std::string summary;                ///< one line naming the problem
  std::vector<std::string> evidence;  ///< lines: which ops/kernels/calls, how many, how much
  uint64_t est_saving_ns = 0;         ///< upper bound of what fixing it could save
  /// The memory rules price device memory instead of time (docs/hints.md "Memory"): the bytes
  /// fixing it could take off the peak, and their share of the peak they are taken from.
  uint64_t est_saving_bytes = 0;
  double est_saving_bytes_pct = 0;
  double est_saving_pct = 0;  ///< est_saving_ns / (wall time less start-up) * 100; docs/hints.md
  std::string assumption;     ///< what the estimate assumes
  std::string fix_cuda;       ///< the fix, worded for CUDA C++
  std::string fix_pytorch;    ///< the fix, worded for PyTorch
  std::vector<SavingClaim> claims;  ///< where the estimate lies (not written to the outputs)
  uint64_t base_ns = 0;  ///< what est_saving_pct is a percentage of: wall time less start-up
};

/// "If every hint were fixed": a what-if over the recorded timeline (docs/hints.md, "The joint
/// figure"). Every hint's fix removes its claims; at each instant the removable part is
/// 1 - prod(1 - fraction) over the claims covering it (a gap removed by one fix is removed once
/// however many claim it; two fixes that each speed up the same kernel compound), and the joint
/// figure is its integral over the run, capped at the run. Never more than the sum of the
/// estimates; equal to it when no two hints claim the same time. Hints without claims (kprof's
/// own overhead, profiler-data-loss) are left out.
struct JointSaving {
  uint64_t est_saving_ns = 0;
  double est_saving_pct = 0;  ///< of the hints' base (wall time less start-up)
  uint64_t sum_est_ns = 0;    ///< the hints' estimates added up, counting overlaps twice
  size_t hints = 0;           ///< hints that priced something
  uint64_t base_ns = 0;       ///< what est_saving_pct is of: the steady state (docs/hints.md)
};
JointSaving EstimateJoint(const std::vector<Hint>& hints);

/// Runs every rule (src/analysis/hints/rules.def) over the timeline and its analysis; returns
/// the hints most costly first (ties: severity, then id).
std::vector<Hint> ComputeHints(const Timeline& timeline, const Analysis& analysis);

/// The hint with rule id `id` among `hints`, or null.
const Hint* FindHint(const std::vector<Hint>& hints, std::string_view id);

/// The ids of every rule, in catalogue order.
const std::vector<std::string>& HintIds();

}  // namespace kprof
