// The CUDA graphs of a process (kprof/timeline.h, GraphIndex): which node each graph node was
// cloned from, where (in which NVTX range, on which thread) each was made, how many nodes each
// graph has and how often graphs were captured and instantiated. Built from the agent's
// GraphNode and GraphEvent records; read by the timeline's attribution and the graph view.
#include "analysis/graphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analysis/intervals.h"

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
  std::vector<const Record*> node_records;
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> instantiating;
  std::vector<int8_t> is_instantiate(p.strings.size(), -1);  // by name id: -1 not yet known
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
        if (r.flags == static_cast<uint8_t>(GraphEventKind::GraphCreated) ||
            r.flags == static_cast<uint8_t>(GraphEventKind::ExecCreated))
          g.events.push_back(&r);
        if (r.flags == static_cast<uint8_t>(GraphEventKind::ExecCreated)) {
          ++g.instantiations;
          g.graphs[r.a].id = r.a;
          g.graphs[r.a].source = r.b;
          if ((r.c & kInstantiateDeviceLaunch) != 0 && !g.graphs[r.a].device_launch) {
            g.graphs[r.a].device_launch = true;
            ++g.device_launch_execs;
          }
        }
        break;
      case RecordKind::GraphLaunch:
        g.graphs[r.a].id = r.a;
        break;
      case RecordKind::RuntimeApi:
      case RecordKind::DriverApi: {
        // Classified once per name: a run has millions of API records and few names.
        if (r.name >= is_instantiate.size()) break;
        int8_t& known = is_instantiate[r.name];
        if (known < 0) known = GraphApiOf(p.Name(r)) == GraphApi::Instantiate ? 1 : 0;
        if (known == 1) instantiating[r.tid].emplace_back(r.start_ns, r.end_ns);
        break;
      }
      default:
        break;
    }
  }
  // Graphs the program made: instantiation makes graphs of its own (the executable graph, and
  // with graph-level tracing one more), on the instantiating thread inside the instantiate call.
  for (const Record* r : g.events) {
    if (r->flags != static_cast<uint8_t>(GraphEventKind::GraphCreated)) continue;
    if (auto exec = g.graphs.find(r->a); exec != g.graphs.end() && exec->second.source != 0)
      continue;  // the executable graph itself
    bool inside = false;
    if (auto it = instantiating.find(r->tid); it != instantiating.end()) {
      for (const auto& [s, e] : it->second) inside |= s <= r->start_ns && r->start_ns <= e;
    }
    if (!inside) ++g.captures;
  }
  std::stable_sort(g.events.begin(), g.events.end(),
                   [](const Record* x, const Record* y) { return x->start_ns < y->start_ns; });
  // Nodes made inside an instantiate call are the executable graph's own: where they came from is
  // what their clone records say (node mode), or their template (graph mode records no clones,
  // and GraphInfo::source names the template). They are not nodes the program made.
  const auto made_by_instantiate = [&](const Record* r) {
    if (r->flags != static_cast<uint8_t>(GraphNodeOrigin::Created)) return false;
    auto it = instantiating.find(r->tid);
    if (it == instantiating.end()) return false;
    for (const auto& [s, e] : it->second)
      if (s <= r->start_ns && r->start_ns <= e) return true;
    return false;
  };
  node_records.erase(std::remove_if(node_records.begin(), node_records.end(), made_by_instantiate),
                     node_records.end());
  for (auto it = by_id.begin(); it != by_id.end();)
    it = made_by_instantiate(it->second) ? by_id.erase(it) : std::next(it);
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
    g.node_range[id] = r->start_ns != 0 ? index.OpRangeAt(r->tid, r->start_ns) : -1;
  }
  // Nodes per graph, and where they were made. A node with several records (made, then cloned
  // into the same id) counts once. An executable graph's nodes are the ones cloned into it:
  // instantiation also makes helper nodes of its own that never run as work of the program.
  std::unordered_map<uint32_t, bool> has_clones;
  for (const Record* r : node_records)
    if (r->flags == static_cast<uint8_t>(GraphNodeOrigin::Cloned)) has_clones[r->a] = true;
  // Structure of each graph the program built: its made nodes, counted, and their kernel names.
  std::unordered_map<uint32_t, std::vector<uint32_t>> names_of;
  for (const Record* r : node_records)
    if (!has_clones.count(r->a) && r->flags == static_cast<uint8_t>(GraphNodeOrigin::Created))
      names_of[r->a].push_back(r->name);
  for (auto& [id, names] : names_of) {
    std::sort(names.begin(), names.end());
    uint64_t h = 1469598103934665603ull ^ names.size();  // FNV-1a over the count and names
    for (uint32_t n : names) h = (h ^ n) * 1099511628211ull;
    g.structure[id] = h;
  }
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

std::vector<GraphRow> GraphRows(const Timeline& tl) {
  std::vector<GraphRow> out;
  const bool many = tl.processes.size() > 1;
  for (const ProcessTimeline& t : tl.processes) {
    // Launch durations per graph id: graph-level records directly; node-level work grouped by
    // its launch (correlation id) and graph (the high half of the node id, CUPTI's layout).
    std::map<uint32_t, std::vector<uint64_t>> durations;
    std::map<uint32_t, uint64_t> node_work;
    std::map<uint32_t, std::map<uint32_t, uint64_t>> from_device;  // graph -> launcher -> n
    std::map<uint32_t, UnionAcc> busy;  // acts are in start order, as UnionAcc needs
    std::map<std::pair<uint32_t, uint32_t>, NsInterval> extent;  // (graph, correlation)
    for (const Record* a : t.acts) {
      const uint64_t end = std::max(a->start_ns, a->end_ns);
      if (a->Kind() == RecordKind::GraphLaunch) {
        durations[a->a].push_back(a->DurationNs());
        busy[a->a].Add(a->start_ns, end);
        if ((a->flags & kGraphLaunchFromDevice) != 0) ++from_device[a->a][a->c];
        continue;
      }
      const uint64_t node = GraphNodeOf(*a);
      if (node == 0) continue;
      const auto graph = static_cast<uint32_t>(node >> 32);
      ++node_work[graph];
      busy[graph].Add(a->start_ns, end);
      auto [it, fresh] = extent.try_emplace({graph, t.Correlation(*a)}, a->start_ns, a->end_ns);
      if (!fresh) {
        it->second.first = std::min(it->second.first, a->start_ns);
        it->second.second = std::max(it->second.second, a->end_ns);
      }
    }
    for (const auto& [key, iv] : extent)
      durations[key.first].push_back(iv.second > iv.first ? iv.second - iv.first : 0);
    std::map<uint32_t, uint64_t> execs_of_source;
    for (const auto& [id, info] : t.graphs.graphs)
      if (info.source != 0) ++execs_of_source[info.source];
    for (auto& [id, d] : durations) {
      GraphRow row;
      row.pid = many ? t.process->pid : 0;
      row.id = id;
      row.launches = d.size();
      row.per_launch = MakeStat(d);
      row.node_activities = node_work.count(id) ? node_work[id] : 0;
      row.busy_ns = busy[id].Total();
      if (auto fd = from_device.find(id); fd != from_device.end()) {
        for (const auto& [launcher, n] : fd->second) {
          row.device_launches += n;
          row.launched_by +=
              fmt::format("{}graph {}", row.launched_by.empty() ? "" : ", ", launcher);
        }
      }
      auto it = t.graphs.graphs.find(id);
      if (it != t.graphs.graphs.end()) {
        const GraphInfo& info = it->second;
        row.nodes = info.nodes;
        row.instantiations = info.source != 0 ? execs_of_source[info.source] : 0;
        std::vector<std::pair<uint64_t, int>> where;
        for (const auto& [range, n] : info.capture_ranges) where.emplace_back(n, range);
        std::sort(where.begin(), where.end(), [](const auto& x, const auto& y) {
          return x.first != y.first ? x.first > y.first : x.second < y.second;
        });
        for (size_t i = 0; i < where.size() && i < 3; ++i) {
          const auto [n, range] = where[i];
          row.captured_in += fmt::format(
              "{}{} ({:.0f}%)", i ? ", " : "",
              range < 0 ? std::string("(no range)") : t.index.Path(range),
              info.nodes ? 100.0 * static_cast<double>(n) / static_cast<double>(info.nodes) : 0.0);
        }
        if (where.size() > 3) row.captured_in += fmt::format(", {} more", where.size() - 3);
      }
      out.push_back(std::move(row));
    }
  }
  std::sort(out.begin(), out.end(), [](const GraphRow& x, const GraphRow& y) {
    if (x.per_launch.total_ns != y.per_launch.total_ns)
      return x.per_launch.total_ns > y.per_launch.total_ns;
    return std::tie(x.pid, x.id) < std::tie(y.pid, y.id);
  });
  return out;
}

}  // namespace detail

std::string GraphRow::Key() const {
  return (pid != 0 ? fmt::format("pid {} ", pid) : std::string()) + fmt::format("graph {}", id);
}

}  // namespace kprof
