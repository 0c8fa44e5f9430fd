// Report writers: terminal table, CSV and Markdown (the JSON summary: summary_json.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kprof/output.h"
#include "kprof/utf8.h"
#include "output/report_common.h"
#include "output/report_distributed.h"
#include "output/report_memory.h"
#include "output/report_text.h"

namespace kprof {
namespace {

using report_common::BoundView;
using report_common::HasCounters;
using report_common::kCopyNames;
using report_text::Columns;
using report_text::Fit;
using report_text::FitTail;
using report_text::Md;
using report_text::Pad;

std::string Pct(double share) { return fmt::format("{:.1f}%", share * 100.0); }

// ---- Hardware counters (docs/counters.md) -----------------------------------------

/// A measured value with `digits` decimals, "-" when not measured.
std::string Value(double v, int digits) {
  return Measured(v) ? fmt::format("{:.{}f}", v, digits) : std::string("-");
}

/// A table line without the spaces an empty last column leaves.
std::string Line(std::string s) {
  s.erase(s.find_last_not_of(' ') + 1);
  return s + "\n";
}

/// "200 us", "1 ms": the sampling interval as it was asked for.
std::string Interval(uint64_t ns) {
  if (ns >= 1'000'000 && ns % 1'000'000 == 0) return fmt::format("{} ms", ns / 1'000'000);
  if (ns >= 1'000 && ns % 1'000 == 0) return fmt::format("{} us", ns / 1'000);
  return FormatDuration(ns);
}

/// The lines above the table of counters: what was measured, what it cost, what went wrong, and
/// the kernels by class.
std::vector<std::string> CounterLines(const CounterSummary& c) {
  std::vector<std::string> lines;
  const bool replay = c.mode.find("replay") != std::string::npos || c.replayed_launches;
  const bool sampled = c.mode.find("sampled") != std::string::npos || c.samples;
  if (replay) {
    const auto names = std::count_if(c.kernels.begin(), c.kernels.end(), [](const auto& k) {
      return k.source == CounterSource::Replay;
    });
    lines.push_back(fmt::format(
        "replay: {} launch{} of {} kernel{} replayed{}, cost {} of host time", c.replayed_launches,
        c.replayed_launches == 1 ? "" : "es", names, names == 1 ? "" : "s",
        c.max_passes
            ? fmt::format(", up to {} pass{} each", c.max_passes, c.max_passes == 1 ? "" : "es")
            : std::string(),
        FormatDuration(c.replay_ns)));
  }
  if (sampled)
    lines.push_back(fmt::format(
        "sampled{}: {} sample{}{}",
        c.sample_interval_ns ? " every " + Interval(c.sample_interval_ns) : std::string(),
        c.samples, c.samples == 1 ? "" : "s",
        c.setup_ns ? fmt::format(", set-up cost {} of host time", FormatDuration(c.setup_ns))
                   : std::string()));
  if (!c.problem.empty()) lines.push_back("counters: " + DisplayText(c.problem));
  if (const std::string roof = FormatRoofline(c); !roof.empty())
    lines.push_back("roofline: " + roof);
  return lines;
}

/// "not measured: NAME (12.3% of kernel time, 40 launches): why".
std::string UnmeasuredLine(const UnmeasuredKernel& u) {
  return fmt::format("not measured: {} ({} of kernel time, {} launch{}): {}", Fit(u.name, 60),
                     Pct(u.share), u.launches, u.launches == 1 ? "" : "es", u.why);
}

/// The columns of the table of counters after the kernel's name, as strings.
std::vector<std::string> CounterCells(const KernelCounters& k) {
  const CounterValues& v = k.values;
  const double flops_per_s = k.FlopsPerSecond();
  return {CounterSourceName(k.source),
          std::to_string(k.launches),
          Value(v.sm_pct, 1),
          Value(v.mem_pct, 1),
          Value(v.dram_pct, 1),
          Value(v.l2_pct, 1),
          Value(v.tensor_pct, 1),
          Value(v.occupancy_pct, 1),
          Value(k.Intensity(), 2),
          Value(Measured(flops_per_s) ? flops_per_s / 1e12 : kNotMeasured, 3),
          BoundName(k.bound)};
}

/// What hint percentages are of: the wall time less its one-time start-up (docs/hints.md).
std::string SteadyStateText(uint64_t wall_ns, uint64_t base_ns) {
  if (base_ns >= wall_ns)
    return fmt::format("{} (no start-up left out): what hint percentages are of",
                       FormatDuration(base_ns));
  return fmt::format("{} of {} wall, less {} of start-up: what hint percentages are of",
                     FormatDuration(base_ns), FormatDuration(wall_ns),
                     FormatDuration(wall_ns - base_ns));
}

/// "If every hint were fixed: up to ..." (the joint figure, docs/hints.md).
std::string JointLine(const JointSaving& j) {
  std::string line =
      fmt::format("If every hint were fixed: up to {} ({:.1f}% of the {} steady state)",
                  FormatDuration(j.est_saving_ns), j.est_saving_pct, FormatDuration(j.base_ns));
  if (j.sum_est_ns > j.est_saving_ns)
    line += fmt::format("; the {} estimates add up to {}, {} of it the same time counted twice",
                        j.hints, FormatDuration(j.sum_est_ns),
                        FormatDuration(j.sum_est_ns - j.est_saving_ns));
  return line;
}

// ---- Table ----------------------------------------------------------------------------------
void Totals(std::ostream& out, const RunSummary& s, uint64_t hint_base_ns, const char* indent) {
  for (const auto& [k, v] : TotalsLines(s, hint_base_ns)) out << indent << Pad(k, 22) << v << "\n";
}

/// `bound`: a last column with each kernel's class from the counters (runs with counters only).
void KernelTable(std::ostream& out, const std::vector<KernelRow>& rows, size_t top,
                 const char* indent, bool bound = false) {
  out << indent
      << fmt::format("{:<60} {:>8} {:>11} {:>10} {:>10} {:>10} {:>7}{}\n", "Kernel", "Calls",
                     "Total", "Mean", "Min", "Max", "Share", bound ? "  Bound" : "");
  size_t n = 0;
  for (const auto& k : rows) {
    if (top && n++ >= top) {
      out << indent << fmt::format("... {} more kernels\n", rows.size() - top);
      break;
    }
    const std::string line =
        Pad(Fit(k.name, 60), 60) +
        fmt::format(" {:>8} {:>11} {:>10} {:>10} {:>10} {:>7}", k.stat.count,
                    FormatDuration(k.stat.total_ns), FormatDuration(k.stat.mean_ns),
                    FormatDuration(k.stat.min_ns), FormatDuration(k.stat.max_ns), Pct(k.share));
    out << indent << (bound ? Line(line + "  " + BoundName(k.bound)) : line + "\n");
  }
}

/// The "Hardware counters" section of the table report (runs with counters only).
void CountersTable(std::ostream& out, const CounterSummary& c, size_t top) {
  out << "\nHardware counters\n";
  for (const std::string& line : CounterLines(c)) out << "  " << line << "\n";
  if (c.kernels.empty()) out << "  (no kernel measured)\n";
  for (const UnmeasuredKernel& u : c.unmeasured) out << "  " << Line(UnmeasuredLine(u));
  if (c.kernels.empty()) return;
  constexpr const char* kRow = " {:<7} {:>8} {:>6} {:>6} {:>6} {:>6} {:>8} {:>11} {:>9} {:>8}  {}";
  out << Line("  " + Pad("Kernel", 40) +
              fmt::format(kRow, "Source", "Launches", "SM %", "Mem %", "DRAM %", "L2 %", "Tensor %",
                          "Occupancy %", "FLOP/byte", "TFLOP/s", "Bound"));
  size_t n = 0;
  for (const KernelCounters& k : c.kernels) {
    if (top && n++ >= top) {
      out << fmt::format("  ... {} more kernels\n", c.kernels.size() - top);
      break;
    }
    const std::vector<std::string> v = CounterCells(k);
    out << Line(
        "  " + Pad(Fit(k.name, 40), 40) +
        fmt::format(kRow, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]));
  }
}

/// The rows of the view asked for (every view but the kernel view), with the top kernels
/// beneath each row.
void GroupTable(std::ostream& out, const Analysis& a, const ReportOptions& o) {
  const RunSummary& s = a.summary;
  const char* what = GroupByName(a.by);
  const bool counters = HasCounters(a);
  // PyTorch runs with autograd traced to the forward ops, and the module view: a column of
  // backward GPU time (docs/pytorch.md).
  const bool bwd = a.by == GroupBy::Module || a.by == GroupBy::Source ||
                   (a.by == GroupBy::Op && s.backward_linked_ns);
  // Op view with source lines (--pytorch stack): where in the program each op was called.
  const bool from = a.by == GroupBy::Op && !a.sources.empty();
  // Runs with hardware counters: the class of each row's kernels (docs/counters.md).
  const bool bound = counters && BoundView(a.by);
  const std::string header =
      fmt::format("  {:<50} {:>8} {:>11} {:>11} {:>7} {:>8} {:>11}{}{}{}", what, "Calls",
                  "GPU time", "Projected", "Share", "Kernels", "CPU time",
                  bwd ? fmt::format(" {:>11}", a.by == GroupBy::Op ? "Its backward" : "Backward")
                      : std::string(),
                  bound ? "  Bound   " : "", from ? "  Called from" : "");
  out << fmt::format("GPU time by {} (Share: of GPU busy time, {})\n", what,
                     FormatDuration(s.gpu_busy_ns));
  out << (bound ? Line(header) : header + "\n");
  size_t n = 0;
  for (const auto& g : a.rows) {
    if (o.top && n++ >= o.top) break;
    // Source lines keep their end (the file name and line) when cut.
    std::string key = a.by == GroupBy::Source ? FitTail(g.key, g.kind.empty() ? 50 : 30) : g.key;
    if (!g.kind.empty())
      key = std::string(2 * std::min<uint32_t>(g.depth, 8), ' ') + key + " (" + g.kind + ")";
    const std::string row =
        "  " + Pad(Fit(key, 50), 50) +
        fmt::format(" {:>8} {:>11} {:>11} {:>7} {:>8} {:>11}{}{}{}", g.calls,
                    FormatDuration(g.gpu_ns), FormatDuration(g.gpu_projected_ns), Pct(g.share),
                    g.kernels, g.cpu_ns ? FormatDuration(g.cpu_ns) : "-",
                    bwd ? fmt::format(" {:>11}", g.bwd_gpu_ns ? FormatDuration(g.bwd_gpu_ns)
                                                              : std::string("-"))
                        : std::string(),
                    bound ? "  " + Pad(BoundName(g.bound), 8) : std::string(),
                    from && !g.source.empty() ? "  " + FitTail(g.source, 40) : "");
    out << (bound ? Line(row) : row + "\n");
    size_t m = 0;
    for (const auto& k : g.kernel_rows) {
      if (m++ >= 3) {
        out << fmt::format("      ... {} more kernels\n", g.kernel_rows.size() - 3);
        break;
      }
      out << "    " << Pad(Fit(k.name, 48), 48)
          << fmt::format(" {:>8} {:>11}\n", k.stat.count, FormatDuration(k.stat.total_ns));
    }
  }
  if (a.rows.empty()) out << "  (no GPU activity)\n";
  out << "\n";
}

/// The launched CUDA graphs.
void GraphsTable(std::ostream& out, const Analysis& a, const ReportOptions& o) {
  // Only runs with CUDA graphs: every other report stays as it was.
  out << "\nCUDA graphs\n";
  out << fmt::format("  {:<16} {:>8} {:>7} {:>6} {:>11} {:>11} {:>11}  {}\n", "Graph", "Launches",
                     "Nodes", "Inst.", "Per launch", "p95", "GPU time", "Captured in");
  size_t n = 0;
  for (const GraphRow& g : a.graphs) {
    if (o.top && n++ >= o.top) {
      out << fmt::format("  ... {} more graphs\n", a.graphs.size() - o.top);
      break;
    }
    out << "  " << Pad(Fit(g.Key(), 16), 16)
        << fmt::format(" {:>8} {:>7} {:>6} {:>11} {:>11} {:>11}  {}\n", g.launches,
                       g.nodes ? std::to_string(g.nodes) : "?",
                       g.instantiations ? std::to_string(g.instantiations) : "?",
                       FormatDuration(g.per_launch.mean_ns), FormatDuration(g.per_launch.p95_ns),
                       FormatDuration(g.per_launch.total_ns),
                       (g.captured_in.empty() ? std::string("(not recorded)")
                                              : DisplayText(g.captured_in)) +
                           (g.device_launches ? fmt::format("; {} launched from the GPU by {}",
                                                            g.device_launches == g.launches
                                                                ? std::string("all")
                                                                : std::to_string(g.device_launches),
                                                            g.launched_by)
                                              : std::string()));
  }
}

/// The hints, most costly first, with the joint figure.
void HintsTable(std::ostream& out, const std::vector<Hint>& hints) {
  out << "\nHints (most costly first)\n";
  if (const JointSaving j = EstimateJoint(hints); j.hints > 1) out << "  " << JointLine(j) << "\n";
  for (const auto& h : hints) {
    // Hint texts quote kernel and range names: shown as DisplayText like the tables.
    out << fmt::format("  [{}] {}: {}\n", SeverityName(h.severity), h.id, DisplayText(h.summary));
    for (const auto& e : h.evidence) out << "      " << DisplayText(e) << "\n";
    if (h.est_saving_ns || h.est_saving_bytes)
      out << fmt::format("      est. saving: up to {}; {}\n", report_common::Saving(h, false),
                         h.assumption);
    if (!h.fix_cuda.empty()) out << "      fix (CUDA): " << h.fix_cuda << "\n";
    if (!h.fix_pytorch.empty()) out << "      fix (PyTorch): " << h.fix_pytorch << "\n";
  }
}

void Table(std::ostream& out, const Run& run, const Analysis& a, const std::vector<Hint>& hints,
           const ReportOptions& o) {
  const RunSummary& s = a.summary;
  std::string devices;
  for (const auto& d : s.devices)
    devices += fmt::format("{}dev {} {}", devices.empty() ? "" : ", ", d.id, d.name);
  out << fmt::format("kprof: {} process{}{}{}\n\n", s.processes, s.processes == 1 ? "" : "es",
                     devices.empty() ? "" : ", ", devices);
  report_memory::OutOfMemory(out, a);

  const bool counters = HasCounters(a);
  if (a.by == GroupBy::Memory) {
    report_memory::Peaks(out, a, true);
    out << (a.memory.peaks.empty() ? "Device memory: no allocation recorded\n\n" : "\n");
  } else if (a.by != GroupBy::Kernel) {
    GroupTable(out, a, o);
  }
  if (a.by == GroupBy::Kernel) {
    // The kernel view: the rows as --filter and --sort left them, with full statistics.
    std::unordered_map<std::string_view, const KernelRow*> by_name;
    for (const auto& k : a.kernels) by_name.emplace(k.name, &k);
    std::vector<KernelRow> shown;
    for (const auto& g : a.rows)
      if (auto it = by_name.find(g.key); it != by_name.end()) shown.push_back(*it->second);
    out << fmt::format("GPU time by kernel (Share: of GPU busy time, {})\n",
                       FormatDuration(a.summary.gpu_busy_ns));
    if (shown.empty())
      out << (a.kernels.empty() ? "  (no kernels recorded)\n" : "  (no kernel matches)\n");
    else
      KernelTable(out, shown, o.top, "  ", counters);
  } else {
    out << fmt::format("Top kernels by GPU time (Share: of GPU busy time, {})\n",
                       FormatDuration(a.summary.gpu_busy_ns));
    if (a.kernels.empty())
      out << "  (no kernels recorded)\n";
    else
      KernelTable(out, a.kernels, o.top, "  ", counters);
  }
  // Only runs with hardware counters (kprof run --metrics): every other report stays as it was.
  if (counters) CountersTable(out, a.counters, o.top);
  if (!a.graphs.empty()) GraphsTable(out, a, o);
  out << "\nTotals\n";
  Totals(out, s, HintBaseNs(hints), "  ");
  if (a.by != GroupBy::Memory) report_memory::Peaks(out, a, false);

  if (!a.ranges.empty()) {
    out << "\nNVTX ranges\n";
    out << fmt::format("  {:<50} {:>8} {:>11} {:>10} {:>6}\n", "Range", "Calls", "Total", "Mean",
                       "Depth");
    size_t n = 0;
    for (const auto& r : a.ranges) {
      if (o.top && n++ >= o.top) {
        out << fmt::format("  ... {} more ranges\n", a.ranges.size() - o.top);
        break;
      }
      out << "  " << Pad(Fit(r.name, 50), 50)
          << fmt::format(" {:>8} {:>11} {:>10} {:>6}\n", r.calls, FormatDuration(r.stat.total_ns),
                         FormatDuration(r.stat.mean_ns), r.max_depth);
    }
  }
  report_dist::Tables(out, a);
  if (a.processes.size() > 1 && !a.dist.Multi()) {
    out << "\nProcesses\n";
    for (size_t i = 0; i < a.processes.size(); ++i) {
      const auto& p = a.processes[i];
      out << "  " << Pad(run.processes[i].Label(), 24)
          << fmt::format(" wall {:>10}  GPU busy {:>10}  kernels {:>8}{}\n",
                         FormatDuration(p.wall_ns), FormatDuration(p.gpu_busy_ns), p.kernels,
                         p.complete ? "" : "  (incomplete)");
    }
  }
  if (!hints.empty()) HintsTable(out, hints);
  if (!o.saved_to.empty()) out << "\nSaved to " << o.saved_to << "\n";
}

// ---- CSV ------------------------------------------------------------------------------------
std::string Csv(const std::string& raw) {
  const std::string s = ValidUtf8(raw);  // CSV readers decode UTF-8: never a stray byte
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

void WriteCsv(std::ostream& out, const Analysis& a) {
  if (a.by == GroupBy::Memory) return report_memory::Csv(out, a, Csv);
  // Runs with hardware counters: a last column with each row's class (docs/counters.md).
  const bool bound = HasCounters(a) && BoundView(a.by);
  const auto end = [&](Bound b) { return bound ? fmt::format(",{}\n", BoundName(b)) : "\n"; };
  if (a.by == GroupBy::Kernel) {
    out << "kernel,calls,total_ns,mean_ns,min_ns,median_ns,p95_ns,max_ns,share"
        << (bound ? ",bound\n" : "\n");
    for (const auto& g : a.rows) {
      auto it = std::find_if(a.kernels.begin(), a.kernels.end(),
                             [&](const KernelRow& k) { return k.name == g.key; });
      if (it == a.kernels.end()) continue;
      const Stat& s = it->stat;
      out << fmt::format("{},{},{},{},{},{},{},{},{:.6f}", Csv(it->name), s.count, s.total_ns,
                         s.mean_ns, s.min_ns, s.median_ns, s.p95_ns, s.max_ns, it->share)
          << end(it->bound);
    }
    return;
  }
  out << GroupByName(a.by)
      << ",calls,gpu_ns,gpu_projected_ns,cpu_ns,kernels,memcpys,memsets,bytes,share,"
         "mem_delta_bytes"
      << (bound ? ",bound\n" : "\n");
  for (const auto& g : a.rows)
    out << fmt::format("{},{},{},{},{},{},{},{},{},{:.6f},{}", Csv(g.key), g.calls, g.gpu_ns,
                       g.gpu_projected_ns, g.cpu_ns, g.kernels, g.memcpys, g.memsets, g.bytes,
                       g.share, g.mem_delta_bytes)
        << end(g.bound);
}

// ---- Markdown -------------------------------------------------------------------------------
void WriteMarkdown(std::ostream& out, const Analysis& a, const std::vector<Hint>& hints,
                   const ReportOptions& o) {
  const RunSummary& s = a.summary;
  out << "## kprof report\n\n";
  out << "| Metric | Value |\n|---|---|\n";
  out << fmt::format("| Wall time | {} |\n", FormatDuration(s.wall_ns));
  if (const uint64_t base = HintBaseNs(hints); base > 0)
    out << fmt::format("| Steady state | {} |\n", SteadyStateText(s.wall_ns, base));
  out << fmt::format("| GPU busy | {}{} ({:.1f}% of wall) |\n", FormatDuration(s.gpu_busy_ns),
                     report_dist::GpusNote(s), s.utilisation * 100);
  out << fmt::format("| Kernels | {} ({}) |\n", s.kernels, FormatDuration(s.kernel_ns));
  out << fmt::format("| Memcpy | {} ({}) |\n", s.memcpys, FormatDuration(s.memcpy_ns));
  out << fmt::format("| Synchronization | {} calls, {} |\n", s.syncs, FormatDuration(s.sync_ns));
  out << fmt::format("| Peak device memory | {} |\n",
                     FormatBytes(static_cast<uint64_t>(std::max<int64_t>(0, s.peak_memory_bytes))));
  out << fmt::format("| Dropped records | {} |\n\n", s.dropped_records);

  const bool counters = HasCounters(a);
  // Runs with hardware counters: a column with each row's class (docs/counters.md).
  const bool bound = counters && BoundView(a.by);
  out << fmt::format("### GPU time by {}\n\nShare: of GPU busy time ({}).\n\n", GroupByName(a.by),
                     FormatDuration(s.gpu_busy_ns));
  out << fmt::format("| {} | Calls | GPU time | Share | Kernels |{}\n|---|---:|---:|---:|---:|{}\n",
                     GroupByName(a.by), bound ? " Bound |" : "", bound ? "---|" : "");
  size_t n = 0;
  for (const auto& g : a.rows) {
    if (o.top && n++ >= o.top) break;
    out << fmt::format("| {} | {} | {} | {} | {} |{}\n", Md(Fit(g.key, 80)), g.calls,
                       FormatDuration(g.gpu_ns), Pct(g.share), g.kernels,
                       bound ? fmt::format(" {} |", BoundName(g.bound)) : "");
  }
  if (counters) {
    // Only runs with hardware counters (kprof run --metrics): every other report stays as it was.
    const CounterSummary& c = a.counters;
    out << "\n### Hardware counters\n\n";
    for (const std::string& line : CounterLines(c)) out << "- " << Md(line) << "\n";
    for (const UnmeasuredKernel& u : c.unmeasured) out << "- " << Md(UnmeasuredLine(u)) << "\n";
    if (c.kernels.empty()) {
      out << "- no kernel measured\n";
    } else {
      out << "\n| Kernel | Source | Launches | SM % | Mem % | DRAM % | L2 % | Tensor % | "
             "Occupancy % | FLOP/byte | TFLOP/s | Bound |\n"
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
      n = 0;
      for (const KernelCounters& k : c.kernels) {
        if (o.top && n++ >= o.top) break;
        out << "| " << Md(Fit(k.name, 80));
        for (const std::string& cell : CounterCells(k)) out << " | " << cell;
        out << " |\n";
      }
    }
  }
  report_dist::Markdown(out, a);
  if (!hints.empty()) {
    out << "\n### Hints\n\n";
    if (const JointSaving j = EstimateJoint(hints); j.hints > 1) out << Md(JointLine(j)) << "\n\n";
    for (const auto& h : hints) {
      out << fmt::format("- **{}** `{}`: {}", SeverityName(h.severity), h.id, Md(h.summary));
      if (h.est_saving_ns || h.est_saving_bytes)
        out << " (up to " << report_common::Saving(h, true) << ")";
      out << "\n";
      for (const auto& e : h.evidence) out << "  - " << Md(e) << "\n";
      if (!h.fix_cuda.empty()) out << "  - Fix (CUDA): " << Md(h.fix_cuda) << "\n";
      if (!h.fix_pytorch.empty()) out << "  - Fix (PyTorch): " << Md(h.fix_pytorch) << "\n";
    }
  }
}

}  // namespace

uint64_t HintBaseNs(const std::vector<Hint>& hints) {
  uint64_t base = 0;
  for (const Hint& h : hints) base = std::max(base, h.base_ns);
  return base;
}

std::vector<std::pair<std::string, std::string>> TotalsLines(const RunSummary& s,
                                                             uint64_t hint_base_ns) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto line = [&](const std::string& k, const std::string& v) { lines.emplace_back(k, v); };
  if (!s.capture.empty()) {
    // The windows recorded (docs/capture.md): the wall time below is the time inside them.
    const std::string how = s.capture == "time" ? "--delay/--duration" : s.capture;
    line("recorded", fmt::format("{} capture window{} ({}){}", s.capture_windows,
                                 s.capture_windows == 1 ? "" : "s", how,
                                 s.capture_problem.empty() ? "" : "; " + s.capture_problem));
    line("wall time", FormatDuration(s.wall_ns) + " inside the windows");
  } else {
    line("wall time", FormatDuration(s.wall_ns));
  }
  if (hint_base_ns > 0) line("steady state", SteadyStateText(s.wall_ns, hint_base_ns));
  if (!s.steady_from.empty() &&  // docs/hints.md, "Start-up and the steady state"
      s.startup_copies + s.startup_kernels > 0)
    line("start-up", fmt::format("before the first call of {}: {} copies ({}, {}), {} kernels; "
                                 "not priced",
                                 s.steady_from, s.startup_copies, FormatBytes(s.startup_copy_bytes),
                                 FormatDuration(s.startup_copy_ns), s.startup_kernels));
  if (s.self_cost)  // docs/hints.md, "kprof's own cost"
    line("kprof's own cost",
         fmt::format("{} taken out of the priced idle time ({:.2f} us a launch, {:.2f} us a call, "
                     "{:.2f} us a range; {})",
                     FormatDuration(s.self_cost_ns), s.self_cost->launch_ns / 1e3,
                     s.self_cost->api_ns / 1e3, s.self_cost->range_ns / 1e3, s.self_cost->source));
  line("GPU busy", fmt::format("{}{} ({:.1f}% of {}wall; idle {})", FormatDuration(s.gpu_busy_ns),
                               report_dist::GpusNote(s), s.utilisation * 100,
                               s.gpus > 1 ? "their " : "", FormatDuration(s.gpu_idle_ns)));
  line("kernels", fmt::format("{} ({} in kernels; {} launch calls, {:.0f}/s)", s.kernels,
                              FormatDuration(s.kernel_ns), s.launches, s.launch_rate_per_s));
  std::string copies = fmt::format("{} ({})", s.memcpys, FormatDuration(s.memcpy_ns));
  for (int i = 1; i < 6; ++i)
    if (s.memcpy_count[i])
      copies += fmt::format("; {} {} x, {}", kCopyNames[i], s.memcpy_count[i],
                            FormatBytes(s.memcpy_bytes[i]));
  if (s.memcpy_count[0])
    copies += fmt::format("; other {} x, {}", s.memcpy_count[0], FormatBytes(s.memcpy_bytes[0]));
  line("memcpy", copies);
  line("memset", fmt::format("{} ({})", s.memsets, FormatBytes(s.memset_bytes)));
  if (s.graph_launches || s.graph_node_activities || s.graph_captures || s.graph_instantiations)
    line("CUDA graphs",
         s.graph_launches
             ? fmt::format("{} launches traced as a whole ({}){}; {} captured, {} instantiated",
                           s.graph_launches, FormatDuration(s.graph_ns),
                           s.graph_device_launches
                               ? fmt::format(", {} of them from the GPU", s.graph_device_launches)
                               : std::string(),
                           s.graph_captures, s.graph_instantiations)
             : fmt::format("{} kernels/copies/memsets inside graphs; {} captured, {} instantiated",
                           s.graph_node_activities, s.graph_captures, s.graph_instantiations));
  if (s.graph_device_unrecorded)
    line("device graph launches",
         fmt::format("{} executable graph{} made for launch from the GPU: such launches are not "
                     "recorded with --graph-trace node (CUPTI records them at graph level only; "
                     "kprof run --graph-trace graph does)",
                     s.graph_device_unrecorded, s.graph_device_unrecorded == 1 ? "" : "s"));
  line("synchronization", fmt::format("{} calls, {} blocked", s.syncs, FormatDuration(s.sync_ns)));
  line("CUDA API", fmt::format("{} calls, {}", s.api_calls, FormatDuration(s.api_ns)));
  line("copy/compute overlap", FormatDuration(s.copy_compute_overlap_ns));
  line("peak device memory",
       s.allocs ? FormatBytes(static_cast<uint64_t>(std::max<int64_t>(0, s.peak_memory_bytes))) +
                      fmt::format(" ({} allocs, {} frees)", s.allocs, s.frees)
                : std::string("not recorded"));
  line("NVTX ranges", std::to_string(s.nvtx_ranges));
  if (!s.pytorch_mode.empty() || !s.pytorch_added.empty() || s.backward_linked_ns) {
    std::string py;
    if (!s.pytorch_added.empty()) {
      auto colon = s.pytorch_added.find(':');
      py = fmt::format(
          "kprof added {} ranges (--pytorch {})",
          colon == std::string::npos ? s.pytorch_added : s.pytorch_added.substr(colon + 1),
          s.pytorch_added.substr(0, colon));
      if (!s.pytorch_ops.empty()) py += "; ops from the " + s.pytorch_ops;
    } else if (!s.pytorch_mode.empty() && !s.capture.empty() && s.aten_ranges) {
      // The layer says what it added when torch is imported: before any capture window.
      py = fmt::format(
          "--pytorch {}: what it added was not recorded (torch was imported before "
          "the capture windows)",
          s.pytorch_mode);
    } else if (!s.pytorch_mode.empty()) {
      py = fmt::format("--pytorch {}: nothing added (no process imported torch{})", s.pytorch_mode,
                       s.pytorch_mode == "off" ? ", or off" : "");
    }
    if (s.backward_linked_ns)
      py += fmt::format("{}backward: {} of GPU work traced to the forward ops that made it",
                        py.empty() ? "" : "; ", FormatDuration(s.backward_linked_ns));
    line("PyTorch", py);
  }
  std::string loss =
      fmt::format("{} dropped, {} without timestamps", s.dropped_records, s.missing_timestamps);
  if (s.dropped_records || s.missing_timestamps) loss += "  << the profile is incomplete";
  line("profiler data loss", loss);
  if (s.incomplete_processes)
    line("incomplete", fmt::format("{} of {} processes ended without closing their file "
                                   "(crash or kill): partial results",
                                   s.incomplete_processes, s.processes));
  return lines;
}

std::optional<Format> ParseFormat(const std::string& s) {
  if (s == "table") return Format::Table;
  if (s == "csv") return Format::Csv;
  if (s == "json") return Format::Json;
  if (s == "md" || s == "markdown") return Format::Markdown;
  return std::nullopt;
}

void WriteReport(std::ostream& out, const Run& run, const Analysis& analysis,
                 const std::vector<Hint>& hints, const ReportOptions& opts) {
  switch (opts.format) {
    case Format::Table:
      Table(out, run, analysis, hints, opts);
      break;
    case Format::Csv:
      WriteCsv(out, analysis);
      break;
    case Format::Json:
      out << ReportJson(run, analysis, hints) << "\n";
      break;
    case Format::Markdown:
      WriteMarkdown(out, analysis, hints, opts);
      break;
  }
}

}  // namespace kprof
