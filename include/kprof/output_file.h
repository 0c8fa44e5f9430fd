// A file that kprof writes as a whole (HTML report, SQLite export): written under a temporary
// name in the same directory and renamed over the destination only when complete, so that a
// reader never sees half a file and an interrupted write leaves nothing at the destination.
#pragma once

#include <fstream>
#include <string>

namespace kprof {

/// Opening checks, each an InputError naming the path (exit 2 in the CLI):
///   - the path is a directory                      "PATH: is a directory"
///   - the path exists (file or symlink) and !force "PATH: already exists (--force overwrites)"
///   - its directory does not exist                 "PATH: directory DIR does not exist"
///   - the temporary file cannot be created         "PATH: cannot create (REASON)"
/// The destination is never opened or followed: a symlink planted there is replaced by the new
/// file (with --force), never written through. The exception is a character device or a FIFO
/// (/dev/null, /dev/stdout on a terminal or a pipe): that is a stream, written directly (no
/// temporary file, no --force needed), since renaming over it would replace the device node.
class OutputFile {
 public:
  OutputFile(std::string path, bool force);
  ~OutputFile();  ///< removes the temporary file unless Commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& path() const { return path_; }
  /// Where the content goes until Commit(): for writers that open files by name (SQLite).
  const std::string& temp_path() const { return temp_; }
  /// A stream on the temporary file (opened on first use).
  std::ostream& stream();
  /// Flushes, closes and renames the temporary file to path(). Throws InputError on a write
  /// error ("PATH: write error (REASON)").
  void Commit();

 private:
  std::string path_, temp_;
  std::ofstream out_;
  bool committed_ = false;
  bool direct_ = false;  ///< a device or FIFO: written in place
};

}  // namespace kprof
