// Hint rule profiler-data-loss: Records the profiler lost, processes that did not finish writing,
// and the profiler's own overhead. Catalogue entry, thresholds and the reasoning behind the
// estimate: docs/hints.md#profiler-data-loss.
#include <algorithm>
#include <optional>
#include <unordered_set>

#include "analysis/hints/rule.h"
#include "analysis/intervals.h"

namespace kprof::hints {

namespace {

using detail::Interval;
using detail::Length;
using detail::Merge;

/// Dropped/missing records as a fraction of all records from which data loss is critical.
constexpr double kCriticalLossFraction = 0.01;

}  // namespace

std::optional<Hint> ProfilerDataLoss(const RuleContext& c) {
  const RunSummary& S = c.analysis.summary;
  uint64_t written = 0, setup_ns = 0;
  std::vector<Interval> overhead;
  for (const ProcessTimeline& proc : c.timeline.processes) {
    const ProcessTrace& p = *proc.process;
    written += p.stats.records_written;
    // Overhead counts where it distorts the picture: inside the process's GPU window (first to
    // last GPU activity). CUPTI's one-time setup at context creation comes before any GPU work.
    // Only overhead on the program's own threads (those that call CUDA) slows it down; the
    // agent's flush thread waiting inside cuptiActivityFlushAll costs the program nothing.
    std::unordered_set<uint32_t> app_threads;
    for (const Record* a : proc.apis) app_threads.insert(a->tid);
    const uint64_t first = proc.busy.empty() ? UINT64_MAX : proc.busy.front().first;
    const uint64_t last = proc.busy.empty() ? 0 : proc.busy.back().second;
    for (const Record& r : p.records) {
      if (r.Kind() != RecordKind::Overhead) continue;
      // Only the profiler's own costs; module loading, compilation and command-buffer stalls
      // are the application's and would be there without kprof.
      auto k = static_cast<OverheadKind>(r.a);
      if (k != OverheadKind::BufferFlush && k != OverheadKind::Instrumentation &&
          k != OverheadKind::Resource && k != OverheadKind::ActivityBufferRequest)
        continue;
      if (!app_threads.count(r.tid)) continue;
      uint64_t b = std::max(r.start_ns, first), e = std::min(r.end_ns, last);
      if (b < e) overhead.emplace_back(b, e);
      setup_ns += r.DurationNs() - (b < e ? e - b : 0);
    }
  }
  Hint h;
  h.est_saving_ns = std::min(Length(Merge(std::move(overhead))), c.wall);
  h.est_saving_pct = PctOf(h.est_saving_ns, c.wall);
  h.base_ns = c.wall;
  uint64_t lost = S.dropped_records + S.missing_timestamps;
  if (lost == 0 && S.incomplete_processes == 0 && h.est_saving_pct < kEmitPct) return std::nullopt;
  h.severity = SeverityForPct(h.est_saving_pct);
  double lost_frac =
      written + lost ? static_cast<double>(lost) / static_cast<double>(written + lost) : 0;
  if (lost || S.incomplete_processes) h.severity = std::max(h.severity, Severity::Warning);
  if (lost_frac >= kCriticalLossFraction) h.severity = Severity::Critical;
  h.summary =
      lost ? fmt::format("The profiler lost {} records: totals and hints undercount", lost)
      : S.incomplete_processes
          ? "A recorded process did not finish writing: the end of the run is missing"
          : fmt::format("Profiler overhead is {} of the steady state", Pct(h.est_saving_pct));
  if (S.dropped_records)
    h.evidence.push_back(
        fmt::format("{} records dropped by CUPTI (buffers full)", S.dropped_records));
  if (S.missing_timestamps)
    h.evidence.push_back(
        fmt::format("{} records without timestamps not written", S.missing_timestamps));
  if (lost)
    h.evidence.push_back(fmt::format("{:.2f}% of {} records", 100 * lost_frac, written + lost));
  if (S.incomplete_processes)
    h.evidence.push_back(fmt::format("{} of {} processes without an End block (crash or kill)",
                                     S.incomplete_processes, S.processes));
  h.evidence.push_back(
      fmt::format("profiler overhead during GPU work (buffer flushes, instrumentation): {}",
                  OfWall(h.est_saving_ns, c)));
  if (setup_ns)
    h.evidence.push_back(fmt::format(
        "not counted: {} of one-time profiler setup outside the GPU work (context creation)",
        Dur(setup_ns)));
  h.assumption =
      "The estimate is the profiler's own overhead recorded in the run, which an unprofiled run "
      "does not pay. Lost records are not priced: every other figure is a lower bound.";
  h.fix_cuda =
      "Record fewer kinds (KPROF_KINDS), flush more often (KPROF_FLUSH_MS), profile fewer "
      "iterations; make sure the program exits normally (cudaDeviceReset or return from main) "
      "so that the agent writes its last buffers.";
  h.fix_pytorch =
      "Profile a few steps only (a short loop or torch.profiler.schedule(wait, warmup, active)); "
      "let the script exit normally so that buffers are flushed.";
  return h;
}

}  // namespace kprof::hints
