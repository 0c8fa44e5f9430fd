// kprof report --window K: one capture window of each process (kprof/analysis.h).
#include <algorithm>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/trace.h"

namespace kprof {

Run KeepWindow(const Run& run, uint64_t k) {
  if (k == 0) throw InputError("--window 0: windows are numbered from 1");
  size_t most = 0;
  Run kept;
  for (const ProcessTrace& p : run.processes) {
    std::vector<size_t> windows;  // indices of the placed CaptureWindow records, by start
    for (size_t i = 0; i < p.records.size(); ++i)
      if (p.records[i].Kind() == RecordKind::CaptureWindow && p.records[i].start_ns != 0)
        windows.push_back(i);
    std::sort(windows.begin(), windows.end(),
              [&](size_t a, size_t b) { return p.records[a].start_ns < p.records[b].start_ns; });
    most = std::max(most, windows.size());
    if (windows.size() < k) continue;
    const size_t w = windows[k - 1];
    const uint64_t from = p.records[w].start_ns;
    const uint64_t until = k < windows.size() ? p.records[windows[k]].start_ns : UINT64_MAX;
    // One process copied at a time, then cut to its window (not the whole run first).
    ProcessTrace& q = kept.processes.emplace_back(p);
    const Record* window = &q.records[w];
    std::erase_if(q.records, [&](const Record& r) {
      return r.Kind() == RecordKind::CaptureWindow
                 ? &r != window
                 : r.start_ns != 0 && (r.start_ns < from || r.start_ns >= until);
    });
    q.meta["capture_windows"] = "1";
    q.meta["capture_window_selected"] = std::to_string(k);
  }
  if (kept.processes.empty())
    throw InputError("--window " + std::to_string(k) + ": no process recorded " +
                     std::to_string(k) + " capture window" + (k == 1 ? "" : "s") +
                     (most == 0 ? " (none recorded any)"
                                : " (the most any recorded: " + std::to_string(most) + ")"));
  return kept;
}

}  // namespace kprof
