// The diff page's data document: run totals, ops and kernels of base and new side by side with
// the change and the verdict of kprof's comparison (kprof/compare.h), and the hints that
// appeared or went away. Layout: docs/html.md, "Diff page".
#include <algorithm>

#include "output/html/html_internal.h"

namespace kprof {
namespace {

using html::JsonWriter;

/// A cell shown as text and sorted by a number.
void Pair(JsonWriter& j, const std::string& text, double sort) {
  j.Arr().Str(text).Dbl(sort).EndArr();
}

std::string Why(const ItemDiff& item) {
  std::string out;
  for (const auto& m : item.metrics) {
    if (m.reason.empty()) continue;
    if (!out.empty()) out += "; ";
    if (item.section != Section::Run) out += m.metric + " ";
    out += m.reason;
  }
  return out;
}

void Change(JsonWriter& j, const MetricDiff& m) {
  std::string text = "0";
  if (m.abs_change != 0)
    text = m.kind == MetricKind::Time
               ? FormatSignedDuration(m.abs_change)
               : (m.abs_change > 0 ? "+" : "-") + FormatMetric(std::abs(m.abs_change), m.kind);
  Pair(j, text, m.abs_change);
  j.Dbl(m.rel_change);
  if (m.p_value)
    j.Dbl(*m.p_value);
  else
    j.Null();
}

/// The columns of a diff table: `head`, then the change, its p-value, the verdict and why.
void Columns(JsonWriter& j, std::initializer_list<std::pair<const char*, const char*>> head) {
  static constexpr std::pair<const char*, const char*> kTail[] = {
      {"change", "pair"}, {"relative", "pct"}, {"p", "p"}, {"verdict", "verdict"}, {"why", "text"}};
  j.Key("columns").Arr();
  for (const auto& [label, type] : head) j.Obj().S("label", label).S("type", type).EndObj();
  for (const auto& [label, type] : kTail) j.Obj().S("label", label).S("type", type).EndObj();
  j.EndArr();
}

void RunTable(JsonWriter& j, const DiffResult& r) {
  j.Obj().S("id", "run").S("title", "Run totals").U("total", r.run.size());
  j.U("shown", r.run.size());
  Columns(j, {{"metric", "text"}, {"base", "pair"}, {"new", "pair"}});
  j.Key("rows").Arr();
  for (const auto& i : r.run) {
    const MetricDiff& m = i.metrics.front();
    j.Arr().Str(i.name);
    Pair(j, FormatMetric(m.base_median, m.kind), m.base_median);
    Pair(j, FormatMetric(m.new_median, m.kind), m.new_median);
    Change(j, m);
    j.Str(VerdictName(i.verdict)).Str(Why(i)).EndArr();
  }
  j.EndArr().EndObj();
}

void ItemTable(JsonWriter& j, const char* id, const char* title, const char* what,
               const std::vector<ItemDiff>& items, size_t max_rows) {
  const size_t n = std::min(items.size(), max_rows);
  j.Obj().S("id", id).S("title", title).U("total", items.size()).U("shown", n);
  Columns(j, {{what, "text"},
              {"base calls", "int"},
              {"new calls", "int"},
              {"base GPU", "dur"},
              {"new GPU", "dur"}});
  j.Key("rows").Arr();
  for (size_t k = 0; k < n; ++k) {
    const ItemDiff& i = items[k];
    const MetricDiff* calls = i.Find("calls");
    const MetricDiff& t = i.metrics.back();
    j.Arr().Str(i.name);
    j.Dbl(calls ? calls->base_median : 0).Dbl(calls ? calls->new_median : 0);
    j.Dbl(t.base_median).Dbl(t.new_median);
    Change(j, t);
    j.Str(VerdictName(i.verdict)).Str(Why(i)).EndArr();
  }
  j.EndArr().EndObj();
}

}  // namespace

std::string HtmlDiffData(const DiffResult& r, const std::vector<std::string>& base,
                         const std::vector<std::string>& now, const HtmlOptions& opts) {
  JsonWriter j;
  j.Obj().S("kind", "diff").U("version", 1).S("title", opts.title);
  j.S("generator", "kprof " KPROF_VERSION);
  j.S("result", r.Regressed() ? "regression" : "pass");
  j.S("mode", r.mode == DiffMode::Test ? "test" : "threshold-only").S("mode_note", r.mode_note);
  j.U("base_runs", r.base_runs).U("new_runs", r.new_runs);
  j.Key("base").Arr();
  for (const auto& b : base) j.Str(b);
  j.EndArr().Key("new").Arr();
  for (const auto& n : now) j.Str(n);
  j.EndArr().Key("counts").Obj();
  for (Verdict v : {Verdict::Regression, Verdict::Improvement, Verdict::Changed, Verdict::Added,
                    Verdict::Removed})
    j.U(VerdictName(v), r.Count(v));
  j.EndObj().Key("tables").Arr();
  RunTable(j, r);
  ItemTable(j, "ops", "Ops", "op", r.ops, opts.max_rows);
  ItemTable(j, "kernels", "Kernels", "kernel", r.kernels, opts.max_rows);
  if (!r.modules.empty()) ItemTable(j, "modules", "Modules", "module", r.modules, opts.max_rows);
  j.EndArr().Key("hints").Arr();
  for (const auto& h : r.hints) {
    j.Obj().S("id", h.id).S("severity", SeverityName(h.severity)).S("summary", h.summary);
    j.S("change", h.appeared ? "appeared" : "gone").U("base_runs", h.base_runs);
    j.U("new_runs", h.new_runs).EndObj();
  }
  j.EndArr().Key("warnings").Arr();
  for (const auto& w : r.warnings) j.Str(w);
  j.EndArr().EndObj();
  return std::move(j).Finish();
}

}  // namespace kprof
