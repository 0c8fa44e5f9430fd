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
        << fmt::format(" {:>10} {}", Bytes(o.live_bytes), Share(o.live_bytes, whole));
    // PyTorch's categories are blocks inside the allocator's segments, not driver allocations.
    if (o.allocations > 0)
      out << fmt::format("  {} live of {} made", o.live_allocations, o.allocations);
    out << "\n";
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

// The owners with PyTorch's allocator split by category when the PyTorch layer said what its
// blocks held, else by library.
void ByOwner(std::ostream& out, const MemoryState& s, size_t top) {
  if (s.by_owner.empty()) {
    Owners(out, "by library", s.by_library, s.live_bytes, top);
    return;
  }
  Owners(out, "by owner (PyTorch's allocator by what its blocks held)", s.by_owner, s.live_bytes,
         top);
}

// The blocks live after the last optimizer step, by the op and module that allocated them.
nlohmann::ordered_json ByOpJson(const std::vector<StepEndOwner>& owners) {
  auto by_op = nlohmann::ordered_json::array();
  for (const StepEndOwner& o : owners) {
    nlohmann::ordered_json e{{"op", o.op}};
    if (!o.module.empty()) e["module"] = o.module;
    e["category"] = std::string(TorchCategoryName(o.category));
    e["bytes"] = o.bytes;
    e["blocks"] = o.blocks;
    by_op.push_back(std::move(e));
  }
  return by_op;
}

nlohmann::ordered_json StepEndJson(const TorchMemory& t) {
  return {{"t_ns", t.step_end_t_ns},
          {"live_bytes", t.step_end_live_bytes},
          {"by_op", ByOpJson(t.step_end_by_op)}};
}

// The step-end lines of the table: the bytes live after the last optimizer step the history
// saw, by the op that allocated them (`top` lines).
void StepEnd(std::ostream& out, const TorchMemory& t, size_t top) {
  if (t.step_end_by_op.empty()) return;
  out << fmt::format(
      "    live after the last optimizer step recorded: {}, by the op that made it\n",
      Bytes(t.step_end_live_bytes));
  for (size_t i = 0; i < std::min(top, t.step_end_by_op.size()); ++i) {
    const StepEndOwner& o = t.step_end_by_op[i];
    out << fmt::format("      {:>10}  {:<16} {}{}\n", Bytes(o.bytes), TorchCategoryName(o.category),
                       o.op, o.module.empty() ? "" : " in " + o.module);
  }
}

// What the PyTorch layer found in each process's caching allocator: its own peaks, the
// categories at the allocated peak, and the bytes kept from one optimizer step to the next.
void Torch(std::ostream& out, const MemorySummary& m, bool all) {
  size_t shown = 0, exits = 0;
  for (const TorchMemory& t : m.torch) exits += t.when == "exit" ? 1 : 0;
  for (const TorchMemory& t : m.torch) {
    if (t.when != "exit" && !all) continue;
    if (!all && shown++ == 2) {
      out << fmt::format(
          "  ... {} more PyTorch processes or devices (--by memory shows every one)\n", exits - 2);
      break;
    }
    out << fmt::format(
        "  PyTorch caching allocator on GPU {}, pid {}{} ({}): peak allocated {}, "
        "peak reserved {}\n",
        t.device, t.pid, t.rank >= 0 ? fmt::format(", rank {}", t.rank) : "",
        t.when == "oom" ? "at the out-of-memory error" : "at exit", Bytes(t.max_allocated),
        Bytes(t.max_reserved));
    if (const TorchMoment* p = t.Find("allocated_peak")) {
      const std::string cats = p->Categories();
      out << fmt::format("    at the allocated peak ({} replayed{}): {}\n", Bytes(p->allocated),
                         t.complete ? "" : ", history incomplete", cats.empty() ? "-" : cats);
      std::string blocks;
      for (size_t i = 0; i < std::min<size_t>(3, p->largest.size()); ++i)
        blocks +=
            fmt::format("{}{} {}", i ? ", " : "", Bytes(p->largest[i].first), p->largest[i].second);
      if (!blocks.empty()) out << fmt::format("      largest blocks then: {}\n", blocks);
    }
    StepEnd(out, t, all ? SIZE_MAX : 3);
    if (t.unrecorded_steps > 0)
      out << fmt::format(
          "    history recorded in {} window{}: paused once the peaks held, {} optimizer step{} "
          "unrecorded\n",
          t.windows, t.windows == 1 ? "" : "s", t.unrecorded_steps,
          t.unrecorded_steps == 1 ? "" : "s");
    if (t.steps.size() >= 2)
      out << fmt::format(
          "    allocated after each optimizer step: {} after step {}, {} after step "
          "{}\n",
          Bytes(t.steps.front()), t.FirstStep(), Bytes(t.steps.back()), t.steps_total);
  }
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
  if (!s.by_owner.empty()) {
    j["by_owner"] = OwnersJson(s.by_owner);
    j["pytorch_moment"] = s.torch_moment;
    j["pytorch_matched"] = s.torch_matched;
  }
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
  // A failure the program retried with success (a capability probe) is a note, not a headline.
  std::vector<const FailedAllocation*> failures;
  const FailedAllocation* probe = nullptr;
  size_t probes = 0;
  for (const FailedAllocation& f : a.memory.failures) {
    if (!f.retried) {
      failures.push_back(&f);
    } else if (probes++ == 0) {
      probe = &f;
    }
  }
  const std::string retried =
      probes == 0 ? ""
                  : fmt::format(
                        "{} allocation call{} failed and succeeded when retried ({} error "
                        "{}{}): not a shortage",
                        probes, probes == 1 ? "" : "s", probe->call, probe->code,
                        probes > 1 ? ", ..." : "");
  if (failures.empty()) {
    if (probes > 0) out << "Note: " << retried << "\n\n";
    return;
  }
  size_t oom = 0;
  for (const FailedAllocation* f : failures) oom += f->OutOfMemory() ? 1 : 0;
  if (oom > 0)
    out << fmt::format("OUT OF MEMORY: {} allocation call{} failed{}\n", failures.size(),
                       failures.size() == 1 ? "" : "s",
                       oom < failures.size() ? fmt::format(", {} out of memory", oom) : "");
  else
    out << fmt::format("ALLOCATION FAILED: {} allocation call{} failed, none out of memory\n",
                       failures.size(), failures.size() == 1 ? "" : "s");
  if (probes > 0) out << "  (and " << retried << ")\n";
  size_t shown = 0;
  for (const FailedAllocation* fp : failures) {
    const FailedAllocation& f = *fp;
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
    ByOwner(out, s, 3);
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
    ByOwner(out, s, all ? SIZE_MAX : 3);
    if (all && !s.by_owner.empty()) Owners(out, "by library", s.by_library, s.live_bytes, SIZE_MAX);
    Owners(out, "by range of the allocating call", s.by_range, s.live_bytes, all ? SIZE_MAX : 3);
    if (all) Largest(out, s.largest);
  }
  Torch(out, m, all);
  if (m.allocations > 0 && m.sourced_allocations < m.allocations)
    out << fmt::format("  ({} of {} allocations without the library that made them)\n",
                       m.allocations - m.sourced_allocations, m.allocations);
}

void Csv(std::ostream& out, const Analysis& a, std::string (*field)(const std::string&)) {
  out << "pid,rank,device,moment,t_ns,live_bytes,view,owner,owner_bytes,live_allocations,"
         "allocations,position\n";
  const auto rank = [](int r) { return r >= 0 ? std::to_string(r) : std::string(); };
  const auto state = [&](const MemoryState& s, const char* moment) {
    const std::string device = s.device == kNoDevice ? "" : std::to_string(s.device);
    const auto rows = [&](const char* view, const std::vector<MemoryOwner>& owners) {
      for (size_t i = 0; i < owners.size(); ++i) {
        const MemoryOwner& o = owners[i];
        out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", s.pid, rank(s.rank), device,
                           moment, s.t_ns, s.live_bytes, view, field(o.name), o.live_bytes,
                           o.live_allocations, o.allocations, i);
      }
    };
    rows("library", s.by_library);
    rows("owner", s.by_owner);
    rows("range", s.by_range);
  };
  for (const MemoryState& s : a.memory.peaks) state(s, "peak");
  for (const FailedAllocation& f : a.memory.failures)
    if (f.described) state(f.state, "failure");
  // What PyTorch's allocator held after the last optimizer step, by the op that made it: the
  // view is the category, the owner the op (and module).
  for (const TorchMemory& t : a.memory.torch)
    for (size_t i = 0; i < t.step_end_by_op.size(); ++i) {
      const StepEndOwner& o = t.step_end_by_op[i];
      out << fmt::format("{},{},{},step_end,{},{},{},{},{},{},{},{}\n", t.pid, rank(t.rank),
                         t.device, t.step_end_t_ns, t.step_end_live_bytes,
                         field(std::string(TorchCategoryName(o.category))),
                         field(o.module.empty() ? o.op : o.op + " in " + o.module), o.bytes,
                         o.blocks, o.blocks, i);
    }
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
    fj["retried"] = f.retried;
    if (f.described) fj["state"] = StateJson(f.state);
    failures.push_back(std::move(fj));
  }
  mj["failed_allocations"] = std::move(failures);
  if (!m.torch.empty()) {
    auto torch = nlohmann::ordered_json::array();
    for (const TorchMemory& t : m.torch) {
      nlohmann::ordered_json tj{{"pid", t.pid},
                                {"device", t.device},
                                {"when", t.when},
                                {"t_ns", t.t_ns},
                                {"max_allocated", t.max_allocated},
                                {"max_reserved", t.max_reserved},
                                {"allocated", t.allocated},
                                {"reserved", t.reserved},
                                {"inactive_split", t.inactive_split},
                                {"replayed_max_allocated", t.replayed_max_allocated},
                                {"replayed_max_reserved", t.replayed_max_reserved},
                                {"expandable_max_reserved", t.expandable_max_reserved},
                                {"complete", t.complete},
                                {"entries", t.entries},
                                {"windows", t.windows},
                                {"unrecorded_steps", t.unrecorded_steps},
                                {"optimizer_steps", t.optimizer_steps},
                                {"backward_passes", t.backward_passes}};
      if (t.rank >= 0) tj["rank"] = t.rank;
      if (t.requested > 0) tj["requested"] = t.requested;
      tj["steps"] = t.steps;
      auto moments = nlohmann::ordered_json::array();
      for (const TorchMoment& mo : t.moments) {
        nlohmann::ordered_json cats;
        for (size_t i = 0; i < kTorchCategories; ++i)
          cats[std::string(TorchCategoryName(i))] = mo.bytes[i];
        auto largest = nlohmann::ordered_json::array();
        for (const auto& [bytes, cat] : mo.largest)
          largest.push_back({{"bytes", bytes}, {"category", cat}});
        moments.push_back({{"kind", mo.kind},
                           {"t_ns", mo.t_ns},
                           {"allocated", mo.allocated},
                           {"reserved", mo.reserved},
                           {"categories", std::move(cats)},
                           {"kept", mo.kept},
                           {"largest", std::move(largest)}});
        if (!mo.kept_by_op.empty()) moments.back()["kept_by_op"] = ByOpJson(mo.kept_by_op);
      }
      tj["moments"] = std::move(moments);
      if (t.step_end_t_ns != 0) tj["step_end"] = StepEndJson(t);
      nlohmann::ordered_json dtypes = nlohmann::ordered_json::object();
      for (size_t c = 0; c < kDtypeCategories; ++c)
        for (const auto& [name, bytes] : t.dtypes[c])
          dtypes[std::string(TorchCategoryName(c))][name] = bytes;
      if (!dtypes.empty()) tj["dtypes"] = std::move(dtypes);
      torch.push_back(std::move(tj));
    }
    mj["pytorch"] = std::move(torch);
  }
  j["memory"] = std::move(mj);
}

}  // namespace kprof::report_memory
