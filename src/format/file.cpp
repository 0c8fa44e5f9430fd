// kprof run files: the streaming writer used by the agent, and the validating reader.
// Layout (docs/format.md):
//   header  16 bytes: magic "KPROFRUN", u16 major, u16 minor, u32 reserved (0)
//   blocks  16-byte block header {u32 type, u32 count, u32 payload_bytes, u32 crc32c} + payload
// The checksum covers the first 12 bytes of the block header and the payload. All integers are
// little-endian. A file whose last block is End was closed normally; one without it comes from
// a process that died (the reader keeps everything up to the last complete block).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kprof/progress.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "kprof files are little-endian");

constexpr size_t kHeaderBytes = 16;
constexpr size_t kBlockHeaderBytes = 16;

struct BlockHeader {
  uint32_t type = 0;
  uint32_t count = 0;
  uint32_t bytes = 0;
  uint32_t crc = 0;
};
static_assert(sizeof(BlockHeader) == kBlockHeaderBytes);

// ---- CRC-32C -------------------------------------------------------------------------------
struct CrcTable {
  uint32_t t[8][256];
  CrcTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

uint32_t CrcSoftware(const uint8_t* p, size_t n, uint32_t crc) {
  static const CrcTable table;
  const auto& t = table.t;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = t[7][v & 0xFF] ^ t[6][(v >> 8) & 0xFF] ^ t[5][(v >> 16) & 0xFF] ^ t[4][(v >> 24) & 0xFF] ^
          t[3][(v >> 32) & 0xFF] ^ t[2][(v >> 40) & 0xFF] ^ t[1][(v >> 48) & 0xFF] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t CrcHardware(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
bool HaveHardwareCrc() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

// ---- little helpers for variable-length payloads --------------------------------------------
void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

class PayloadReader {
 public:
  PayloadReader(const std::string& data) : data_(data) {}
  bool U32(uint32_t& v) {
    if (data_.size() - pos_ < 4) return false;
    std::memcpy(&v, data_.data() + pos_, 4);
    pos_ += 4;
    return true;
  }
  bool Str(std::string& s) {
    uint32_t n = 0;
    if (!U32(n) || data_.size() - pos_ < n) return false;
    s.assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw InputError(path + ": " + what);
}

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (HaveHardwareCrc()) return ~CrcHardware(p, n, crc);
#endif
  return ~CrcSoftware(p, n, crc);
}

// ---- StringTable ----------------------------------------------------------------------------
uint32_t StringTable::Intern(std::string_view s) {
  if (s.empty()) return 0;
  auto it = index_.find(std::string(s));
  if (it != index_.end()) return it->second;
  auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  defined_.push_back(true);
  index_.emplace(strings_.back(), id);
  return id;
}

void StringTable::Set(uint32_t id, std::string s) {
  if (id == 0) throw InputError("string id 0 is reserved for the empty string");
  if (id < strings_.size() && defined_[id])
    throw InputError("string id " + std::to_string(id) + " defined twice");
  if (id >= strings_.size()) {
    strings_.resize(size_t{id} + 1);
    defined_.resize(size_t{id} + 1, false);
  }
  index_.emplace(s, id);  // first definition of a text wins for Intern()
  strings_[id] = std::move(s);
  defined_[id] = true;
}

const std::string& ProcessTrace::Meta(const std::string& key) const {
  static const std::string kNone;
  auto it = meta.find(key);
  return it == meta.end() ? kNone : it->second;
}

uint64_t ProcessTrace::MetaU64(const std::string& key) const {
  return std::strtoull(Meta(key).c_str(), nullptr, 10);
}

std::string ProcessTrace::Label() const {
  std::string pid_s = "pid " + std::to_string(pid);
  if (rank >= 0) return "rank " + std::to_string(rank) + " (" + pid_s + ")";
  return pid_s;
}

// ---- FileWriter -----------------------------------------------------------------------------
FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);  // without End block: reads as incomplete
}

bool FileWriter::Open(const std::string& path) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    ++errors_;
    return false;
  }
  char header[kHeaderBytes] = {};
  std::memcpy(header, kFileMagic, 8);
  uint16_t major = kFormatMajor, minor = kFormatMinor;
  std::memcpy(header + 8, &major, 2);
  std::memcpy(header + 10, &minor, 2);
  if (::write(fd_, header, sizeof header) != static_cast<ssize_t>(sizeof header)) {
    ++errors_;
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  bytes_ = sizeof header;
  return true;
}

void FileWriter::WriteBlock(uint32_t type, uint32_t count, const void* payload, uint32_t bytes) {
  if (fd_ < 0 || write_errno_ != 0) {
    ++errors_;
    return;
  }
  BlockHeader h{type, count, bytes, 0};
  h.crc = Crc32c(&h, 12);
  h.crc = Crc32c(payload, bytes, h.crc);
  // One writev per block, so a block is either in the file or (on a kill mid-write) truncated.
  iovec iov[2] = {{&h, sizeof h}, {const_cast<void*>(payload), bytes}};
  size_t want = sizeof h + bytes, done = 0;
  int iovcnt = bytes ? 2 : 1;
  iovec* v = iov;
  while (done < want) {
    ssize_t n = ::writev(fd_, v, iovcnt);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Disk full, quota, I/O error: drop the part of this block that was written, so that the
      // file ends at a block boundary, and write nothing more (a later block after a hole
      // would be unreadable anyway).
      write_errno_ = errno;
      ++errors_;
      if (::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) ++errors_;
      return;
    }
    done += static_cast<size_t>(n);
    auto left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= v->iov_len) {
      left -= v->iov_len;
      ++v;
      --iovcnt;
    }
    if (iovcnt > 0) {
      v->iov_base = static_cast<char*>(v->iov_base) + left;
      v->iov_len -= left;
    }
  }
  bytes_ += want;
}

void FileWriter::WriteMeta(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string p;
  for (const auto& [k, val] : kv) {
    PutU32(p, static_cast<uint32_t>(k.size()));
    p += k;
    PutU32(p, static_cast<uint32_t>(val.size()));
    p += val;
  }
  WriteBlock(static_cast<uint32_t>(BlockType::Meta), static_cast<uint32_t>(kv.size()), p.data(),
             static_cast<uint32_t>(p.size()));
}

void FileWriter::WriteStrings(const std::vector<std::pair<uint32_t, std::string>>& entries) {
  std::string p;
  uint32_t count = 0;
  auto flush = [&] {
    if (count == 0) return;
    WriteBlock(static_cast<uint32_t>(BlockType::Strings), count, p.data(),
               static_cast<uint32_t>(p.size()));
    p.clear();
    count = 0;
  };
  for (const auto& [id, s] : entries) {
    // Names longer than 1 MiB are cut (kernel names of heavily templated code stay far below).
    std::string_view text(s.data(), std::min<size_t>(s.size(), 1u << 20));
    if (p.size() + text.size() + 8 > kMaxBlockPayload) flush();
    PutU32(p, id);
    PutU32(p, static_cast<uint32_t>(text.size()));
    p.append(text);
    ++count;
  }
  flush();
}

void FileWriter::WriteRecords(const Record* records, size_t n) {
  constexpr size_t kPerBlock = kMaxBlockPayload / sizeof(Record);
  while (n > 0) {
    size_t m = std::min(n, kPerBlock);
    WriteBlock(static_cast<uint32_t>(BlockType::Records), static_cast<uint32_t>(m), records,
               static_cast<uint32_t>(m * sizeof(Record)));
    if (write_errno_ == 0) records_kept_ += m;
    records += m;
    n -= m;
  }
}

void FileWriter::WriteStats(const CollectionStats& s) {
  const uint64_t v[kCollectionStatsFields] = {
      s.records_written, s.dropped_records,   s.missing_timestamps,
      s.unknown_records, s.buffers_completed, s.buffer_bytes,
      s.flushes,         s.foreign_buffers,   s.write_errors};
  WriteBlock(static_cast<uint32_t>(BlockType::Stats), kCollectionStatsFields, v, sizeof v);
}

void FileWriter::Close() {
  if (fd_ < 0) return;
  WriteBlock(static_cast<uint32_t>(BlockType::End), 0, nullptr, 0);
  if (::close(fd_) != 0) ++errors_;
  fd_ = -1;
}

// ---- Reader ---------------------------------------------------------------------------------
namespace {

class File {
 public:
  explicit File(const std::string& path) : path_(path) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) Fail(path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fileno(f_), &st) == 0) {
      if (S_ISDIR(st.st_mode)) Fail(path, "is a directory, not a kprof run file");
      size_ = static_cast<uint64_t>(st.st_size);
    }
  }
  ~File() { std::fclose(f_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  /// Reads exactly n bytes; returns the number actually read (short only at end of file).
  size_t Read(void* dst, size_t n) {
    size_t got = std::fread(dst, 1, n, f_);
    if (got < n && std::ferror(f_)) Fail(path_, std::string("read error: ") + std::strerror(errno));
    pos_ += got;
    return got;
  }
  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  FILE* f_ = nullptr;
  uint64_t pos_ = 0;
  uint64_t size_ = 0;
};

uint32_t ParseU32(const std::string& s, uint32_t fallback) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v > 0xFFFFFFFFul) return fallback;
  return static_cast<uint32_t>(v);
}

}  // namespace

ProcessTrace ReadRunFile(const std::string& path, bool show_progress) {
  File f(path);
  Progress progress(show_progress, "reading " + path, "MB");
  ProcessTrace t;
  t.source = path;

  char header[kHeaderBytes];
  size_t got = f.Read(header, sizeof header);
  if (got == 0) Fail(path, "empty file, not a kprof run file");
  if (got < 8 || std::memcmp(header, kFileMagic, 8) != 0)
    Fail(path, "not a kprof run file (bad magic)");
  if (got < sizeof header) Fail(path, "truncated inside the file header");
  uint16_t major = 0, minor = 0;
  std::memcpy(&major, header + 8, 2);
  std::memcpy(&minor, header + 10, 2);
  if (major > kFormatMajor || major == 0)
    Fail(path, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported (this kprof reads " + std::to_string(kFormatMajor) + ".x)");

  std::string payload;
  bool ended = false;
  uint64_t skipped_kinds = 0;
  while (!ended) {
    uint64_t offset = f.pos();
    progress.Update(offset, f.size());
    BlockHeader h;
    got = f.Read(&h, sizeof h);
    if (got == 0) break;  // no End block: the process died; keep what was written
    auto where = "block at offset " + std::to_string(offset);
    // A last block cut short: the process was killed inside its write (or the file was cut).
    // Everything before it is whole and checked; the file reads as incomplete and says so.
    if (got < sizeof h) {
      t.torn_tail_bytes = got;
      break;
    }
    if (h.bytes > kMaxBlockPayload)
      Fail(path, where + ": payload of " + std::to_string(h.bytes) + " bytes (corrupted)");
    if (h.type == static_cast<uint32_t>(BlockType::Records) &&
        uint64_t{h.count} * sizeof(Record) != h.bytes)
      Fail(path, where + ": record block size does not match its count (corrupted)");
    if (f.size() && offset + sizeof h + h.bytes > f.size()) {
      t.torn_tail_bytes = f.size() - offset;
      break;
    }

    uint32_t crc = Crc32c(&h, 12);
    if (h.type == static_cast<uint32_t>(BlockType::Records)) {
      size_t old = t.records.size();
      t.records.resize(old + h.count);
      // In slices, so that progress moves within a large block.
      char* dst = reinterpret_cast<char*>(t.records.data() + old);
      for (uint32_t done = 0; done < h.bytes;) {
        const uint32_t n = std::min<uint32_t>(h.bytes - done, 8u << 20);
        if (f.Read(dst + done, n) < n) Fail(path, "truncated inside the " + where);
        done += n;
        progress.Update(f.pos(), f.size());
      }
      crc = Crc32c(t.records.data() + old, h.bytes, crc);
      if (crc != h.crc) Fail(path, where + ": checksum mismatch (corrupted)");
      continue;
    }
    payload.resize(h.bytes);
    if (f.Read(payload.data(), h.bytes) < h.bytes) Fail(path, "truncated inside the " + where);
    if (Crc32c(payload.data(), h.bytes, crc) != h.crc)
      Fail(path, where + ": checksum mismatch (corrupted)");

    PayloadReader r(payload);
    switch (static_cast<BlockType>(h.type)) {
      case BlockType::Strings: {
        for (uint32_t i = 0; i < h.count; ++i) {
          uint32_t id = 0;
          std::string s;
          if (!r.U32(id) || !r.Str(s)) Fail(path, where + ": malformed string entry");
          // Ids are dense: a file cannot name an id beyond what it could have defined.
          if (id == 0 || id > t.strings.size() + h.count)
            Fail(path, where + ": string id " + std::to_string(id) + " out of range");
          try {
            t.strings.Set(id, std::move(s));
          } catch (const InputError& e) {
            Fail(path, where + ": " + e.what());
          }
        }
        if (!r.AtEnd()) Fail(path, where + ": trailing bytes after string entries");
        break;
      }
      case BlockType::Meta: {
        for (uint32_t i = 0; i < h.count; ++i) {
          std::string k, v;
          if (!r.Str(k) || !r.Str(v)) Fail(path, where + ": malformed meta entry");
          t.meta[k] = std::move(v);
        }
        if (!r.AtEnd()) Fail(path, where + ": trailing bytes after meta entries");
        break;
      }
      case BlockType::Stats: {
        if (uint64_t{h.count} * 8 != h.bytes) Fail(path, where + ": malformed stats block");
        uint64_t v[kCollectionStatsFields] = {};
        std::memcpy(v, payload.data(), std::min<size_t>(h.bytes, sizeof v));
        t.stats = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
        break;
      }
      case BlockType::End:
        ended = true;
        break;
      default:
        break;  // a block type from a newer minor version: checksummed, skipped
    }
  }
  t.complete = ended;

  // Every record must name a defined string and have a known kind.
  size_t keep = 0;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const Record& rec = t.records[i];
    if (rec.kind == 0 || rec.kind >= kRecordKindCount) {
      ++skipped_kinds;  // newer minor version
      continue;
    }
    if (!t.strings.Has(rec.name))
      Fail(path, "record " + std::to_string(i) + " names undefined string id " +
                     std::to_string(rec.name) + " (corrupted)");
    if ((rec.Kind() == RecordKind::MarkerStart || rec.Kind() == RecordKind::Range ||
         rec.Kind() == RecordKind::GpuRange) &&
        rec.b != 0 && !t.strings.Has(rec.b))
      Fail(path, "record " + std::to_string(i) + " names undefined domain string id " +
                     std::to_string(rec.b) + " (corrupted)");
    if (rec.Kind() == RecordKind::DriverApi && (rec.flags & kApiMemoryCaller) != 0 && rec.e != 0 &&
        !t.strings.Has(rec.e))
      Fail(path, "record " + std::to_string(i) + " names undefined caller string id " +
                     std::to_string(rec.e) + " (corrupted)");
    t.records[keep++] = rec;
  }
  t.records.resize(keep);
  if (skipped_kinds) t.meta["reader.skipped_records"] = std::to_string(skipped_kinds);

  t.pid = ParseU32(t.meta.count("pid") ? t.meta["pid"] : "", 0);
  if (t.meta.count("rank")) {
    uint32_t r = ParseU32(t.meta["rank"], 0xFFFFFFFFu);
    t.rank = r == 0xFFFFFFFFu ? -1 : static_cast<int>(r);
  }
  return t;
}

void WriteRunFile(const std::string& path, const ProcessTrace& trace) {
  FileWriter w;
  if (!w.Open(path)) Fail(path, std::string("cannot create: ") + std::strerror(errno));
  std::vector<std::pair<std::string, std::string>> meta(trace.meta.begin(), trace.meta.end());
  if (!trace.meta.count("pid")) meta.emplace_back("pid", std::to_string(trace.pid));
  if (!trace.meta.count("rank") && trace.rank >= 0)
    meta.emplace_back("rank", std::to_string(trace.rank));
  w.WriteMeta(meta);
  std::vector<std::pair<uint32_t, std::string>> strings;
  for (uint32_t id = 1; id < trace.strings.size(); ++id)
    if (trace.strings.Has(id)) strings.emplace_back(id, trace.strings.Get(id));
  w.WriteStrings(strings);
  w.WriteRecords(trace.records.data(), trace.records.size());
  w.WriteStats(trace.stats);
  if (trace.complete) w.Close();
  if (w.errors()) Fail(path, "write error");
}

}  // namespace kprof
