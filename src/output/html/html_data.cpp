// The report page's data document: the run, its totals, the hints, the tables of every view,
// and (html_timeline.cpp) the timeline, utilisation and memory. Layout: docs/html.md, "Data".
#include <algorithm>

#include "kprof/output.h"
#include "output/html/html_internal.h"

namespace kprof {
namespace html {
namespace {

struct Column {
  const char* label;
  const char* type;  ///< text | int | dur | bytes | sbytes | pct (formatting and sorting in JS)
};

void BeginTable(JsonWriter& j, const char* id, const char* title, size_t total, size_t shown,
                std::initializer_list<Column> cols) {
  j.Obj().S("id", id).S("title", title).U("total", total).U("shown", shown);
  j.Key("columns").Arr();
  for (const auto& c : cols) j.Obj().S("label", c.label).S("type", c.type).EndObj();
  j.EndArr().Key("rows").Arr();
}

void EndTable(JsonWriter& j) { j.EndArr().EndObj(); }

std::string DimText(Dim3 d) { return fmt::format("{}x{}x{}", d.x, d.y, d.z); }

void GroupTable(JsonWriter& j, const char* id, const char* title, const char* what,
                const std::vector<GroupRow>& rows, bool with_cpu, size_t max_rows) {
  const size_t n = std::min(rows.size(), max_rows);
  if (with_cpu)
    BeginTable(j, id, title, rows.size(), n,
               {{what, "text"},
                {"calls", "int"},
                {"GPU time", "dur"},
                {"projected", "dur"},
                {"share", "pct"},
                {"kernels", "int"},
                {"copies", "int"},
                {"memsets", "int"},
                {"bytes", "bytes"},
                {"CPU time", "dur"},
                {"memory delta", "sbytes"}});
  else
    BeginTable(j, id, title, rows.size(), n,
               {{what, "text"},
                {"activities", "int"},
                {"GPU time", "dur"},
                {"busy", "dur"},
                {"share", "pct"},
                {"kernels", "int"},
                {"copies", "int"},
                {"memsets", "int"},
                {"bytes", "bytes"}});
  for (size_t i = 0; i < n; ++i) {
    const GroupRow& g = rows[i];
    j.Arr().Str(g.key).U64(g.calls).U64(g.gpu_ns).U64(g.gpu_projected_ns).Dbl(g.share);
    j.U64(g.kernels).U64(g.memcpys).U64(g.memsets).U64(g.bytes);
    if (with_cpu) j.U64(g.cpu_ns).I64(g.mem_delta_bytes);
    j.EndArr();
  }
  EndTable(j);
}

void KernelTable(JsonWriter& j, const std::vector<KernelRow>& rows, size_t max_rows) {
  const size_t n = std::min(rows.size(), max_rows);
  BeginTable(j, "kernel", "Kernels", rows.size(), n,
             {{"kernel", "text"},
              {"calls", "int"},
              {"total", "dur"},
              {"mean", "dur"},
              {"min", "dur"},
              {"median", "dur"},
              {"p95", "dur"},
              {"max", "dur"},
              {"share", "pct"},
              {"grid", "text"},
              {"block", "text"},
              {"registers", "int"},
              {"shared mem", "bytes"}});
  for (size_t i = 0; i < n; ++i) {
    const KernelRow& k = rows[i];
    j.Arr().Str(k.name).U64(k.stat.count).U64(k.stat.total_ns).U64(k.stat.mean_ns);
    j.U64(k.stat.min_ns).U64(k.stat.median_ns).U64(k.stat.p95_ns).U64(k.stat.max_ns);
    j.Dbl(k.share).Str(DimText(k.grid)).Str(DimText(k.block)).U64(k.registers);
    j.U64(k.shared_mem).EndArr();
  }
  EndTable(j);
}

void RangeTable(JsonWriter& j, const std::vector<RangeRow>& rows, size_t max_rows) {
  const size_t n = std::min(rows.size(), max_rows);
  BeginTable(j, "nvtx", "NVTX ranges", rows.size(), n,
             {{"range", "text"},
              {"domain", "text"},
              {"calls", "int"},
              {"total", "dur"},
              {"mean", "dur"},
              {"median", "dur"},
              {"p95", "dur"},
              {"max", "dur"},
              {"depth", "int"}});
  for (size_t i = 0; i < n; ++i) {
    const RangeRow& r = rows[i];
    j.Arr().Str(r.name).Str(r.domain).U64(r.calls).U64(r.stat.total_ns).U64(r.stat.mean_ns);
    j.U64(r.stat.median_ns).U64(r.stat.p95_ns).U64(r.stat.max_ns).U64(r.max_depth).EndArr();
  }
  EndTable(j);
}

void WriteHints(JsonWriter& j, const std::vector<Hint>& hints) {
  j.Key("hints").Arr();
  for (const auto& h : hints) {
    j.Obj().S("id", h.id).S("severity", SeverityName(h.severity)).S("summary", h.summary);
    j.Key("evidence").Arr();
    for (const auto& e : h.evidence) j.Str(e);
    j.EndArr();
    j.U("est_saving_ns", h.est_saving_ns).D("est_saving_pct", h.est_saving_pct);
    if (h.est_saving_bytes)  // the memory rules (docs/hints.md "Memory")
      j.U("est_saving_bytes", h.est_saving_bytes).D("est_saving_bytes_pct", h.est_saving_bytes_pct);
    j.U("base_ns", h.base_ns);
    j.S("assumption", h.assumption).S("fix_cuda", h.fix_cuda).S("fix_pytorch", h.fix_pytorch);
    j.EndObj();
  }
  j.EndArr();
  const JointSaving joint = EstimateJoint(hints);
  j.Key("joint_saving").Obj().U("est_saving_ns", joint.est_saving_ns);
  j.D("est_saving_pct", joint.est_saving_pct).U("sum_est_saving_ns", joint.sum_est_ns);
  j.U("hints", joint.hints).U("base_ns", joint.base_ns).EndObj();
}

void WriteRun(JsonWriter& j, const Analysis& an, uint64_t hint_base_ns) {
  const RunSummary& s = an.summary;
  j.Key("run").Obj();
  j.U("wall_ns", s.wall_ns).U("gpu_busy_ns", s.gpu_busy_ns).D("utilisation", s.utilisation);
  j.U("kernels", s.kernels).U("memcpys", s.memcpys).U("memsets", s.memsets);
  j.U("nvtx_ranges", s.nvtx_ranges).I("peak_memory_bytes", s.peak_memory_bytes);
  j.U("processes", s.processes).U("dropped_records", s.dropped_records);
  j.Key("devices").Arr();
  for (const auto& d : s.devices) {
    j.Obj().U("id", d.id).S("name", d.name).U("sm_count", d.sm_count);
    j.U("memory_bytes", d.memory_bytes).S("compute_capability", d.compute_capability).EndObj();
  }
  j.EndArr().Key("process_list").Arr();
  for (const auto& p : an.processes)
    j.Obj()
        .U("pid", p.pid)
        .I("rank", p.rank)
        .S("source", p.source)
        .B("complete", p.complete)
        .EndObj();
  j.EndArr().Key("totals").Arr();
  for (const auto& [k, v] : TotalsLines(s, hint_base_ns)) j.Arr().Str(k).Str(v).EndArr();
  j.EndArr().EndObj();
}

}  // namespace

std::string JsonWriter::Finish() && {
  std::string out;
  out.reserve(s_.size() + s_.size() / 64);
  for (char c : s_) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

}  // namespace html

std::string HtmlReportData(const Timeline& timeline, const std::vector<Hint>& hints,
                           const HtmlOptions& opts) {
  using html::JsonWriter;
  AnalysisOptions ao;
  ao.by = GroupBy::Op;
  ao.top = 0;
  ao.timeline = true;
  ao.all_views = true;  // every table from one pass
  const Analysis an = Analyze(timeline, ao);
  JsonWriter j;
  j.Obj().S("kind", "report").U("version", 1).S("title", opts.title);
  j.S("generator", "kprof " KPROF_VERSION);
  j.Key("limits").Obj().U("max_slices", opts.max_slices).U("max_ranges", opts.max_ranges);
  j.U("bins", opts.bins).U("max_rows", opts.max_rows).EndObj();
  html::WriteRun(j, an, HintBaseNs(hints));
  html::WriteHints(j, hints);
  j.Key("tables").Arr();
  html::GroupTable(j, "op", "Ops", "op", an.ops, true, opts.max_rows);
  html::KernelTable(j, an.kernels, opts.max_rows);
  html::GroupTable(j, "range-path", "Range paths", "range path", an.paths, true, opts.max_rows);
  html::GroupTable(j, "stream", "Streams", "stream", an.streams, false, opts.max_rows);
  html::GroupTable(j, "device", "Devices", "device", an.devices, false, opts.max_rows);
  html::RangeTable(j, an.ranges, opts.max_rows);
  // PyTorch (docs/pytorch.md): the module tree, with each module's class; the page names the
  // view even for runs without modules. Source lines and compiled regions where recorded.
  if (an.modules.empty()) {
    j.Obj().S("id", "module").S("title", "Modules");
    j.S("unavailable",
        "Modules were not recorded in this run: kprof run records them for PyTorch programs "
        "(--pytorch auto).");
    j.EndObj();
  } else {
    std::vector<GroupRow> rows = an.modules;
    for (GroupRow& r : rows)
      r.key = std::string(2 * std::min<uint32_t>(r.depth, 8), ' ') + r.key + " (" + r.kind + ")";
    html::GroupTable(j, "module", "Modules", "module", rows, true, opts.max_rows);
  }
  if (!an.sources.empty())
    html::GroupTable(j, "source", "Source lines", "source line", an.sources, true, opts.max_rows);
  if (!an.compiled.empty())
    html::GroupTable(j, "compiled", "Compiled code", "region", an.compiled, true, opts.max_rows);
  j.EndArr();
  html::WriteTimeline(j, timeline, an, opts);
  j.EndObj();
  return std::move(j).Finish();
}

}  // namespace kprof
