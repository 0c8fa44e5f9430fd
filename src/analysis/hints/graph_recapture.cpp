// Hint rule graph-recapture: CUDA graphs captured and instantiated again and again once graphs are
// being replayed, the common torch.compile(mode="reduce-overhead") failure (dynamic shapes, cache
// misses): every new graph costs its capture and its instantiation on the host.
// Catalogue entry, thresholds and the reasoning behind the estimate: docs/hints.md#graph-recapture.
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analysis/hints/rule.h"

namespace kprof::hints {

namespace {

// Which graph a capture or instantiate call on thread `tid` made: the first GraphCreated
// (capture) or ExecCreated (instantiate: its template) event inside [from, to] on that thread;
// 0 when the file has none (traces without graph records).
uint32_t GraphBuilt(const GraphIndex& g, GraphEventKind kind, uint32_t tid, uint64_t from,
                    uint64_t to) {
  auto it = std::lower_bound(g.events.begin(), g.events.end(), from,
                             [](const Record* r, uint64_t t) { return r->start_ns < t; });
  for (; it != g.events.end() && (*it)->start_ns <= to; ++it) {
    const Record& r = **it;
    if (r.tid != tid || r.flags != static_cast<uint8_t>(kind)) continue;
    return kind == GraphEventKind::ExecCreated ? r.b : r.a;
  }
  return 0;
}

/// kprof's own time in its graph callbacks (GraphNode/GraphEvent records: end_ns - start_ns,
/// format 1.2), per thread, summed over a span: under kprof, building a graph costs the
/// agent's recording of every node made and cloned, which a run without kprof does not pay.
class AgentTime {
 public:
  explicit AgentTime(const ProcessTrace& p) {
    for (const Record& r : p.records)
      if ((r.Kind() == RecordKind::GraphNode || r.Kind() == RecordKind::GraphEvent) &&
          r.end_ns > r.start_ns)
        by_tid_[r.tid].push_back({r.start_ns, r.end_ns - r.start_ns});
    for (auto& [tid, v] : by_tid_) {
      std::sort(v.begin(), v.end());
      for (size_t i = 1; i < v.size(); ++i) v[i].second += v[i - 1].second;  // running sums
    }
  }
  /// The agent's time in callbacks that began on `tid` within [from, to].
  uint64_t In(uint32_t tid, uint64_t from, uint64_t to) const {
    auto it = by_tid_.find(tid);
    if (it == by_tid_.end()) return 0;
    const auto& v = it->second;
    const auto at = [&](uint64_t t) {  // sum over callbacks that began before t
      auto i = std::lower_bound(v.begin(), v.end(), std::make_pair(t, uint64_t{0}));
      return i == v.begin() ? uint64_t{0} : std::prev(i)->second;
    };
    return at(to + 1) - at(from);
  }

 private:
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> by_tid_;
};

}  // namespace

std::optional<Hint> GraphRecapture(const RuleContext& c) {
  Hint h;
  uint64_t again = 0, captures = 0, capture_ns = 0, instantiate_ns = 0, agent_ns = 0;
  Tally ops;
  // A span of host time priced as the program's, less the agent's own time inside it.
  const auto price = [&](const AgentTime& own, uint32_t tid, uint64_t from, uint64_t to) {
    const uint64_t len = to - std::min(to, from);
    const uint64_t mine = std::min(len, own.In(tid, from, to));
    agent_ns += mine;
    h.est_saving_ns += len - mine;
    if (len) Claim(h, from, to, static_cast<double>(len - mine) / static_cast<double>(len));
    return len - mine;
  };
  for (const ProcessTimeline& p : c.timeline.processes) {
    // Replaying began at the first graph launch call; what is built after it is built again.
    uint64_t first_launch = UINT64_MAX;
    for (const Record* api : p.apis)
      if (GraphApiOf(p.process->Name(*api)) == GraphApi::Launch)
        first_launch = std::min(first_launch, api->start_ns);
    if (first_launch == UINT64_MAX) continue;
    const AgentTime own(*p.process);
    // A build counts when it repeats the structure of a graph built before (the same kernels
    // in the same number of nodes): a program that builds several different graphs once each
    // rebuilds nothing. Captures and instantiations are told apart (a template is usually
    // captured, then instantiated once: not a rebuild). Where the file does not say which graph
    // a call built, every build after the first launch counts.
    std::unordered_set<uint64_t> built;
    auto repeated = [&](GraphEventKind kind, const Record& call, uint64_t from) {
      const uint32_t id = GraphBuilt(p.graphs, kind, call.tid, from, call.end_ns);
      auto it = id != 0 ? p.graphs.structure.find(id) : p.graphs.structure.end();
      if (it == p.graphs.structure.end()) return true;
      return !built.insert(it->second ^ static_cast<uint64_t>(kind)).second;
    };
    std::unordered_map<uint32_t, uint64_t> capture_began;  // thread -> begin-capture call start
    for (const Record* api : p.apis) {                     // outermost calls, in time order
      const GraphApi kind = GraphApiOf(p.process->Name(*api));
      if (kind == GraphApi::BeginCapture) {
        capture_began[api->tid] = api->start_ns;
      } else if (kind == GraphApi::EndCapture) {
        auto it = capture_began.find(api->tid);
        if (it == capture_began.end()) continue;
        const uint64_t began = it->second;
        capture_began.erase(it);
        if (!repeated(GraphEventKind::GraphCreated, *api, began)) continue;
        if (began > first_launch) {
          ++captures;
          capture_ns += price(own, api->tid, began, api->end_ns);
        }
      } else if (kind == GraphApi::Instantiate) {
        if (!repeated(GraphEventKind::ExecCreated, *api, api->start_ns) ||
            api->start_ns <= first_launch)
          continue;
        ++again;
        const uint64_t cost = price(own, api->tid, api->start_ns, api->end_ns);
        instantiate_ns += cost;
        ops.Add(p.OpOf(api), cost);
      }
    }
  }
  if (again < 2 || !Price(h, c)) return std::nullopt;
  const RunSummary& S = c.analysis.summary;
  h.summary = fmt::format(
      "{} CUDA graphs instantiated after replaying began: graphs are rebuilt "
      "instead of replayed",
      again);
  h.evidence.push_back(fmt::format(
      "{} graphs captured and {} instantiated in the whole run; {} "
      "graph launches",
      S.graph_captures, S.graph_instantiations, S.graph_launches ? S.graph_launches : S.launches));
  h.evidence.push_back(
      fmt::format("after the first graph launch: {} captures ({}), {} "
                  "instantiations ({})",
                  captures, Dur(capture_ns), again, Dur(instantiate_ns)));
  if (agent_ns)
    h.evidence.push_back(
        fmt::format("not counted: {} that kprof itself spent recording the nodes of those graphs",
                    Dur(agent_ns)));
  AddTopOps(h, ops, "instantiations");
  h.assumption =
      "A graph built once and replayed costs its capture and instantiation once: at most the "
      "host time of the captures and instantiations made after the first graph launch is saved "
      "(the work they launch is not counted, nor the time kprof spent recording their nodes).";
  h.fix_cuda =
      "Capture and instantiate once, outside the loop, and replay; to change kernel parameters "
      "or buffers, update the executable graph (cudaGraphExecUpdate, "
      "cudaGraphExecKernelNodeSetParams) instead of instantiating a new one; keep shapes fixed.";
  h.fix_pytorch =
      "Keep input shapes static under torch.compile(mode=\"reduce-overhead\") (pad or bucket "
      "them; torch._dynamo.mark_dynamic where they must vary); find the cause with "
      "TORCH_LOGS=\"recompiles,cudagraphs\"; with torch.cuda.graph, capture once and copy new "
      "inputs into the static input tensors.";
  return h;
}

}  // namespace kprof::hints
