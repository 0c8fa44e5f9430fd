// What every hint rule shares: the context it reads, the thresholds used by more than one rule,
// and the helpers that price a hint and word its evidence. Each rule is one file in this folder
// (its id, its own thresholds, evidence, estimate and fix texts) and one line in rules.def.
// The catalogue, with the thresholds and the reasoning behind every estimate, is docs/hints.md;
// keep the two in step.
//
// Six rules price GPU idle time: excessive-sync, host-work-after-sync, launch-bound,
// sync-readback, gpu-idle-gaps and shape-setup. They read one classification of the idle gaps (Gap
// in kprof/timeline.h). A gap's rest goes to one of launch-bound (or sync-readback, after a
// per-step read-back), gpu-idle-gaps and shape-setup
// and never overlaps what a wait (excessive-sync) or the host work after it
// (host-work-after-sync) explains; those two are two fixes for the same idle time and may
// overlap each other. Estimates of other rules can overlap too (a small copy's call and a gap);
// each is an upper bound on its own. Every rule also says where its estimate lies on the
// timeline (Hint::claims): the joint figure (EstimateJoint) counts each instant once from them.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"

namespace kprof::hints {

// ---------------------------------------------------------------------------------------------
// Thresholds shared by several rules (docs/hints.md, "Thresholds", explains each one).

inline constexpr double kEmitPct = 1.0;       ///< below this share of the run a hint is noise
inline constexpr double kWarningPct = 5.0;    ///< material: worth fixing
inline constexpr double kCriticalPct = 20.0;  ///< dominates the run
/// Copies below this size cost mostly their fixed per-call overhead (small-transfers); at and
/// above it bandwidth dominates and the host memory kind matters (pageable-memcpy).
inline constexpr uint64_t kSmallCopyBytes = 64 << 10;

// ---------------------------------------------------------------------------------------------
// What a rule reads.

struct RuleContext {
  const Timeline& timeline;
  const Analysis& analysis;
  /// The run's wall time less its one-time start-up: what percentages are taken of.
  uint64_t wall = 0;
};

/// A rule: returns its hint (id left empty: the registry fills it in) or nothing.
using RuleFn = std::optional<Hint> (*)(const RuleContext&);

// ---------------------------------------------------------------------------------------------
// Pricing and wording.

inline std::string Dur(uint64_t ns) { return FormatDuration(ns); }
inline std::string Pct(double p) { return fmt::format("{:.1f}%", p); }
inline double PctOf(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}
Severity SeverityForPct(double pct);
/// Fills severity and percentage from the estimate (capped at the run); returns false when the
/// hint is below the emit floor.
bool Price(Hint& h, const RuleContext& c);
/// Is acts[i] work of torch.compile'd code (a compiled region, not compilation itself)?
bool InCompiledCode(const ProcessTimeline& p, size_t i);
/// "12.5 ms (3.1% of the run)".
std::string OfWall(uint64_t ns, const RuleContext& c);

/// Lower median; reorders `v`.
uint64_t Median(std::vector<uint64_t>& v);
/// Shortened name for evidence lines (template arguments can run to kilobytes).
std::string Short(const std::string& s, size_t n = 90);
std::string Lower(std::string s);
bool Contains(const std::string& s, std::initializer_list<const char*> needles);

// ---------------------------------------------------------------------------------------------
// Where an estimate lies (Hint::claims).

/// Adds the claim [start, end) x fraction, merged into the last one where they touch.
void Claim(Hint& h, uint64_t start, uint64_t end, double fraction = 1);
/// Claims the parts of [start, end) that the merged intervals `busy` do not cover; returns their
/// length.
uint64_t ClaimUncovered(Hint& h, const std::vector<NsInterval>& busy, uint64_t start, uint64_t end);
/// Claims `len` ns of gap `g`, beginning `skip` ns into the gap's time outside alloc/free calls
/// (which alloc-churn claims): a gap's parts lie in the order wait, host work, rest.
void ClaimGapPart(Hint& h, const ProcessTimeline& p, const Gap& g, uint64_t skip, uint64_t len);

/// The per-step read-back before gap `g`: the device-to-host copy smaller than kSmallCopyBytes
/// that ends where the gap begins, when a host wait was released inside the gap (a synchronous
/// cudaMemcpy, or `.item()`: an async copy and a stream synchronize) and the gap ends at a kernel.
/// Null otherwise. sync-readback prices such gaps; launch-bound leaves them to it.
const Record* ReadbackBefore(const ProcessTimeline& p, const Gap& g);
/// Fewer read-backs than this are a result read once, not a per-step pattern.
inline constexpr uint64_t kMinReadbacks = 20;
/// Whether sync-readback prices the run's read-back gaps (kMinReadbacks of them or more, together
/// above the emit floor); launch-bound prices them otherwise, so that no gap goes unpriced.
bool ReadbacksPriced(const RuleContext& c);

/// Per-key count and time, printed most costly first.
struct Tally {
  std::map<std::string, std::pair<uint64_t, uint64_t>> m;  // key -> (count, ns)
  void Add(const std::string& key, uint64_t ns, uint64_t n = 1) {
    m[key].first += n;
    m[key].second += ns;
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> Top(size_t n) const;
};
/// Evidence lines for the three ops with the most time in `ops`.
void AddTopOps(Hint& h, const Tally& ops, const char* what);

// ---------------------------------------------------------------------------------------------
// Copies.

bool IsHostCopy(const Record& r);
/// Host-side memory kind of a host<->device copy.
MemKind HostSide(const Record& r);

/// Pinned bandwidth reference for a direction: (bytes, ns) of the fastest large pinned copy.
struct PinnedRef {
  double bytes = 0, ns = 0;
  bool measured = false;
  uint64_t TimeFor(uint64_t b) const;
};
/// Pinned host<->device bandwidth assumed when the run has no large pinned copy to measure it:
/// what a PCIe 5.0 x16 link sustains (bytes per ns = GB/s). Slower links make the real saving
/// smaller, so the estimate stays an upper bound there.
inline constexpr double kDefaultPinnedBytesPerNs = 50.0;
/// The fastest large pinned copy of each direction (CopyKind) in the run.
std::map<uint8_t, PinnedRef> PinnedReferences(const Timeline& tl);

// ---------------------------------------------------------------------------------------------
// Kernel name families (matched on the lowercased, demangled name), classified once per name.

class KernelFamilies {
 public:
  bool Fp32Gemm(const ProcessTimeline& t, const Record& k) { return Get(t, k) & kFp32Gemm; }
  bool MemoryBound(const ProcessTimeline& t, const Record& k) { return Get(t, k) & kMemoryBound; }

 private:
  static constexpr uint8_t kFp32Gemm = 1, kMemoryBound = 2;
  uint8_t Get(const ProcessTimeline& t, const Record& k);
  std::unordered_map<const std::string*, uint8_t> by_name_;  // interned kernel name -> bits
};

/// The hardware counters a run measured for a kernel's name (Analysis::counters: replay or PM
/// sampling), cached per interned name; null when not measured. Rules that use them behave as
/// without counters for every kernel not measured (docs/hints.md, "With hardware counters").
class CounterLookup {
 public:
  explicit CounterLookup(const RuleContext& c) : counters_(c.analysis.counters) {}
  const KernelCounters* Of(const ProcessTimeline& t, const Record& k) {
    const std::string* name = &t.KernelName(k);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) it = by_name_.emplace(name, counters_.Find(*name)).first;
    return it->second;
  }
  /// Whether the run measured any kernel (a line on the counters goes into the evidence).
  bool Any() const { return !counters_.kernels.empty(); }

 private:
  const CounterSummary& counters_;
  std::unordered_map<const std::string*, const KernelCounters*> by_name_;
};

/// "SM 51%, memory 0.7%, tensor 0%, occupancy 12%" of what was measured.
std::string CounterLine(const CounterValues& v);

}  // namespace kprof::hints

namespace kprof::hints {

// The rules (rules.def), each defined in its own file.
#define KPROF_HINT_RULE(id, function) std::optional<Hint> function(const RuleContext& c);
#include "analysis/hints/rules.def"
#undef KPROF_HINT_RULE

}  // namespace kprof::hints
