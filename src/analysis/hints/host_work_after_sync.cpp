// Hint rule host-work-after-sync: after waiting for the GPU, the program works on the host before
// it launches more, and the GPU idles meanwhile. Not a slow launch rate (CUDA graphs would not
// remove this host work): the work is off the GPU's critical path only once it overlaps GPU work.
// Catalogue entry, thresholds and the reasoning behind the estimate:
// docs/hints.md#host-work-after-sync.
#include <algorithm>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

std::optional<Hint> HostWorkAfterSync(const RuleContext& c) {
  Hint h;
  std::vector<uint64_t> host, launch;
  Tally waits, ranges;
  for (const ProcessTimeline& p : c.timeline.processes) {
    // Waits by release time, to name the one each gap followed.
    std::vector<const HostWait*> by_release;
    for (const HostWait& w : p.waits) by_release.push_back(&w);
    std::sort(by_release.begin(), by_release.end(),
              [](const HostWait* a, const HostWait* b) { return a->release_ns < b->release_ns; });
    for (const Gap& g : p.gaps) {
      if (g.host_ns == 0) continue;
      h.est_saving_ns += g.host_ns;
      ClaimGapPart(h, p, g, g.host_at, g.host_ns);
      host.push_back(g.host_ns);
      // The last wait released inside the gap, and where the host was halfway through its work.
      auto it = std::lower_bound(by_release.begin(), by_release.end(), g.end_ns,
                                 [](const HostWait* w, uint64_t t) { return w->release_ns < t; });
      const HostWait* w = it != by_release.begin() ? *std::prev(it) : nullptr;
      waits.Add(w != nullptr ? w->what : "a wait", g.host_ns);
      if (const Record* api = p.Api(*p.acts[g.next])) {
        launch.push_back(api->DurationNs());
        const std::string op = p.OpAt(api->tid, g.start_ns + g.host_at + g.host_ns / 2);
        ranges.Add(op == "(no range)" ? "host code outside NVTX ranges" : "NVTX range '" + op + "'",
                   g.host_ns);
      }
    }
  }
  if (host.size() < 2 || !Price(h, c)) return std::nullopt;
  const uint64_t n = host.size();
  h.summary = fmt::format(
      "After {} waits for the GPU the host works {} (median) before it launches more: the GPU "
      "idles meanwhile",
      n, Dur(Median(host)));
  for (const auto& [what, v] : waits.Top(3))
    h.evidence.push_back(
        fmt::format("after {}: {} times, {} of host work", what, v.first, Dur(v.second)));
  h.evidence.push_back(
      fmt::format("host work after the waits: {}; the launch calls that follow "
                  "take {} (median): the launch rate is not what is slow",
                  OfWall(h.est_saving_ns, c), Dur(Median(launch))));
  for (const auto& [where, v] : ranges.Top(2))
    h.evidence.push_back(fmt::format("{} of that work in {}", Dur(v.second), where));
  h.assumption =
      "With that host work off the GPU's critical path (done by another thread, or after the "
      "next GPU work is queued), the GPU would not wait for it: at most the host time between "
      "each wait's release and the next launch is saved.";
  h.fix_cuda =
      "Queue the next GPU work before processing the result you waited for (double-buffer the "
      "outputs; process step i while step i+1 runs), or hand the processing to worker threads. "
      "CUDA graphs would not help: the launches are quick, the host work between them is not.";
  h.fix_pytorch =
      "Move the Python work done after .item()/.cpu()/torch.cuda.synchronize() (metrics, "
      "logging, decoding results) off the critical path: launch the next step first and process "
      "the previous step's values, hand them to a worker thread, or keep them on the GPU and "
      "read them every N steps.";
  return h;
}

}  // namespace kprof::hints
