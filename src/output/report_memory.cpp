#include "output/report_memory.h"

#include <fmt/format.h>

#include <string>

#include "output/report_text.h"

namespace kprof::report_memory {
namespace {

using report_text::Fit;
using report_text::Pad;

std::string Bytes(int64_t b) { return FormatBytes(b > 0 ? static_cast<uint64_t>(b) : 0); }

std::string Where(const MemoryState& s) {
  std::string w = s.device == kNoDevice ? std::string("GPU ?") : fmt::format("GPU {}", s.device);
  w += fmt::format(", pid {}", s.pid);
  if (s.rank >= 0) w += fmt::format(", rank {}", s.rank);
  return w;
}

std::string Share(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:5.1f}%",
                                 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                   : std::string("     -");
}

void Owners(std::ostream& out, const char* title, const std::vector<MemoryOwner>& owners,
            int64_t whole, size_t top) {
  if (owners.empty()) return;
  out << "  " << title << "\n";
  size_t n = 0;
  for (const MemoryOwner& o : owners) {
    if (n++ == top) break;
    out << "    " << Pad(Fit(o.name, 56), 56)
        << fmt::format(" {:>10} {}  {} live of {} made\n", Bytes(o.live_bytes),
                       Share(o.live_bytes, whole), o.live_allocations, o.allocations);
  }
}

void Largest(std::ostream& out, const std::vector<LiveAllocation>& largest) {
  if (largest.empty()) return;
  out << "  largest live allocations\n";
  for (const LiveAllocation& l : largest) {
    std::string what = l.library;
    if (!l.variable.empty()) what += " '" + l.variable + "'";
    if (!l.range.empty()) what += " in " + l.range;
    out << fmt::format("    {:>10}  0x{:x}  {}\n", FormatBytes(l.bytes), l.address, Fit(what, 80));
  }
}

std::string Capacity(const MemoryState& s) {
  if (s.capacity_bytes == 0) return "";
  return fmt::format(" ({} of the GPU's {})",
                     fmt::format("{:.1f}%", 100.0 * static_cast<double>(s.live_bytes) /
                                                static_cast<double>(s.capacity_bytes)),
                     FormatBytes(s.capacity_bytes));
}

std::string Partial(const MemoryState& s) {
  return s.partial ? " (allocations inside the capture windows only)" : "";
}

nlohmann::ordered_json OwnersJson(const std::vector<MemoryOwner>& owners) {
  auto arr = nlohmann::ordered_json::array();
  for (const MemoryOwner& o : owners)
    arr.push_back({{"owner", o.name},
                   {"live_bytes", o.live_bytes},
                   {"live_allocations", o.live_allocations},
                   {"allocations", o.allocations}});
  return arr;
}

nlohmann::ordered_json StateJson(const MemoryState& s) {
  nlohmann::ordered_json j;
  j["pid"] = s.pid;
  if (s.rank >= 0) j["rank"] = s.rank;
  if (s.device != kNoDevice) j["device"] = s.device;
  j["t_ns"] = s.t_ns;
  j["since_start_ns"] = s.since_start_ns;
  j["live_bytes"] = s.live_bytes;
  j["partial"] = s.partial;
  if (s.capacity_bytes) j["capacity_bytes"] = s.capacity_bytes;
  if (!s.range.empty()) j["range"] = s.range;
  j["by_library"] = OwnersJson(s.by_library);
  j["by_range"] = OwnersJson(s.by_range);
  auto largest = nlohmann::ordered_json::array();
  for (const LiveAllocation& l : s.largest) {
    nlohmann::ordered_json e{
        {"bytes", l.bytes}, {"address", l.address}, {"t_ns", l.t_ns}, {"library", l.library}};
    if (!l.range.empty()) e["range"] = l.range;
    if (!l.variable.empty()) e["variable"] = l.variable;
    largest.push_back(std::move(e));
  }
  j["largest"] = std::move(largest);
  return j;
}

}  // namespace

void OutOfMemory(std::ostream& out, const Analysis& a) {
  const auto& failures = a.memory.failures;
  if (failures.empty()) return;
  size_t oom = 0;
  for (const FailedAllocation& f : failures) oom += f.OutOfMemory() ? 1 : 0;
  if (oom > 0)
    out << fmt::format("OUT OF MEMORY: {} allocation call{} failed{}\n", failures.size(),
                       failures.size() == 1 ? "" : "s",
                       oom < failures.size() ? fmt::format(", {} out of memory", oom) : "");
  else
    out << fmt::format("ALLOCATION FAILED: {} allocation call{} failed, none out of memory\n",
                       failures.size(), failures.size() == 1 ? "" : "s");
  size_t shown = 0;
  for (const FailedAllocation& f : failures) {
    if (shown++ == 3) {
      out << fmt::format("  ... {} more (kprof report --format json lists them all)\n",
                         failures.size() - 3);
      break;
    }
    const MemoryState& s = f.state;
    out << fmt::format("  {} asked for {}{} at {} and failed (error {}{}) on {}{}\n", f.call,
                       FormatBytes(f.bytes), f.pinned_host ? " of pinned host memory" : "",
                       FormatDuration(s.since_start_ns), f.code,
                       f.OutOfMemory() ? ": out of memory" : "", Where(s),
                       f.range.empty() ? "" : ", in " + f.range);
    if (f.pinned_host) continue;  // host memory: the GPU's owners do not bear on it
    if (!f.described) {
      out << fmt::format(
          "  held then: not described (the first {} failures of a process and "
          "its last are)\n",
          kDescribedFailures);
      continue;
    }
    out << fmt::format("  held then by the process's allocations: {}{}{}\n", Bytes(s.live_bytes),
                       Capacity(s), Partial(s));
    Owners(out, "by library", s.by_library, s.live_bytes, 3);
    Owners(out, "by range of the allocating call", s.by_range, s.live_bytes, 3);
  }
  out << "\n";
}

void Peaks(std::ostream& out, const Analysis& a, bool all) {
  const MemorySummary& m = a.memory;
  if (m.peaks.empty()) return;
  out << (all ? "" : "\n") << "Device memory (the process's allocations at their peak, by owner)\n";
  size_t shown = 0;
  for (const MemoryState& s : m.peaks) {
    if (!all && shown++ == 2) {
      out << fmt::format("  ... {} more processes or devices (--by memory shows every one)\n",
                         m.peaks.size() - 2);
      break;
    }
    out << fmt::format("  peak {} on {} at {}{}{}{}\n", Bytes(s.live_bytes), Where(s),
                       FormatDuration(s.since_start_ns), Capacity(s),
                       s.range.empty() ? "" : ", in " + s.range, Partial(s));
    Owners(out, "by library", s.by_library, s.live_bytes, all ? SIZE_MAX : 3);
    Owners(out, "by range of the allocating call", s.by_range, s.live_bytes, all ? SIZE_MAX : 3);
    if (all) Largest(out, s.largest);
  }
  if (m.allocations > 0 && m.sourced_allocations < m.allocations)
    out << fmt::format("  ({} of {} allocations without the library that made them)\n",
                       m.allocations - m.sourced_allocations, m.allocations);
}

void Json(nlohmann::ordered_json& j, const Analysis& a) {
  const MemorySummary& m = a.memory;
  if (m.peaks.empty() && m.failures.empty()) return;
  nlohmann::ordered_json mj;
  mj["allocations"] = m.allocations;
  mj["sourced_allocations"] = m.sourced_allocations;
  auto peaks = nlohmann::ordered_json::array();
  for (const MemoryState& s : m.peaks) peaks.push_back(StateJson(s));
  mj["peaks"] = std::move(peaks);
  auto failures = nlohmann::ordered_json::array();
  for (const FailedAllocation& f : m.failures) {
    nlohmann::ordered_json fj{{"call", f.call},
                              {"bytes", f.bytes},
                              {"code", f.code},
                              {"pinned_host", f.pinned_host},
                              {"tid", f.tid}};
    if (!f.range.empty()) fj["range"] = f.range;
    fj["out_of_memory"] = f.OutOfMemory();
    if (f.described) fj["state"] = StateJson(f.state);
    failures.push_back(std::move(fj));
  }
  mj["failed_allocations"] = std::move(failures);
  j["memory"] = std::move(mj);
}

}  // namespace kprof::report_memory
