// Mapping of Chrome trace events to kprof records. See docs/chrome-trace.md for the mapping.
#include "format/chrome_records.h"

#include <algorithm>
#include <utility>

#include "format/json_pull.h"

namespace kprof::chrome {
namespace {

// Names as Kineto writes them, in the order of the enum values from 1 (0 is Unknown).
constexpr std::string_view kMemKindNames[] = {"Pageable", "Pinned",       "Device",       "Array",
                                              "Managed",  "DeviceStatic", "ManagedStatic"};
constexpr std::string_view kSyncKindNames[] = {"Event Sync", "Stream Wait Event", "Stream Sync",
                                               "Context Sync"};
constexpr std::string_view kOverheadKindNames[] = {"Buffer Flush",
                                                   "Instrumentation",
                                                   "Resource",
                                                   "Runtime Triggered Module Loading",
                                                   "Lazy Function Loading",
                                                   "Command Buffer Full",
                                                   "Activity Buffer Request",
                                                   "UVM Activity Init",
                                                   "Driver Compiler",
                                                   "Counter Replay",
                                                   "Counter Setup"};

/// The enum value named `name` in `names` (see above), else 0 (Unknown).
template <class E, size_t N>
E FromName(std::string_view name, const std::string_view (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<E>(i + 1);
  return static_cast<E>(0);
}

MemKind MemKindFromName(std::string_view s) {
  // Kineto spells the static kinds "Device Static", CUPTI "DeviceStatic": both are accepted.
  constexpr std::string_view kSpaced = " Static";
  if (s.size() > kSpaced.size() && s.ends_with(kSpaced)) {
    std::string joined(s.substr(0, s.size() - kSpaced.size()));
    return FromName<MemKind>(joined + "Static", kMemKindNames);
  }
  return FromName<MemKind>(s, kMemKindNames);
}

/// The first copy direction ("HtoD", ...) that the name contains.
CopyKind CopyKindFromName(std::string_view name) {
  for (uint8_t k = 1; k <= static_cast<uint8_t>(CopyKind::PtoP); ++k)
    if (name.find(CopyKindName(k)) != std::string_view::npos) return static_cast<CopyKind>(k);
  return CopyKind::Unknown;
}

/// The kinds in a copy's or memset's name: "Memcpy HtoD (Pageable -> Device)" -> (Pageable,
/// Device); "Memset (Device)" -> (Device, Unknown).
std::pair<MemKind, MemKind> MemKindsFromName(std::string_view name, bool copy) {
  constexpr std::pair<MemKind, MemKind> kNone{MemKind::Unknown, MemKind::Unknown};
  size_t open = name.find('(');
  size_t close = name.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || open > close)
    return kNone;
  if (!copy) return {MemKindFromName(name.substr(open + 1, close - open - 1)), MemKind::Unknown};
  size_t arrow = name.find("->");
  if (arrow == std::string_view::npos || !(open < arrow && arrow < close)) return kNone;
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  return {MemKindFromName(trim(name.substr(open + 1, arrow - open - 1))),
          MemKindFromName(trim(name.substr(arrow + 2, close - arrow - 2)))};
}

uint32_t U32(int64_t v) {
  if (v < 0) return 0;
  if (v > int64_t{UINT32_MAX}) return UINT32_MAX;
  return static_cast<uint32_t>(v);
}
uint16_t U16(int64_t v) {
  if (v < 0 || v >= kNoDevice) return kNoDevice;
  return static_cast<uint16_t>(v);
}

[[noreturn]] void EventError(const RawEvent& e, const char* what) {
  throw json::ParseError{e.at, what};
}

}  // namespace

void RecordChunks::Push(const Record& r) {
  if (chunks_.empty() || fill_ == kPerChunk) {
    chunks_.push_back(std::make_unique<Record[]>(kPerChunk));
    fill_ = 0;
  }
  chunks_.back()[fill_++] = r;
  ++size_;
}

uint32_t RecordBuilder::Intern(std::string_view s) {
  if (s.empty()) return 0;
  auto it = intern_.find(s);
  if (it != intern_.end()) return it->second;
  uint32_t id = strings_.Intern(s);
  const std::string& stored = arena_.emplace_back(s);
  intern_.emplace(std::string_view(stored), id);
  return id;
}

RecordBuilder::PidData& RecordBuilder::Cpu(int64_t pid) {
  if (last_cpu_ != nullptr && last_cpu_->pid == pid) return *last_cpu_;
  for (auto& p : cpu_) {
    if (p->pid == pid) return *(last_cpu_ = p.get());
  }
  cpu_.push_back(std::make_unique<PidData>());
  cpu_.back()->pid = pid;
  return *(last_cpu_ = cpu_.back().get());
}

void RecordBuilder::AddMeta(const RawEvent& e) {
  if (e.pid_is_string || !(e.has & kHasPid) || e.arg_name.empty()) return;
  if (e.name == "process_name")
    pending_meta_.push_back({e.pid, "process_name", std::string(e.arg_name)});
  else if (e.name == "thread_name")
    pending_meta_.push_back(
        {e.pid, "thread." + std::to_string(e.tid) + ".name", std::string(e.arg_name)});
}

void RecordBuilder::AddMemory(const RawEvent& e, Record& r) {
  if (e.cat != "cpu_instant_event" || e.name != "[memory]" || !(e.has & kHasMemBytes) ||
      ((e.has & kHasDeviceType) && e.device_type != 1) || e.mem_bytes == 0)
    return;
  r.kind = static_cast<uint8_t>(e.mem_bytes > 0 ? RecordKind::MemAlloc : RecordKind::MemFree);
  r.end_ns = r.start_ns;
  r.device = U16(e.mem_device);
  r.bytes = static_cast<uint64_t>(e.mem_bytes > 0 ? e.mem_bytes : -e.mem_bytes);
  auto addr = static_cast<uint64_t>(e.addr);
  r.a = static_cast<uint32_t>(addr);
  r.b = static_cast<uint32_t>(addr >> 32);
  r.c = static_cast<uint32_t>(MemKind::Device);
  r.tid = static_cast<uint32_t>(e.tid);
  r.correlation = 0;
  Cpu(e.pid).records.Push(r);
}

RecordBuilder::Place RecordBuilder::Categorize(const RawEvent& e, Record& r) {
  std::string_view cat = e.cat;
  if (cat == "kernel") {
    r.kind = static_cast<uint8_t>(RecordKind::Kernel);
    SetKernelLaunch(r, {U32(e.grid[0]), U32(e.grid[1]), U32(e.grid[2])},
                    {U32(e.block[0]), U32(e.block[1]), U32(e.block[2])}, U32(e.regs), U32(e.smem));
    return Place::Gpu;
  }
  if (cat == "gpu_memcpy" || cat == "gpu_memset") {
    bool copy = cat == "gpu_memcpy";
    auto [first, second] = MemKindsFromName(e.name, copy);
    r.kind = static_cast<uint8_t>(copy ? RecordKind::Memcpy : RecordKind::Memset);
    if (copy) {
      r.flags = static_cast<uint8_t>(CopyKindFromName(e.name));
      r.a = static_cast<uint32_t>(first);
    }
    r.b = static_cast<uint32_t>(copy ? second : first);
    r.bytes = static_cast<uint64_t>(std::max<int64_t>(e.bytes, 0));
    return Place::Gpu;
  }
  if (cat == "gpu_user_annotation") {
    r.kind = static_cast<uint8_t>(RecordKind::GpuRange);
    r.b = Intern("user_annotation");
    return Place::Gpu;
  }
  if (cat == "cuda_sync") {
    r.kind = static_cast<uint8_t>(RecordKind::Sync);
    r.flags = static_cast<uint8_t>(FromName<SyncKind>(e.name, kSyncKindNames));
    r.a = U32(e.stream);
    r.tid = 0;
    if (e.has & kHasDevice) r.device = U16(e.device);
    return Place::Linked;
  }
  r.tid = static_cast<uint32_t>(e.tid);
  if (cat == "cuda_runtime" || cat == "cuda_driver") {
    r.kind = static_cast<uint8_t>(cat == "cuda_runtime" ? RecordKind::RuntimeApi
                                                        : RecordKind::DriverApi);
    r.a = U32(e.cbid);
    return Place::Cpu;
  }
  if (cat == "cpu_op" || cat == "user_annotation") {
    r.kind = static_cast<uint8_t>(RecordKind::Range);
    uint32_t& domain = cat == "cpu_op" ? cpu_op_id_ : user_annotation_id_;
    if (domain == 0) domain = Intern(cat);
    r.b = domain;
    // Autograd's sequence number, plus one, as kprof's op observer records it (format.md).
    if ((e.has & kHasSeq) != 0 && e.seq >= 0 && e.seq < int64_t{UINT32_MAX})
      r.d = static_cast<uint32_t>(e.seq) + 1;
    return Place::Cpu;
  }
  if (cat == "kprof_capture") {  // kprof's own capture windows (chrome_process_events.cpp)
    r.kind = static_cast<uint8_t>(RecordKind::CaptureWindow);
    r.device = kNoDevice;
    if (e.pid >= 0) pending_meta_.push_back({e.pid, "capture", std::string(e.name)});
    return e.pid < 0 ? Place::Unowned : Place::Cpu;
  }
  if (cat == "overhead") {
    r.kind = static_cast<uint8_t>(RecordKind::Overhead);
    r.a = static_cast<uint32_t>(FromName<OverheadKind>(e.name, kOverheadKindNames));
    return e.pid < 0 ? Place::Unowned : Place::Cpu;
  }
  return Place::Ignored;  // python_function, Trace spans, unknown categories: not used by kprof
}

void RecordBuilder::Add(const RawEvent& e) {
  if (e.ph.size() != 1) {
    if (e.ph.empty() && !(e.has & kHasTs) && e.cat.empty() && e.name.empty()) return;  // {}
    if (e.ph.empty()) EventError(e, "trace event without \"ph\"");
    return;  // unknown phases are ignored
  }
  const char ph = e.ph[0];
  if (ph == 'M') return AddMeta(e);
  if (ph != 'X' && ph != 'i' && ph != 'I') return;  // flows (ac2g), counters, B/E: ignored
  if (e.pid_is_string) return;                      // "Spans"/"Traces" tracks
  if (!(e.has & kHasTs)) EventError(e, "trace event without \"ts\"");
  if (e.dur < 0) EventError(e, "negative \"dur\"");

  Record r;
  r.start_ns = static_cast<uint64_t>(e.ts);  // relative; the base is added at the end
  // dur >= 0: only a positive ts can overflow (INT64_MAX - ts itself overflows for ts < 0).
  r.end_ns = static_cast<uint64_t>(e.ts > 0 && e.dur > INT64_MAX - e.ts ? INT64_MAX : e.ts + e.dur);
  r.correlation = U32(e.correlation);
  r.device = kNoDevice;
  if (ph != 'X') return AddMemory(e, r);

  Place place = Categorize(e, r);
  if (place == Place::Ignored) return;
  r.name = Intern(e.name);
  switch (place) {
    case Place::Gpu:
      r.device = U16((e.has & kHasDevice) ? e.device : e.pid);
      r.tid = U32((e.has & kHasStream) ? e.stream : e.tid);
      gpu_.Push(r);
      break;
    case Place::Unowned:
      gpu_.Push(r);
      break;
    case Place::Linked:
      // A sync drawn on a CPU process's track stays there; one on a device track is linked by
      // correlation like GPU work. Which pids are CPU processes is only known at the end.
      linked_.push_back({e.pid, r});
      break;
    default:
      Cpu(e.pid).records.Push(r);
  }
}

uint64_t RecordBuilder::Absolute(uint64_t rel) const {
  int64_t v = static_cast<int64_t>(rel);
  if (v < 0 && base_ns <= -(v + 1)) return 0;  // before 0 (-(v + 1): -v overflows for INT64_MIN)
  // Unsigned: a relative time near INT64_MAX plus the base does not fit an int64_t.
  return rel + static_cast<uint64_t>(base_ns);
}

// Owner of each GPU record: the only process, or the one whose API call has the same
// correlation id (the latest such call starting no later than the GPU work), else the first.
std::vector<uint16_t> RecordBuilder::GpuOwners() {
  std::vector<uint16_t> owner;
  const size_t np = cpu_.size();
  if (np == 1) return owner;
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint16_t>>> by_corr;
  for (size_t i = 0; i < np; ++i) {
    cpu_[i]->records.ForEach([&](const Record& r) {
      if (r.correlation != 0 &&
          (r.Kind() == RecordKind::RuntimeApi || r.Kind() == RecordKind::DriverApi))
        by_corr[r.correlation].emplace_back(r.start_ns, static_cast<uint16_t>(i));
    });
  }
  owner.reserve(gpu_.size());
  gpu_.ForEach([&](const Record& r) {
    uint16_t o = 0;
    auto it = r.correlation != 0 ? by_corr.find(r.correlation) : by_corr.end();
    if (it != by_corr.end()) {
      const auto& cands = it->second;
      o = cands.front().second;
      int64_t best = INT64_MIN;
      for (auto& [t, idx] : cands) {
        auto ts = static_cast<int64_t>(t);
        if (ts <= static_cast<int64_t>(r.start_ns) && ts > best) {
          best = ts;
          o = idx;
        }
      }
    }
    owner.push_back(o);
  });
  return owner;
}

Run RecordBuilder::Finish() {
  // Syncs on a CPU process's track go to it; the others are handled like GPU work.
  for (auto& [pid, r] : linked_) {
    bool cpu_pid = false;
    for (auto& p : cpu_)
      if (p->pid == pid) cpu_pid = true;
    if (cpu_pid)
      Cpu(pid).records.Push(r);
    else
      gpu_.Push(r);
  }
  linked_.clear();
  linked_.shrink_to_fit();

  Run run;
  if (cpu_.empty()) Cpu(0);  // GPU-only or empty trace: one anonymous process
  const size_t np = cpu_.size();
  std::vector<uint16_t> owner = GpuOwners();

  std::vector<size_t> counts(np, 0);
  for (size_t i = 0; i < np; ++i) counts[i] = cpu_[i]->records.size();
  if (np == 1) {
    counts[0] += gpu_.size();
  } else {
    for (uint16_t o : owner) ++counts[o];
  }

  run.processes.resize(np);
  for (size_t i = 0; i < np; ++i) {
    ProcessTrace& p = run.processes[i];
    p.source = path_;
    p.pid = static_cast<uint32_t>(cpu_[i]->pid);
    p.rank = rank;
    p.complete = true;
    p.records.reserve(counts[i]);
    cpu_[i]->records.Drain([&](const Record& r) { p.records.push_back(r); });
  }
  size_t gi = 0;
  gpu_.Drain([&](const Record& r) {
    size_t o = np == 1 ? 0 : owner[gi];
    ++gi;
    run.processes[o].records.push_back(r);
  });
  owner.clear();
  owner.shrink_to_fit();

  for (size_t i = 0; i < np; ++i) {
    ProcessTrace& p = run.processes[i];
    for (Record& r : p.records) {
      r.start_ns = Absolute(r.start_ns);
      r.end_ns = Absolute(r.end_ns);
    }
    p.stats.records_written = p.records.size();
    p.meta = top_meta;
    for (auto& [k, v] : device_meta) p.meta[k] = v;
    p.meta["format"] = "chrome";
    for (auto& m : pending_meta_)
      if (m.pid == cpu_[i]->pid) p.meta[m.key] = m.value;
    // The string table is shared by all processes (ids are the same); the last one takes it.
    if (i + 1 == np)
      p.strings = std::move(strings_);
    else
      p.strings = strings_;
  }
  return run;
}

}  // namespace kprof::chrome
