// The JSON summary, written and read back: see kprof/summary_json.h and docs/json-schema.md.
#include "kprof/summary_json.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "kprof/output.h"
#include "output/report_common.h"
#include "output/report_distributed.h"
#include "output/report_memory.h"

namespace kprof {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using report_common::BoundView;
using report_common::HasCounters;
using report_common::kCopyNames;

// ---- Writing ---------------------------------------------------------------------------------

/// A double for JSON: null when not measured.
ordered_json JsonValue(double v) {
  return Measured(v) && std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr);
}

ordered_json CountersJson(const CounterSummary& c) {
  ordered_json kernels = ordered_json::array();
  for (const KernelCounters& k : c.kernels) {
    const CounterValues& v = k.values;
    kernels.push_back({{"name", k.name},
                       {"source", CounterSourceName(k.source)},
                       {"launches", k.launches},
                       {"gpu_ns", k.gpu_ns},
                       {"sm_pct", JsonValue(v.sm_pct)},
                       {"mem_pct", JsonValue(v.mem_pct)},
                       {"dram_pct", JsonValue(v.dram_pct)},
                       {"l2_pct", JsonValue(v.l2_pct)},
                       {"tensor_pct", JsonValue(v.tensor_pct)},
                       {"occupancy_pct", JsonValue(v.occupancy_pct)},
                       {"flops", JsonValue(v.flops)},
                       {"dram_bytes", JsonValue(v.dram_bytes)},
                       {"intensity", JsonValue(k.Intensity())},
                       {"flops_per_s", JsonValue(k.FlopsPerSecond())},
                       {"peak_flops_per_s", JsonValue(v.peak_flops_per_s)},
                       {"peak_dram_bytes_per_s", JsonValue(v.peak_dram_bytes_per_s)},
                       {"bound", BoundName(k.bound)}});
  }
  ordered_json unmeasured = ordered_json::array();
  for (const UnmeasuredKernel& u : c.unmeasured)
    unmeasured.push_back({{"name", u.name},
                          {"gpu_ns", u.gpu_ns},
                          {"share", u.share},
                          {"launches", u.launches},
                          {"median_ns", u.median_ns},
                          {"reason", u.reason},
                          {"why", u.why}});
  return {{"mode", c.mode},
          {"problem", c.problem},
          {"replayed_launches", c.replayed_launches},
          {"replay_ns", c.replay_ns},
          {"setup_ns", c.setup_ns},
          {"max_passes", c.max_passes},
          {"samples", c.samples},
          {"sample_interval_ns", c.sample_interval_ns},
          {"roofline", FormatRoofline(c)},
          {"kernels", kernels},
          {"unmeasured", unmeasured}};
}

/// `bound`: with its class from the counters (runs with counters only).
ordered_json KernelJson(const KernelRow& k, bool bound) {
  ordered_json j = {{"name", k.name},
                    {"calls", k.stat.count},
                    {"total_ns", k.stat.total_ns},
                    {"mean_ns", k.stat.mean_ns},
                    {"min_ns", k.stat.min_ns},
                    {"median_ns", k.stat.median_ns},
                    {"p95_ns", k.stat.p95_ns},
                    {"max_ns", k.stat.max_ns},
                    {"share", k.share},
                    {"grid", {k.grid.x, k.grid.y, k.grid.z}},
                    {"block", {k.block.x, k.block.y, k.block.z}},
                    {"registers", k.registers},
                    {"shared_mem", k.shared_mem},
                    {"max_blocks", k.max_blocks}};
  if (bound) j["bound"] = BoundName(k.bound);
  return j;
}

ordered_json GroupJsonBase(const GroupRow& g, const ordered_json& kr) {
  return {{"key", g.key},
          {"calls", g.calls},
          {"gpu_ns", g.gpu_ns},
          {"gpu_projected_ns", g.gpu_projected_ns},
          {"cpu_ns", g.cpu_ns},
          {"kernels", g.kernels},
          {"memcpys", g.memcpys},
          {"memsets", g.memsets},
          {"bytes", g.bytes},
          {"share", g.share},
          {"mem_delta_bytes", g.mem_delta_bytes},
          {"kernel_rows", kr}};
}

/// A row of view `by`. PyTorch rows have more fields (docs/json-schema.md). `counters`: the run
/// has counters, and the rows of the kernel, op and range-path views carry their class.
ordered_json GroupJson(const GroupRow& g, GroupBy by, bool counters = false) {
  const bool bound = counters && BoundView(by);
  ordered_json kr = ordered_json::array();
  for (const auto& k : g.kernel_rows) kr.push_back(KernelJson(k, bound));
  ordered_json j = GroupJsonBase(g, kr);
  if (bound) j["bound"] = BoundName(g.bound);
  const bool pytorch_view =
      by == GroupBy::Module || by == GroupBy::Source || by == GroupBy::Compiled;
  if (g.bwd_gpu_ns != 0 || pytorch_view) j["bwd_gpu_ns"] = g.bwd_gpu_ns;
  if (!g.source.empty()) j["source"] = g.source;
  if (by == GroupBy::Module) {
    j["class"] = g.kind;
    j["depth"] = g.depth;
  } else if (by == GroupBy::Source) {
    j["op"] = g.kind;
  } else if (by == GroupBy::Compiled) {
    j["module"] = g.kind;
  }
  return j;
}

ordered_json SummaryJson(const RunSummary& s) {
  ordered_json bytes, count;
  for (int i = 1; i < 6; ++i) {
    bytes[kCopyNames[i]] = s.memcpy_bytes[i];
    count[kCopyNames[i]] = s.memcpy_count[i];
  }
  bytes["Unknown"] = s.memcpy_bytes[0];
  count["Unknown"] = s.memcpy_count[0];
  ordered_json streams = ordered_json::array(), devices = ordered_json::array();
  for (const auto& st : s.streams)
    streams.push_back({{"device", st.device},
                       {"stream", st.stream},
                       {"busy_ns", st.busy_ns},
                       {"activities", st.activities}});
  for (const auto& d : s.devices)
    devices.push_back({{"id", d.id},
                       {"name", d.name},
                       {"sm_count", d.sm_count},
                       {"memory_bytes", d.memory_bytes},
                       {"compute_capability", d.compute_capability}});
  ordered_json j = {{"wall_ns", s.wall_ns},
                    {"gpu_busy_ns", s.gpu_busy_ns},
                    {"gpu_idle_ns", s.gpu_idle_ns},
                    {"utilisation", s.utilisation},
                    {"kernel_ns", s.kernel_ns},
                    {"kernels", s.kernels},
                    {"memcpys", s.memcpys},
                    {"memcpy_ns", s.memcpy_ns},
                    {"memcpy_bytes", bytes},
                    {"memcpy_count", count},
                    {"memsets", s.memsets},
                    {"memset_bytes", s.memset_bytes},
                    {"syncs", s.syncs},
                    {"sync_ns", s.sync_ns},
                    {"api_calls", s.api_calls},
                    {"api_ns", s.api_ns},
                    {"launches", s.launches},
                    {"launch_rate_per_s", s.launch_rate_per_s},
                    {"copy_compute_overlap_ns", s.copy_compute_overlap_ns},
                    {"peak_memory_bytes", s.peak_memory_bytes},
                    {"allocs", s.allocs},
                    {"frees", s.frees},
                    {"nvtx_ranges", s.nvtx_ranges},
                    {"dropped_records", s.dropped_records},
                    {"missing_timestamps", s.missing_timestamps},
                    {"processes", s.processes},
                    {"incomplete_processes", s.incomplete_processes},
                    {"overhead_ns", s.overhead_ns},
                    {"streams", streams},
                    {"devices", devices}};
  // Only for runs with CUDA graphs: the JSON of every other run stays as it was.
  if (s.graph_launches || s.graph_node_activities || s.graph_captures || s.graph_instantiations) {
    j["graphs"] = {{"launches", s.graph_launches},
                   {"gpu_ns", s.graph_ns},
                   {"node_activities", s.graph_node_activities},
                   {"captures", s.graph_captures},
                   {"instantiations", s.graph_instantiations}};
    if (s.graph_device_launches || s.graph_device_unrecorded) {
      j["graphs"]["device_launches"] = s.graph_device_launches;
      j["graphs"]["device_launch_graphs_unrecorded"] = s.graph_device_unrecorded;
    }
  }
  // Only for runs recorded in capture windows.
  if (!s.capture.empty())
    j["capture"] = {
        {"trigger", s.capture}, {"windows", s.capture_windows}, {"problem", s.capture_problem}};
  // Start-up told from the steady state: the work before the repeated part, not priced.
  if (!s.steady_from.empty())
    j["startup"] = {{"steady_from", s.steady_from},
                    {"copies", s.startup_copies},
                    {"copy_bytes", s.startup_copy_bytes},
                    {"copy_ns", s.startup_copy_ns},
                    {"kernels", s.startup_kernels}};
  // kprof's own cost per event and what was taken out of the priced idle time for it (docs/
  // hints.md, "kprof's own cost"); absent when the run was recorded without the figures.
  if (s.self_cost)
    j["self_cost"] = {
        {"taken_out_ns", s.self_cost_ns}, {"launch_ns", s.self_cost->launch_ns},
        {"api_ns", s.self_cost->api_ns},  {"range_ns", s.self_cost->range_ns},
        {"source", s.self_cost->source},  {"processes_without", s.self_cost_unmeasured}};
  // Only for PyTorch runs (kprof run --pytorch, or autograd ranges in the recording).
  if (!s.pytorch_mode.empty() || !s.pytorch_added.empty() || s.backward_linked_ns) {
    j["pytorch"] = {{"mode", s.pytorch_mode},
                    {"added", s.pytorch_added},
                    {"backward_linked_ns", s.backward_linked_ns}};
    if (!s.pytorch_ops.empty()) j["pytorch"]["ops"] = s.pytorch_ops;
  }
  return j;
}

ordered_json HintJson(const Hint& h) {
  ordered_json j = {{"id", h.id},
                    {"severity", SeverityName(h.severity)},
                    {"summary", h.summary},
                    {"evidence", h.evidence},
                    {"est_saving_ns", h.est_saving_ns},
                    {"est_saving_pct", h.est_saving_pct},
                    {"base_ns", h.base_ns},
                    {"assumption", h.assumption},
                    {"fix", {{"cuda", h.fix_cuda}, {"pytorch", h.fix_pytorch}}}};
  if (h.est_saving_bytes > 0) {  // the memory rules (docs/hints.md "Memory")
    j["est_saving_bytes"] = h.est_saving_bytes;
    j["est_saving_bytes_pct"] = h.est_saving_bytes_pct;
  }
  return j;
}

// ---- Reading ---------------------------------------------------------------------------------

uint64_t GetU64(const json& obj, const char* key, const std::string& where, bool clamp = false) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) {
    const auto v = it->get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
    if (clamp) return 0;
  } else if (it->is_number_float()) {
    const double v = it->get<double>();
    if (v >= 0 && v < 1.8e19) return static_cast<uint64_t>(std::llround(v));
    if (clamp && v < 0) return 0;
  }
  throw InputError(fmt::format("{}.{}: expected a non-negative number", where, key));
}

std::string GetString(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string())
    throw InputError(fmt::format("{}.{}: expected a string", where, key));
  return it->get<std::string>();
}

const json& GetArray(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array())
    throw InputError(fmt::format("{}: no \"{}\" array", where, key));
  return *it;
}

RunDigest DigestFromDoc(const json& doc, const std::string& source) {
  try {
    if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != kSummarySchema)
      throw InputError("not a kprof JSON summary (no \"schema\":\"kprof.summary\")");
    const auto ver = doc.find("schema_version");
    if (ver == doc.end() || !ver->is_number_integer())
      throw InputError("schema_version: missing or not an integer");
    if (ver->get<int64_t>() > kJsonSchemaVersion || ver->get<int64_t>() < 1)
      throw InputError(fmt::format("schema_version {} is not supported (this kprof reads {})",
                                   ver->get<int64_t>(), kJsonSchemaVersion));
    const auto s = doc.find("summary");
    if (s == doc.end() || !s->is_object()) throw InputError("no \"summary\" object");

    RunDigest d;
    d.source = source;
    RunTotals& t = d.totals;
    const std::string w = "summary";
    t.wall_ns = GetU64(*s, "wall_ns", w);
    t.gpu_busy_ns = GetU64(*s, "gpu_busy_ns", w);
    t.kernel_ns = GetU64(*s, "kernel_ns", w);
    t.memcpy_ns = GetU64(*s, "memcpy_ns", w);
    t.sync_ns = GetU64(*s, "sync_ns", w);
    t.kernels = GetU64(*s, "kernels", w);
    t.launches = GetU64(*s, "launches", w);
    t.syncs = GetU64(*s, "syncs", w);
    t.memcpys = GetU64(*s, "memcpys", w);
    if (auto b = s->find("memcpy_bytes"); b != s->end() && b->is_object()) {
      for (const auto& [dir, v] : b->items())
        t.memcpy_bytes += GetU64(*b, dir.c_str(), w + ".memcpy_bytes");
    } else if (b != s->end() && !b->is_null()) {
      t.memcpy_bytes = GetU64(*s, "memcpy_bytes", w);
    }
    t.memsets = GetU64(*s, "memsets", w);
    t.peak_memory_bytes = GetU64(*s, "peak_memory_bytes", w, /*clamp=*/true);
    t.memory_events = GetU64(*s, "allocs", w) + GetU64(*s, "frees", w);
    t.processes = GetU64(*s, "processes", w);
    t.incomplete_processes = GetU64(*s, "incomplete_processes", w);
    t.dropped_records = GetU64(*s, "dropped_records", w);

    // "ops" is the full op view; summaries of an op view also carry it in "rows".
    const char* ops_key = doc.contains("ops") ? "ops" : "rows";
    if (std::string(ops_key) == "rows" && doc.value("view", "") != "op")
      throw InputError("no \"ops\" array");
    const json& ops = GetArray(doc, ops_key, "summary");
    for (size_t i = 0; i < ops.size(); ++i) {
      const std::string where = fmt::format("{}[{}]", ops_key, i);
      auto& op = d.ops[GetString(ops[i], "key", where)];
      op.calls += GetU64(ops[i], "calls", where);
      op.gpu_ns += GetU64(ops[i], "gpu_ns", where);
    }
    const json& kernels = GetArray(doc, "kernels", "summary");
    for (size_t i = 0; i < kernels.size(); ++i) {
      const std::string where = fmt::format("kernels[{}]", i);
      auto& k = d.kernels[GetString(kernels[i], "name", where)];
      k.calls += GetU64(kernels[i], "calls", where);
      k.total_ns += GetU64(kernels[i], "total_ns", where);
    }
    // "modules" (PyTorch runs) is optional: summaries of other runs have none.
    if (auto m = doc.find("modules"); m != doc.end()) {
      if (!m->is_array()) throw InputError("\"modules\" is not an array");
      for (size_t i = 0; i < m->size(); ++i) {
        const std::string where = fmt::format("modules[{}]", i);
        auto& dm = d.modules[GetString((*m)[i], "key", where)];
        dm.calls += GetU64((*m)[i], "calls", where);
        dm.gpu_ns += GetU64((*m)[i], "gpu_ns", where);
      }
    }
    if (auto c = doc.find("compiled"); c != doc.end() && c->is_array())
      for (const json& row : *c)
        if (auto m = row.find("module"); m != row.end() && m->is_string())
          if (std::string name = m->get<std::string>(); !name.empty())
            d.compiled_callers.insert(std::move(name));
    if (auto h = doc.find("hints"); h != doc.end() && h->is_array()) {
      for (size_t i = 0; i < h->size(); ++i) {
        const std::string where = fmt::format("hints[{}]", i);
        const json& hj = (*h)[i];
        DigestHint dh;
        dh.id = GetString(hj, "id", where);
        const auto sev = ParseHintSeverity(GetString(hj, "severity", where));
        if (!sev || *sev == kNoHintAllowed)
          throw InputError(where + ".severity: expected info, warning or critical");
        dh.severity = static_cast<Severity>(*sev);
        dh.summary = hj.value("summary", "");
        d.hints.push_back(std::move(dh));
      }
    }
    return d;
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  } catch (const json::exception& e) {
    throw InputError(source + ": " + e.what());
  }
}

}  // namespace

std::string ReportJson(const Run& run, const Analysis& a, const std::vector<Hint>& hints) {
  ordered_json j;
  j["schema"] = "kprof.summary";
  j["schema_version"] = kJsonSchemaVersion;
#ifdef KPROF_VERSION
  j["kprof_version"] = KPROF_VERSION;
#endif
  j["view"] = GroupByName(a.by);
  ordered_json inputs = ordered_json::array();
  for (const auto& p : run.processes)
    inputs.push_back(
        {{"source", p.source}, {"pid", p.pid}, {"rank", p.rank}, {"complete", p.complete}});
  j["inputs"] = inputs;
  j["summary"] = SummaryJson(a.summary);
  ordered_json rows = ordered_json::array(), ops = ordered_json::array(),
               kernels = ordered_json::array(), ranges = ordered_json::array(),
               procs = ordered_json::array(), hs = ordered_json::array();
  const bool counters = HasCounters(a);
  for (const auto& g : a.rows) rows.push_back(GroupJson(g, a.by, counters));
  for (const auto& g : a.ops) ops.push_back(GroupJson(g, GroupBy::Op, counters));
  for (const auto& k : a.kernels) kernels.push_back(KernelJson(k, counters));
  for (const auto& r : a.ranges)
    ranges.push_back({{"name", r.name},
                      {"domain", r.domain},
                      {"calls", r.calls},
                      {"total_ns", r.stat.total_ns},
                      {"mean_ns", r.stat.mean_ns},
                      {"min_ns", r.stat.min_ns},
                      {"median_ns", r.stat.median_ns},
                      {"p95_ns", r.stat.p95_ns},
                      {"max_ns", r.stat.max_ns},
                      {"max_depth", r.max_depth}});
  for (const auto& p : a.processes)
    procs.push_back({{"pid", p.pid},
                     {"rank", p.rank},
                     {"source", p.source},
                     {"complete", p.complete},
                     {"wall_ns", p.wall_ns},
                     {"gpu_busy_ns", p.gpu_busy_ns},
                     {"kernels", p.kernels},
                     {"kernel_ns", p.kernel_ns},
                     {"windows", p.windows}});
  for (const auto& h : hints) hs.push_back(HintJson(h));
  j["rows"] = rows;
  j["ops"] = ops;
  j["kernels"] = kernels;
  j["ranges"] = ranges;
  j["processes"] = procs;
  report_dist::Json(j, a);
  report_memory::Json(j, a);
  j["hints"] = hs;
  const JointSaving joint = EstimateJoint(hints);
  j["joint_saving"] = {{"est_saving_ns", joint.est_saving_ns},
                       {"est_saving_pct", joint.est_saving_pct},
                       {"sum_est_saving_ns", joint.sum_est_ns},
                       {"hints", joint.hints},
                       {"base_ns", joint.base_ns}};
  // What hint percentages are of: the wall time less its one-time start-up (docs/hints.md).
  if (const uint64_t base = HintBaseNs(hints); base > 0)
    j["hint_base"] = {{"steady_state_ns", base},
                      {"wall_ns", a.summary.wall_ns},
                      {"startup_ns", a.summary.wall_ns - std::min(a.summary.wall_ns, base)}};
  if (!a.graphs.empty()) {
    ordered_json graphs = ordered_json::array();
    for (const GraphRow& g : a.graphs)
      graphs.push_back({{"pid", g.pid},
                        {"id", g.id},
                        {"launches", g.launches},
                        {"nodes", g.nodes},
                        {"instantiations", g.instantiations},
                        {"node_activities", g.node_activities},
                        {"gpu_ns", g.per_launch.total_ns},
                        {"launch_mean_ns", g.per_launch.mean_ns},
                        {"launch_p95_ns", g.per_launch.p95_ns},
                        {"launch_max_ns", g.per_launch.max_ns},
                        {"captured_in", g.captured_in},
                        {"device_launches", g.device_launches},
                        {"launched_by", g.launched_by}});
    j["graphs"] = graphs;
  }
  if (!a.modules.empty()) {
    ordered_json modules = ordered_json::array();
    for (const GroupRow& g : a.modules) modules.push_back(GroupJson(g, GroupBy::Module));
    j["modules"] = modules;
  }
  if (!a.sources.empty()) {
    ordered_json sources = ordered_json::array();
    for (const GroupRow& g : a.sources) sources.push_back(GroupJson(g, GroupBy::Source));
    j["sources"] = sources;
  }
  if (!a.compiled.empty()) {
    ordered_json compiled = ordered_json::array();
    for (const GroupRow& g : a.compiled) compiled.push_back(GroupJson(g, GroupBy::Compiled));
    j["compiled"] = compiled;
  }
  // Only for runs with hardware counters (kprof run --metrics, docs/counters.md).
  if (counters) j["counters"] = CountersJson(a.counters);
  // Names come from the profiled program: invalid UTF-8 is replaced, never fatal.
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool LooksLikeSummaryJson(std::string_view text) {
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string_view::npos || text[i] != '{') return false;
  if (text.find("\"kprof.summary\"") == std::string_view::npos) return false;
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.contains("schema") && doc["schema"] == kSummarySchema;
}

RunDigest DigestFromSummaryJson(std::string_view text, const std::string& source) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw InputError(source + ": malformed JSON");
  return DigestFromDoc(doc, source);
}

std::optional<RunDigest> ReadSummaryJson(std::string_view text, const std::string& source) {
  const size_t i = text.find_first_not_of(" \t\r\n");
  if (i == std::string_view::npos || text[i] != '{' ||
      text.find("\"kprof.summary\"") == std::string_view::npos)
    return std::nullopt;
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw InputError(source + ": malformed JSON");
  if (!doc.is_object() || !doc.contains("schema")) return std::nullopt;
  return DigestFromDoc(doc, source);
}

}  // namespace kprof
