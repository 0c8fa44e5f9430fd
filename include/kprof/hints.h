// Bottleneck hints: rules over an analysed run that name a problem, show the evidence, bound
// what it costs and give the fix. Catalogue and thresholds: docs/hints.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kprof/analysis.h"

namespace kprof {

enum class Severity { Info = 0, Warning = 1, Critical = 2 };
const char* SeverityName(Severity s);  ///< "info", "warning", "critical"

struct Hint {
  std::string id;  ///< stable rule id, e.g. "launch-bound"
  Severity severity = Severity::Info;
  std::string summary;                ///< one line naming the problem
  std::vector<std::string> evidence;  ///< lines: which ops/kernels/calls, how many, how much
  uint64_t est_saving_ns = 0;         ///< upper bound of what fixing it could save
  double est_saving_pct = 0;  ///< est_saving_ns / (wall time less start-up) * 100; docs/hints.md
  std::string assumption;     ///< what the estimate assumes
  std::string fix_cuda;       ///< the fix, worded for CUDA C++
  std::string fix_pytorch;    ///< the fix, worded for PyTorch
};

/// Runs every rule (src/analysis/hints/rules.def) over the timeline and its analysis; returns
/// the hints most costly first (ties: severity, then id).
std::vector<Hint> ComputeHints(const Timeline& timeline, const Analysis& analysis);

/// The ids of every rule, in catalogue order.
const std::vector<std::string>& HintIds();

}  // namespace kprof
