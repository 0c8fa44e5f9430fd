// kprof's own tables (KPROF_*: the views and hints `kprof report` prints) and the run-level
// tables nsys also has (PROCESSES, ANALYSIS_DETAILS, TARGET_INFO_*).
#include <ctime>
#include <exception>
#include <optional>
#include <string>

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

}  // namespace

void WriteKprofTables(Context& c, Strings& strings) {
  WriteMeta(c);
  WriteProcesses(c);
  WriteViews(c, strings);
  WriteHints(c);
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
