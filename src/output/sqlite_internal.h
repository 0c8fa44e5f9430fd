// Shared by the SQLite export's files: the export context (string table, time base, progress)
// and the writers of each group of tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/progress.h"
#include "kprof/timeline.h"
#include "output/sqlite_db.h"

namespace kprof::sqlite {

/// Nsight Systems' serialized ids: globalPid = pid << 24, globalTid = globalPid + tid, decoded
/// with `globalTid / 0x1000000 % 0x1000000` (pid) and `globalTid % 0x1000000` (tid).
inline int64_t GlobalPid(uint32_t pid) { return static_cast<int64_t>(pid) << 24; }
inline int64_t GlobalTid(uint32_t pid, uint32_t tid) {
  return GlobalPid(pid) + static_cast<int64_t>(tid & 0xFFFFFFu);
}

struct Context {
  Db& db;
  const Timeline& timeline;
  const Analysis& analysis;
  const std::vector<Hint>& hints;
  uint64_t base_ns = 0;  ///< session start: the run's first timestamp; times are relative to it
  Progress& progress;
  uint64_t done = 0, total = 0;

  /// Nanoseconds since the session start (negative for a timestamp before it).
  int64_t Rel(uint64_t t) const { return static_cast<int64_t>(t - base_ns); }
  /// Counts one row towards the progress line.
  void Tick() {
    if ((++done & 0xFFF) == 0) progress.Update(done, total);
  }
};

/// StringIds: each distinct string once, ids from 1 in order of first use.
class Strings {
 public:
  explicit Strings(Db& db);
  int64_t Id(std::string_view s);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  Stmt insert_;
};

/// Creates every table (src/output/sqlite_schema.cpp).
void CreateSchema(Db& db);
/// Fills the ENUM_* tables.
void WriteEnums(Db& db);
/// Creates the indexes, after the rows are in.
void CreateIndexes(Db& db);

/// The Nsight-Systems-shaped tables of the records (sqlite_export.cpp).
void WriteRecordTables(Context& c, Strings& strings);
/// KPROF_* tables and the run-level nsys tables (sqlite_kprof_tables.cpp).
void WriteKprofTables(Context& c, Strings& strings);
void WriteTargetInfo(Context& c);

}  // namespace kprof::sqlite
