#include "analysis/hints/memory_common.h"

#include <algorithm>

namespace kprof::hints {

std::vector<const TorchMemory*> TorchAtExit(const RuleContext& c) {
  std::vector<const TorchMemory*> out;
  for (const TorchMemory& t : c.analysis.memory.torch)
    if (t.when == "exit") out.push_back(&t);
  std::stable_sort(out.begin(), out.end(), [](const TorchMemory* a, const TorchMemory* b) {
    return a->max_reserved > b->max_reserved;
  });
  return out;
}

bool MemoryIsShort(const RuleContext& c, const TorchMemory& t) {
  for (const MemoryState& s : c.analysis.memory.peaks)
    if (s.pid == t.pid && s.device == t.device && s.capacity_bytes > 0)
      return static_cast<double>(s.live_bytes) >=
             kShortShare * static_cast<double>(s.capacity_bytes);
  return false;
}

bool PriceBytes(Hint& h, int64_t bytes, int64_t peak) {
  if (bytes <= 0 || peak <= 0) return false;
  h.est_saving_bytes = static_cast<uint64_t>(bytes);
  h.est_saving_bytes_pct = 100.0 * static_cast<double>(bytes) / static_cast<double>(peak);
  h.severity = SeverityForPct(h.est_saving_bytes_pct);
  return bytes >= kMemoryEmitBytes && h.est_saving_bytes_pct >= kMemoryEmitPct;
}

}  // namespace kprof::hints
