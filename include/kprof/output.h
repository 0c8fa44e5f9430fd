// Output writers: terminal table, CSV, JSON (versioned schema, docs/json-schema.md), Markdown,
// and Chrome trace JSON (Perfetto / chrome://tracing / PyTorch-profiler-trace tools).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/summary_json.h"

namespace kprof {

enum class Format { Table, Csv, Json, Markdown };
std::optional<Format> ParseFormat(const std::string& s);  ///< "table|csv|json|md"

struct ReportOptions {
  Format format = Format::Table;
  size_t top = 15;       ///< rows shown in the table/markdown views
  bool color = false;    ///< ANSI colour in table output
  std::string saved_to;  ///< "results saved to ..." line, empty = none
};

/// Writes the analysis (and hints) in the requested format.
void WriteReport(std::ostream& out, const Run& run, const Analysis& analysis,
                 const std::vector<Hint>& hints, const ReportOptions& opts);

/// The totals block of the table report as (label, value) lines, in its order. With
/// `hint_base_ns` (HintBaseNs), a "steady state" line: what hint percentages are of.
std::vector<std::pair<std::string, std::string>> TotalsLines(const RunSummary& s,
                                                             uint64_t hint_base_ns = 0);
/// What the hints' percentages are of (the run's wall time less its start-up); 0 without hints.
uint64_t HintBaseNs(const std::vector<Hint>& hints);

/// What a Chrome trace holds: the whole run (one merged trace), or one process of it, as a
/// per-rank trace for Holistic Trace Analysis (docs/chrome-trace.md, "Per-rank traces").
struct ChromeTraceOptions {
  /// Index in the run of the one process to write; -1: every process. One process is written
  /// in PyTorch profiler (Kineto) conventions: its CPU threads and its GPU streams only (stream
  /// tracks without the offsets of a merged trace), `distributedInfo` {backend, rank,
  /// world_size}, cuda_sync slices on a CPU thread without a `stream` arg, and each GPU
  /// activity's correlation that of its launch (inherited by graph work that has none). The
  /// times keep the run's baseTimeNanoseconds, so that the files of one run line up.
  int process = -1;
};

/// Writes a Chrome trace of the timeline's run to `path` (".gz" suffix: gzip) through an
/// OutputFile: an existing file is replaced only with `force`, a symlink there is never followed.
/// Throws InputError (the OutputFile checks, I/O errors).
void WriteChromeTrace(const std::string& path, const Timeline& timeline, bool force = false,
                      const ChromeTraceOptions& opts = {});
/// Same, into an OutputFile opened by the caller (its place checked before the work); commits it.
class OutputFile;
void WriteChromeTrace(OutputFile& out, const Timeline& timeline,
                      const ChromeTraceOptions& opts = {});
/// Same, to a stream (uncompressed).
void WriteChromeTrace(std::ostream& out, const Timeline& timeline,
                      const ChromeTraceOptions& opts = {});

/// The `distributedInfo` of a process's trace (`kprof run/report --trace-dir`; a merged trace of
/// one process): rank -1 means none is written.
struct DistributedInfo {
  int rank = -1;
  uint64_t world_size = 0;
  std::string backend;  ///< "nccl" when the process ran NCCL kernels; else as read; may be empty
};
/// That of process `i` of the timeline's run: its RANK; for a run where no process has one, the
/// process's index (each file then loads as its own rank). world_size: the process's meta
/// "world_size" (WORLD_SIZE and the like, or distributedInfo.world_size of a trace read), else
/// the ranks of the run (their count, or the highest rank + 1 if more). backend: "nccl" when a
/// communication kernel ran (kprof::IsCommKernel), else meta "distributed.backend".
DistributedInfo ProcessDistributedInfo(const Timeline& timeline, size_t i);

/// One file of `--trace-dir`: process `process` of the run into `name` (no directory).
struct RankTraceFile {
  size_t process = 0;
  std::string name;
};
/// The per-rank traces of a run: one per process with a rank, "rank<R>.<pid>.pt.trace.json"
/// (processes without a rank are left out), or, when no process has a rank, one per process,
/// "pid<pid>.pt.trace.json". A name that two processes would share gets "-2", "-3"... after the
/// pid. In run order.
std::vector<RankTraceFile> RankTraceFiles(const Run& run);
/// Is `name` the name of a per-rank trace as RankTraceFiles makes them?
bool IsRankTraceName(std::string_view name);
/// Checks the place of a --trace-dir before the work (InputError, one line naming the path):
/// DIR, or its nearest existing parent, must be a writable directory ("DIR: not a directory",
/// "DIR: cannot create (REASON)"); without `force`, DIR must hold no per-rank trace
/// ("DIR/rank0.7.pt.trace.json: already exists (--force overwrites)"). Creates nothing.
void CheckRankTraceDir(const std::string& dir, bool force);
/// Writes the per-rank traces of the timeline's run into `dir` (created if missing), each
/// through an OutputFile (all opened before the first is written). With `force` the per-rank
/// traces already in `dir` are replaced: those of the same names overwritten, the others removed,
/// so that the directory holds this run's only. Returns the paths written. Throws InputError.
std::vector<std::string> WriteRankTraces(const std::string& dir, const Timeline& timeline,
                                         bool force);

/// Escapes a string for JSON: quotes, backslashes, control characters; invalid UTF-8 bytes
/// are replaced by U+FFFD. Appends to `out`.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace kprof
