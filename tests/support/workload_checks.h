// Assertions on recordings of the kernels/ workloads, shared by the GPU tests (live recordings)
// and the CPU tests on the committed fixtures (tests/fixtures/gpu, scripts/record_fixtures.sh):
// the same exact counts hold for both.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kprof/analysis.h"
#include "kprof/trace.h"

namespace kprof::testing {

// Counting helpers over one process's records.
inline size_t Count(const ProcessTrace& t, RecordKind k) {
  size_t n = 0;
  for (const auto& r : t.records) n += r.Kind() == k;
  return n;
}
inline size_t CountNamed(const ProcessTrace& t, RecordKind k, const std::string& substr) {
  size_t n = 0;
  for (const auto& r : t.records) {
    n += r.Kind() == k && t.Name(r).find(substr) != std::string::npos;
  }
  return n;
}
inline size_t CountCopies(const ProcessTrace& t, CopyKind kind, MemKind host, uint64_t bytes) {
  size_t n = 0;
  for (const auto& r : t.records) {
    if (r.Kind() != RecordKind::Memcpy || r.flags != static_cast<uint8_t>(kind)) continue;
    uint32_t host_side = kind == CopyKind::HtoD ? r.a : r.b;
    if (kind == CopyKind::DtoD || host_side == static_cast<uint32_t>(host)) n += r.bytes == bytes;
  }
  return n;
}
inline size_t CountSync(const ProcessTrace& t, SyncKind k) {
  size_t n = 0;
  for (const auto& r : t.records) {
    n += r.Kind() == RecordKind::Sync && r.flags == static_cast<uint8_t>(k);
  }
  return n;
}

inline const ProcessTrace& Only(const kprof::Run& run) {
  EXPECT_EQ(run.processes.size(), 1u);
  return run.processes.at(0);
}

inline void ExpectClean(const ProcessTrace& t) {
  EXPECT_TRUE(t.complete) << t.source << " has no End block";
  EXPECT_EQ(t.stats.dropped_records, 0u);
  EXPECT_EQ(t.stats.missing_timestamps, 0u);
  EXPECT_EQ(t.meta.count("displaced"), 0u);
}

inline void CheckVectorAdd(const Run& run) {
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(Count(t, RecordKind::Kernel), 1u);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "vector_add"), 1u);
  EXPECT_EQ(CountCopies(t, CopyKind::HtoD, MemKind::Pageable, 4u << 20), 2u);
  EXPECT_EQ(CountCopies(t, CopyKind::DtoH, MemKind::Pageable, 4u << 20), 1u);
  EXPECT_EQ(Count(t, RecordKind::Memcpy), 3u);
  EXPECT_EQ(CountNamed(t, RecordKind::RuntimeApi, "cudaDeviceSynchronize"), 1u);
  EXPECT_EQ(CountSync(t, SyncKind::ContextSynchronize), 1u);
  EXPECT_EQ(CountNamed(t, RecordKind::RuntimeApi, "cudaLaunchKernel"), 1u);
  // Three 4 MiB buffers were allocated and freed.
  EXPECT_EQ(Count(t, RecordKind::MemAlloc), 3u);
  EXPECT_EQ(Count(t, RecordKind::MemFree), 3u);
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.peak_memory_bytes, 3 * (4 << 20));
  EXPECT_EQ(a.summary.kernels, 1u);
  // Device properties reached the file.
  EXPECT_NE(t.meta.count("device.0.name"), 0u);
  EXPECT_NE(t.meta.at("device.0.sm_count"), "0");
  EXPECT_NE(t.meta.count("cupti_version"), 0u);
  EXPECT_NE(t.meta.count("driver_version"), 0u);
}

inline void CheckMemcpyKinds(const Run& run, uint64_t bytes) {
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(Count(t, RecordKind::Memcpy), 5u);
  EXPECT_EQ(CountCopies(t, CopyKind::HtoD, MemKind::Pageable, bytes), 1u);
  EXPECT_EQ(CountCopies(t, CopyKind::HtoD, MemKind::Pinned, bytes), 1u);
  EXPECT_EQ(CountCopies(t, CopyKind::DtoH, MemKind::Pageable, bytes), 1u);
  EXPECT_EQ(CountCopies(t, CopyKind::DtoH, MemKind::Pinned, bytes), 1u);
  EXPECT_EQ(CountCopies(t, CopyKind::DtoD, MemKind::Device, bytes), 1u);
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.memcpy_count[static_cast<int>(CopyKind::HtoD)], 2u);
  EXPECT_EQ(a.summary.memcpy_bytes[static_cast<int>(CopyKind::DtoH)], 2 * bytes);
}

inline void CheckMemsets(const Run& run) {
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(Count(t, RecordKind::Memset), 5u);
  uint64_t total = 0;
  for (const auto& rec : t.records) total += rec.Kind() == RecordKind::Memset ? rec.bytes : 0;
  EXPECT_EQ(total, 14u << 20);  // 1 + 2 + 3 + 4 + 4 MiB
}

inline void CheckSyncKinds(const Run& run) {
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "busy"), 14u);
  EXPECT_EQ(CountSync(t, SyncKind::ContextSynchronize), 3u);
  EXPECT_EQ(CountSync(t, SyncKind::StreamSynchronize), 5u);
  EXPECT_EQ(CountSync(t, SyncKind::EventSynchronize), 5u);
  EXPECT_EQ(CountSync(t, SyncKind::StreamWaitEvent), 2u);
  Analysis a = Analyze(BuildTimeline(run));
  EXPECT_EQ(a.summary.syncs, 15u);
  // Each blocking wait follows a ~200 us kernel: the host really waited.
  EXPECT_GT(a.summary.sync_ns, 13u * 100000u);
}

inline void CheckNvtxThreads(const Run& run) {
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  for (int th = 0; th < 2; ++th) {
    std::string p = "thread" + std::to_string(th);
    EXPECT_EQ(CountNamed(t, RecordKind::MarkerStart, p + "/outer"), 3u);
    EXPECT_EQ(CountNamed(t, RecordKind::MarkerStart, p + "/inner"), 3u);
    EXPECT_EQ(CountNamed(t, RecordKind::MarkerStart, p + "/startend"), 1u);
    EXPECT_EQ(CountNamed(t, RecordKind::MarkerInstant, p + "/mark"), 1u);
  }
  EXPECT_EQ(Count(t, RecordKind::MarkerEnd), 14u);
  // Attribution: each kernel lands in its own thread's innermost range.
  std::map<std::string, std::map<std::string, int>> by_range;  // innermost -> kernel -> count
  std::map<std::string, std::string> parent;                   // innermost -> outer
  std::map<std::string, std::set<uint32_t>> streams;
  for (const Attributed& at : Attribute(BuildTimeline(run))) {
    if (at.activity->Kind() != RecordKind::Kernel) continue;
    std::string inner = at.ranges.empty() ? "(none)" : t.Name(*at.ranges.back());
    by_range[inner][t.Name(*at.activity)]++;
    if (at.ranges.size() >= 2) parent[inner] = t.Name(*at.ranges[at.ranges.size() - 2]);
    streams[inner].insert(at.activity->tid);
  }
  for (int th = 0; th < 2; ++th) {
    std::string p = "thread" + std::to_string(th);
    std::string tag = "ILi" + std::to_string(th) + "E";  // template argument in the mangled name
    ASSERT_EQ(by_range[p + "/inner"].size(), 1u);
    EXPECT_NE(by_range[p + "/inner"].begin()->first.find("k_inner"), std::string::npos);
    EXPECT_EQ(by_range[p + "/inner"].begin()->second, 6);
    EXPECT_EQ(parent[p + "/inner"], p + "/outer");
    ASSERT_EQ(by_range[p + "/outer"].size(), 1u);
    EXPECT_NE(by_range[p + "/outer"].begin()->first.find("k_outer"), std::string::npos);
    EXPECT_EQ(by_range[p + "/outer"].begin()->second, 3);
    EXPECT_EQ(by_range[p + "/startend"].begin()->second, 1);
    EXPECT_EQ(streams[p + "/inner"].size(), 1u);
  }
  EXPECT_NE(*streams["thread0/inner"].begin(), *streams["thread1/inner"].begin());
}

/// The row of a view with this key, or null.
inline const GroupRow* FindRow(const std::vector<GroupRow>& rows, const std::string& key) {
  for (const GroupRow& g : rows)
    if (g.key == key) return &g;
  return nullptr;
}

inline void CheckGraphLaunch(const Run& run) {
  const ProcessTrace& t = Only(run);
  ExpectClean(t);
  EXPECT_EQ(CountNamed(t, RecordKind::Kernel, "graph_k"), 20u);
  EXPECT_EQ(CountNamed(t, RecordKind::RuntimeApi, "cudaGraphLaunch"), 5u);
  // Recorded with per-node records. Since format 1.1 the agent also records where each node was
  // captured, and the kernels go to the range that captured them; before, to the launch's.
  const bool captured = Count(t, RecordKind::GraphNode) > 0;
  size_t in_range = 0;
  for (const Attributed& at : Attribute(BuildTimeline(run))) {
    if (at.activity->Kind() != RecordKind::Kernel) continue;
    ASSERT_NE(at.api, nullptr);
    EXPECT_EQ(t.Name(*at.api), "cudaGraphLaunch");
    in_range +=
        !at.ranges.empty() && t.Name(*at.ranges.back()) == (captured ? "capture" : "replay");
  }
  EXPECT_EQ(in_range, 20u);
}

}  // namespace kprof::testing
