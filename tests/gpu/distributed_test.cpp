// GPU tests of the multi-GPU analysis (issue 13, docs/distributed.md) on two GPUs of one host:
// examples/ddp_train.py, a 2-rank DDP job, under kprof run. A planted straggler (rank 1 sleeps
// 20 ms in each of 50 steps) is named and priced by "rank-imbalance"; the same job without it
// raises no such hint; every device's and rank's time splits into parts that add up; an NVTX
// capture window records exactly 3 steps' kernels on each rank; torchrun,
// `python -m torch.distributed.run` and mpirun set the ranks; --trace-dir writes one Chrome trace
// per rank. Every test skips cleanly without two GPUs and PyTorch.
//
// A job that hangs (an NCCL deadlock) is stopped after kJobTimeout seconds (`timeout` before the
// launcher), so that one bad run does not take the whole session's time.
//
// Each distinct kprof run is made once per test binary run (function-local statics), and also
// once per ctest run, where every test is a process of its own: a run that completed is kept in
// gpu-test-runs/dist_NAME with a marker (dist_NAME.done: its exit status and a key of the command
// and of the kprof, agent and script files) and reused for 30 minutes while the key matches
// (KPROF_DIST_RERUN=1: never). scripts/ddp_session.sh takes its fixtures from there.
#include "kprof/distributed.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu_harness.h"
#include "gtest/gtest.h"
#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/memory.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"
#include "nlohmann/json.hpp"

namespace fs = std::filesystem;
using namespace kprof;
using namespace kprof::gpu_test;

namespace {

constexpr int kSteps = 50;
constexpr uint64_t kStragglerNs = 20'000'000;  // --straggler-ms 20
// Two ranks arriving "together" at a collective still differ by a few microseconds: a wait
// shorter than this is not counted as one rank arriving last.
constexpr uint64_t kRealWaitNs = 50'000;
// A 50-step run takes 20-40 s (most of it the launcher's and NCCL's start).
constexpr const char* kJobTimeout = "180";

bool HaveTwoGpus() {
  static const bool have = HaveGpu() && access("/dev/nvidia1", F_OK) == 0;
  return have;
}

// PyTorch is installed for Python() (found, not imported: importing it takes seconds, and under
// ctest every test is a process of its own).
bool HaveTorchModule() {
  static const bool have =
      Exec({Python(), "-c",
            "import importlib.util as u, sys; sys.exit(0 if u.find_spec('torch') else 1)"})
          .status == 0;
  return have;
}

#define REQUIRE_TWO_GPUS()                                                                     \
  do {                                                                                         \
    if (!HaveTwoGpus()) GTEST_SKIP() << "needs 2 NVIDIA GPUs (/dev/nvidia0 and /dev/nvidia1)"; \
    if (!HaveTorchModule()) GTEST_SKIP() << "needs PyTorch (" << Python() << ")";              \
  } while (0)

std::string Tail(const std::string& s, size_t n = 6000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

std::string Script() { return Src("examples/ddp_train.py"); }

// torchrun next to Python(), or `Python() -m torch.distributed.run` where there is none.
std::vector<std::string> Torchrun(int port) {
  std::vector<std::string> argv;
  const std::string py = Python();
  const std::string torchrun = fs::path(py).parent_path().string() + "/torchrun";
  if (py.find('/') != std::string::npos && access(torchrun.c_str(), X_OK) == 0) {
    argv = {torchrun};
  } else {
    argv = {py, "-m", "torch.distributed.run"};
  }
  argv.push_back("--nproc_per_node=2");
  argv.push_back("--master_port=" + std::to_string(port));
  return argv;
}

// timeout LAUNCHER... examples/ddp_train.py ARGS...
std::vector<std::string> DdpJob(const std::vector<std::string>& launcher,
                                const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"timeout", "--kill-after=10", kJobTimeout};
  argv.insert(argv.end(), launcher.begin(), launcher.end());
  argv.push_back(Script());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// A run made (or found) and analysed once. Heap-allocated and never moved: the timeline and the
// analysis point into `run`.
struct Recorded {
  std::string dir;
  Result result;
  bool reused = false;
  Run run;
  std::unique_ptr<Timeline> tl;
  Analysis an;
  std::vector<Hint> hints;

  int RankOf(size_t dist_rank) const { return an.dist.ranks.at(dist_rank).rank; }
  /// The launcher's own file (torchrun counts the GPUs, which loads CUDA and so the agent):
  /// no rank, no CUDA context, nothing recorded. Checked, then left out of `run`.
  std::vector<ProcessTrace> launchers;
};

std::string Stamp(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return path + " missing";
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// kprof run -o gpu-test-runs/dist_NAME --quiet OPTIONS -- PROGRAM, or the same run kept from
// earlier in this ctest run (see the top of the file). `extra_dirs` are other outputs of the
// run (--trace-dir), cleared with it.
std::unique_ptr<Recorded> Make(const std::string& name, const std::vector<std::string>& options,
                               const std::vector<std::string>& program,
                               const std::vector<std::string>& extra_dirs = {}) {
  auto m = std::make_unique<Recorded>();
  m->dir = Bin("gpu-test-runs/dist_" + name);
  const std::string marker = m->dir + ".done", log = m->dir + ".log";
  std::string key = "key";
  for (const std::string& a : options) key += " " + a;
  key += " --";
  for (const std::string& a : program) key += " " + a;
  for (const std::string& f : {Bin("kprof"), Bin("libkprof_agent.so"), Script()})
    key += "\n" + Stamp(f);
  key += "\n";

  struct stat st {};
  const char* rerun = std::getenv("KPROF_DIST_RERUN");
  const std::string kept = ReadText(marker), status = "status ";
  if ((rerun == nullptr || *rerun == '\0') && stat(marker.c_str(), &st) == 0 &&
      std::time(nullptr) - st.st_mtime < 1800 && kept.rfind(key + status, 0) == 0 &&
      fs::is_directory(m->dir)) {
    m->reused = true;
    m->result.status = std::atoi(kept.c_str() + key.size() + status.size());
    m->result.out = ReadText(log);
  } else {
    fs::remove(marker);
    for (const std::string& d : extra_dirs) fs::remove_all(d);
    FreshDir("dist_" + name);
    m->result = KprofWith(m->dir, options, program);
    WriteText(log, m->result.out);
    WriteText(marker, key + status + std::to_string(m->result.status) + "\n");
  }
  std::cout << "[kprof run " << name << (m->reused ? " (kept from earlier in this ctest run)" : "")
            << ": exit " << m->result.status << "]\n";
  // The job's own lines: "rank R: N steps, median step X ms".
  std::stringstream lines(m->result.out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("median step") != std::string::npos) std::cout << "  " << line << "\n";
  if (m->result.status != 0 || !fs::is_directory(m->dir)) return m;
  try {
    m->run = ReadInputs({m->dir});
    std::erase_if(m->run.processes, [&](ProcessTrace& p) {
      if (p.rank >= 0) return false;
      m->launchers.push_back(std::move(p));
      return true;
    });
  } catch (const InputError& e) {
    m->result.out += std::string("\nReadInputs: ") + e.what();
    m->result.status = 1000;
    return m;
  }
  m->tl = std::make_unique<Timeline>(BuildTimeline(m->run));
  m->an = Analyze(*m->tl);
  m->hints = ComputeHints(*m->tl, m->an);
  return m;
}

#define ASSERT_RUN_OK(m)                                     \
  do {                                                       \
    ASSERT_EQ((m).result.status, 0) << Tail((m).result.out); \
    ASSERT_TRUE((m).tl) << "no timeline";                    \
  } while (0)

// a. rank 1 sleeps 20 ms in each of 50 steps.
const Recorded& Straggler() {
  static const std::unique_ptr<Recorded> m = Make(
      "straggler", {},
      DdpJob(Torchrun(29521),
             {"--steps", std::to_string(kSteps), "--straggler-rank", "1", "--straggler-ms", "20"}));
  return *m;
}

// b. the same job, balanced.
const Recorded& Balanced() {
  static const std::unique_ptr<Recorded> m =
      Make("balanced", {}, DdpJob(Torchrun(29522), {"--steps", std::to_string(kSteps)}));
  return *m;
}

// c. the balanced job with a capture window around the first 3 "step" ranges of each rank.
const Recorded& Capture3() {
  static const std::unique_ptr<Recorded> m =
      Make("capture3", {"--capture", "nvtx:step", "--capture-count", "3"},
           DdpJob(Torchrun(29523), {"--steps", std::to_string(kSteps)}));
  return *m;
}

std::set<int> Ranks(const Run& run) {
  std::set<int> ranks;
  for (const ProcessTrace& p : run.processes) ranks.insert(p.rank);
  return ranks;
}

// The launcher's file, if it wrote one: it made no CUDA context and recorded nothing.
void ExpectIdleLaunchers(const std::vector<ProcessTrace>& launchers) {
  EXPECT_LE(launchers.size(), 1u);
  for (const ProcessTrace& p : launchers) {
    std::cout << "launcher " << p.Label() << ": " << p.records.size() << " records, contexts '"
              << p.Meta("contexts") << "', " << p.Meta("cmdline").substr(0, 120) << "\n";
    EXPECT_EQ(p.Meta("contexts"), "0") << p.source;
    for (const Record& r : p.records) EXPECT_FALSE(IsGpuActivity(r.Kind())) << p.source;
  }
}

void ExpectTwoCompleteRanks(const Run& run) {
  ASSERT_EQ(run.processes.size(), 2u);
  EXPECT_EQ(Ranks(run), (std::set<int>{0, 1}));
  for (const ProcessTrace& p : run.processes) EXPECT_TRUE(p.complete) << p.source;
}

// Two complete ranks, and the launcher's file (if any) idle.
void ExpectRanksAndLauncher(const Recorded& m) {
  ASSERT_NO_FATAL_FAILURE(ExpectTwoCompleteRanks(m.run));
  ExpectIdleLaunchers(m.launchers);
}

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

// Per device and per rank, the wall time splits into compute, communication only, copies only
// and idle, exactly; utilisations and the device view's shares lie in [0, 1] and the shares add
// up to 1; the ranks' kernels add up to the run's.
TEST(GpuDistributed, DevicesAndRanksAddUp) {
  REQUIRE_TWO_GPUS();
  const Recorded& m = Straggler();
  ASSERT_RUN_OK(m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(m));
  const DistributedSummary& d = m.an.dist;
  ASSERT_EQ(d.devices.size(), 2u);
  EXPECT_EQ(m.an.summary.gpus, 2u);
  EXPECT_TRUE(d.Multi());
  for (const DeviceUsage& u : d.devices) {
    std::cout << "device " << u.key << ": utilisation " << u.utilisation * 100 << "%, wall "
              << Ms(u.wall_ns) << " ms, compute " << Ms(u.compute_ns) << " ms, comm only "
              << Ms(u.comm_only_ns) << " ms, copy only " << Ms(u.copy_only_ns) << " ms, idle "
              << Ms(u.idle_ns) << " ms\n";
    EXPECT_GE(u.utilisation, 0.0) << u.key;
    EXPECT_LE(u.utilisation, 1.0) << u.key;
    EXPECT_GT(u.busy_ns, 0u) << u.key;
    EXPECT_LE(u.busy_ns, u.wall_ns) << u.key;
    EXPECT_EQ(u.compute_ns + u.comm_only_ns + u.copy_only_ns + u.idle_ns, u.wall_ns) << u.key;
  }
  EXPECT_GE(m.an.summary.utilisation, 0.0);
  EXPECT_LE(m.an.summary.utilisation, 1.0);

  AnalysisOptions by_device;
  by_device.by = GroupBy::Device;
  const Analysis dev = Analyze(*m.tl, by_device);
  ASSERT_EQ(dev.rows.size(), 2u);
  double shares = 0;
  for (const GroupRow& g : dev.rows) {
    std::cout << "device row " << g.key << ": share " << g.share * 100 << "%\n";
    EXPECT_GE(g.share, 0.0) << g.key;
    EXPECT_LE(g.share, 1.0) << g.key;
    shares += g.share;
  }
  EXPECT_NEAR(shares, 1.0, 1e-9);

  ASSERT_EQ(d.ranks.size(), 2u);
  uint64_t kernel_ns = 0, kernels = 0;
  std::set<int> ranks;
  for (const RankUsage& r : d.ranks) {
    std::cout << "rank " << r.rank << ": wall " << Ms(r.wall_ns) << " ms, busy " << Ms(r.busy_ns)
              << " ms, kernels " << r.kernels << " (" << r.comm_kernels << " communication)\n";
    ranks.insert(r.rank);
    EXPECT_EQ(r.compute_ns + r.comm_only_ns + r.copy_only_ns + r.idle_ns, r.wall_ns) << r.label;
    EXPECT_LE(r.busy_ns, r.wall_ns) << r.label;
    EXPECT_GT(r.comm_kernels, 0u) << r.label;
    EXPECT_LE(r.comm_kernels, r.kernels) << r.label;
    kernel_ns += r.kernel_ns;
    kernels += r.kernels;
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(kernel_ns, m.an.summary.kernel_ns);
  EXPECT_EQ(kernels, m.an.summary.kernels);
}

// The planted straggler: "rank-imbalance" names rank 1 and prices the other rank's exposed
// waiting at 50 x 20 ms, within 10%; rank 1 is the last to arrive at the collectives that waited.
TEST(GpuDistributed, StragglerIsNamedAndPriced) {
  REQUIRE_TWO_GPUS();
  const Recorded& m = Straggler();
  ASSERT_RUN_OK(m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(m));
  const DistributedSummary& d = m.an.dist;
  ASSERT_EQ(d.ranks.size(), 2u);
  EXPECT_GE(d.collectives.size(), static_cast<size_t>(kSteps));
  size_t waited = 0, rank1_last = 0, any_wait = 0, any_rank1_last = 0;
  // Once rank 1 arrives, the collective's transfer runs while rank 0 has no compute left in
  // the step (it finished its backward long before): rank 0's waiting with nothing else to run
  // is the planted delay less these transfers, and less the slowing of its backward by the
  // NCCL kernel spinning beside it; the hint prices rank 1's extra idle time instead (for the
  // log).
  uint64_t transfers_after_rank1 = 0;
  for (const Collective& c : d.collectives) {
    ASSERT_EQ(c.parts.size(), 2u) << c.kind << " " << c.seq;
    uint64_t longest = 0;
    for (const Collective::Part& p : c.parts) longest = std::max(longest, p.wait_ns);
    const bool last1 = m.RankOf(c.parts.at(c.last).rank) == 1;
    if (last1) transfers_after_rank1 += c.parts[c.last].end_ns - c.parts[c.last].arrive_ns;
    if (longest > 0) {
      ++any_wait;
      any_rank1_last += last1;
    }
    if (longest >= kRealWaitNs) {
      ++waited;
      rank1_last += last1;
    }
  }
  for (const RankUsage& r : d.ranks)
    std::cout << "rank " << r.rank << ": waited " << Ms(r.wait_ns) << " ms (exposed "
              << Ms(r.exposed_wait_ns) << " ms) in " << r.collectives << " collectives, last in "
              << r.last << "\n";
  std::cout << d.collectives.size() << " collectives; " << waited << " with a wait of "
            << kRealWaitNs / 1000 << " us or more, rank 1 last in " << rank1_last << "; "
            << any_wait << " with any wait, rank 1 last in " << any_rank1_last << "\n";
  std::cout << "transfer time of the collectives rank 1 arrived last at: "
            << Ms(transfers_after_rank1) << " ms (" << Ms(transfers_after_rank1) / kSteps
            << " ms per step)\n";
  EXPECT_GT(waited, 0u);
  EXPECT_GE(static_cast<double>(rank1_last), 0.9 * static_cast<double>(waited));

  const Hint* h = FindHint(m.hints, "rank-imbalance");
  ASSERT_NE(h, nullptr) << "no rank-imbalance hint";
  const double planted = static_cast<double>(kSteps * kStragglerNs);
  const double est = static_cast<double>(h->est_saving_ns);
  std::cout << "rank-imbalance: \"" << h->summary << "\" estimate " << est / 1e6 << " ms, planted "
            << planted / 1e6 << " ms, ratio " << est / planted << "\n";
  for (const std::string& e : h->evidence) std::cout << "  " << e << "\n";
  EXPECT_NE(h->summary.find("rank 1"), std::string::npos) << h->summary;
  EXPECT_LE(std::fabs(est - planted), 0.1 * planted);
}

// Without the planted delay: no rank-imbalance hint.
TEST(GpuDistributed, BalancedRaisesNoImbalance) {
  REQUIRE_TWO_GPUS();
  const Recorded& m = Balanced();
  ASSERT_RUN_OK(m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(m));
  const DistributedSummary& d = m.an.dist;
  EXPECT_GE(d.collectives.size(), static_cast<size_t>(kSteps));
  uint64_t longest = 0;
  size_t longest_at = 0;
  for (size_t i = 0; i < d.collectives.size(); ++i)
    for (const Collective::Part& p : d.collectives[i].parts)
      if (p.wait_ns > longest) longest = p.wait_ns, longest_at = i;
  std::cout << d.collectives.size() << " collectives, longest single wait " << Ms(longest)
            << " ms (collective " << longest_at << ")\n";
  for (const RankUsage& r : d.ranks)
    std::cout << "rank " << r.rank << ": exposed waits " << Ms(r.exposed_wait_ns) << " ms (waits "
              << Ms(r.wait_ns) << " ms), last in " << r.last << " of " << r.collectives
              << ", utilisation of its devices "
              << (r.wall_ns ? static_cast<double>(r.busy_ns) / static_cast<double>(r.wall_ns) : 0) *
                     100
              << "%\n";
  if (const Hint* h = FindHint(m.hints, "rank-imbalance"))
    ADD_FAILURE() << "rank-imbalance raised: " << h->summary << " (" << Ms(h->est_saving_ns)
                  << " ms)";
}

// Issue 37 (docs/memory.md "Who made it"): every byte of each rank's driver-level peak has an
// owner. NCCL makes its buffers with the virtual-memory calls on its own threads, and CUPTI names
// no library for them: the agent names the caller of each such call from its stack.
TEST(GpuDistributed, EveryRanksDriverLevelPeakHasAnOwner) {
  REQUIRE_TWO_GPUS();
  const Recorded& m = Balanced();
  ASSERT_RUN_OK(m);
  size_t peaks = 0;
  for (const MemoryState& s : m.an.memory.peaks) {
    // A rank loads its libraries' static memory on the other GPU too (a few hundred KiB).
    if (s.live_bytes < 64 * (int64_t{1} << 20)) continue;
    ++peaks;
    int64_t unowned = 0, nccl = 0;
    std::string owners;
    for (const MemoryOwner& o : s.by_library) {
      if (o.name.find("not recorded") != std::string::npos) unowned += o.live_bytes;
      if (o.name.starts_with("NCCL")) nccl += o.live_bytes;
      owners += "  " + o.name + " " + std::to_string(o.live_bytes >> 20) + " MiB\n";
    }
    std::cout << "pid " << s.pid << " rank " << s.rank << " GPU " << s.device << ": peak "
              << (s.live_bytes >> 20) << " MiB, no owner " << (unowned >> 20) << " MiB, NCCL "
              << (nccl >> 20) << " MiB\n"
              << owners;
    EXPECT_LE(static_cast<double>(unowned), 0.01 * static_cast<double>(s.live_bytes)) << owners;
    EXPECT_GT(nccl, 0) << "NCCL's buffers have another owner:\n" << owners;
  }
  EXPECT_EQ(peaks, 2u);
}

namespace {

// Kernels launched inside each "step" range of each rank of a whole-process run, by rank: a
// kernel belongs to the step whose range (on any thread: backward kernels come from autograd's
// thread, where "step" is not open) was open when its launch call began, which is what a capture
// window around the step records. Kernels without a recorded launch call count by their start.
std::map<int, std::vector<uint64_t>> KernelsPerStep(const Recorded& m) {
  std::map<int, std::vector<uint64_t>> out;
  for (size_t i = 0; i < m.tl->processes.size(); ++i) {
    const ProcessTimeline& pt = m.tl->processes[i];
    std::vector<NsInterval> steps;
    for (size_t r = 0; r < pt.index.ranges.size(); ++r)
      if (pt.index.Name(r) == "step")
        steps.emplace_back(pt.index.ranges[r].begin_ns, pt.index.ranges[r].end_ns);
    std::sort(steps.begin(), steps.end());
    std::vector<uint64_t> counts(steps.size(), 0);
    for (const Record* a : pt.acts) {
      if (a->Kind() != RecordKind::Kernel) continue;
      const Record* api = pt.Api(*a);
      const uint64_t t = api ? api->start_ns : a->start_ns;
      auto it = std::upper_bound(steps.begin(), steps.end(), NsInterval{t, UINT64_MAX});
      if (it == steps.begin()) continue;
      --it;
      if (t < it->second) ++counts[static_cast<size_t>(it - steps.begin())];
    }
    out[pt.process->rank] = counts;
  }
  return out;
}

}  // namespace

// --capture nvtx:step --capture-count 3 on a 50-step job: 3 windows on each rank, holding
// exactly the kernels of 3 steps (as many as a step launches in the whole-process run).
TEST(GpuDistributed, CaptureRecordsThreeStepsPerRank) {
  REQUIRE_TWO_GPUS();
  const Recorded& full = Balanced();
  ASSERT_RUN_OK(full);
  ASSERT_EQ(full.run.processes.size(), 2u);
  std::map<int, uint64_t> per_step;
  for (const auto& [rank, counts] : KernelsPerStep(full)) {
    ASSERT_EQ(counts.size(), static_cast<size_t>(kSteps)) << "rank " << rank;
    std::map<uint64_t, int> histogram;
    for (uint64_t n : counts) ++histogram[n];
    std::cout << "rank " << rank << ": kernels per step";
    for (const auto& [n, steps] : histogram) std::cout << " " << n << " (x" << steps << ")";
    std::cout << "\n";
    ASSERT_EQ(histogram.size(), 1u) << "rank " << rank << ": steps launch different kernel counts";
    ASSERT_GT(counts[0], 0u);
    per_step[rank] = counts[0];
  }

  const Recorded& m = Capture3();
  ASSERT_RUN_OK(m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(m));
  for (const ProcessTrace& p : m.run.processes) {
    uint64_t windows = 0, kernels = 0;
    for (const Record& r : p.records) {
      windows += r.Kind() == RecordKind::CaptureWindow;
      kernels += r.Kind() == RecordKind::Kernel;
    }
    ASSERT_TRUE(per_step.count(p.rank)) << p.Label();
    std::cout << "rank " << p.rank << ": " << windows << " windows, " << kernels << " kernels (3 x "
              << per_step[p.rank] << " expected)\n";
    EXPECT_EQ(windows, 3u) << p.Label();
    EXPECT_EQ(kernels, 3 * per_step[p.rank]) << p.Label();
  }
  EXPECT_EQ(m.an.summary.capture, "nvtx:step");
  EXPECT_EQ(m.an.summary.capture_windows, 6u);
  EXPECT_EQ(m.an.summary.capture_problem, "");
}

// `python -m torch.distributed.run`: the ranks, the world size and the local ranks.
TEST(GpuDistributed, TorchDistributedRunSetsRanks) {
  REQUIRE_TWO_GPUS();
  static const std::unique_ptr<Recorded> m = Make(
      "torch_distributed_run", {},
      DdpJob({Python(), "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29524"},
             {"--steps", "10"}));
  ASSERT_RUN_OK(*m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(*m));
  for (const ProcessTrace& p : m->run.processes) {
    EXPECT_EQ(p.Meta("world_size"), "2") << p.Label();
    EXPECT_EQ(p.Meta("local_rank"), std::to_string(p.rank)) << p.Label();
  }
}

namespace {

std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string p = dir + "/" + name;
    if (access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p;
  }
  return "";
}

}  // namespace

// mpirun -np 2: the ranks come from Open MPI's variables (OMPI_COMM_WORLD_RANK; MPICH's PMI_RANK).
TEST(GpuDistributed, MpirunSetsRanks) {
  REQUIRE_TWO_GPUS();
  const std::string mpirun = OnPath("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "mpirun is not on PATH";
  std::vector<std::string> launcher = {mpirun};
  const Result version = Exec({mpirun, "--version"});
  std::cout << "mpirun: " << mpirun << ": " << version.out.substr(0, version.out.find('\n'))
            << "\n";
  // Open MPI refuses to run as root without this (the GPU machines run as root); MPICH's
  // mpirun (Hydra) does not know it.
  if (version.out.find("Open MPI") != std::string::npos ||
      version.out.find("OpenRTE") != std::string::npos ||
      version.out.find("PRRTE") != std::string::npos)
    launcher.push_back("--allow-run-as-root");
  launcher.insert(launcher.end(), {"-np", "2", Python()});
  static const std::unique_ptr<Recorded> m = Make("mpirun", {}, DdpJob(launcher, {"--steps", "5"}));
  ASSERT_RUN_OK(*m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(*m));
  for (const ProcessTrace& p : m->run.processes) EXPECT_EQ(p.Meta("world_size"), "2") << p.Label();
}

// --trace-dir: one Chrome trace per rank, rank<R>.<pid>.pt.trace.json, with PyTorch's
// distributedInfo, read back as the two ranks.
TEST(GpuDistributed, TraceDirWritesOneTracePerRank) {
  REQUIRE_TWO_GPUS();
  const std::string traces = Bin("gpu-test-runs/dist_trace_dir_traces");
  static const std::unique_ptr<Recorded> m = Make(
      "trace_dir", {"--trace-dir", traces},
      DdpJob(Torchrun(29525), {"--steps", "10", "--straggler-rank", "1", "--straggler-ms", "20"}),
      {traces});
  ASSERT_RUN_OK(*m);
  ASSERT_NO_FATAL_FAILURE(ExpectRanksAndLauncher(*m));
  ASSERT_TRUE(fs::is_directory(traces)) << Tail(m->result.out);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(traces)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 2u);
  std::set<int> ranks;
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    int rank = -1;
    unsigned long pid = 0;
    char rest[64] = {};
    ASSERT_EQ(std::sscanf(name.c_str(), "rank%d.%lu.%63s", &rank, &pid, rest), 3) << name;
    EXPECT_EQ(std::string(rest), "pt.trace.json") << name;
    ranks.insert(rank);
    const std::string text = ReadText(f.string());
    const size_t at = text.find("\"distributedInfo\"");
    ASSERT_NE(at, std::string::npos) << name;
    // Its value is a flat object: from its '{' to the first '}'.
    const size_t from = text.find('{', at), to = text.find('}', at);
    ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to) << name;
    const nlohmann::json info =
        nlohmann::json::parse(text.substr(from, to + 1 - from), nullptr, false);
    ASSERT_FALSE(info.is_discarded()) << text.substr(at, to + 1 - at);
    std::cout << name << ": " << info.dump() << "\n";
    EXPECT_EQ(info.value("backend", ""), "nccl") << name;
    EXPECT_EQ(info.value("rank", -1), rank) << name;
    EXPECT_EQ(info.value("world_size", -1), 2) << name;
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  kprof::Run back;
  ASSERT_NO_THROW(back = ReadInputs({traces}));
  ASSERT_EQ(back.processes.size(), 2u);
  EXPECT_EQ(Ranks(back), (std::set<int>{0, 1}));
}
