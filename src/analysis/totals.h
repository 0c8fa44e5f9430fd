// Internal to the analysis library: the run's totals (RunSummary, the per-process summaries,
// streams, devices, memory, distributed usage), fed by the same pass as the views (views/view.h).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "analysis/intervals.h"
#include "analysis/views/view.h"
#include "kprof/analysis.h"
#include "kprof/distributed.h"

namespace kprof::detail {

class RunTotals {
 public:
  /// Fills `an` (summary, processes, dist, memory_timeline when `timeline`).
  RunTotals(const Timeline& tl, const DeviceKeys& devices, Analysis& an, bool timeline);
  void BeginProcess(const ProcessPass& pp);
  /// Each of the process's records, in file order.
  void Note(const ProcessPass& pp, const Record& r);
  void Activity(const ProcessPass& pp, const ActivityEvent& a);
  void EndProcess(const ProcessPass& pp);
  /// After the last process: the run's span.
  void EndProcesses();
  void Busy(size_t process, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e);
  /// After the busy pass: the unions, per GPU and per rank, the memory timeline.
  void Finish();

 private:
  struct MemEvent {
    uint64_t t;
    uint16_t dev;
    int64_t delta;
  };
  const Timeline& tl_;
  const DeviceKeys& devices_;
  Analysis& an_;
  RunSummary& S;
  bool timeline_;
  // The process being read.
  ProcessSummary ps_;
  uint64_t pfirst_ = UINT64_MAX, plast_ = 0;
  std::vector<bool> launched_;  ///< launching calls already counted, by record index
  uint64_t launches_ = 0;
  // The run.
  std::map<std::pair<uint16_t, uint32_t>, uint32_t> streams_;  ///< (device, stream) -> index
  std::vector<std::pair<UnionAcc, uint64_t>> stream_acc_;      ///< busy, activities
  std::vector<MemEvent> mem_;
  /// The time each process was recorded (its windows, or its first to last record): the wall
  /// time of the devices it used (docs/distributed.md).
  std::vector<std::vector<NsInterval>> spans_;
  std::vector<Interval> recorded_;  ///< each process's windows, or its span when recorded whole
  uint64_t first_ = UINT64_MAX, last_ = 0;
  UnionAcc all_, kern_, copy_, kern_or_copy_;
  std::vector<UnionAcc> proc_busy_;
};

}  // namespace kprof::detail
