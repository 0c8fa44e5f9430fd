// See self_cost.h.
#include "analysis/self_cost.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "kprof/self_cost.h"

namespace kprof::detail {
namespace {

/// The host events kprof recorded on one thread: when each began and the cost of all of them up
/// to and including it (a running sum, so that any stretch's cost is one subtraction).
struct ThreadCosts {
  std::vector<std::pair<uint64_t, double>> events;  ///< (start, cost), then (start, running sum)

  void Sum() {
    std::sort(events.begin(), events.end());
    double sum = 0;
    for (auto& [at, cost] : events) cost = sum += cost;
  }
  /// The cost of the events that began in [from, to).
  double Between(uint64_t from, uint64_t to) const {
    const auto before = [&](uint64_t t) {
      auto it = std::lower_bound(
          events.begin(), events.end(), t,
          [](const std::pair<uint64_t, double>& e, uint64_t v) { return e.first < v; });
      return it == events.begin() ? 0.0 : std::prev(it)->second;
    };
    return to > from ? before(to) - before(from) : 0.0;
  }
};

}  // namespace

void TakeOutSelfCost(ProcessTimeline& t) {
  const std::optional<SelfCost> cost = ParseSelfCost(t.process->Meta("self_cost"));
  if (!cost) return;
  t.self_cost = cost;
  const std::vector<Record>& records = t.process->records;
  // The calls that launched GPU work cost a launch; the others an API call.
  std::vector<bool> launched(records.size(), false);
  for (const Record* a : t.acts)
    if (const Record* api = t.Api(*a)) launched[static_cast<size_t>(api - records.data())] = true;
  std::unordered_map<uint32_t, ThreadCosts> threads;
  for (const Record* api : t.apis)
    threads[api->tid].events.emplace_back(
        api->start_ns,
        launched[static_cast<size_t>(api - records.data())] ? cost->launch_ns : cost->api_ns);
  // NVTX ranges the agent recorded (op, module and source ranges alike; not a foreign trace's):
  // CUPTI's record of each. An op or module range of kprof's PyTorch layer costs what the layer
  // measured too; made by kprof's op observer (a Range record of a process whose meta names the
  // observer, kprof/op_abi.h), that alone: no CUPTI record is behind it. (The layer measures no
  // figure for its source lines.)
  const bool observer = !t.process->Meta("op_observer").empty();
  struct Forest {
    const RangeForest* f;
    double nvtx, observed;
  };
  const Forest forests[] = {
      {&t.index, cost->range_ns + t.index.pytorch_op_ns, t.index.pytorch_op_ns},
      {&t.index.modules, cost->range_ns + t.index.pytorch_module_ns, t.index.pytorch_module_ns},
      {&t.index.sources, cost->range_ns, 0}};
  for (const Forest& f : forests)
    for (const RangeInterval& r : f.f->ranges) {
      if (r.start == nullptr) continue;
      if (r.start->Kind() == RecordKind::MarkerStart)
        threads[r.tid].events.emplace_back(r.begin_ns, f.nvtx);
      else if (observer && r.start->Kind() == RecordKind::Range && f.observed > 0)
        threads[r.tid].events.emplace_back(r.begin_ns, f.observed);
    }
  for (auto& [tid, tc] : threads) tc.Sum();
  // Per thread, where the last stretch taken out ended: with several streams the work before a
  // gap may have been launched before the previous gap's, and no event is taken out twice.
  std::unordered_map<uint32_t, uint64_t> taken_to;
  for (Gap& g : t.gaps) {
    const bool priced_rest =
        g.kind == GapKind::Short || g.kind == GapKind::Long || g.kind == GapKind::Setup;
    if ((!priced_rest || g.rest_ns == 0) && g.host_ns == 0) continue;
    const Record* next = t.Api(*t.acts[g.next]);
    if (next == nullptr) continue;
    auto it = threads.find(next->tid);
    if (it == threads.end()) continue;
    // From the launch of the work before the gap (on the same thread) to the launch after it:
    // each launch's own cost counted once, in the stretch that it begins.
    uint64_t from = std::min(g.start_ns, next->start_ns);
    if (g.next > 0)
      if (const Record* prev = t.Api(*t.acts[g.next - 1]);
          prev != nullptr && prev->tid == next->tid && prev->start_ns < from)
        from = prev->start_ns;
    uint64_t& done = taken_to[next->tid];
    from = std::max(from, std::min(done, next->start_ns));
    done = next->start_ns;
    auto left = static_cast<uint64_t>(std::llround(it->second.Between(from, next->start_ns)));
    const uint64_t rest = priced_rest ? std::min(g.rest_ns, left) : 0;
    g.rest_ns -= rest;
    left -= rest;
    // What the rest could not hold was spent in the host work after a wait, when there is some
    // (host-work-after-sync's): the same events, never counted twice.
    uint64_t host = 0;
    if (g.host_ns > 0 && left > 0) {
      const double in_host = it->second.Between(g.start_ns + g.host_at, next->start_ns);
      host = std::min({g.host_ns, left, static_cast<uint64_t>(std::llround(in_host))});
      g.host_ns -= host;
    }
    t.self_cost_ns += rest + host;
  }
}

}  // namespace kprof::detail
