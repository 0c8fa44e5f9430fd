// The CUDA graphs of a process (kprof/timeline.h, GraphIndex): which node each graph node was
// cloned from, where (in which NVTX range, on which thread) each was made, how many nodes each
// graph has and how often graphs were captured and instantiated. Built from the agent's
// GraphNode and GraphEvent records; read by the timeline's attribution and the graph view.
#include "analysis/graphs.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kprof {

int GraphIndex::CaptureRange(uint64_t node_id) const {
  auto it = node_range.find(node_id);
  return it == node_range.end() ? -1 : it->second;
}

namespace detail {

void BuildGraphIndex(const ProcessTrace& p, const ProcessIndex& index, GraphIndex& g) {
  g.index = &index;
  // Node id -> its record; a node made by capture or the graph API wins over a clone record.
  std::unordered_map<uint64_t, const Record*> by_id;
  std::vector<const Record*> node_records, created;
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> instantiating;
  for (const Record& r : p.records) {
    switch (r.Kind()) {
      case RecordKind::GraphNode: {
        node_records.push_back(&r);
        // Instantiation makes each node of the executable graph (a Created record, on the
        // instantiating thread) and then reports it cloned from its template node under the same
        // id: the clone record says where the node really came from, so it wins.
        const Record*& slot = by_id[r.bytes];
        if (slot == nullptr || r.flags == static_cast<uint8_t>(GraphNodeOrigin::Cloned)) slot = &r;
        break;
      }
      case RecordKind::GraphEvent:
        switch (static_cast<GraphEventKind>(r.flags)) {
          case GraphEventKind::GraphCreated:
            created.push_back(&r);
            break;
          case GraphEventKind::ExecCreated:
            ++g.instantiations;
            g.graphs[r.a].id = r.a;
            g.graphs[r.a].source = r.b;
            break;
          default:
            break;
        }
        break;
      case RecordKind::GraphLaunch:
        g.graphs[r.a].id = r.a;
        break;
      case RecordKind::RuntimeApi:
      case RecordKind::DriverApi: {
        const std::string& name = p.Name(r);
        if (name.rfind("cudaGraphInstantiate", 0) == 0 || name.rfind("cuGraphInstantiate", 0) == 0)
          instantiating[r.tid].emplace_back(r.start_ns, r.end_ns);
        break;
      }
      default:
        break;
    }
  }
  // Graphs the program made: instantiation makes graphs of its own (the executable graph, and
  // with graph-level tracing one more), on the instantiating thread inside the instantiate call.
  std::unordered_map<uint32_t, bool> execs;
  for (const auto& [id, info] : g.graphs) execs[id] = info.source != 0;
  for (const Record* r : created) {
    if (execs.count(r->a) && execs[r->a]) continue;
    bool inside = false;
    if (auto it = instantiating.find(r->tid); it != instantiating.end()) {
      for (const auto& [s, e] : it->second) inside |= s <= r->start_ns && r->start_ns <= e;
    }
    if (!inside) ++g.captures;
  }
  if (node_records.empty()) return;
  // Each node back to the node it was cloned from, and from there to where it was made (a
  // bounded walk: ids come from a file, and a cycle must not hang the reader).
  for (const auto& [id, rec] : by_id) {
    const Record* r = rec;
    for (int step = 0; step < 16 && r->flags == static_cast<uint8_t>(GraphNodeOrigin::Cloned);
         ++step) {
      const uint64_t orig = r->c | (static_cast<uint64_t>(r->d) << 32);
      auto it = by_id.find(orig);
      if (it == by_id.end() || it->second == r) break;
      r = it->second;
    }
    if (r->flags != static_cast<uint8_t>(GraphNodeOrigin::Created)) continue;
    g.made[id] = r;
    g.node_range[id] = r->start_ns != 0 ? index.InnermostAt(r->tid, r->start_ns) : -1;
  }
  // Nodes per graph, and where they were made. A node with several records (made, then cloned
  // into the same id) counts once. An executable graph's nodes are the ones cloned into it:
  // instantiation also makes helper nodes of its own that never run as work of the program.
  std::unordered_map<uint32_t, bool> has_clones;
  for (const Record* r : node_records)
    if (r->flags == static_cast<uint8_t>(GraphNodeOrigin::Cloned)) has_clones[r->a] = true;
  std::map<uint32_t, std::map<int, uint64_t>> ranges_of;
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, bool>> seen;
  for (const Record* r : node_records) {
    if (has_clones.count(r->a) && r->flags != static_cast<uint8_t>(GraphNodeOrigin::Cloned))
      continue;
    if (!seen[r->a].emplace(r->bytes, true).second) continue;
    GraphInfo& info = g.graphs[r->a];
    info.id = r->a;
    ++info.nodes;
    ++ranges_of[r->a][g.CaptureRange(r->bytes)];
  }
  for (auto& [id, info] : g.graphs) {
    auto it = ranges_of.find(id);
    if (it == ranges_of.end() && info.source != 0) it = ranges_of.find(info.source);
    if (it == ranges_of.end()) continue;
    if (info.nodes == 0) {
      for (const auto& [range, n] : it->second) info.nodes += n;
    }
    info.capture_ranges.assign(it->second.begin(), it->second.end());
  }
}

}  // namespace detail
}  // namespace kprof
