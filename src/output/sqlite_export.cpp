// kprof export --sqlite: the records in Nsight Systems' tables (this file), kprof's views in
// KPROF_* tables (sqlite_kprof_tables.cpp), the schema (sqlite_schema.cpp). docs/sqlite.md.
#include "kprof/sqlite_export.h"

#include <algorithm>
#include <map>
#include <optional>

#include "kprof/output_file.h"
#include "kprof/progress.h"
#include "output/sqlite_internal.h"

namespace kprof {
namespace sqlite {
namespace {

/// CUPTI's CUpti_ActivityMemcpyKind (nsys ENUM_CUDA_MEMCPY_OPER) of a kprof CopyKind.
int64_t CopyKindId(uint8_t k) {
  switch (static_cast<CopyKind>(k)) {
    case CopyKind::HtoD:
      return 1;
    case CopyKind::DtoH:
      return 2;
    case CopyKind::DtoD:
      return 8;
    case CopyKind::HtoH:
      return 9;
    case CopyKind::PtoP:
      return 10;
    case CopyKind::Unknown:
      break;
  }
  return 0;
}

/// nsys ENUM_CUDA_MEM_KIND of a kprof MemKind (nsys: 0 pageable .. 6 managed static, 7 unknown;
/// kprof: 0 unknown, 1 pageable .. 7 managed static).
int64_t MemKindId(uint32_t k) { return k >= 1 && k <= 7 ? k - 1 : 7; }

std::optional<int64_t> Correlation(const Record& r) {
  if (r.correlation == 0) return std::nullopt;
  return r.correlation;
}

constexpr int64_t kNvtxMark = 34, kNvtxPushPopRange = 59, kNvtxDomainCreate = 75;

/// NVTX domains over the run: id 0 is the default domain; others from 1 in order of first use,
/// each announced by one NvtxDomainCreate row at its first event.
class Domains {
 public:
  int64_t Id(const std::string& name, int64_t start, int64_t global_tid) {
    if (name.empty()) return 0;
    auto [it, fresh] =
        ids_.try_emplace(name, Domain{static_cast<int64_t>(ids_.size()) + 1, start, global_tid});
    if (!fresh && start < it->second.start) {
      it->second.start = start;
      it->second.global_tid = global_tid;
    }
    return it->second.id;
  }
  void Write(Stmt& nvtx) const {
    for (const auto& [name, d] : ids_)
      nvtx.Insert(d.start, Null{}, kNvtxDomainCreate, Null{}, name, d.global_tid, d.id);
  }

 private:
  struct Domain {
    int64_t id, start, global_tid;
  };
  std::map<std::string, Domain> ids_;
};

const char* GapKindName(GapKind k) {
  switch (k) {
    case GapKind::Warmup:
      return "warmup";
    case GapKind::Long:
      return "long";
    case GapKind::Short:
      return "short";
    case GapKind::Setup:
      return "setup";
    case GapKind::Unrecorded:
      return "unrecorded";
    case GapKind::Other:
      break;
  }
  return "other";
}

/// The statements of the record tables, prepared once and reused for every row.
struct RecordStatements {
  Stmt kernel, memcpy, memset, graph, runtime, sync, memory, nvtx, gaps;
  explicit RecordStatements(Db& db)
      : kernel(db, InsertSql("CUPTI_ACTIVITY_KIND_KERNEL",
                             "start, end, deviceId, streamId, correlationId, globalPid, "
                             "demangledName, shortName, mangledName, registersPerThread, gridX, "
                             "gridY, gridZ, blockX, blockY, blockZ, kprofSharedMemory, "
                             "kprofGraphLaunch")),
        memcpy(db, InsertSql("CUPTI_ACTIVITY_KIND_MEMCPY",
                             "start, end, deviceId, streamId, correlationId, globalPid, bytes, "
                             "copyKind, srcKind, dstKind, srcDeviceId, dstDeviceId, kprofAsync")),
        memset(db, InsertSql("CUPTI_ACTIVITY_KIND_MEMSET",
                             "start, end, deviceId, streamId, correlationId, globalPid, value, "
                             "bytes, memKind")),
        graph(db, InsertSql("CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                            "start, end, deviceId, streamId, correlationId, globalPid, graphId, "
                            "endDeviceId")),
        runtime(db, InsertSql("CUPTI_ACTIVITY_KIND_RUNTIME",
                              "start, end, eventClass, globalTid, correlationId, nameId, "
                              "returnValue")),
        sync(db, InsertSql("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                           "start, end, deviceId, streamId, correlationId, globalPid, syncType")),
        memory(db, InsertSql("CUDA_GPU_MEMORY_USAGE_EVENTS",
                             "start, globalPid, deviceId, address, bytes, memKind, "
                             "memoryOperationType, correlationId")),
        nvtx(db,
             InsertSql("NVTX_EVENTS", "start, end, eventType, rangeId, text, globalTid, domainId")),
        gaps(db,
             InsertSql("KPROF_GAPS", "globalPid, start, end, kind, wait_ns, host_ns, rest_ns")) {}
};

/// One process's rows.
class ProcessWriter {
 public:
  ProcessWriter(Context& c, Strings& strings, RecordStatements& st, Domains& domains,
                const ProcessTimeline& t)
      : c_(c),
        strings_(strings),
        st_(st),
        domains_(domains),
        t_(t),
        p_(*t.process),
        gpid_(GlobalPid(p_.pid)),
        ids_(p_.strings.size(), 0),
        kernel_ids_(p_.strings.size()) {}

  void Write() {
    for (const Record& r : p_.records) {
      Row(r);
      c_.Tick();
    }
    for (size_t i = 0; i < t_.index.ranges.size(); ++i) {
      const RangeInterval& ri = t_.index.ranges[i];
      const Record& s = *ri.start;
      const int64_t start = c_.Rel(ri.begin_ns), gtid = GlobalTid(p_.pid, ri.tid);
      std::optional<int64_t> range_id;
      if (s.Kind() == RecordKind::MarkerStart) range_id = s.a;
      st_.nvtx.Insert(start, c_.Rel(ri.end_ns), kNvtxPushPopRange, range_id, p_.Name(s), gtid,
                      domains_.Id(p_.strings.Get(s.b), start, gtid));
      c_.Tick();
    }
    for (const Gap& g : t_.gaps) {
      st_.gaps.Insert(gpid_, c_.Rel(g.start_ns), c_.Rel(g.end_ns), GapKindName(g.kind), g.wait_ns,
                      g.host_ns, g.rest_ns);
      c_.Tick();
    }
  }

 private:
  /// StringIds id of the process's string `id`.
  int64_t Str(uint32_t id) {
    if (id >= ids_.size()) return strings_.Id("");
    int64_t& g = ids_[id];
    if (g == 0) g = strings_.Id(p_.strings.Get(id));
    return g;
  }

  struct KernelNames {
    int64_t demangled = 0, short_name = 0;
    std::optional<int64_t> mangled;
  };
  const KernelNames& Kernel(const Record& r) {
    static thread_local KernelNames spare;
    KernelNames* k = r.name < kernel_ids_.size() ? &kernel_ids_[r.name] : &spare;
    if (k->demangled != 0 && k != &spare) return *k;
    const std::string& display = t_.KernelName(r);  // what the kernel view groups by
    k->demangled = strings_.Id(display);
    k->short_name = strings_.Id(KernelShortName(display));
    const std::string& raw = p_.Name(r);
    k->mangled = raw.empty() ? std::nullopt : std::optional<int64_t>(strings_.Id(raw));
    return *k;
  }

  void Row(const Record& r) {
    const int64_t start = c_.Rel(r.start_ns);
    const int64_t end = c_.Rel(std::max(r.start_ns, r.end_ns));
    switch (r.Kind()) {
      case RecordKind::Kernel: {
        const KernelNames& n = Kernel(r);
        const Dim3 g = KernelGrid(r), b = KernelBlock(r);
        st_.kernel.Insert(start, end, r.device, r.tid, Correlation(r), gpid_, n.demangled,
                          n.short_name, n.mangled, KernelRegisters(r), g.x, g.y, g.z, b.x, b.y, b.z,
                          KernelSharedMem(r), r.flags & 1u);
        break;
      }
      case RecordKind::Memcpy:
        st_.memcpy.Insert(start, end, r.device, r.tid, Correlation(r), gpid_, r.bytes,
                          CopyKindId(r.flags), MemKindId(r.a), MemKindId(r.b), r.d, r.e,
                          (r.c & kCopyAsync) != 0 ? 1 : 0);
        break;
      case RecordKind::Memset:
        st_.memset.Insert(start, end, r.device, r.tid, Correlation(r), gpid_, r.a, r.bytes,
                          MemKindId(r.b));
        break;
      case RecordKind::GraphLaunch:
        st_.graph.Insert(start, end, r.device, r.tid, Correlation(r), gpid_, r.a, r.b);
        break;
      case RecordKind::RuntimeApi:
      case RecordKind::DriverApi:
        st_.runtime.Insert(start, end, r.Kind() == RecordKind::RuntimeApi ? 0 : 1,
                           GlobalTid(p_.pid, r.tid), Correlation(r), Str(r.name), r.b);
        break;
      case RecordKind::Sync: {
        std::optional<int64_t> device, stream;
        if (r.device != kNoDevice) device = r.device;
        if (r.a != 0) stream = r.a;
        st_.sync.Insert(start, end, device, stream, Correlation(r), gpid_, r.flags);
        break;
      }
      case RecordKind::MemAlloc:
      case RecordKind::MemFree:
        st_.memory.Insert(start, gpid_, r.device, (uint64_t{r.b} << 32) | r.a, r.bytes,
                          MemKindId(r.c), r.Kind() == RecordKind::MemAlloc ? 0 : 1, Correlation(r));
        break;
      case RecordKind::MarkerInstant: {
        const int64_t gtid = GlobalTid(p_.pid, r.tid);
        st_.nvtx.Insert(start, Null{}, kNvtxMark, Null{}, p_.Name(r), gtid,
                        domains_.Id(p_.strings.Get(r.b), start, gtid));
        break;
      }
      default:  // markers are written as ranges; overhead and GPU annotations are not exported
        break;
    }
  }

  Context& c_;
  Strings& strings_;
  RecordStatements& st_;
  Domains& domains_;
  const ProcessTimeline& t_;
  const ProcessTrace& p_;
  const int64_t gpid_;
  std::vector<int64_t> ids_;
  std::vector<KernelNames> kernel_ids_;
};

}  // namespace

Strings::Strings(Db& db) : insert_(db, InsertSql("StringIds", "id, value")) {}

int64_t Strings::Id(std::string_view s) {
  if (auto it = ids_.find(s); it != ids_.end()) return it->second;
  const int64_t id = static_cast<int64_t>(ids_.size()) + 1;
  ids_.emplace(std::string(s), id);
  insert_.Insert(id, s);
  return id;
}

void WriteRecordTables(Context& c, Strings& strings) {
  RecordStatements st(c.db);
  Domains domains;
  for (const ProcessTimeline& t : c.timeline.processes)
    ProcessWriter(c, strings, st, domains, t).Write();
  domains.Write(st.nvtx);
}

}  // namespace sqlite

namespace {

/// `name` without the bracketed group that ends it ("f<int>" -> "f" for '<', '>'), if any.
std::string_view CutTrailingGroup(std::string_view name, char open, char close) {
  if (name.empty() || name.back() != close) return name;
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == close) ++depth;
    if (name[i] == open && --depth == 0) return name.substr(0, i);
  }
  return name;
}

}  // namespace

std::string KernelShortName(std::string_view s) {
  // The parameter list, then the template arguments that end the name.
  std::string_view name = CutTrailingGroup(CutTrailingGroup(s, '(', ')'), '<', '>');
  // Return type and qualification: what follows the last top-level space or "::".
  size_t from = 0;
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    if (ch == '(' || ch == '<') ++depth;
    if ((ch == ')' || ch == '>') && depth > 0) --depth;
    if (depth != 0) continue;
    if (ch == ' ') from = i + 1;
    if (ch == ':' && i + 1 < name.size() && name[i + 1] == ':') from = i + 2;
  }
  name = name.substr(std::min(from, name.size()));
  return name.empty() ? std::string(s) : std::string(name);
}

void WriteSqlite(const std::string& path, const Timeline& timeline, const Analysis& analysis,
                 const std::vector<Hint>& hints, const SqliteExportOptions& opts) {
  OutputFile out(path, opts.force);
  WriteSqlite(out, timeline, analysis, hints, opts);
}

void WriteSqlite(OutputFile& out, const Timeline& timeline, const Analysis& analysis,
                 const std::vector<Hint>& hints, const SqliteExportOptions& opts) {
  const std::string& path = out.path();
  {
    sqlite::Db db(out.temp_path(), path);
    // One transaction, no journal, no fsync: the file is renamed into place only once complete,
    // so a crash leaves nothing at the destination and durability buys nothing here.
    db.Exec(
        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; "
        "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-65536;");
    db.Exec("BEGIN");
    sqlite::CreateSchema(db);
    sqlite::WriteEnums(db);

    Progress progress(opts.progress, "exporting " + path, "records");
    sqlite::Context c{db, timeline, analysis, hints, analysis.summary.start_ns, progress};
    for (const ProcessTimeline& t : timeline.processes)
      c.total += t.process->records.size() + t.index.ranges.size() + t.gaps.size();
    {
      sqlite::Strings strings(db);
      sqlite::WriteRecordTables(c, strings);
      sqlite::WriteKprofTables(c, strings);
    }
    sqlite::WriteTargetInfo(c);
    sqlite::CreateIndexes(db);
    db.Exec("COMMIT");
    db.Close();
  }
  out.Commit();
}

}  // namespace kprof
