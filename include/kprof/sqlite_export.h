// SQLite export (`kprof export RUN --sqlite FILE`): the run's records in tables that follow
// Nsight Systems' SQLite export schema where the meaning is the same (StringIds,
// CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET / RUNTIME / SYNCHRONIZATION, NVTX_EVENTS,
// TARGET_INFO_*, ENUM_*), so that SQL written for `nsys export --type sqlite` runs unchanged, and
// kprof's own views in KPROF_* tables. Every table and column: docs/sqlite.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"

namespace kprof {

/// Version of the exported schema (KPROF_META 'schema_version'). Bump on incompatible change.
inline constexpr int kSqliteSchemaVersion = 1;

struct SqliteExportOptions {
  bool force = false;     ///< overwrite an existing file
  bool progress = false;  ///< "exporting FILE: N / M records" on stderr (ProgressToTerminal())
};

/// Writes the timeline's run, its analysis and hints to the SQLite database `path`, through
/// OutputFile: written under a temporary name, renamed when complete. Throws InputError, one
/// line naming `path`: the OutputFile checks (directory, existing file without force, missing
/// directory, cannot create) and "PATH: sqlite: MESSAGE" for any SQLite error.
/// `analysis` must be Analyze(timeline) of the same timeline (its `ops`, `kernels`, `ranges`,
/// `processes` and `summary` are written; the requested view `rows` is not).
void WriteSqlite(const std::string& path, const Timeline& timeline, const Analysis& analysis,
                 const std::vector<Hint>& hints, const SqliteExportOptions& opts = {});
/// The same, into an OutputFile opened by the caller (so that a bad output path is reported
/// before a long read); commits it when complete.
class OutputFile;
void WriteSqlite(OutputFile& out, const Timeline& timeline, const Analysis& analysis,
                 const std::vector<Hint>& hints, const SqliteExportOptions& opts = {});

/// Nsight Systems' "shortName" of a demangled kernel name: the function's base name, without
/// return type, namespaces, template arguments and parameters
/// ("void at::native::elementwise_kernel<128, 4>(int, F)" -> "elementwise_kernel"). A name that
/// is not a C++ signature ("triton_poi_fused_add_0") is returned unchanged.
std::string KernelShortName(std::string_view demangled);

}  // namespace kprof
