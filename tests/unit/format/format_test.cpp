// The kprof run file: round trip, string table, and rejection of damaged or foreign files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "kprof/trace.h"
#include "test_util.h"

namespace kprof {
namespace {

using test::TempDir;

ProcessTrace Sample() {
  test::TraceBuilder b(4242);
  b.t.rank = 3;
  b.t.meta["rank"] = "3";
  b.t.meta["hostname"] = "node\"1\\";
  b.Range(11, "outer", 1000, 90000);
  b.Launch(11, 2000, "_Z6vecAddPfS_S_i", 5000, 9000);
  b.Launch(11, 3000, "kernel\xff\x01", 9000, 12000, 9);
  Record& m = b.Add(RecordKind::Memcpy, "", 13000, 15000);
  m.flags = static_cast<uint8_t>(CopyKind::HtoD);
  m.bytes = 1 << 20;
  m.a = static_cast<uint32_t>(MemKind::Pageable);
  b.t.stats.records_written = 7;
  b.t.stats.dropped_records = 2;
  b.t.stats.write_errors = 9;
  return b.t;
}

void ExpectSameRecords(const ProcessTrace& a, const ProcessTrace& b) {
  ASSERT_EQ(a.records.size(), b.records.size());
  for (size_t i = 0; i < a.records.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.records[i], &b.records[i], sizeof(Record)), 0) << "record " << i;
    EXPECT_EQ(a.Name(a.records[i]), b.Name(b.records[i])) << "record " << i;
  }
}

TEST(Format, RoundTrip) {
  TempDir d;
  ProcessTrace in = Sample();
  WriteRunFile(d / "a.kprof", in);
  ProcessTrace out = ReadRunFile(d / "a.kprof");
  ExpectSameRecords(in, out);
  EXPECT_EQ(out.pid, 4242u);
  EXPECT_EQ(out.rank, 3);
  EXPECT_EQ(out.meta.at("hostname"), "node\"1\\");
  EXPECT_EQ(out.stats.records_written, 7u);
  EXPECT_EQ(out.stats.dropped_records, 2u);
  EXPECT_EQ(out.stats.write_errors, 9u);
  EXPECT_TRUE(out.complete);
  EXPECT_EQ(out.source, d / "a.kprof");
  EXPECT_EQ(out.Label(), "rank 3 (pid 4242)");
}

TEST(Format, StreamingWriterBlocksAndLatestStatsWin) {
  TempDir d;
  FileWriter w;
  ASSERT_TRUE(w.Open(d / "s.kprof"));
  w.WriteMeta({{"pid", "7"}, {"exit_reason", "running"}});
  std::vector<Record> recs;
  for (uint32_t i = 0; i < 5000; ++i) {
    if (i % 1000 == 0) w.WriteStrings({{i / 1000 + 1, "k" + std::to_string(i / 1000)}});
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::Kernel);
    r.name = i / 1000 + 1;
    r.start_ns = i * 10;
    r.end_ns = i * 10 + 5;
    recs.push_back(r);
    if (recs.size() == 700) {
      w.WriteRecords(recs.data(), recs.size());
      recs.clear();
    }
  }
  w.WriteRecords(recs.data(), recs.size());
  CollectionStats s;
  s.records_written = 1;
  w.WriteStats(s);
  s.records_written = 5000;
  w.WriteStats(s);
  w.WriteMeta({{"exit_reason", "exit"}});
  w.Close();
  EXPECT_EQ(w.errors(), 0u);
  ProcessTrace t = ReadRunFile(d / "s.kprof");
  ASSERT_EQ(t.records.size(), 5000u);
  EXPECT_EQ(t.Name(t.records[4999]), "k4");
  EXPECT_EQ(t.stats.records_written, 5000u);
  EXPECT_EQ(t.meta.at("exit_reason"), "exit");
  EXPECT_EQ(t.pid, 7u);
  EXPECT_TRUE(t.complete);
  EXPECT_EQ(w.bytes_written(), std::filesystem::file_size(d / "s.kprof"));
}

TEST(Format, FileWithoutEndBlockIsIncompleteButReadable) {
  TempDir d;
  ProcessTrace in = Sample();
  in.complete = false;  // WriteRunFile then omits the End block, like a killed process
  WriteRunFile(d / "a.kprof", in);
  ProcessTrace out = ReadRunFile(d / "a.kprof");
  EXPECT_FALSE(out.complete);
  ExpectSameRecords(in, out);
}

TEST(Format, TruncationAtEveryOffsetReadsAsIncompleteUpToTheLastWholeBlock) {
  TempDir d;
  WriteRunFile(d / "a.kprof", Sample());
  const std::string bytes = test::ReadAll(d / "a.kprof");
  // Where each block ends, and the records read when the file ends there.
  std::vector<std::pair<size_t, size_t>> ends;  // (offset, records before it)
  size_t records = 0;
  for (size_t at = 16; at + 16 <= bytes.size();) {
    uint32_t type = 0, count = 0, payload = 0;
    std::memcpy(&type, bytes.data() + at, 4);
    std::memcpy(&count, bytes.data() + at + 4, 4);
    std::memcpy(&payload, bytes.data() + at + 8, 4);
    at += 16 + payload;
    if (type == static_cast<uint32_t>(BlockType::Records)) records += count;
    ends.emplace_back(at, records);
  }
  ASSERT_EQ(ends.back().first, bytes.size());
  ASSERT_EQ(ends.back().second, Sample().records.size());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    test::WriteAll(d / "t.kprof", bytes.substr(0, cut));
    if (cut < 16) {  // no whole file header: not readable as a run file
      try {
        ReadRunFile(d / "t.kprof");
        ADD_FAILURE() << "cut at " << cut << " accepted";
      } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(d / "t.kprof" + ": ", 0), 0u) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos);
      }
      continue;
    }
    // A process killed inside a write: everything up to the last whole block is kept.
    size_t whole = 16, kept = 0;
    for (const auto& [end, n] : ends) {
      if (end <= cut) {
        whole = end;
        kept = n;
      }
    }
    ProcessTrace t = ReadRunFile(d / "t.kprof");
    EXPECT_FALSE(t.complete) << "cut at " << cut;
    EXPECT_EQ(t.records.size(), kept) << "cut at " << cut;
    EXPECT_EQ(t.torn_tail_bytes, cut - whole) << "cut at " << cut;
  }
}

// A full disk (here a file size limit, which fails writes the same way without root): the
// writer stops at the first failed write and cuts the file back to its last whole block, so the
// file reads as incomplete with every record it says it kept.
TEST(Format, WriterStopsAtTheFirstFailedWriteAndKeepsWholeBlocks) {
  TempDir d;
  const std::string path = d / "full.kprof";
  constexpr rlim_t kLimit = 200000;
  constexpr size_t kPerCall = 1000;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    rlimit lim{kLimit, kLimit};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
    FileWriter w;
    if (!w.Open(path)) _exit(4);
    w.WriteStrings({{1, "k"}});
    std::vector<Record> recs(kPerCall);
    for (size_t i = 0; i < recs.size(); ++i) {
      recs[i].kind = static_cast<uint8_t>(RecordKind::Kernel);
      recs[i].name = 1;
      recs[i].start_ns = i * 10;
      recs[i].end_ns = i * 10 + 5;
    }
    for (int i = 0; i < 10; ++i) w.WriteRecords(recs.data(), recs.size());
    w.WriteMeta({{"exit_reason", "exit"}});
    w.Close();
    const uint64_t out[3] = {w.records_kept(), static_cast<uint64_t>(w.write_failure()),
                             w.errors()};
    _exit(write(fds[1], out, sizeof out) == sizeof out ? 0 : 5);
  }
  close(fds[1]);
  uint64_t out[3] = {};
  const ssize_t got = read(fds[0], out, sizeof out);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof out));
  EXPECT_EQ(out[1], static_cast<uint64_t>(EFBIG));
  EXPECT_GE(out[2], 3u);  // the failed block, the meta block and the End block
  const uint64_t size = std::filesystem::file_size(path);
  const uint64_t block = 16 + kPerCall * sizeof(Record);
  EXPECT_LE(size, kLimit);
  EXPECT_GT(size + block, kLimit) << "stopped before the disk was full";
  ProcessTrace t = ReadRunFile(path);
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.torn_tail_bytes, 0u);
  EXPECT_EQ(t.records.size(), out[0]);
  EXPECT_GT(out[0], 0u);
  EXPECT_EQ(out[0] % kPerCall, 0u);
}

TEST(Format, EveryFlippedByteIsDetected) {
  TempDir d;
  WriteRunFile(d / "a.kprof", Sample());
  const std::string bytes = test::ReadAll(d / "a.kprof");
  size_t detected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    test::WriteAll(d / "c.kprof", bad);
    try {
      // A length flipped to run past the end reads as a last block cut short, which the
      // report states (torn_tail_bytes): detected too.
      if (ReadRunFile(d / "c.kprof").torn_tail_bytes > 0) ++detected;
    } catch (const InputError& e) {
      ++detected;
      EXPECT_EQ(std::string(e.what()).rfind(d / "c.kprof", 0), 0u);
    }
  }
  // Only the reserved bytes of the file header (12..15) and the minor version (10..11) may
  // change without being seen; everything else is covered by magic, version or checksums.
  EXPECT_EQ(detected, bytes.size() - 6);
}

TEST(Format, ForeignAndNewerFilesRejected) {
  TempDir d;
  test::WriteAll(d / "f.kprof", "PK\x03\x04 this is a zip file");
  EXPECT_THROW(
      {
        try {
          ReadRunFile(d / "f.kprof");
        } catch (const InputError& e) {
          EXPECT_STREQ(e.what(), (d / "f.kprof" + ": not a kprof run file (bad magic)").c_str());
          throw;
        }
      },
      InputError);
  std::string hdr(kFileMagic, 8);
  hdr += std::string("\x02\x00\x00\x00\x00\x00\x00\x00", 8);
  test::WriteAll(d / "n.kprof", hdr);
  try {
    ReadRunFile(d / "n.kprof");
    FAIL() << "newer major version accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("format version 2.0 is not supported"), std::string::npos);
  }
  test::WriteAll(d / "e.kprof", "");
  EXPECT_THROW(ReadRunFile(d / "e.kprof"), InputError);
  EXPECT_THROW(ReadRunFile(d / "missing.kprof"), InputError);
  EXPECT_THROW(ReadRunFile(d.path()), InputError);
}

TEST(Format, RandomGarbageAfterHeaderNeverCrashes) {
  TempDir d;
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string s(kFileMagic, 8);
    s += std::string("\x01\x00\x00\x00\x00\x00\x00\x00", 8);
    size_t n = rng() % 200;
    for (size_t k = 0; k < n; ++k) s += static_cast<char>(rng());
    test::WriteAll(d / "g.kprof", s);
    try {
      ReadRunFile(d / "g.kprof");
    } catch (const InputError&) {
    }
  }
}

TEST(Format, BlockClaimingHugePayloadIsRejectedWithoutAllocating) {
  TempDir d;
  std::string s(kFileMagic, 8);
  s += std::string("\x01\x00\x00\x00\x00\x00\x00\x00", 8);
  uint32_t h[4] = {2, 0x7fffffff, 0xffffffff, 0};
  s.append(reinterpret_cast<const char*>(h), sizeof h);
  test::WriteAll(d / "h.kprof", s);
  try {
    ReadRunFile(d / "h.kprof");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("corrupted"), std::string::npos) << e.what();
  }
}

TEST(Format, RecordNamingUndefinedStringRejected) {
  TempDir d;
  ProcessTrace t;
  t.complete = true;
  Record r;
  r.kind = static_cast<uint8_t>(RecordKind::Kernel);
  r.name = 5;  // never defined
  t.records.push_back(r);
  WriteRunFile(d / "u.kprof", t);
  try {
    ReadRunFile(d / "u.kprof");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("undefined string id 5"), std::string::npos);
  }
}

// A virtual-memory call's caller is a string id too (format 1.6): one never defined is corruption;
// the same field of an ordinary API record means nothing and is not checked.
TEST(Format, MemoryCallerNamingUndefinedStringRejected) {
  TempDir d;
  ProcessTrace t;
  t.complete = true;
  Record r;
  r.kind = static_cast<uint8_t>(RecordKind::DriverApi);
  r.e = 7;  // never defined
  t.records.push_back(r);
  WriteRunFile(d / "plain.kprof", t);
  EXPECT_EQ(ReadRunFile(d / "plain.kprof").records.size(), 1u);
  t.records[0].flags = kApiMemoryCaller;
  WriteRunFile(d / "caller.kprof", t);
  try {
    ReadRunFile(d / "caller.kprof");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("undefined caller string id 7"), std::string::npos)
        << e.what();
  }
}

TEST(StringTable, InternAndSet) {
  StringTable s;
  EXPECT_EQ(s.Intern(""), 0u);
  uint32_t a = s.Intern("alpha");
  EXPECT_EQ(s.Intern("alpha"), a);
  uint32_t b = s.Intern("beta");
  EXPECT_NE(a, b);
  EXPECT_EQ(s.Get(a), "alpha");
  EXPECT_EQ(s.Get(999), "");
  EXPECT_FALSE(s.Has(999));
  StringTable r;
  r.Set(3, "three");
  EXPECT_TRUE(r.Has(3));
  EXPECT_FALSE(r.Has(2));
  EXPECT_EQ(r.Get(3), "three");
  EXPECT_THROW(r.Set(3, "again"), InputError);
  EXPECT_THROW(r.Set(0, "zero"), InputError);
  EXPECT_EQ(r.Intern("three"), 3u);
}

TEST(Crc32c, KnownValues) {
  // RFC 3720 (iSCSI) test vectors for CRC-32C.
  std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  // Incremental equals one-shot.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
}

TEST(Inputs, DirectoryFilesAndErrors) {
  TempDir d;
  EXPECT_THROW(ReadInputs({d.path()}), InputError);  // no .kprof files
  ProcessTrace a = Sample();
  WriteRunFile(d / "kprof.1.kprof", a);
  a.pid = 2;
  a.meta["pid"] = "2";
  WriteRunFile(d / "kprof.2.kprof", a);
  kprof::Run run = ReadInputs({d.path()});
  ASSERT_EQ(run.processes.size(), 2u);
  EXPECT_EQ(run.processes[0].pid, 4242u);
  EXPECT_EQ(run.processes[1].pid, 2u);
  test::WriteAll(d / "x.txt", "hello");
  try {
    ReadInputs({d / "x.txt"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), d / "x.txt" + ": not a kprof run file or Chrome trace JSON");
  }
  EXPECT_THROW(ReadInputs({d / "nope"}), InputError);
  EXPECT_THROW(ReadInputs({}), InputError);
  TempDir reps;
  std::filesystem::create_directories(reps / "rep1");
  try {
    ReadInputs({reps.path()});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("repeated runs"), std::string::npos);
  }
}

// The agent's run file (kprof.PID.kprof) is created, never truncated, never written through a
// link: a file or a symbolic link planted at its name makes Open fail and leaves it as it was.
TEST(Format, WriterNeverTruncatesAnExistingFile) {
  TempDir d;
  const std::string path = d / "kprof.7.kprof";
  test::WriteAll(path, "planted");
  FileWriter w;
  errno = 0;
  EXPECT_FALSE(w.Open(path));
  EXPECT_EQ(errno, EEXIST);
  EXPECT_FALSE(w.IsOpen());
  EXPECT_EQ(test::ReadAll(path), "planted");
  try {
    WriteRunFile(path, Sample());
    ADD_FAILURE() << "WriteRunFile overwrote " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot create: File exists");
  }
  EXPECT_EQ(test::ReadAll(path), "planted");
}

TEST(Format, WriterNeverFollowsAPlantedLink) {
  TempDir d;
  const std::string target = d / "target", link = d / "kprof.7.kprof";
  test::WriteAll(target, "victim");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  FileWriter w;
  EXPECT_FALSE(w.Open(link));
  EXPECT_EQ(test::ReadAll(target), "victim");
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  // A dangling link is not followed either: nothing is created at its target.
  const std::string absent = d / "absent", dangling = d / "kprof.8.kprof";
  ASSERT_EQ(::symlink(absent.c_str(), dangling.c_str()), 0);
  EXPECT_FALSE(w.Open(dangling));
  EXPECT_FALSE(std::filesystem::exists(absent));
  // A fresh name is created.
  EXPECT_TRUE(w.Open(d / "kprof.9.kprof"));
}

}  // namespace
}  // namespace kprof

namespace kprof {
namespace {

TEST(Inputs, PipesAreRefusedWithAClearMessage) {
  test::TempDir d;
  std::string fifo = d / "trace.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    ReadInputs({fifo});
    FAIL() << "a FIFO was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              fifo + ": not a regular file (a pipe or device?); save it to a file first");
  }
}

}  // namespace
}  // namespace kprof
