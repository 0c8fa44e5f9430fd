// kprof report --window K: one capture window of each process (kprof/analysis.h).
#include <algorithm>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/trace.h"

namespace kprof {

void KeepWindow(Run& run, uint64_t k) {
  if (k == 0) throw InputError("--window 0: windows are numbered from 1");
  size_t most = 0;
  std::vector<ProcessTrace> kept;
  for (ProcessTrace& p : run.processes) {
    std::vector<const Record*> windows;
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::CaptureWindow && r.start_ns != 0) windows.push_back(&r);
    std::sort(windows.begin(), windows.end(),
              [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
    most = std::max(most, windows.size());
    if (windows.size() < k) continue;
    const Record* w = windows[k - 1];
    const uint64_t from = w->start_ns;
    const uint64_t until = k < windows.size() ? windows[k]->start_ns : UINT64_MAX;
    std::vector<Record> records;
    for (const Record& r : p.records) {
      if (r.Kind() == RecordKind::CaptureWindow
              ? &r == w
              : r.start_ns == 0 || (r.start_ns >= from && r.start_ns < until))
        records.push_back(r);
    }
    p.records = std::move(records);
    p.meta["capture_windows"] = "1";
    p.meta["capture_window_selected"] = std::to_string(k);
    kept.push_back(std::move(p));
  }
  if (kept.empty())
    throw InputError("--window " + std::to_string(k) + ": no process recorded " +
                     std::to_string(k) + " capture window" + (k == 1 ? "" : "s") +
                     (most == 0 ? " (none recorded any)"
                                : " (the most any recorded: " + std::to_string(most) + ")"));
  run.processes = std::move(kept);
}

}  // namespace kprof
