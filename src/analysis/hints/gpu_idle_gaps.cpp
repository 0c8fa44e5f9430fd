// Hint rule gpu-idle-gaps: Long GPU idle gaps (kLongGapNs or more) while the host does other work,
// with what the host was doing. Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#gpu-idle-gaps.
#include <algorithm>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

std::optional<Hint> GpuIdleGaps(const RuleContext& c) {
  Hint h;
  struct Item {
    uint64_t claim, start, len;
    std::string cause;
  };
  std::vector<Item> items;
  Tally causes;
  uint64_t warm = 0, warm_ns = 0;
  for (const ProcessTimeline& p : c.timeline.processes) {
    // Outermost API calls per thread, by start (they do not overlap on one thread), so that the
    // calls inside a gap are found by binary search.
    std::unordered_map<uint32_t, std::vector<const Record*>> apis_of;
    for (const Record* a : p.apis) apis_of[a->tid].push_back(a);
    for (auto& [tid, v] : apis_of)
      std::sort(v.begin(), v.end(),
                [](const Record* x, const Record* y) { return x->start_ns < y->start_ns; });
    for (const Gap& g : p.gaps) {
      if (g.kind == GapKind::Warmup && g.Len() >= kLongGapNs) {
        ++warm;
        warm_ns += g.Len();
      }
      if (!g.idle_ns()) continue;
      h.est_saving_ns += g.idle_ns();
      ClaimGapPart(h, p, g, g.explained_ns(), g.rest_ns);
      // What the host was doing: on the thread that launched the work ending the gap, the NVTX
      // range open at mid-gap and the API call that overlaps the gap most.
      const Record* api = p.Api(*p.acts[g.next]);
      std::string cause;
      if (api) {
        uint64_t mid = g.start_ns + g.Len() / 2;
        std::string op = p.OpAt(api->tid, mid);
        const Record* best = nullptr;
        uint64_t best_ov = 0;
        const auto& calls = apis_of[api->tid];
        auto it = std::lower_bound(calls.begin(), calls.end(), g.start_ns,
                                   [](const Record* a, uint64_t t) { return a->start_ns < t; });
        if (it != calls.begin()) --it;  // a call that began before the gap may reach into it
        for (; it != calls.end() && (*it)->start_ns < g.end_ns; ++it) {
          const Record* a = *it;
          if (a->end_ns <= g.start_ns) continue;
          uint64_t ov = std::min(a->end_ns, g.end_ns) - std::max(a->start_ns, g.start_ns);
          if (ov > best_ov) {
            best_ov = ov;
            best = a;
          }
        }
        if (op != "(no range)") cause = "in NVTX range '" + op + "'";
        if (best && best_ov * 10 >= g.Len())  // the call covers at least a tenth of the gap
          cause += fmt::format("{}in {} for {}", cause.empty() ? "" : ", ", p.process->Name(*best),
                               Dur(best_ov));
        if (cause.empty()) cause = "in host code outside CUDA calls and NVTX ranges";
        cause = fmt::format("thread {} {}", api->tid, cause);
      } else {
        cause = "host activity unknown (launching call not recorded)";
      }
      causes.Add(cause, g.idle_ns());
      items.push_back({g.idle_ns(), g.start_ns - c.analysis.summary.start_ns, g.Len(), cause});
    }
  }
  if (!Price(h, c)) return std::nullopt;
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.claim > b.claim; });
  h.summary = fmt::format("GPU idle in {} gaps of {} or more while the host does other work",
                          items.size(), Dur(kLongGapNs));
  h.evidence.push_back(fmt::format("{} idle in {} gaps, longest {}", OfWall(h.est_saving_ns, c),
                                   items.size(), Dur(items.front().len)));
  for (const auto& [cause, v] : causes.Top(3))
    h.evidence.push_back(fmt::format("{} gaps ({}): {}", v.first, Dur(v.second), cause));
  for (size_t i = 0; i < std::min<size_t>(3, items.size()); ++i)
    h.evidence.push_back(
        fmt::format("gap at +{}: {}, {}", Dur(items[i].start), Dur(items[i].len), items[i].cause));
  if (warm)
    h.evidence.push_back(fmt::format(
        "not counted: {} gaps ({}) before a kernel's first run (module loading, warm-up)", warm,
        Dur(warm_ns)));
  h.assumption =
      "The host work in these gaps could overlap GPU work (queued ahead, on another thread, or "
      "prefetched): at most the idle time is saved. Time explained by host waits or "
      "allocation calls, the program's work right after a wait and one-time set-up inside an "
      "op are priced by excessive-sync, alloc-churn, host-work-after-sync and shape-setup "
      "instead.";
  h.fix_cuda =
      "Queue the next GPU work before the host work (the launches are asynchronous), move host "
      "preprocessing/IO to another thread with double-buffered pinned staging, or use "
      "cudaLaunchHostFunc to keep the stream fed.";
  h.fix_pytorch =
      "DataLoader(num_workers>0, pin_memory=True, prefetch_factor, persistent_workers=True); "
      "move CPU preprocessing to the GPU or to the workers; avoid checkpointing/logging inside "
      "the step; overlap with a prefetcher on a side torch.cuda.Stream.";
  return h;
}

}  // namespace kprof::hints
