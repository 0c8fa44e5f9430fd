// The timeline model (kprof/timeline.h): its invariants on every real recording, and the gap
// classification on hand-built runs whose answers are known exactly.
#include "kprof/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "kprof/analysis.h"
#include "test_util.h"

namespace kprof {
namespace {

using test::TraceBuilder;

std::vector<std::string> RecordedInputs() {
  std::vector<std::string> inputs;
  const std::string root = KPROF_SOURCE_DIR;
  for (const auto& d : std::filesystem::directory_iterator(root + "/tests/fixtures/gpu"))
    if (d.path().filename() != "diff") inputs.push_back(d.path().string());
  inputs.push_back(root + "/tests/fixtures/gpu/diff/base/rep1");
  inputs.push_back(root + "/examples/default-run");
  inputs.push_back(root + "/tests/fixtures/kineto/mlp_train_free.trace.json.gz");
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

class RecordedTimeline : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordedTimeline, Invariants) {
  const kprof::Run run = ReadInputs({GetParam()});
  const Timeline tl = BuildTimeline(run);
  ASSERT_EQ(tl.processes.size(), run.processes.size());
  std::vector<int> open;
  for (size_t pi = 0; pi < tl.processes.size(); ++pi) {
    const ProcessTimeline& t = tl.processes[pi];
    const ProcessTrace& p = run.processes[pi];
    ASSERT_EQ(t.process, &p);

    // Every GPU activity exactly once, in (start, end) order.
    std::set<const Record*> in_acts(t.acts.begin(), t.acts.end());
    size_t activities = 0;
    for (const Record& r : p.records)
      if (IsGpuActivity(r.Kind())) {
        ++activities;
        EXPECT_TRUE(in_acts.count(&r));
      }
    EXPECT_EQ(t.acts.size(), activities);
    EXPECT_EQ(in_acts.size(), activities);
    EXPECT_TRUE(std::is_sorted(t.acts.begin(), t.acts.end(), [](const Record* a, const Record* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns < b->end_ns;
    }));
    ASSERT_EQ(t.act_range.size(), t.acts.size());
    ASSERT_EQ(t.first_run.size(), t.acts.size());

    // The busy intervals: sorted, disjoint, covering exactly the activities' union.
    std::vector<std::pair<uint64_t, uint64_t>> iv;
    for (const Record* a : t.acts) iv.emplace_back(a->start_ns, std::max(a->start_ns, a->end_ns));
    uint64_t busy = 0;
    for (size_t i = 0; i < t.busy.size(); ++i) {
      EXPECT_LE(t.busy[i].first, t.busy[i].second);
      if (i) {
        EXPECT_LT(t.busy[i - 1].second, t.busy[i].first);
      }
      busy += t.busy[i].second - t.busy[i].first;
    }
    EXPECT_EQ(busy, UnionLength(iv));

    // One gap between each pair of busy intervals, its claims within its length.
    ASSERT_EQ(t.gaps.size(), t.busy.empty() ? 0 : t.busy.size() - 1);
    std::set<const Record*> seen_kernel_names;
    for (size_t i = 0; i < t.gaps.size(); ++i) {
      const Gap& g = t.gaps[i];
      EXPECT_EQ(g.start_ns, t.busy[i].second);
      EXPECT_EQ(g.end_ns, t.busy[i + 1].first);
      EXPECT_EQ(t.acts[g.next]->start_ns, g.end_ns);
      EXPECT_LE(g.wait_ns + g.rest_ns, g.Len());
      if (g.kind == GapKind::Warmup || g.kind == GapKind::Other) {
        EXPECT_EQ(g.rest_ns, 0u);
      }
      if (g.kind == GapKind::Long) {
        EXPECT_GE(g.Len(), kLongGapNs);
      }
      if (g.kind == GapKind::Short) {
        EXPECT_LT(g.Len(), kLongGapNs);
        EXPECT_EQ(t.acts[g.next]->Kind(), RecordKind::Kernel);
      }
    }

    // The range at each launch is the innermost one open on the launching thread; for work of
    // a graph node whose capture is known, the innermost one open where it was captured. A
    // library's range inside a PyTorch op gives it to the op (ProcessIndex::owner), which is open
    // there too.
    const auto owned = [&](const std::vector<int>& o) {
      if (o.empty()) return -1;
      const int r = t.index.owner.empty() ? o.back() : t.index.owner[static_cast<size_t>(o.back())];
      EXPECT_NE(std::find(o.begin(), o.end(), r), o.end()) << "an owner not open around its range";
      return r;
    };
    for (size_t i = 0; i < t.acts.size(); ++i) {
      if (const uint64_t node = GraphNodeOf(*t.acts[i]); node != 0) {
        const int captured = t.graphs.CaptureRange(node);
        if (captured >= 0) {
          const Record* made = t.graphs.made.at(node);
          t.index.OpenAt(made->tid, made->start_ns, open);
          ASSERT_FALSE(open.empty());
          EXPECT_EQ(t.act_range[i], owned(open));
          EXPECT_EQ(captured, owned(open));
          continue;
        }
      }
      const Record* api = t.Api(*t.acts[i]);
      if (api == nullptr) {
        EXPECT_EQ(t.act_range[i], -1);
        continue;
      }
      t.index.OpenAt(api->tid, api->start_ns, open);
      EXPECT_EQ(t.act_range[i], owned(open));
    }

    // First runs: one per kernel name, the earliest.
    std::set<uint32_t> names;
    for (size_t i = 0; i < t.acts.size(); ++i) {
      if (t.acts[i]->Kind() != RecordKind::Kernel) {
        EXPECT_FALSE(t.first_run[i]);
        continue;
      }
      EXPECT_EQ(t.first_run[i], names.insert(t.acts[i]->name).second);
    }
  }
}

// One pass with all_views gives each view exactly as a pass for that view alone does.
TEST_P(RecordedTimeline, AllViewsInOnePassEqualEachViewAlone) {
  const kprof::Run run = ReadInputs({GetParam()});
  const Timeline tl = BuildTimeline(run);
  AnalysisOptions all;
  all.all_views = true;
  const Analysis one = Analyze(tl, all);
  const auto same = [](const std::vector<GroupRow>& a, const std::vector<GroupRow>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].key, b[i].key);
      EXPECT_EQ(a[i].calls, b[i].calls) << a[i].key;
      EXPECT_EQ(a[i].gpu_ns, b[i].gpu_ns) << a[i].key;
      EXPECT_EQ(a[i].gpu_projected_ns, b[i].gpu_projected_ns) << a[i].key;
      EXPECT_EQ(a[i].cpu_ns, b[i].cpu_ns) << a[i].key;
      EXPECT_EQ(a[i].kernels, b[i].kernels) << a[i].key;
      EXPECT_EQ(a[i].bytes, b[i].bytes) << a[i].key;
      EXPECT_EQ(a[i].mem_delta_bytes, b[i].mem_delta_bytes) << a[i].key;
      ASSERT_EQ(a[i].kernel_rows.size(), b[i].kernel_rows.size()) << a[i].key;
      for (size_t k = 0; k < a[i].kernel_rows.size(); ++k) {
        EXPECT_EQ(a[i].kernel_rows[k].name, b[i].kernel_rows[k].name);
        EXPECT_EQ(a[i].kernel_rows[k].stat.total_ns, b[i].kernel_rows[k].stat.total_ns);
        EXPECT_EQ(a[i].kernel_rows[k].grid.x, b[i].kernel_rows[k].grid.x);
      }
    }
  };
  for (GroupBy by : {GroupBy::RangePath, GroupBy::Stream, GroupBy::Device}) {
    AnalysisOptions alone;
    alone.by = by;
    const Analysis v = Analyze(tl, alone);
    same(by == GroupBy::RangePath ? one.paths
         : by == GroupBy::Stream  ? one.streams
                                  : one.devices,
         v.rows);
    EXPECT_GT(v.rows.size(), 0u) << GroupByName(by);
  }
  // The requested view (op) and the shared parts are those of a plain pass.
  const Analysis plain = Analyze(tl, {});
  same(one.rows, plain.rows);
  same(one.ops, plain.ops);
  EXPECT_EQ(one.summary.gpu_busy_ns, plain.summary.gpu_busy_ns);
  EXPECT_TRUE(plain.paths.empty() && plain.streams.empty() && plain.devices.empty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RecordedTimeline, ::testing::ValuesIn(RecordedInputs()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string n = std::filesystem::path(param_info.param).filename();
                           if (n == "rep1") n = "diff_base_rep1";
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

kprof::Run OneProcess(const TraceBuilder& b) {
  kprof::Run run;
  run.processes.push_back(b.t);
  return run;
}

TEST(TimelineGaps, EachGapIsClassifiedOnce) {
  TraceBuilder b;
  // k1 opens the window; then a short gap before k1 again (launch latency), a long gap before
  // k2's first run (warm-up), a long gap before k1 (host busy elsewhere), and a short gap before
  // a copy (not priced).
  b.Launch(1, 0, "k1", 10'000, 20'000);
  b.Launch(1, 21'000, "k1", 25'000, 30'000);           // gap 5 us: Short
  b.Launch(1, 31'000, "k2", 3'000'000, 3'010'000);     // gap ~3 ms, k2's first run: Warmup
  b.Launch(1, 3'020'000, "k1", 6'000'000, 6'010'000);  // gap ~3 ms: Long
  Record& copy = b.Add(RecordKind::Memcpy, "", 6'015'000, 6'020'000);  // gap 5 us: Other
  copy.flags = static_cast<uint8_t>(CopyKind::DtoH);
  const kprof::Run run = OneProcess(b);
  const Timeline tl = BuildTimeline(run);
  const ProcessTimeline& t = tl.processes[0];
  ASSERT_EQ(t.gaps.size(), 4u);
  EXPECT_EQ(t.gaps[0].kind, GapKind::Short);
  EXPECT_EQ(t.gaps[0].launch_ns(), 5'000u);
  EXPECT_EQ(t.gaps[1].kind, GapKind::Warmup);
  EXPECT_EQ(t.gaps[1].rest_ns, 0u);
  EXPECT_EQ(t.gaps[2].kind, GapKind::Long);
  EXPECT_EQ(t.gaps[2].idle_ns(), 6'000'000u - 3'010'000u);
  EXPECT_EQ(t.gaps[2].launch_ns(), 0u);
  EXPECT_EQ(t.gaps[3].kind, GapKind::Other);
  EXPECT_EQ(t.gaps[3].rest_ns, 0u);
}

TEST(TimelineGaps, WaitsAndAllocationsAreTakenOffFirst) {
  TraceBuilder b;
  b.Launch(1, 0, "k1", 10'000, 20'000);
  b.Launch(1, 21'000, "k2", 22'000, 23'000);  // k2's first run after a 2 us gap: Warmup
  // A 2 ms gap before k1 again: a synchronize that blocked from the gap's start until 100 us into
  // it, and a 300 us cudaFree inside it.
  Record& sync = b.Add(RecordKind::RuntimeApi, "cudaDeviceSynchronize", 23'000, 123'000);
  sync.tid = 1;
  Record& free_call = b.Add(RecordKind::RuntimeApi, "cudaFree", 500'000, 800'000);
  free_call.tid = 1;
  b.Launch(1, 2'000'000, "k1", 2'023'000, 2'030'000);
  const kprof::Run run = OneProcess(b);
  const Timeline tl = BuildTimeline(run);
  const ProcessTimeline& t = tl.processes[0];
  ASSERT_EQ(t.gaps.size(), 2u);
  ASSERT_EQ(t.waits.size(), 1u);
  EXPECT_EQ(t.waits[0].what, "cudaDeviceSynchronize");
  EXPECT_EQ(t.waits[0].blocked_ns, 100'000u);
  const Gap& g = t.gaps[1];
  EXPECT_EQ(g.Len(), 2'000'000u);
  EXPECT_EQ(g.kind, GapKind::Long);
  EXPECT_EQ(g.wait_ns, 100'000u);
  // After the release (100 us into the gap) the host works until the launch call at 2 ms, less
  // the cudaFree: 1.577 ms of its own work after the wait. The wait (the gap's first 100 us) and
  // that work (from 100 us on) explain 1.677 ms; the rest is the 23 us from the launch call to
  // the kernel.
  EXPECT_EQ(g.host_at, 100'000u);
  EXPECT_EQ(g.host_ns, 2'000'000u - 123'000u - 300'000u);
  EXPECT_EQ(g.explained_ns(), 100'000u + 1'577'000u);
  EXPECT_EQ(g.rest_ns, 23'000u);
  ASSERT_EQ(t.alloc_calls.size(), 1u);
  EXPECT_EQ(t.alloc_calls[0], std::make_pair(uint64_t{500'000}, uint64_t{800'000}));
}

TEST(TimelineNames, KernelNamesAreDemangledAndSharedAcrossProcesses) {
  TraceBuilder a(1), b(2);
  a.Launch(1, 0, "_Z3fooPf", 10, 20);
  b.Launch(1, 0, "_Z3fooPf", 10, 20);
  kprof::Run run;
  run.processes = {a.t, b.t};
  const Timeline tl = BuildTimeline(run);
  const std::string& na = tl.processes[0].KernelName(*tl.processes[0].acts[0]);
  const std::string& nb = tl.processes[1].KernelName(*tl.processes[1].acts[0]);
  EXPECT_EQ(na, "foo(float*)");
  EXPECT_EQ(&na, &nb);
}

}  // namespace
}  // namespace kprof
