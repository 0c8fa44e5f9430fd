// In-memory form of one recorded process, and the readers/writers of kprof run files.
// Plain C++: no CUDA/CUPTI. Used by the CLI, the analysis library and the tests; the agent uses
// only the streaming FileWriter (which never throws and never allocates per record).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kprof/record.h"

namespace kprof {

/// Error in an input file or in user input. `what()` is one line naming the file and the problem,
/// e.g. "runs/a/kprof.123.kprof: block at offset 4096: checksum mismatch".
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Interns strings: id 0 is the empty string; ids are dense and stable.
class StringTable {
 public:
  StringTable() { strings_.emplace_back(); }
  uint32_t Intern(std::string_view s);
  /// Adds a string with a given id (reading files). Throws InputError on a duplicate id.
  void Set(uint32_t id, std::string s);
  const std::string& Get(uint32_t id) const {
    static const std::string kEmpty;
    return id < strings_.size() ? strings_[id] : kEmpty;
  }
  bool Has(uint32_t id) const { return id < strings_.size() && (id == 0 || defined_[id]); }
  size_t size() const { return strings_.size(); }

 private:
  std::vector<std::string> strings_;
  std::vector<bool> defined_{true};
  std::unordered_map<std::string, uint32_t> index_;
};

/// One process's recording (one kprof file, or one pid of a Chrome trace).
struct ProcessTrace {
  std::string source;  ///< file it came from (for messages)
  uint32_t pid = 0;
  int rank = -1;  ///< RANK / OMPI_COMM_WORLD_RANK / PMI_RANK / SLURM_PROCID, -1 if unset
  std::map<std::string, std::string> meta;  ///< see docs/format.md "Meta keys"
  StringTable strings;
  std::vector<Record> records;
  CollectionStats stats;
  bool complete = false;  ///< false when the process never wrote its End block (crash, kill)
  /// Bytes of a last block cut short (killed inside a write, disk full, a cut file): not read.
  uint64_t torn_tail_bytes = 0;

  const std::string& Name(const Record& r) const { return strings.Get(r.name); }
  /// A meta value, "" when absent; as an unsigned number, 0 when absent or not a number.
  const std::string& Meta(const std::string& key) const;
  uint64_t MetaU64(const std::string& key) const;
  std::string Label() const;  ///< "pid 1234" or "rank 1 (pid 1234)"
};

/// A set of processes analysed together (the files given to `kprof report`, or one run dir).
struct Run {
  std::vector<ProcessTrace> processes;
};

/// Reads one kprof run file. Throws InputError (one line, naming `path`) when the file is
/// missing, foreign, of a newer major version, or corrupted. A file whose last block is cut
/// short reads as incomplete, with `torn_tail_bytes` set: what precedes that block is kept.
/// `show_progress`: "reading PATH: N / M MB" on stderr while reading (kprof/progress.h).
ProcessTrace ReadRunFile(const std::string& path, bool show_progress = false);

/// Reads any supported input: a kprof run file, a run directory (all *.kprof files in it),
/// or Chrome trace JSON (plain or gzip), detected from the content. Throws InputError.
Run ReadInputs(const std::vector<std::string>& paths);

/// Repetition number N of a directory named "repN" (N ≥ 1, as `kprof run --repeat` writes
/// them), or 0 for any other name ("reports", "rep", "rep0").
uint32_t RepNumber(std::string_view dir_name);

/// Writes a whole ProcessTrace as a kprof run file (tests, fixtures, conversions).
/// Throws InputError if the file cannot be written or something already exists at `path`
/// (FileWriter::Open: never truncated, never followed).
void WriteRunFile(const std::string& path, const ProcessTrace& trace);

/// Streaming writer used by the agent and by WriteRunFile. Thread-compatible (one writer
/// thread). Never throws; I/O errors are counted in `errors()`.
/// Layout: header, then blocks; strings are written before the first record that uses them.
class FileWriter {
 public:
  FileWriter() = default;
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  /// Creates the file and writes the header. Returns false (errno set) on failure, and when
  /// anything already exists at `path`: a file is never truncated, a symbolic link planted
  /// there never followed (O_CREAT|O_EXCL|O_NOFOLLOW).
  bool Open(const std::string& path);
  bool IsOpen() const { return fd_ >= 0; }
  /// Writes a Meta block with these key/value pairs.
  void WriteMeta(const std::vector<std::pair<std::string, std::string>>& kv);
  /// Writes a Strings block for ids [first, first + n) taken from `strings`.
  void WriteStrings(const std::vector<std::pair<uint32_t, std::string>>& entries);
  /// Writes a Records block. `n` may be large; it is split into blocks under kMaxBlockPayload.
  void WriteRecords(const Record* records, size_t n);
  /// Writes a Stats block (latest one wins when reading).
  void WriteStats(const CollectionStats& stats);
  /// Writes the End block and closes. A file without End block reads as incomplete.
  void Close();
  uint64_t errors() const { return errors_; }
  uint64_t bytes_written() const { return bytes_; }
  /// The errno of the first failed write (disk full, ...), 0 while every write succeeded. After
  /// a failed write the file is cut back to its last whole block and nothing more is written:
  /// it stays readable (as incomplete) up to that block; later writes only count as errors.
  int write_failure() const { return write_errno_; }
  /// Records in the blocks that are in the file.
  uint64_t records_kept() const { return records_kept_; }

 private:
  void WriteBlock(uint32_t type, uint32_t count, const void* payload, uint32_t bytes);
  int fd_ = -1;
  uint64_t errors_ = 0;
  uint64_t bytes_ = 0;
  int write_errno_ = 0;
  uint64_t records_kept_ = 0;
};

/// Block types of the file format (docs/format.md). Serialized; never renumber.
enum class BlockType : uint32_t {
  Strings = 1,
  Records = 2,
  Meta = 3,
  Stats = 4,
  End = 5,
};

/// CRC-32C (Castagnoli) of a buffer, used for block checksums.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

/// Reads Chrome trace JSON (kprof's own or PyTorch profiler's, plain or gzip) into processes,
/// streaming: memory stays far below the file size. Throws InputError.
/// `progress` (may be null) is called with bytes consumed so far and the total when known.
struct ChromeReadOptions {
  bool show_progress = false;  ///< print progress on stderr (caller checks isatty)
};
Run ReadChromeTrace(const std::string& path, const ChromeReadOptions& opts = {});

}  // namespace kprof
