// kprof's own tables (KPROF_*: the views, hints and device memory by owner `kprof report`
// prints) and the run-level tables nsys also has (PROCESSES, ANALYSIS_DETAILS, TARGET_INFO_*).
#include <cstdint>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/memory.h"
#include "kprof/sqlite_export.h"
#include "output/sqlite_internal.h"

namespace kprof::sqlite {
namespace {

constexpr const char* kStatColumns = "count, total_ns, mean_ns, min_ns, median_ns, p95_ns, max_ns";

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out += lines[i];
  }
  return out;
}

/// "2025-01-02T03:04:05.123456789Z" (UTC) or the local time with its offset; empty when the
/// time cannot be converted.
std::string FormatTime(uint64_t epoch_ns, bool utc) {
  const auto secs = static_cast<std::time_t>(epoch_ns / 1'000'000'000u);
  std::tm tm{};
  if ((utc ? gmtime_r(&secs, &tm) : localtime_r(&secs, &tm)) == nullptr) return "";
  char buf[64];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) == 0) return "";
  std::string s = buf;
  const std::string frac = std::to_string(epoch_ns % 1'000'000'000u);
  s += "." + std::string(9 - frac.size(), '0') + frac;
  if (utc) return s + "Z";
  if (std::strftime(buf, sizeof buf, "%z", &tm) == 0) return s;
  return s + buf;
}

void WriteMeta(Context& c) {
  const RunSummary& S = c.analysis.summary;
  Stmt st(c.db, InsertSql("KPROF_META", "key, value"));
  auto put = [&](const char* key, const std::string& value) { st.Insert(key, value); };
  auto num = [&](const char* key, auto v) { put(key, std::to_string(v)); };
  put("kprof_version", KPROF_VERSION);
  num("schema_version", kSqliteSchemaVersion);
  num("session_start_ns", c.base_ns);
  put("time_unit", "ns since session_start_ns");
  num("wall_ns", S.wall_ns);
  num("gpu_busy_ns", S.gpu_busy_ns);
  num("gpu_idle_ns", S.gpu_idle_ns);
  num("utilisation", S.utilisation);
  num("kernel_ns", S.kernel_ns);
  num("kernels", S.kernels);
  num("memcpys", S.memcpys);
  num("memcpy_ns", S.memcpy_ns);
  num("memsets", S.memsets);
  num("memset_bytes", S.memset_bytes);
  num("syncs", S.syncs);
  num("sync_ns", S.sync_ns);
  num("api_calls", S.api_calls);
  num("api_ns", S.api_ns);
  num("launches", S.launches);
  num("launch_rate_per_s", S.launch_rate_per_s);
  num("copy_compute_overlap_ns", S.copy_compute_overlap_ns);
  num("peak_memory_bytes", S.peak_memory_bytes);
  num("allocs", S.allocs);
  num("frees", S.frees);
  num("nvtx_ranges", S.nvtx_ranges);
  num("dropped_records", S.dropped_records);
  num("missing_timestamps", S.missing_timestamps);
  num("processes", S.processes);
  num("incomplete_processes", S.incomplete_processes);
  num("overhead_ns", S.overhead_ns);
  num("unattributed_gpu_ns", c.analysis.unattributed_gpu_ns);
  num("hints", c.hints.size());
}

void WriteProcesses(Context& c) {
  Stmt kp(c.db, InsertSql("KPROF_PROCESSES",
                          "id, pid, globalPid, rank, source, complete, records, wall_ns, "
                          "gpu_busy_ns, kernels, kernel_ns, dropped_records"));
  Stmt np(c.db, InsertSql("PROCESSES", "globalPid, pid, name"));
  const auto& procs = c.timeline.processes;
  for (size_t i = 0; i < procs.size(); ++i) {
    const ProcessTrace& p = *procs[i].process;
    ProcessSummary ps;
    if (i < c.analysis.processes.size()) ps = c.analysis.processes[i];
    std::optional<int64_t> rank;
    if (p.rank >= 0) rank = p.rank;
    kp.Insert(static_cast<int64_t>(i), p.pid, GlobalPid(p.pid), rank, p.source, p.complete ? 1 : 0,
              p.records.size(), ps.wall_ns, ps.gpu_busy_ns, ps.kernels, ps.kernel_ns,
              p.stats.dropped_records);
    // nsys's process name: the program, from the recorded command line.
    std::string name;
    if (auto it = p.meta.find("cmdline"); it != p.meta.end()) {
      name = it->second.substr(0, it->second.find(' '));
      name = name.substr(name.find_last_of('/') + 1);
    }
    np.Insert(GlobalPid(p.pid), p.pid, name);
  }
}

void WriteViews(Context& c, Strings& strings) {
  const Analysis& an = c.analysis;
  Stmt kernels(c.db, InsertSql("KPROF_KERNELS",
                               std::string("id, name, nameId, ") + kStatColumns +
                                   ", share, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
                                   "registers, shared_mem, max_blocks"));
  for (size_t i = 0; i < an.kernels.size(); ++i) {
    const KernelRow& k = an.kernels[i];
    const Stat& s = k.stat;
    kernels.Insert(static_cast<int64_t>(i), k.name, strings.Id(k.name), s.count, s.total_ns,
                   s.mean_ns, s.min_ns, s.median_ns, s.p95_ns, s.max_ns, k.share, k.grid.x,
                   k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z, k.registers, k.shared_mem,
                   k.max_blocks);
  }

  Stmt ops(c.db, InsertSql("KPROF_OPS",
                           "id, name, calls, gpu_ns, gpu_projected_ns, cpu_ns, kernels, memcpys, "
                           "memsets, bytes, share, mem_delta_bytes"));
  Stmt op_kernels(
      c.db, InsertSql("KPROF_OP_KERNELS", std::string("op_id, name, ") + kStatColumns + ", share"));
  for (size_t i = 0; i < an.ops.size(); ++i) {
    const GroupRow& g = an.ops[i];
    const auto id = static_cast<int64_t>(i);
    ops.Insert(id, g.key, g.calls, g.gpu_ns, g.gpu_projected_ns, g.cpu_ns, g.kernels, g.memcpys,
               g.memsets, g.bytes, g.share, g.mem_delta_bytes);
    for (const KernelRow& k : g.kernel_rows) {
      const Stat& s = k.stat;
      op_kernels.Insert(id, k.name, s.count, s.total_ns, s.mean_ns, s.min_ns, s.median_ns, s.p95_ns,
                        s.max_ns, k.share);
    }
  }

  Stmt ranges(c.db, InsertSql("KPROF_RANGES",
                              std::string("id, name, domain, calls, total_ns, mean_ns, min_ns, "
                                          "median_ns, p95_ns, max_ns, max_depth")));
  for (size_t i = 0; i < an.ranges.size(); ++i) {
    const RangeRow& r = an.ranges[i];
    const Stat& s = r.stat;
    ranges.Insert(static_cast<int64_t>(i), r.name, r.domain, r.calls, s.total_ns, s.mean_ns,
                  s.min_ns, s.median_ns, s.p95_ns, s.max_ns, r.max_depth);
  }

  Stmt streams(c.db, InsertSql("KPROF_STREAMS", "deviceId, streamId, busy_ns, activities"));
  for (const StreamBusy& s : an.summary.streams)
    streams.Insert(s.device, s.stream, s.busy_ns, s.activities);
}

void WriteHints(Context& c) {
  Stmt st(c.db, InsertSql("KPROF_HINTS",
                          "id, rule, severity, title, est_saving_ns, est_saving_pct, evidence, "
                          "assumption, fix_cuda, fix_pytorch"));
  for (size_t i = 0; i < c.hints.size(); ++i) {
    const Hint& h = c.hints[i];
    st.Insert(static_cast<int64_t>(i), h.id, SeverityName(h.severity), h.summary, h.est_saving_ns,
              h.est_saving_pct, Join(h.evidence), h.assumption, h.fix_cuda, h.fix_pytorch);
  }
}

std::optional<int64_t> RankOf(int rank) {
  if (rank < 0) return std::nullopt;
  return rank;
}

/// NULL for an empty string.
std::optional<std::string_view> Text(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return std::string_view(s);
}

/// KPROF_MEMORY_STATES and the rows beneath each state (its owners, its largest allocations).
class MemoryStates {
 public:
  /// torch: the rows of KPROF_PYTORCH_MEMORY (their ids: the index), for torchId.
  MemoryStates(Context& c, const std::vector<TorchMemory>& torch)
      : c_(c),
        torch_(torch),
        states_(c.db, InsertSql("KPROF_MEMORY_STATES",
                                "id, globalPid, pid, rank, deviceId, moment, timestamp, liveBytes, "
                                "capacityBytes, range, torchMoment, torchMatched, partial, "
                                "failedCall, requestedBytes, errorCode, torchId, "
                                "torchMomentPosition")),
        owners_(c.db, InsertSql("KPROF_MEMORY_OWNERS",
                                "stateId, view, name, liveBytes, liveAllocations, "
                                "madeAllocations, position")),
        live_(c.db, InsertSql("KPROF_MEMORY_LIVE",
                              "stateId, bytes, address, timestamp, owner, range, variable")) {}

  /// A peak: the state's own range is the op range open when the peak was reached.
  void Peak(const MemoryState& s) { Write(s, "peak", s.range, true, nullptr); }
  /// A failed allocation call: its range is the one open on the calling thread; an undescribed
  /// failure's state holds no owners (liveBytes NULL).
  void Failure(const FailedAllocation& f) { Write(f.state, "failure", f.range, f.described, &f); }

 private:
  void Write(const MemoryState& s, const char* moment, const std::string& range, bool described,
             const FailedAllocation* f) {
    const int64_t id = next_id_++;
    std::optional<int64_t> device, live, capacity;
    if (s.device != kNoDevice) device = s.device;
    if (described) live = s.live_bytes;
    if (s.capacity_bytes != 0) capacity = s.capacity_bytes;
    std::optional<std::string_view> call;
    std::optional<int64_t> requested, code;
    if (f != nullptr) {
      call = f->call;
      requested = f->bytes;
      code = f->code;
    }
    // The payload the moment was joined from, and the moment's position in it: an exact join
    // with KPROF_PYTORCH_MEMORY_MOMENTS on (torchId, position).
    std::optional<int64_t> torch_id, torch_position;
    for (size_t i = 0; s.torch_matched && i < torch_.size(); ++i)
      if (torch_[i].pid == s.pid && torch_[i].rank == s.rank && torch_[i].device == s.device &&
          torch_[i].t_ns == s.torch_t_ns) {
        torch_id = static_cast<int64_t>(i);
        torch_position = static_cast<int64_t>(s.torch_moment_index);
        break;
      }
    states_.Insert(id, GlobalPid(s.pid), s.pid, RankOf(s.rank), device, moment, c_.Rel(s.t_ns),
                   live, capacity, Text(range), Text(s.torch_moment), s.torch_matched ? 1 : 0,
                   s.partial ? 1 : 0, call, requested, code, torch_id, torch_position);
    Owners(id, "library", s.by_library);
    Owners(id, "owner", s.by_owner);
    Owners(id, "range", s.by_range);
    for (const LiveAllocation& l : s.largest)
      live_.Insert(id, l.bytes, l.address, c_.Rel(l.t_ns), l.library, Text(l.range),
                   Text(l.variable));
  }

  void Owners(int64_t id, const char* view, const std::vector<MemoryOwner>& owners) {
    for (size_t i = 0; i < owners.size(); ++i) {
      const MemoryOwner& o = owners[i];
      owners_.Insert(id, view, o.name, o.live_bytes, o.live_allocations, o.allocations,
                     static_cast<int64_t>(i));
    }
  }

  Context& c_;
  const std::vector<TorchMemory>& torch_;
  Stmt states_, owners_, live_;
  int64_t next_id_ = 0;
};

void WritePyTorchMemory(Context& c, const std::vector<TorchMemory>& torch) {
  Stmt st(c.db, InsertSql("KPROF_PYTORCH_MEMORY",
                          "id, globalPid, pid, rank, deviceId, whenWritten, timestamp, "
                          "maxAllocated, maxReserved, allocated, reserved, inactiveSplit, "
                          "requested, replayedMaxAllocated, replayedMaxReserved, "
                          "expandableMaxReserved, complete, "
                          "entries, windows, unrecordedSteps, optimizerSteps, backwardPasses, "
                          "allocConf"));
  // The categories' columns, in the order of kTorchCategories (TorchCategoryName).
  static_assert(kTorchCategories == 5);
  Stmt moments(c.db, InsertSql("KPROF_PYTORCH_MEMORY_MOMENTS",
                               "torchId, position, kind, timestamp, allocated, reserved, "
                               "parameters, gradients, optimizerState, activations, other"));
  for (size_t i = 0; i < torch.size(); ++i) {
    const TorchMemory& t = torch[i];
    const auto id = static_cast<int64_t>(i);
    st.Insert(id, GlobalPid(t.pid), t.pid, RankOf(t.rank), t.device, t.when, c.Rel(t.t_ns),
              t.max_allocated, t.max_reserved, t.allocated, t.reserved, t.inactive_split,
              t.requested, t.replayed_max_allocated, t.replayed_max_reserved,
              t.expandable_max_reserved > 0 ? std::optional<int64_t>(t.expandable_max_reserved)
                                            : std::nullopt,
              t.complete ? 1 : 0, t.entries, t.windows, t.unrecorded_steps, t.optimizer_steps,
              t.backward_passes, Text(t.alloc_conf));
    for (size_t k = 0; k < t.moments.size(); ++k) {
      const TorchMoment& m = t.moments[k];
      const auto& b = m.bytes;
      moments.Insert(id, static_cast<int64_t>(k), m.kind, c.Rel(m.t_ns), m.allocated, m.reserved,
                     b[0], b[1], b[2], b[3], b[4]);
    }
  }
}

void WriteMemory(Context& c) {
  // Every owner of each state, so that a state's owners of one view add up to its liveBytes:
  // an analysis made without AnalysisOptions::every_memory_owner cuts each list (kprof export
  // asks for every owner: one summary).
  std::optional<MemorySummary> uncut;
  if (c.analysis.memory.top != SIZE_MAX) uncut = SummarizeMemory(c.timeline, SIZE_MAX);
  const MemorySummary& m = uncut ? *uncut : c.analysis.memory;
  MemoryStates states(c, m.torch);
  for (const MemoryState& s : m.peaks) states.Peak(s);
  for (const FailedAllocation& f : m.failures) states.Failure(f);
  WritePyTorchMemory(c, m.torch);
}

}  // namespace

void WriteKprofTables(Context& c, Strings& strings) {
  WriteMeta(c);
  WriteProcesses(c);
  WriteViews(c, strings);
  WriteHints(c);
  WriteMemory(c);
}

void WriteTargetInfo(Context& c) {
  const RunSummary& S = c.analysis.summary;
  Stmt start(c.db, InsertSql("TARGET_INFO_SESSION_START_TIME", "utcEpochNs, utcTime, localTime"));
  start.Insert(c.base_ns, FormatTime(c.base_ns, true), FormatTime(c.base_ns, false));
  Stmt details(c.db, InsertSql("ANALYSIS_DETAILS", "globalVid, duration, startTime, stopTime"));
  details.Insert(0, S.wall_ns, 0, S.wall_ns);
  Stmt gpu(c.db, InsertSql("TARGET_INFO_GPU",
                           "vmId, id, name, totalMemory, smCount, computeMajor, computeMinor"));
  for (const DeviceInfo& d : S.devices) {
    std::optional<int64_t> major, minor;
    if (const size_t dot = d.compute_capability.find('.'); dot != std::string::npos) {
      try {
        major = std::stoll(d.compute_capability.substr(0, dot));
        minor = std::stoll(d.compute_capability.substr(dot + 1));
      } catch (const std::exception&) {
        major = minor = std::nullopt;
      }
    }
    gpu.Insert(0, d.id, d.name, d.memory_bytes, d.sm_count, major, minor);
  }
}

}  // namespace kprof::sqlite
