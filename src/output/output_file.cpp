#include "kprof/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "kprof/trace.h"

namespace kprof {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

OutputFile::OutputFile(std::string path, bool force) : path_(std::move(path)) {
  if (path_.empty()) throw InputError("output path is empty");
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    // A device or a pipe (/dev/null, /dev/stdout on a terminal or a pipe, a FIFO): a stream to
    // write into, not a file to replace; renaming over it would replace the device node.
    direct_ = true;
    temp_ = path_;
    return;
  }
  if (::lstat(path_.c_str(), &st) == 0) {
    struct stat target {};
    const bool dir =
        S_ISDIR(st.st_mode) ||
        (S_ISLNK(st.st_mode) && ::stat(path_.c_str(), &target) == 0 && S_ISDIR(target.st_mode));
    if (dir) throw InputError(path_ + ": is a directory");
    if (!force) throw InputError(path_ + ": already exists (--force overwrites)");
  }
  const std::string dir = DirOf(path_);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
    throw InputError(path_ + ": directory " + dir + " does not exist");
  if (BaseOf(path_).empty()) throw InputError(path_ + ": is a directory");

  std::string tmpl = dir + "/." + BaseOf(path_) + ".kprof-XXXXXX";
  const int fd = ::mkstemp(tmpl.data());  // O_CREAT|O_EXCL: never follows a planted link
  if (fd < 0) throw InputError(path_ + ": cannot create (" + std::strerror(errno) + ")");
  // mkstemp creates 0600; give the file the mode a plain creation would have.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw InputError(path_ + ": cannot create (" + std::strerror(err) + ")");
  }
  ::close(fd);
  temp_ = std::move(tmpl);
}

OutputFile::~OutputFile() {
  if (committed_ || temp_.empty() || direct_) return;
  if (out_.is_open()) out_.close();
  ::unlink(temp_.c_str());
}

std::ostream& OutputFile::stream() {
  if (!out_.is_open()) {
    out_.open(temp_, std::ios::binary | std::ios::trunc);
    if (!out_) throw InputError(path_ + ": cannot create (" + std::strerror(errno) + ")");
  }
  return out_;
}

void OutputFile::Commit() {
  if (committed_) return;
  if (out_.is_open()) {
    out_.flush();
    const bool ok = static_cast<bool>(out_);
    out_.close();
    if (!ok || out_.fail())
      throw InputError(path_ + ": write error (" + std::strerror(errno ? errno : EIO) + ")");
  }
  if (!direct_ && ::rename(temp_.c_str(), path_.c_str()) != 0)
    throw InputError(path_ + ": cannot write (" + std::strerror(errno) + ")");
  committed_ = true;
}

}  // namespace kprof
