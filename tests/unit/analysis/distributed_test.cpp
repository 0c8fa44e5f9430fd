// Several GPUs and ranks (issue 13, docs/distributed.md): one key per physical GPU, per-GPU and
// per-rank partitions of the wall time that add up, collectives matched across ranks by their
// order on each communicator, and the rank-imbalance and exposed-communication hints, on
// synthetic two-rank runs whose answers are known by construction.
#include "kprof/distributed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "../hints/trace_builder.h"
#include "kprof/analysis.h"
#include "kprof/hints.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

using namespace kprof;
using kprof::testing::TraceBuilder;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUs = 1'000;
const char* kAllReduce =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const char* kBroadcast = "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

struct Step {
  uint64_t load_batch_ns;  // host work before the step's launches
};

// One rank of a data-parallel job on device `rank`: a broadcast of the parameters at start-up
// (990 ms, both ranks together, as DDP does), then steps of 40 ms beginning at 1 s + 40 ms * i,
// each holding "step" > "load_batch" (host work), then a forward and a backward kernel of 5 ms
// each, then an all-reduce on the NCCL stream (20) that begins when the backward ends and ends
// 1 ms after the last rank has arrived (`arrive_last[i]`).
TraceBuilder Rank(int rank, const std::vector<uint64_t>& load_batch,
                  const std::vector<uint64_t>& arrive_last, const std::string& uuid = "") {
  TraceBuilder b(1000 + static_cast<uint32_t>(rank));
  const uint16_t dev = static_cast<uint16_t>(rank);
  b.Device(dev, "NVIDIA H100 80GB HBM3", 132);
  b.Trace().rank = rank;
  b.Trace().meta["rank"] = std::to_string(rank);
  b.Trace().meta["world_size"] = "2";
  b.Trace().meta["hostname"] = "node1";
  if (!uuid.empty()) b.Trace().meta["device." + std::to_string(dev) + ".uuid"] = uuid;
  b.Kernel(kBroadcast, 990 * kMs, 991 * kMs,
           b.Api("cudaLaunchKernel", 989 * kMs, 989 * kMs + 10 * kUs), {24, 1, 1}, 20, dev);
  for (size_t i = 0; i < load_batch.size(); ++i) {
    const uint64_t t = 1000 * kMs + i * 40 * kMs;
    const uint64_t go = t + load_batch[i];
    b.Range("step", t, t + 39 * kMs);
    b.Range("load_batch", t, go);
    uint32_t c = b.Api("cudaLaunchKernel", go, go + 10 * kUs);
    b.Kernel("forward_gemm", go + 20 * kUs, go + 20 * kUs + 5 * kMs, c, {1024, 1, 1}, 7, dev);
    c = b.Api("cudaLaunchKernel", go + 10 * kUs, go + 20 * kUs);
    const uint64_t bwd_end = go + 20 * kUs + 10 * kMs;
    b.Kernel("backward_gemm", go + 20 * kUs + 5 * kMs, bwd_end, c, {1024, 1, 1}, 7, dev);
    c = b.Api("cudaLaunchKernel", go + 20 * kUs, go + 30 * kUs);
    b.Kernel(kAllReduce, bwd_end, std::max(bwd_end, arrive_last[i]) + 1 * kMs, c, {24, 1, 1}, 20,
             dev);
  }
  return b;
}

/// Two ranks of `steps` steps; rank 1's load_batch takes `delay` more than rank 0's 100 us, and
/// `stall` more again in step `stall_at` (a slower warm-up, a one-off pause).
kprof::Run TwoRanks(size_t steps, uint64_t delay, uint64_t stall = 0, size_t stall_at = 0) {
  std::vector<uint64_t> lb0(steps, 100 * kUs), lb1(steps, 100 * kUs + delay), last(steps);
  lb1[stall_at] += stall;
  for (size_t i = 0; i < steps; ++i)
    last[i] = 1000 * kMs + i * 40 * kMs + lb1[i] + 20 * kUs + 10 * kMs;
  kprof::Run run;
  run.processes.push_back(Rank(0, lb0, last).Trace());
  run.processes.push_back(Rank(1, lb1, last).Trace());
  return run;
}

}  // namespace

TEST(CommKernels, NcclNamesOfEveryVersionAreCommunication) {
  EXPECT_TRUE(IsCommKernel(kAllReduce));
  EXPECT_TRUE(
      IsCommKernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, "
                   "ncclWork*)"));
  EXPECT_TRUE(IsCommKernel("ncclSymDevKernel_AllReduce_AGxLL_R_sum_f32"));
  // As CUPTI names them to the agent (mangled): never replayed.
  EXPECT_TRUE(IsCommKernel(
      "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_TRUE(IsCommKernel("_Z42ncclSymDevKernel_AllReduce_AGxLL_R_sum_f3219ncclSymDevArgs"));
  EXPECT_TRUE(IsCommKernel("void ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_FALSE(IsCommKernel("ampere_sgemm_128x64_nn"));
  EXPECT_FALSE(IsCommKernel("void at::native::vectorized_elementwise_kernel<4, nccl_like>"));
  // Mangled, as the agent's launch callbacks see them (replay never replays one: it waits on the
  // other ranks, and a 2-rank DDP job hung under --metrics replay before 2026-11-27).
  EXPECT_TRUE(IsCommKernelName("_Z24ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs"));
  EXPECT_TRUE(IsCommKernelName("_Z22ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_tP11ncclDevComm"));
  EXPECT_FALSE(IsCommKernelName("_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi"));
  EXPECT_EQ(CollectiveOf(kAllReduce), "AllReduce");
  EXPECT_EQ(CollectiveOf(kBroadcast), "Broadcast");
  EXPECT_EQ(CollectiveOf("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*)"), "AllGather");
  EXPECT_EQ(CollectiveOf("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)"), "ReduceScatter");
  EXPECT_EQ(CollectiveOf("ncclSymDevKernel_AllReduce_AGxLL_R_sum_f32"), "AllReduce");
  EXPECT_EQ(CollectiveOf("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), "SendRecv");
  EXPECT_EQ(CollectiveOf("ncclDevKernel_Generic"), "Generic");
  EXPECT_EQ(CollectiveOf("sgemm"), "");
}

TEST(DeviceKeys, OneKeyPerPhysicalGpu) {
  // Two ranks on dev 0 and dev 1 of one host: two GPUs.
  {
    kprof::Run run = TwoRanks(2, 0);
    Timeline tl = BuildTimeline(run);
    DeviceKeys keys(tl);
    ASSERT_EQ(keys.Devices().size(), 2u);
    EXPECT_EQ(keys.Key(0, 0), "dev 0 NVIDIA H100 80GB HBM3");
    EXPECT_EQ(keys.Key(1, 1), "dev 1 NVIDIA H100 80GB HBM3");
    EXPECT_NE(keys.Index(0, 0), keys.Index(1, 1));
  }
  // Each rank sees its GPU as dev 0 (CUDA_VISIBLE_DEVICES): the UUIDs tell them apart.
  {
    std::vector<uint64_t> lb(2, 100 * kUs), last(2, 0);
    TraceBuilder a = Rank(0, lb, last, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
    TraceBuilder b = Rank(1, lb, last, "GPU-bbbbbbbb-1111-2222-3333-444444444444");
    // Rank 1 on its ordinal 0 too.
    for (Record& r : b.Trace().records)
      if (IsGpuKind(r.Kind())) r.device = 0;
    b.Trace().meta["device.0.name"] = "NVIDIA H100 80GB HBM3";
    b.Trace().meta["device.0.uuid"] = "GPU-bbbbbbbb-1111-2222-3333-444444444444";
    a.Trace().meta["device.0.uuid"] = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
    kprof::Run run;
    run.processes = {a.Trace(), b.Trace()};
    Timeline tl = BuildTimeline(run);
    DeviceKeys keys(tl);
    ASSERT_EQ(keys.Devices().size(), 2u);
    EXPECT_EQ(keys.Key(0, 0), "dev 0 NVIDIA H100 80GB HBM3 [GPU-aaaaaaaa]");
    EXPECT_EQ(keys.Key(1, 0), "dev 0 NVIDIA H100 80GB HBM3 [GPU-bbbbbbbb]");
    // The same UUID in both: one GPU shared by two processes.
    run.processes[1].meta["device.0.uuid"] = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
    Timeline shared = BuildTimeline(run);
    DeviceKeys one(shared);
    ASSERT_EQ(one.Devices().size(), 1u);
    EXPECT_EQ(one.Key(0, 0), "dev 0 NVIDIA H100 80GB HBM3");
    EXPECT_EQ(one.Index(1, 0), 0u);
  }
  // dev 0 on two hosts, without UUIDs: two GPUs, named by host.
  {
    std::vector<uint64_t> lb(1, 100 * kUs), last(1, 0);
    TraceBuilder a = Rank(0, lb, last), b = Rank(0, lb, last);
    b.Trace().pid = 2000;
    b.Trace().rank = 1;
    b.Trace().meta["hostname"] = "node2";
    kprof::Run run;
    run.processes = {a.Trace(), b.Trace()};
    Timeline tl = BuildTimeline(run);
    DeviceKeys keys(tl);
    ASSERT_EQ(keys.Devices().size(), 2u);
    EXPECT_EQ(keys.Key(0, 0), "dev 0 NVIDIA H100 80GB HBM3 on node1");
    EXPECT_EQ(keys.Key(1, 0), "dev 0 NVIDIA H100 80GB HBM3 on node2");
  }
}

TEST(Distributed, PerGpuAndPerRankPartitionsAddUp) {
  kprof::Run run = TwoRanks(10, 20 * kMs);
  Timeline tl = BuildTimeline(run);
  AnalysisOptions by_device;
  by_device.by = GroupBy::Device;
  Analysis a = Analyze(tl, by_device);
  const DistributedSummary& D = a.dist;
  ASSERT_EQ(D.devices.size(), 2u);
  ASSERT_EQ(D.ranks.size(), 2u);
  EXPECT_EQ(a.summary.gpus, 2u);
  uint64_t busy = 0, wall = 0, kernels = 0, kernel_ns = 0;
  for (const DeviceUsage& d : D.devices) {
    EXPECT_EQ(d.compute_ns + d.comm_only_ns + d.copy_only_ns + d.idle_ns, d.wall_ns) << d.key;
    EXPECT_GE(d.utilisation, 0.0);
    EXPECT_LE(d.utilisation, 1.0);
    EXPECT_EQ(d.users.size(), 1u);
    busy += d.busy_ns;
    wall += d.wall_ns;
  }
  for (const RankUsage& r : D.ranks) {
    EXPECT_EQ(r.compute_ns + r.comm_only_ns + r.copy_only_ns + r.idle_ns, r.wall_ns) << r.label;
    EXPECT_EQ(r.comm_ns, r.comm_only_ns + r.overlap_ns);
    EXPECT_EQ(r.comm_kernels, 11u);          // the start-up broadcast and 10 all-reduces
    EXPECT_EQ(r.compute_ns, 10 * 10 * kMs);  // forward + backward, 10 ms a step
    kernels += r.kernels;
    kernel_ns += r.kernel_ns;
  }
  EXPECT_EQ(kernels, a.summary.kernels);
  EXPECT_EQ(kernel_ns, a.summary.kernel_ns);
  // GPU busy and utilisation are per GPU: the sum of the two, over the sum of their wall times.
  EXPECT_EQ(a.summary.gpu_busy_ns, busy);
  EXPECT_NEAR(a.summary.utilisation, static_cast<double>(busy) / static_cast<double>(wall), 1e-12);
  EXPECT_LE(a.summary.utilisation, 1.0);
  // The device view: a row per GPU, shares of GPU time adding up to 100%.
  ASSERT_EQ(a.rows.size(), 2u);
  double share = 0;
  for (const GroupRow& g : a.rows) {
    EXPECT_GE(g.share, 0.0);
    EXPECT_LE(g.share, 1.0);
    share += g.share;
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  // Rank 1 waits for nobody; rank 0 waits 20 ms a step with nothing else to run.
  EXPECT_EQ(D.ranks[0].rank, 0);
  EXPECT_EQ(D.ranks[0].wait_ns, 10 * 20 * kMs);
  EXPECT_EQ(D.ranks[0].exposed_wait_ns, 10 * 20 * kMs);
  EXPECT_EQ(D.ranks[1].wait_ns, 0u);
  EXPECT_EQ(D.ranks[1].last, 10u);
}

TEST(Distributed, CollectivesMatchByOrderOnEachCommunicator) {
  kprof::Run run = TwoRanks(10, 20 * kMs);
  // A broadcast at start-up on another stream of each rank (a second communicator, the first
  // to run): its call pairs with the other rank's, the all-reduces with each other.
  for (int r = 0; r < 2; ++r) {
    ProcessTrace& p = run.processes[static_cast<size_t>(r)];
    Record k{};
    k.kind = static_cast<uint8_t>(RecordKind::Kernel);
    k.device = static_cast<uint16_t>(r);
    k.start_ns = 900 * kMs + static_cast<uint64_t>(r) * kMs;
    k.end_ns = 905 * kMs;
    k.tid = 30;
    k.name = p.strings.Intern(kBroadcast);
    p.records.push_back(k);
  }
  Analysis a = Analyze(BuildTimeline(run));
  const DistributedSummary& D = a.dist;
  EXPECT_EQ(D.communicators, 2u);
  ASSERT_EQ(D.collectives.size(), 12u);
  EXPECT_EQ(D.unmatched_kernels, 0u);
  EXPECT_EQ(D.collectives[0].kind, "Broadcast");
  EXPECT_EQ(D.collectives[0].channel, 0u);
  EXPECT_EQ(D.collectives[0].spread_ns, 1 * kMs);
  // The other communicator: its start-up broadcast, both ranks together, then the all-reduces.
  EXPECT_EQ(D.collectives[1].kind, "Broadcast");
  EXPECT_EQ(D.collectives[1].channel, 1u);
  EXPECT_EQ(D.collectives[1].spread_ns, 0u);
  for (size_t i = 2; i < D.collectives.size(); ++i) {
    const Collective& c = D.collectives[i];
    EXPECT_EQ(c.kind, "AllReduce");
    ASSERT_EQ(c.parts.size(), 2u);
    EXPECT_EQ(c.seq, i - 1);
    EXPECT_EQ(D.ranks[c.parts[c.last].rank].rank, 1);
    EXPECT_EQ(c.spread_ns, 20 * kMs);
    EXPECT_EQ(c.parts[0].wait_ns, 20 * kMs);
    EXPECT_EQ(c.parts[1].wait_ns, 0u);
  }
}

TEST(Distributed, MatchingStopsWhereTheCollectivesDisagree) {
  kprof::Run run = TwoRanks(4, 0);
  // Rank 1's second all-reduce (third call, after the broadcast) is a reduce-scatter: it and
  // the two after it cannot be paired.
  ProcessTrace& p = run.processes[1];
  int seen = 0;
  for (Record& r : p.records)
    if (r.Kind() == RecordKind::Kernel && IsCommKernel(p.Name(r)) && ++seen == 3)
      r.name = p.strings.Intern("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(x)");
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.dist.collectives.size(), 2u);
  EXPECT_EQ(a.dist.unmatched_kernels, 6u);  // three on each rank
}

TEST(Distributed, OneProcessHasNoCollectivesAndKeepsItsTotals) {
  kprof::Run run = TwoRanks(3, 0);
  run.processes.pop_back();
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.gpus, 1u);
  EXPECT_FALSE(a.dist.Multi());
  EXPECT_TRUE(a.dist.collectives.empty());
  EXPECT_EQ(a.dist.unmatched_kernels, 0u);
  // One GPU: GPU busy is the union of its work, as without this analysis.
  EXPECT_EQ(a.summary.gpu_busy_ns, a.dist.devices[0].busy_ns);
}

TEST(RankImbalance, NamesTheStragglerAndPricesTheOthersWaiting) {
  kprof::Run run = TwoRanks(10, 20 * kMs);
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  std::vector<Hint> hints = ComputeHints(tl, a);
  const Hint* h = FindHint(hints, "rank-imbalance");
  ASSERT_NE(h, nullptr);
  EXPECT_NE(h->summary.find("rank 1 is the straggler"), std::string::npos) << h->summary;
  // Rank 0's GPU had nothing but waiting to do for 20 ms of each of the 10 steps.
  EXPECT_EQ(h->est_saving_ns, 10 * 20 * kMs);
  uint64_t claimed = 0;
  for (const SavingClaim& c : h->claims) claimed += c.end_ns - c.start_ns;
  EXPECT_EQ(claimed, h->est_saving_ns);
  // What it did differently: the load_batch range, 20 ms a call more.
  bool range = false;
  for (const std::string& e : h->evidence)
    range |= e.find("range 'load_batch'") != std::string::npos;
  EXPECT_TRUE(range) << ::testing::PrintToString(h->evidence);
}

// DDP's shape, as recorded on the H100: each step a forward (5 ms), the first bucket's
// all-reduce launched as soon as it is ready, then the rest of the backward (2 ms, a 2 ms launch
// gap, 3 ms) and the second bucket's all-reduce. Rank 1 loads its batch 20 ms late. Rank 0's
// launch gap falls inside its first all-reduce, which waits for rank 1 (its GPU counts busy
// there), while rank 1's own gap is idle: rank 1's GPU sits idle 22 ms a step more than rank
// 0's, and rank 0 waits 26 ms (20 in the first all-reduce, 6 in the second, which it reached
// held by the first). The job loses 20 ms a step: rank 1's lateness at the all-reduce rank 0
// reached on its own.
TEST(RankImbalance, TheOthersLaunchGapsUnderTheirWaitAreNotTheStragglers) {
  kprof::Run run;
  const uint64_t steps = 10;
  for (uint16_t rank = 0; rank < 2; ++rank) {
    TraceBuilder b(1000 + rank);
    b.Device(rank, "NVIDIA H100 80GB HBM3", 132);
    b.Trace().rank = rank;
    b.Trace().meta["hostname"] = "node1";
    for (uint64_t i = 0; i < steps; ++i) {
      const uint64_t t = 1000 * kMs + i * 50 * kMs, go = t + (rank ? 20 * kMs : 0);
      const uint64_t first = t + 20 * kMs + 5 * kMs;    // rank 1's arrival at the first
      const uint64_t second = t + 20 * kMs + 12 * kMs;  // and at the second all-reduce
      b.Range("step", t, t + 45 * kMs);
      b.Range("load_batch", t, go);
      const auto launch = [&](const char* name, uint64_t start, uint64_t end, Dim3 grid,
                              uint32_t stream) {
        b.Kernel(name, start, end, b.Api("cudaLaunchKernel", start - 20 * kUs, start - 10 * kUs),
                 grid, stream, rank);
      };
      launch("forward_gemm", go, go + 5 * kMs, {1024, 1, 1}, 7);
      launch(kAllReduce, go + 5 * kMs, first + 1 * kMs, {24, 1, 1}, 20);
      launch("backward_gemm", go + 5 * kMs, go + 7 * kMs, {1024, 1, 1}, 7);
      launch("backward_gemm", go + 9 * kMs, go + 12 * kMs, {1024, 1, 1}, 7);
      launch(kAllReduce, std::max(go + 12 * kMs, first + 1 * kMs), second + 1 * kMs, {24, 1, 1},
             20);
    }
    run.processes.push_back(b.Trace());
  }
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  EXPECT_EQ(a.dist.ranks[0].wait_ns, steps * 26 * kMs);
  const std::vector<Hint> hints = ComputeHints(tl, a);
  const Hint* h = FindHint(hints, "rank-imbalance");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_ns, steps * 20 * kMs);
  // Beyond rank 0 over the span (from rank 0's first arrival): 215 ms idle and 5 ms of compute
  // (rank 1's first forward falls in the span, rank 0's before it), 22 ms a step; the lateness
  // where rank 0 arrived on its own is 20 ms a step.
  bool both = false;
  for (const std::string& e : h->evidence)
    both |= e.find(
                "sat idle 215.00 ms more than the other ranks' and computed 5.00 ms more; it "
                "arrived 200.00 ms after them") != std::string::npos;
  EXPECT_TRUE(both) << ::testing::PrintToString(h->evidence);
}

TEST(RankImbalance, OneStalledStepIsNoStraggler) {
  // Balanced but for one 20 ms stall of rank 1 in the first step: rank 1 is the only one late,
  // at the one collective with a wait, and the others waited 20 ms (5% of the run), all of it in
  // the first of five stretches of the run: the median stretch lost nothing.
  kprof::Run run = TwoRanks(10, 0, 20 * kMs);
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  EXPECT_EQ(a.dist.ranks[0].wait_ns, 20 * kMs);
  EXPECT_EQ(FindHint(ComputeHints(tl, a), "rank-imbalance"), nullptr);
}

TEST(RankImbalance, AStallDoesNotAddToTheStragglersPrice) {
  // Rank 1 is 5 ms late every step and 20 ms more in the first: the job runs 5 ms a step at its
  // pace (50 ms); the stall's 20 ms, in one stretch of the run, is not priced as its pace.
  kprof::Run run = TwoRanks(10, 5 * kMs, 20 * kMs);
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  EXPECT_EQ(a.dist.ranks[0].wait_ns, 70 * kMs);
  const std::vector<Hint> hints = ComputeHints(tl, a);
  const Hint* h = FindHint(hints, "rank-imbalance");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->est_saving_ns, 10 * 5 * kMs);
  bool uneven = false;
  for (const std::string& e : h->evidence)
    uneven |= e.find(
                  "in the median of 5 stretches with equal numbers of collectives it cost 5.00 "
                  "ms per collective it arrived last at; over its 10 such collectives 50.00 ms") !=
              std::string::npos;
  EXPECT_TRUE(uneven) << ::testing::PrintToString(h->evidence);
  // The same stall in the middle of the run.
  kprof::Run mid = TwoRanks(10, 5 * kMs, 20 * kMs, 5);
  Timeline tl_mid = BuildTimeline(mid);
  const std::vector<Hint> hints_mid = ComputeHints(tl_mid, Analyze(tl_mid));
  ASSERT_NE(FindHint(hints_mid, "rank-imbalance"), nullptr);
  EXPECT_EQ(FindHint(hints_mid, "rank-imbalance")->est_saving_ns, 10 * 5 * kMs);
}

TEST(RankImbalance, ASteadyStragglerKeepsItsPriceWhateverTheStretchesHold) {
  // 7, 12 or 17 steps (and the start-up broadcast) do not split into five equal stretches: some
  // hold one late collective more than others. Priced per late collective, the straggler still
  // costs 5 ms a step, and the evidence does not call its waiting uneven.
  for (size_t steps : {6u, 7u, 12u, 17u, 22u}) {
    kprof::Run run = TwoRanks(steps, 5 * kMs);
    Timeline tl = BuildTimeline(run);
    const std::vector<Hint> hints = ComputeHints(tl, Analyze(tl));
    const Hint* h = FindHint(hints, "rank-imbalance");
    ASSERT_NE(h, nullptr) << steps;
    EXPECT_EQ(h->est_saving_ns, steps * 5 * kMs) << steps;
    for (const std::string& e : h->evidence)
      EXPECT_EQ(e.find("uneven"), std::string::npos) << steps << ": " << e;
  }
}

TEST(RankImbalance, NoHintWhenRanksTakeTurnsOrArriveTogether) {
  // Arriving together: no wait at all.
  {
    kprof::Run run = TwoRanks(10, 0);
    Timeline tl = BuildTimeline(run);
    EXPECT_EQ(FindHint(ComputeHints(tl, Analyze(tl)), "rank-imbalance"), nullptr);
  }
  // Each rank late in turn by 2 ms: nobody is the straggler.
  {
    const size_t steps = 10;
    std::vector<uint64_t> lb0(steps), lb1(steps), last(steps);
    for (size_t i = 0; i < steps; ++i) {
      lb0[i] = 100 * kUs + (i % 2 ? 2 * kMs : 0);
      lb1[i] = 100 * kUs + (i % 2 ? 0 : 2 * kMs);
      last[i] = 1000 * kMs + i * 40 * kMs + std::max(lb0[i], lb1[i]) + 20 * kUs + 10 * kMs;
    }
    kprof::Run run;
    run.processes.push_back(Rank(0, lb0, last).Trace());
    run.processes.push_back(Rank(1, lb1, last).Trace());
    Timeline tl = BuildTimeline(run);
    Analysis a = Analyze(tl);
    EXPECT_EQ(a.dist.ranks[0].last, 5u);
    EXPECT_EQ(a.dist.ranks[1].last, 5u);
    EXPECT_EQ(FindHint(ComputeHints(tl, a), "rank-imbalance"), nullptr);
  }
}

TEST(ExposedCommunication, PricesTheTransferThatNoComputeHides) {
  kprof::Run run = TwoRanks(10, 20 * kMs);
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  std::vector<Hint> hints = ComputeHints(tl, a);
  const Hint* h = FindHint(hints, "exposed-communication");
  ASSERT_NE(h, nullptr);
  // The broadcast and each all-reduce transfer for 1 ms after the last arrival, on both ranks
  // at once, beside no compute: 11 ms for the job (not 22: the ranks' stretches coincide). The
  // waiting is not here.
  EXPECT_EQ(h->est_saving_ns, 11 * kMs);
  // The joint figure counts the two hints' time once: they claim different instants.
  const JointSaving j = EstimateJoint({*h, *FindHint(hints, "rank-imbalance")});
  EXPECT_EQ(j.est_saving_ns, 11 * kMs + 200 * kMs);
}

TEST(CommKernels, OtherRulesLeaveThemAlone) {
  // NCCL's all-reduce runs 24 blocks on a 132-SM GPU and dominates GPU time: neither
  // underfilled-grid nor dominant-kernel is about it.
  kprof::Run run = TwoRanks(10, 20 * kMs);
  Timeline tl = BuildTimeline(run);
  Analysis a = Analyze(tl);
  ASSERT_TRUE(IsCommKernel(a.kernels.front().name));
  for (const Hint& h : ComputeHints(tl, a)) {
    EXPECT_NE(h.id, "underfilled-grid");
    for (const std::string& e : h.evidence)
      if (h.id == "dominant-kernel") {
        EXPECT_EQ(e.find("nccl"), std::string::npos) << e;
      }
  }
}

// The reports of a two-rank run: the GPUs and Ranks tables, the collectives, the hint, and the
// same figures in JSON (read back) and Markdown.
TEST(DistributedReport, TablesJsonAndMarkdownOfTwoRanks) {
  kprof::test::TempDir dir;
  kprof::Run run = TwoRanks(10, 20 * kMs);
  for (const ProcessTrace& p : run.processes)
    WriteRunFile(
        dir / ("kprof.rank" + std::to_string(p.rank) + "." + std::to_string(p.pid) + ".kprof"), p);
  const auto table = kprof::test::RunCommand(kprof::test::Kprof() + " report " + dir.path());
  ASSERT_EQ(table.status, 0) << table.output;
  const std::string& out = table.output;
  EXPECT_NE(out.find("GPU busy              422.00 ms over 2 GPUs (51.5% of their wall"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\nGPUs ("), std::string::npos) << out;
  EXPECT_NE(out.find("dev 0 NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(out.find("dev 1 NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(out.find("\nRanks ("), std::string::npos);
  EXPECT_NE(out.find("all ranks"), std::string::npos);
  EXPECT_NE(out.find("11 matched across ranks on 1 communicator (10 AllReduce, 1 Broadcast)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank-imbalance: rank 1 is the straggler"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nProcesses\n"), std::string::npos);

  const auto js =
      kprof::test::RunCommand(kprof::test::Kprof() + " report " + dir.path() + " --format json");
  ASSERT_EQ(js.status, 0) << js.output;
  const auto j = nlohmann::json::parse(js.output);
  ASSERT_EQ(j["gpus"].size(), 2u);
  ASSERT_EQ(j["ranks"].size(), 2u);
  uint64_t kernel_ns = 0;
  for (const auto& r : j["ranks"]) {
    EXPECT_EQ(r["compute_ns"].get<uint64_t>() + r["comm_only_ns"].get<uint64_t>() +
                  r["copy_only_ns"].get<uint64_t>() + r["idle_ns"].get<uint64_t>(),
              r["wall_ns"].get<uint64_t>());
    kernel_ns += r["kernel_ns"].get<uint64_t>();
  }
  EXPECT_EQ(kernel_ns, j["summary"]["kernel_ns"].get<uint64_t>());
  EXPECT_EQ(j["ranks"][0]["wait_ns"], 10 * 20 * kMs);
  EXPECT_EQ(j["ranks"][1]["arrived_last"], 10);
  EXPECT_EQ(j["collectives"]["matched"], 11);
  EXPECT_EQ(j["collectives"]["by_kind"]["AllReduce"]["calls"], 10);
  for (const auto& g : j["gpus"]) {
    EXPECT_GE(g["utilisation"].get<double>(), 0.0);
    EXPECT_LE(g["utilisation"].get<double>(), 1.0);
  }

  const auto md =
      kprof::test::RunCommand(kprof::test::Kprof() + " report " + dir.path() + " --format md");
  ASSERT_EQ(md.status, 0) << md.output;
  EXPECT_NE(md.output.find("### GPUs"), std::string::npos);
  EXPECT_NE(md.output.find("| rank 0 (pid 1000) |"), std::string::npos) << md.output;
}

// torchrun's own process loads CUDA to count the GPUs, and so the agent: its file has no
// record and says it made no CUDA context. Under --capture it is no process "whose window
// never opened", and it is no rank.
TEST(Distributed, ALaunchersFileIsNoRankAndNoCaptureProblem) {
  kprof::Run run = TwoRanks(3, 0);
  for (ProcessTrace& p : run.processes) {
    p.meta["capture"] = "nvtx:step";
    p.meta["contexts"] = "1";
    Record w{};
    w.kind = static_cast<uint8_t>(RecordKind::CaptureWindow);
    w.device = kNoDevice;
    w.start_ns = 900 * kMs;
    w.end_ns = 2000 * kMs;
    w.flags = static_cast<uint8_t>(CaptureTrigger::Nvtx);
    w.name = p.strings.Intern("step");
    p.records.push_back(w);
  }
  ProcessTrace launcher;
  launcher.pid = 999;
  launcher.complete = true;
  launcher.meta = {{"capture", "nvtx:step"}, {"contexts", "0"}, {"capture_nvtx_ranges", "0"}};
  run.processes.push_back(launcher);
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.capture_windows, 2u);
  EXPECT_EQ(a.summary.capture_problem, "");
  EXPECT_EQ(a.dist.ranks.size(), 2u);
  // A worker whose window never opened still says so.
  run.processes.back().meta["contexts"] = "1";
  Analysis b = Analyze(BuildTimeline(run));
  EXPECT_NE(b.summary.capture_problem.find("never opened"), std::string::npos)
      << b.summary.capture_problem;
}
