// Per-rank Chrome traces (`--trace-dir`, docs/chrome-trace.md "Per-rank traces"): one file per
// rank in PyTorch profiler conventions for Holistic Trace Analysis, checked the way HTA reads
// them (its rank regular expression on the file's lines, distributedInfo before traceEvents,
// streams and correlation ids of GPU work, no stream on CPU events), and read back by kprof as
// the run they came from.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chrome_checks.h"
#include "chrome_test_util.h"
#include "kprof/output.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

namespace fs = std::filesystem;
using test::ReadFile;
using test::TempDir;

constexpr uint64_t kT0 = 1'700'000'000'000'000'000ull;
const char* const kNccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)";

/// One rank of a job on its own GPU (device = rank): a ProfilerStep#1 NVTX range around a
/// cpu_op that launches a GEMM, an NCCL all-reduce on a second stream (when `nccl`), a copy and
/// a stream synchronization.
ProcessTrace RankProcess(uint32_t pid, int rank, bool nccl, uint64_t offset = 0) {
  ProcessTrace p;
  p.pid = pid;
  p.rank = rank;
  p.source = "memory";
  p.complete = true;
  if (rank >= 0) p.meta["rank"] = std::to_string(rank);
  const auto dev = static_cast<uint16_t>(rank >= 0 ? rank : 0);
  p.meta["device." + std::to_string(dev) + ".name"] = "NVIDIA H100 80GB HBM3";
  auto& s = p.strings;
  const uint32_t tid = 4000 + pid;
  auto add = [&](RecordKind kind, uint64_t start, uint64_t end, const std::string& name, uint32_t t,
                 uint32_t corr) -> Record& {
    Record r;
    r.kind = static_cast<uint8_t>(kind);
    r.start_ns = kT0 + offset + start;
    r.end_ns = kT0 + offset + end;
    r.name = name.empty() ? 0 : s.Intern(name);
    r.tid = t;
    r.correlation = corr;
    r.device = IsGpuKind(kind) ? dev : kNoDevice;
    p.records.push_back(r);
    return p.records.back();
  };
  add(RecordKind::MarkerStart, 0, 0, "ProfilerStep#1", tid, 0).a = 1;
  add(RecordKind::Range, 100, 9'000, "aten::mm", tid, 0).b = s.Intern("cpu_op");
  add(RecordKind::RuntimeApi, 1'000, 3'000, "cudaLaunchKernel", tid, 1).a = 211;
  SetKernelLaunch(add(RecordKind::Kernel, 5'000, 25'000, "_Z4gemmPfS_S_i", 7, 1), {132, 1, 1},
                  {256, 1, 1}, 64, 0);
  if (nccl) {
    add(RecordKind::RuntimeApi, 10'000, 12'000, "cudaLaunchKernel", tid, 2).a = 211;
    SetKernelLaunch(add(RecordKind::Kernel, 26'000, 60'000, kNccl, 20, 2), {8, 1, 1}, {544, 1, 1},
                    96, 0);
  }
  add(RecordKind::RuntimeApi, 61'000, 62'000, "cudaMemcpyAsync", tid, 3).a = 41;
  Record& mc = add(RecordKind::Memcpy, 63'000, 64'000, "", 7, 3);
  mc.flags = static_cast<uint8_t>(CopyKind::DtoH);
  mc.a = static_cast<uint32_t>(MemKind::Device);
  mc.b = static_cast<uint32_t>(MemKind::Pinned);
  mc.bytes = 4096;
  add(RecordKind::RuntimeApi, 65'000, 70'000, "cudaStreamSynchronize", tid, 4).a = 131;
  Record& sync = add(RecordKind::Sync, 65'500, 69'500, "", 0, 4);
  sync.flags = static_cast<uint8_t>(SyncKind::StreamSynchronize);
  sync.a = 7;
  add(RecordKind::MarkerEnd, 71'000, 71'000, "", tid, 0).a = 1;
  return p;
}

/// Two ranks that both ran NCCL, rank 1 a little later (and on GPU 1).
kprof::Run TwoRanks() {
  kprof::Run run;
  run.processes.push_back(RankProcess(1111, 0, true));
  run.processes.push_back(RankProcess(2222, 1, true, 500));
  return run;
}

/// The rank HTA gives a file: the first line matching its regular expression, as
/// hta/common/trace_file.py reads it.
std::optional<int> HtaRank(const std::string& text) {
  static const std::regex rank_re(R"("rank":\s+(\d+))");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, rank_re)) return std::stoi(m[1].str());
  return std::nullopt;
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

size_t Kernels(const ProcessTrace& p) {
  return static_cast<size_t>(std::count_if(p.records.begin(), p.records.end(), [](const Record& r) {
    return r.Kind() == RecordKind::Kernel;
  }));
}

bool IsGpuCategory(const std::string& cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}
bool IsCpuCategory(const std::string& cat) {
  return cat == "cpu_op" || cat == "user_annotation" || cat == "cuda_runtime" ||
         cat == "cuda_driver";
}

TEST(TraceDir, OneFilePerRankInHtaConventions) {
  TempDir dir;
  const std::string out = dir.File("traces");  // created by the writer
  const kprof::Run run = TwoRanks();
  const Timeline tl = BuildTimeline(run);
  const std::vector<std::string> written = WriteRankTraces(out, tl, false);
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(FilesIn(out),
            (std::vector<std::string>{"rank0.1111.pt.trace.json", "rank1.2222.pt.trace.json"}));

  for (size_t i = 0; i < 2; ++i) {
    const ProcessTrace& p = run.processes[i];
    const std::string path =
        out + "/rank" + std::to_string(p.rank) + "." + std::to_string(p.pid) + ".pt.trace.json";
    SCOPED_TRACE(path);
    const std::string text = ReadFile(path);
    // HTA's rank: its regular expression on the lines, first match.
    EXPECT_EQ(HtaRank(text), p.rank);
    // distributedInfo before traceEvents (ijson readers stop at traceEvents).
    const size_t info_at = text.find("\"distributedInfo\"");
    ASSERT_NE(info_at, std::string::npos);
    EXPECT_LT(info_at, text.find("\"traceEvents\""));

    const nlohmann::json doc = nlohmann::json::parse(text);
    const auto& info = doc.at("distributedInfo");
    EXPECT_EQ(info.at("rank").get<int>(), p.rank);
    EXPECT_EQ(info.at("world_size").get<int>(), 2);
    EXPECT_EQ(info.at("backend").get<std::string>(), "nccl");
    EXPECT_FALSE(info.contains("pg_count"));  // nothing kprof does not know
    // The run's base time: the ranks' files line up.
    EXPECT_EQ(doc.at("baseTimeNanoseconds").get<uint64_t>(), kT0);
    // Only this rank's GPU in deviceProperties.
    ASSERT_EQ(doc.at("deviceProperties").size(), 1u);
    EXPECT_EQ(doc["deviceProperties"][0].at("id").get<int>(), p.rank);

    testing::ChromeCounts c = testing::CheckChromeStructure(doc);
    EXPECT_EQ(c.by_cat["kernel"], 2u);
    EXPECT_EQ(c.by_cat["gpu_memcpy"], 1u);

    std::set<uint64_t> launches;  // correlation ids of the launching calls
    for (const auto& e : doc.at("traceEvents"))
      if (e.value("cat", "") == "cuda_runtime" || e.value("cat", "") == "cuda_driver")
        launches.insert(e.at("args").at("correlation").get<uint64_t>());
    size_t nccl = 0;
    for (const auto& e : doc.at("traceEvents")) {
      // Only this process: its pid for CPU tracks, its device for GPU tracks.
      const int64_t pid = e.at("pid").get<int64_t>();
      EXPECT_TRUE(pid == p.pid || pid == p.rank) << e.dump();
      if (e.at("ph") != "X") continue;
      ASSERT_TRUE(e.contains("dur") && e.contains("cat")) << e.dump();
      const std::string cat = e.at("cat");
      if (IsGpuCategory(cat)) {
        EXPECT_EQ(pid, p.rank) << e.dump();
        const auto& args = e.at("args");
        ASSERT_TRUE(args.at("stream").is_number_integer()) << e.dump();
        EXPECT_GE(args.at("stream").get<int64_t>(), 0);
        // The stream itself on the track: no offset in a file of one process.
        EXPECT_EQ(e.at("tid").get<int64_t>(), args.at("stream").get<int64_t>());
        ASSERT_TRUE(args.at("correlation").is_number_integer()) << e.dump();
        EXPECT_EQ(launches.count(args.at("correlation").get<uint64_t>()), 1u) << e.dump();
        if (e.at("name").get<std::string>().rfind("nccl", 0) == 0) ++nccl;
      } else if (pid == p.pid) {
        // CPU events: HTA takes an event with a stream for GPU work.
        EXPECT_TRUE(IsCpuCategory(cat) || cat == "cuda_sync") << e.dump();
        if (e.contains("args")) {
          EXPECT_FALSE(e.at("args").contains("stream")) << e.dump();
        }
      }
    }
    EXPECT_EQ(nccl, 1u);  // HTA's communication kernels: names that begin with "nccl"
    // HTA's iterations: a ProfilerStep#N CPU event (the NVTX range, as user_annotation).
    bool step = false;
    for (const auto& e : doc.at("traceEvents"))
      step = step || (e.value("cat", "") == "user_annotation" &&
                      e.value("name", "") == "ProfilerStep#1" && e.at("pid") == p.pid);
    EXPECT_TRUE(step);
  }
}

TEST(TraceDir, ReadsBackAsTheRun) {
  TempDir dir;
  const kprof::Run run = TwoRanks();
  const Timeline tl = BuildTimeline(run);
  WriteRankTraces(dir.File("t"), tl, false);
  const kprof::Run back = ReadInputs({dir.File("t")});
  ASSERT_EQ(back.processes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ProcessTrace& in = run.processes[i];
    const ProcessTrace& out = back.processes[i];  // files in name order: rank 0, rank 1
    EXPECT_EQ(out.rank, in.rank);
    EXPECT_EQ(out.pid, in.pid);
    EXPECT_EQ(out.Meta("world_size"), "2");
    EXPECT_EQ(out.Meta("distributed.backend"), "nccl");
    EXPECT_EQ(Kernels(out), Kernels(in));
    std::map<RecordKind, size_t> a, b;
    for (const Record& r : in.records)
      if (IsGpuActivity(r.Kind())) ++a[r.Kind()];
    for (const Record& r : out.records)
      if (IsGpuActivity(r.Kind())) ++b[r.Kind()];
    EXPECT_EQ(a, b);
    // Exact times: the shared base time and three decimals of microseconds.
    std::vector<uint64_t> ti, to;
    for (const Record& r : in.records)
      if (r.Kind() == RecordKind::Kernel) ti.push_back(r.start_ns);
    for (const Record& r : out.records)
      if (r.Kind() == RecordKind::Kernel) to.push_back(r.start_ns);
    std::sort(ti.begin(), ti.end());
    std::sort(to.begin(), to.end());
    EXPECT_EQ(ti, to);
  }
  // And written again: the same files, byte for byte.
  const Timeline tl2 = BuildTimeline(back);
  TempDir again;
  WriteRankTraces(again.File("t"), tl2, false);
  for (const std::string& name : FilesIn(dir.File("t"))) {
    const nlohmann::json a = nlohmann::json::parse(ReadFile(dir.File("t/" + name)));
    const nlohmann::json b = nlohmann::json::parse(ReadFile(again.File("t/" + name)));
    EXPECT_EQ(a.at("distributedInfo"), b.at("distributedInfo")) << name;
    EXPECT_EQ(a.at("traceEvents").size(), b.at("traceEvents").size()) << name;
  }
}

TEST(TraceDir, WorldSizeBackendAndRankLeftOut) {
  kprof::Run run;
  run.processes.push_back(RankProcess(1111, 3, false));
  run.processes.back().meta["world_size"] = "8";  // WORLD_SIZE of the job
  run.processes.push_back(RankProcess(2222, 5, false));
  run.processes.push_back(RankProcess(3333, -1, false));  // a launcher without a rank
  const Timeline tl = BuildTimeline(run);
  const DistributedInfo a = ProcessDistributedInfo(tl, 0);
  EXPECT_EQ(a.rank, 3);
  EXPECT_EQ(a.world_size, 8u);
  EXPECT_EQ(a.backend, "");  // no NCCL kernel: no backend written
  const DistributedInfo b = ProcessDistributedInfo(tl, 1);
  EXPECT_EQ(b.world_size, 6u);  // no WORLD_SIZE: at least ranks 0..5
  EXPECT_EQ(ProcessDistributedInfo(tl, 2).rank, -1);

  TempDir dir;
  WriteRankTraces(dir.File("t"), tl, false);
  EXPECT_EQ(FilesIn(dir.File("t")),
            (std::vector<std::string>{"rank3.1111.pt.trace.json", "rank5.2222.pt.trace.json"}));
  const nlohmann::json doc =
      nlohmann::json::parse(ReadFile(dir.File("t/rank3.1111.pt.trace.json")));
  EXPECT_FALSE(doc.at("distributedInfo").contains("backend"));
  EXPECT_EQ(doc.at("distributedInfo").at("world_size"), 8);
}

TEST(TraceDir, ProcessesWithoutRanksAreNumbered) {
  kprof::Run run;
  run.processes.push_back(RankProcess(42, -1, false));
  run.processes.push_back(RankProcess(43, -1, false, 100));
  const Timeline tl = BuildTimeline(run);
  const std::vector<RankTraceFile> files = RankTraceFiles(run);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "pid42.pt.trace.json");
  EXPECT_EQ(files[1].name, "pid43.pt.trace.json");
  TempDir dir;
  WriteRankTraces(dir.File("t"), tl, false);
  // Each loads as its own rank in HTA (else both would be rank 0, one replacing the other).
  EXPECT_EQ(HtaRank(ReadFile(dir.File("t/pid42.pt.trace.json"))), 0);
  EXPECT_EQ(HtaRank(ReadFile(dir.File("t/pid43.pt.trace.json"))), 1);
  const nlohmann::json doc = nlohmann::json::parse(ReadFile(dir.File("t/pid43.pt.trace.json")));
  EXPECT_EQ(doc.at("distributedInfo").at("world_size"), 2);
}

TEST(TraceDir, SharedNamesGetANumber) {
  kprof::Run run;
  run.processes.push_back(RankProcess(7, 0, false));
  run.processes.push_back(RankProcess(7, 0, false, 100));  // two runs merged, same pid
  const std::vector<RankTraceFile> files = RankTraceFiles(run);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "rank0.7.pt.trace.json");
  EXPECT_EQ(files[1].name, "rank0.7-2.pt.trace.json");
  for (const auto& f : files) EXPECT_TRUE(IsRankTraceName(f.name)) << f.name;
}

TEST(TraceDir, RankTraceNames) {
  for (const char* yes : {"rank0.12.pt.trace.json", "rank15.4242.pt.trace.json",
                          "pid9.pt.trace.json", "pid9-3.pt.trace.json", "rank1.2-2.pt.trace.json"})
    EXPECT_TRUE(IsRankTraceName(yes)) << yes;
  // torch.profiler's own names (tensorboard_trace_handler) and anything else are not kprof's.
  for (const char* no : {"host_12.1700000000000.pt.trace.json", "rank0.pt.trace.json",
                         "rank.1.pt.trace.json", "pid.pt.trace.json", "rank0.12.pt.trace.json.gz",
                         "rank0.12.json", "pidx.pt.trace.json", "rank0.1a.pt.trace.json"})
    EXPECT_FALSE(IsRankTraceName(no)) << no;
}

TEST(TraceDir, ExistingTracesNeedForce) {
  TempDir dir;
  const std::string out = dir.File("t");
  const kprof::Run run = TwoRanks();
  const Timeline tl = BuildTimeline(run);
  WriteRankTraces(out, tl, false);
  const std::string first = out + "/rank0.1111.pt.trace.json";
  try {
    CheckRankTraceDir(out, false);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), first + ": already exists (--force overwrites)");
  }
  EXPECT_THROW(WriteRankTraces(out, tl, false), InputError);
  // With --force: this run's files replaced, another run's per-rank traces removed, other files
  // left alone.
  test::WriteFile(out + "/rank7.99.pt.trace.json", "{}");
  test::WriteFile(out + "/notes.txt", "keep");
  EXPECT_NO_THROW(WriteRankTraces(out, tl, true));
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{"notes.txt", "rank0.1111.pt.trace.json",
                                                    "rank1.2222.pt.trace.json"}));
}

TEST(TraceDir, BadPlaces) {
  TempDir dir;
  test::WriteFile(dir.File("file"), "x");
  try {
    CheckRankTraceDir(dir.File("file"), true);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir.File("file") + ": not a directory");
  }
  try {
    CheckRankTraceDir(dir.File("file/sub"), true);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir.File("file/sub") + ": cannot create (" + dir.File("file") +
                                         " is not a directory)");
  }
  // A missing directory (and its parents) is fine, and is not made before the writing.
  EXPECT_NO_THROW(CheckRankTraceDir(dir.File("a/b/c"), false));
  EXPECT_FALSE(fs::exists(dir.File("a")));
}

TEST(TraceDir, MergedTraceOfOneRankHasTheSameDistributedInfo) {
  kprof::Run run;
  run.processes.push_back(RankProcess(1111, 1, true));
  run.processes.back().meta["world_size"] = "2";
  std::ostringstream os;
  WriteChromeTrace(os, BuildTimeline(run));
  const nlohmann::json doc = nlohmann::json::parse(os.str());
  EXPECT_EQ(doc.at("distributedInfo"),
            nlohmann::json::parse(R"({"backend": "nccl", "rank": 1, "world_size": 2})"));
  EXPECT_EQ(HtaRank(os.str()), 1);
  // The merged trace keeps its own conventions: the sync on the host thread names its stream.
  bool sync_stream = false;
  for (const auto& e : doc.at("traceEvents"))
    if (e.value("cat", "") == "cuda_sync") sync_stream = e.at("args").contains("stream");
  EXPECT_TRUE(sync_stream);
}

TEST(TraceDir, DirectoryOfNeitherIsOneLine) {
  TempDir dir;
  test::WriteFile(dir.File("notes.txt"), "x");
  try {
    ReadInputs({dir.File("")});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no kprof run files (*.kprof) or Chrome traces (*.json, *.json.gz)"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

TEST(TraceDir, GzipTracesInADirectoryAreRead) {
  TempDir dir;
  const kprof::Run run = TwoRanks();
  const Timeline tl = BuildTimeline(run);
  fs::create_directories(dir.File("t"));
  ChromeTraceOptions one;
  one.process = 0;
  WriteChromeTrace(dir.File("t/rank0.json.gz"), tl, false, one);
  one.process = 1;
  WriteChromeTrace(dir.File("t/rank1.json"), tl, false, one);
  const kprof::Run back = ReadInputs({dir.File("t")});
  ASSERT_EQ(back.processes.size(), 2u);
  EXPECT_EQ(back.processes[0].rank, 0);
  EXPECT_EQ(back.processes[1].rank, 1);
  EXPECT_EQ(Kernels(back.processes[0]) + Kernels(back.processes[1]), 4u);
}

}  // namespace
}  // namespace kprof
