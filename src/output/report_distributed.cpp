// Per-GPU and per-rank tables and the collectives (report_distributed.h, docs/distributed.md).
#include "output/report_distributed.h"

#include <fmt/format.h>

#include <map>
#include <string>

#include "output/report_text.h"

namespace kprof::report_dist {
namespace {

using nlohmann::ordered_json;
using report_text::Fit;
using report_text::Md;
using report_text::Pad;

std::string Share(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%",
                             100.0 * static_cast<double>(part) / static_cast<double>(whole))
               : std::string("-");
}

/// "50 AllReduce, 1 Broadcast".
std::string Kinds(const DistributedSummary& d) {
  std::map<std::string, uint64_t> kinds;
  for (const Collective& c : d.collectives) ++kinds[c.kind];
  std::string s;
  for (const auto& [kind, n] : kinds) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, kind);
  return s;
}

/// The collectives' line: how many were matched, on how many communicators, what they were,
/// who arrived last.
std::string CollectivesLine(const DistributedSummary& d) {
  std::string s =
      fmt::format("{} matched across ranks on {} communicator{} ({})", d.collectives.size(),
                  d.communicators, d.communicators == 1 ? "" : "s", Kinds(d));
  if (d.unmatched_kernels)
    s += fmt::format("; {} communication kernels without a partner on every rank",
                     d.unmatched_kernels);
  if (d.p2p_kernels) s += fmt::format("; {} send/receive kernels (not matched)", d.p2p_kernels);
  return s;
}

std::string LastLine(const DistributedSummary& d) {
  std::string s;
  for (const RankUsage& r : d.ranks)
    if (r.last) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", r.label, r.last);
  return s.empty() ? s : "arrived last (with a wait): " + s;
}

}  // namespace

std::string GpusNote(const RunSummary& s) {
  return s.gpus > 1 ? fmt::format(" over {} GPUs", s.gpus) : std::string();
}

void Tables(std::ostream& out, const Analysis& a) {
  const DistributedSummary& d = a.dist;
  if (!d.Multi()) return;
  out << "\nGPUs (of each GPU's wall time: compute + communication only + copies only + idle = "
         "100%)\n";
  out << fmt::format("  {:<36} {:<20} {:>10} {:>10} {:>6} {:>8} {:>9} {:>9} {:>6}  {}\n", "GPU",
                     "used by", "wall", "busy", "util", "compute", "comm only", "copy only", "idle",
                     "idle gaps");
  for (const DeviceUsage& g : d.devices) {
    std::string users;
    for (const std::string& u : g.users) users += (users.empty() ? "" : ", ") + u;
    out << "  " << Pad(Fit(g.key, 36), 36) << " " << Pad(Fit(users, 20), 20)
        << fmt::format(
               " {:>10} {:>10} {:>6} {:>8} {:>9} {:>9} {:>6}  {} ({} of 1 ms or more: {})\n",
               FormatDuration(g.wall_ns), FormatDuration(g.busy_ns), Share(g.busy_ns, g.wall_ns),
               Share(g.compute_ns, g.wall_ns), Share(g.comm_only_ns, g.wall_ns),
               Share(g.copy_only_ns, g.wall_ns), Share(g.idle_ns, g.wall_ns), g.gaps, g.long_gaps,
               FormatDuration(g.long_gap_ns));
  }
  out << "\nRanks (wall = compute + communication only + copies only + idle; hidden: "
         "communication beside compute; waiting: in collectives, for a later rank)\n";
  out << fmt::format("  {:<24} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}\n", "rank",
                     "wall", "GPU busy", "compute", "comm", "hidden", "copy only", "waiting",
                     "idle");
  RankUsage sum;
  for (const RankUsage& r : d.ranks) {
    out << "  " << Pad(Fit(r.label, 24), 24)
        << fmt::format(" {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}\n",
                       FormatDuration(r.wall_ns), FormatDuration(r.busy_ns),
                       FormatDuration(r.compute_ns), FormatDuration(r.comm_ns),
                       Share(r.overlap_ns, r.comm_ns), FormatDuration(r.copy_only_ns),
                       FormatDuration(r.wait_ns), FormatDuration(r.idle_ns));
    sum.wall_ns += r.wall_ns;
    sum.busy_ns += r.busy_ns;
    sum.compute_ns += r.compute_ns;
    sum.comm_ns += r.comm_ns;
    sum.overlap_ns += r.overlap_ns;
    sum.copy_only_ns += r.copy_only_ns;
    sum.wait_ns += r.wait_ns;
    sum.idle_ns += r.idle_ns;
  }
  if (d.ranks.size() > 1)
    out << "  " << Pad("all ranks", 24)
        << fmt::format(" {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}\n",
                       FormatDuration(sum.wall_ns), FormatDuration(sum.busy_ns),
                       FormatDuration(sum.compute_ns), FormatDuration(sum.comm_ns),
                       Share(sum.overlap_ns, sum.comm_ns), FormatDuration(sum.copy_only_ns),
                       FormatDuration(sum.wait_ns), FormatDuration(sum.idle_ns));
  if (!d.collectives.empty() || d.unmatched_kernels || d.p2p_kernels) {
    out << "\nCollectives\n  " << CollectivesLine(d) << "\n";
    if (const std::string last = LastLine(d); !last.empty()) out << "  " << last << "\n";
  }
}

void Markdown(std::ostream& out, const Analysis& a) {
  const DistributedSummary& d = a.dist;
  if (!d.Multi()) return;
  out << "\n### GPUs\n\n| GPU | Used by | Wall | Busy | Util | Compute | Comm only | Copy only | "
         "Idle | Idle gaps (>= 1 ms) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const DeviceUsage& g : d.devices) {
    std::string users;
    for (const std::string& u : g.users) users += (users.empty() ? "" : ", ") + u;
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) |\n", Md(g.key),
                       Md(users), FormatDuration(g.wall_ns), FormatDuration(g.busy_ns),
                       Share(g.busy_ns, g.wall_ns), Share(g.compute_ns, g.wall_ns),
                       Share(g.comm_only_ns, g.wall_ns), Share(g.copy_only_ns, g.wall_ns),
                       Share(g.idle_ns, g.wall_ns), g.long_gaps, FormatDuration(g.long_gap_ns));
  }
  out << "\n### Ranks\n\n| Rank | Wall | GPU busy | Compute | Comm | Hidden | Copy only | "
         "Waiting | Idle |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RankUsage& r : d.ranks)
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", Md(r.label),
                       FormatDuration(r.wall_ns), FormatDuration(r.busy_ns),
                       FormatDuration(r.compute_ns), FormatDuration(r.comm_ns),
                       Share(r.overlap_ns, r.comm_ns), FormatDuration(r.copy_only_ns),
                       FormatDuration(r.wait_ns), FormatDuration(r.idle_ns));
  if (!d.collectives.empty() || d.unmatched_kernels || d.p2p_kernels) {
    out << "\nCollectives: " << Md(CollectivesLine(d));
    if (const std::string last = LastLine(d); !last.empty()) out << "; " << Md(last);
    out << "\n";
  }
}

void Json(ordered_json& j, const Analysis& a) {
  const DistributedSummary& d = a.dist;
  if (!d.Multi()) return;
  ordered_json gpus = ordered_json::array(), ranks = ordered_json::array();
  for (const DeviceUsage& g : d.devices)
    gpus.push_back({{"key", g.key},
                    {"used_by", g.users},
                    {"wall_ns", g.wall_ns},
                    {"busy_ns", g.busy_ns},
                    {"utilisation", g.utilisation},
                    {"compute_ns", g.compute_ns},
                    {"comm_ns", g.comm_ns},
                    {"comm_only_ns", g.comm_only_ns},
                    {"copy_only_ns", g.copy_only_ns},
                    {"idle_ns", g.idle_ns},
                    {"gaps", g.gaps},
                    {"long_gaps", g.long_gaps},
                    {"long_gap_ns", g.long_gap_ns}});
  for (const RankUsage& r : d.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"pid", r.pid},
                     {"devices", r.devices},
                     {"wall_ns", r.wall_ns},
                     {"busy_ns", r.busy_ns},
                     {"compute_ns", r.compute_ns},
                     {"comm_ns", r.comm_ns},
                     {"overlap_ns", r.overlap_ns},
                     {"comm_only_ns", r.comm_only_ns},
                     {"copy_only_ns", r.copy_only_ns},
                     {"idle_ns", r.idle_ns},
                     {"kernels", r.kernels},
                     {"kernel_ns", r.kernel_ns},
                     {"comm_kernels", r.comm_kernels},
                     {"comm_kernel_ns", r.comm_kernel_ns},
                     {"collectives", r.collectives},
                     {"arrived_last", r.last},
                     {"wait_ns", r.wait_ns},
                     {"exposed_wait_ns", r.exposed_wait_ns}});
  ordered_json kinds = ordered_json::object();
  for (const Collective& c : d.collectives) {
    auto& k = kinds[c.kind];
    if (k.is_null()) k = {{"calls", 0}, {"spread_ns", 0}};
    k["calls"] = k["calls"].get<uint64_t>() + 1;
    k["spread_ns"] = k["spread_ns"].get<uint64_t>() + c.spread_ns;
  }
  j["gpus"] = gpus;
  j["ranks"] = ranks;
  j["collectives"] = {{"matched", d.collectives.size()},
                      {"communicators", d.communicators},
                      {"unmatched_kernels", d.unmatched_kernels},
                      {"p2p_kernels", d.p2p_kernels},
                      {"by_kind", kinds}};
}

}  // namespace kprof::report_dist
