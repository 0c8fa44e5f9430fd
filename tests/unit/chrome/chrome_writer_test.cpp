// Chrome trace writer: structure of the output (checked with nlohmann::json), escaping of hostile
// names, and writer -> reader round trips of an in-memory run.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chrome_checks.h"
#include "chrome_test_util.h"
#include "kprof/output.h"
#include "kprof/timeline.h"
#include "kprof/trace.h"

namespace kprof {
namespace {

using test::CountKinds;
using test::TempDir;

constexpr uint64_t kT0 = 1'700'000'000'123'456'789ull;

Record Rec(RecordKind kind, uint64_t start, uint64_t end, uint32_t name, uint32_t tid,
           uint32_t corr = 0) {
  Record r;
  r.kind = static_cast<uint8_t>(kind);
  r.start_ns = kT0 + start;
  r.end_ns = kT0 + end;
  r.name = name;
  r.tid = tid;
  r.correlation = corr;
  r.device = IsGpuKind(kind) ? 0 : kNoDevice;
  return r;
}

/// A small but complete process: launches, copies, a memset, a sync, NVTX and cpu_op ranges,
/// allocations; times chosen with odd nanoseconds to check the exact round trip.
ProcessTrace SampleProcess(uint32_t pid) {
  ProcessTrace p;
  p.pid = pid;
  p.source = "memory";
  p.complete = true;
  p.meta["device.0.name"] = "NVIDIA H100 80GB HBM3";
  p.meta["device.0.sm_count"] = "132";
  p.meta["device.0.memory_bytes"] = "85017493504";
  p.meta["device.0.cc"] = "9.0";
  auto& s = p.strings;
  const uint32_t tid = 4242;
  // NVTX range "step" around everything (marker id 1) and a cpu_op range around the first launch.
  Record ms = Rec(RecordKind::MarkerStart, 0, 0, s.Intern("step"), tid);
  ms.a = 1;
  p.records.push_back(ms);
  Record op = Rec(RecordKind::Range, 100, 9'001, s.Intern("aten::mm"), tid);
  op.b = s.Intern("cpu_op");
  p.records.push_back(op);
  Record launch = Rec(RecordKind::RuntimeApi, 1'001, 6'003, s.Intern("cudaLaunchKernel"), tid, 1);
  launch.a = 211;
  p.records.push_back(launch);
  Record k1 = Rec(RecordKind::Kernel, 7'777, 17'778, s.Intern("_Z6kernelPfi"), 7, 1);
  SetKernelLaunch(k1, {512, 2, 1}, {128, 1, 1}, 40, 4096);
  p.records.push_back(k1);
  Record cpy = Rec(RecordKind::RuntimeApi, 20'000, 21'111, s.Intern("cudaMemcpyAsync"), tid, 2);
  cpy.a = 41;
  p.records.push_back(cpy);
  Record mc = Rec(RecordKind::Memcpy, 22'222, 25'555, 0, 7, 2);
  mc.flags = static_cast<uint8_t>(CopyKind::HtoD);
  mc.a = static_cast<uint32_t>(MemKind::Pageable);
  mc.b = static_cast<uint32_t>(MemKind::Device);
  mc.bytes = 4096;
  p.records.push_back(mc);
  Record mset_api =
      Rec(RecordKind::RuntimeApi, 30'000, 30'500, s.Intern("cudaMemsetAsync"), tid, 3);
  p.records.push_back(mset_api);
  Record mset = Rec(RecordKind::Memset, 31'000, 31'999, 0, 7, 3);
  mset.b = static_cast<uint32_t>(MemKind::Device);
  mset.bytes = 256;
  p.records.push_back(mset);
  Record drv = Rec(RecordKind::DriverApi, 40'000, 40'700, s.Intern("cuLaunchKernel"), tid, 4);
  drv.a = 307;
  p.records.push_back(drv);
  Record k2 = Rec(RecordKind::Kernel, 41'000, 52'345, s.Intern("plain_kernel"), 7, 4);
  SetKernelLaunch(k2, {1, 1, 1}, {32, 1, 1}, 16, 0);
  p.records.push_back(k2);
  Record sync_api =
      Rec(RecordKind::RuntimeApi, 53'000, 60'000, s.Intern("cudaDeviceSynchronize"), tid, 5);
  p.records.push_back(sync_api);
  Record sync = Rec(RecordKind::Sync, 53'010, 59'990, 0, 0, 5);
  sync.flags = static_cast<uint8_t>(SyncKind::ContextSynchronize);
  p.records.push_back(sync);
  Record alloc = Rec(RecordKind::MemAlloc, 500, 500, 0, tid);
  alloc.device = 0;
  alloc.bytes = 1 << 20;
  alloc.a = 0x1000;
  alloc.b = 0x7f;
  p.records.push_back(alloc);
  Record free_rec = alloc;
  free_rec.kind = static_cast<uint8_t>(RecordKind::MemFree);
  free_rec.start_ns = free_rec.end_ns = kT0 + 61'000;
  p.records.push_back(free_rec);
  Record me = Rec(RecordKind::MarkerEnd, 62'001, 62'001, 0, tid);
  me.a = 1;
  p.records.push_back(me);
  return p;
}

const Record* Find(const ProcessTrace& p, RecordKind kind, uint32_t corr) {
  for (const Record& r : p.records)
    if (r.Kind() == kind && r.correlation == corr) return &r;
  return nullptr;
}

/// The record of `kind` with correlation `corr`; throws (failing the test) when absent.
const Record& Get(const ProcessTrace& p, RecordKind kind, uint32_t corr) {
  const Record* r = Find(p, kind, corr);
  if (r == nullptr) throw std::runtime_error("record not found");
  return *r;
}

const Record* FindNamed(const ProcessTrace& p, RecordKind kind, const std::string& name) {
  for (const Record& r : p.records)
    if (r.Kind() == kind && p.Name(r) == name) return &r;
  return nullptr;
}

Run RoundTrip(const Run& run, const TempDir& dir, const std::string& name) {
  std::string path = dir.File(name);
  WriteChromeTrace(path, BuildTimeline(run));
  return ReadChromeTrace(path);
}

void ExpectSameTimes(const Record& a, const Record& b) {
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
}

TEST(ChromeWriter, RoundTripKeepsRecords) {
  TempDir dir;
  kprof::Run run;
  run.processes.push_back(SampleProcess(1234));
  const ProcessTrace& in = run.processes[0];
  for (const char* file : {"trace.json", "trace.json.gz"}) {
    SCOPED_TRACE(file);
    kprof::Run back = RoundTrip(run, dir, file);
    ASSERT_EQ(back.processes.size(), 1u);
    const ProcessTrace& out = back.processes[0];
    EXPECT_EQ(out.pid, 1234u);
    EXPECT_EQ(out.meta.at("format"), "chrome");
    EXPECT_EQ(out.meta.at("device.0.name"), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(out.meta.at("device.0.sm_count"), "132");
    EXPECT_EQ(out.meta.at("device.0.memory_bytes"), "85017493504");
    EXPECT_EQ(out.meta.at("device.0.cc"), "9.0");

    auto counts = CountKinds(back);
    EXPECT_EQ(counts[RecordKind::Kernel], 2u);
    EXPECT_EQ(counts[RecordKind::Memcpy], 1u);
    EXPECT_EQ(counts[RecordKind::Memset], 1u);
    EXPECT_EQ(counts[RecordKind::RuntimeApi], 4u);
    EXPECT_EQ(counts[RecordKind::DriverApi], 1u);
    EXPECT_EQ(counts[RecordKind::Sync], 1u);
    EXPECT_EQ(counts[RecordKind::Range], 2u);     // the cpu_op and the NVTX range
    EXPECT_EQ(counts[RecordKind::GpuRange], 1u);  // "step" projected on stream 7
    EXPECT_EQ(counts[RecordKind::MemAlloc], 1u);
    EXPECT_EQ(counts[RecordKind::MemFree], 1u);

    // Kernels: times exact to the ns, launch configuration, demangled name.
    for (uint32_t corr : {1u, 4u}) {
      const Record* a = Find(in, RecordKind::Kernel, corr);
      const Record* b = Find(out, RecordKind::Kernel, corr);
      ASSERT_NE(b, nullptr);
      ExpectSameTimes(*a, *b);
      EXPECT_EQ(b->device, 0);
      EXPECT_EQ(b->tid, 7u);
      EXPECT_EQ(KernelGrid(*b).x, KernelGrid(*a).x);
      EXPECT_EQ(KernelGrid(*b).y, KernelGrid(*a).y);
      EXPECT_EQ(KernelBlock(*b).x, KernelBlock(*a).x);
      EXPECT_EQ(KernelRegisters(*b), KernelRegisters(*a));
      EXPECT_EQ(KernelSharedMem(*b), KernelSharedMem(*a));
    }
    EXPECT_EQ(out.Name(Get(out, RecordKind::Kernel, 1)), "kernel(float*, int)");
    EXPECT_EQ(out.Name(Get(out, RecordKind::Kernel, 4)), "plain_kernel");

    const Record* mc = Find(out, RecordKind::Memcpy, 2);
    ASSERT_NE(mc, nullptr);
    ExpectSameTimes(Get(in, RecordKind::Memcpy, 2), *mc);
    EXPECT_EQ(mc->bytes, 4096u);
    EXPECT_EQ(mc->flags, static_cast<uint8_t>(CopyKind::HtoD));
    EXPECT_EQ(mc->a, static_cast<uint32_t>(MemKind::Pageable));
    EXPECT_EQ(mc->b, static_cast<uint32_t>(MemKind::Device));
    EXPECT_EQ(out.Name(*mc), "Memcpy HtoD (Pageable -> Device)");

    const Record* ms = Find(out, RecordKind::Memset, 3);
    ASSERT_NE(ms, nullptr);
    EXPECT_EQ(ms->bytes, 256u);
    EXPECT_EQ(ms->b, static_cast<uint32_t>(MemKind::Device));

    for (uint32_t corr : {1u, 2u, 3u, 5u}) {
      const Record* b = Find(out, RecordKind::RuntimeApi, corr);
      ASSERT_NE(b, nullptr) << corr;
      ExpectSameTimes(Get(in, RecordKind::RuntimeApi, corr), *b);
      EXPECT_EQ(b->tid, 4242u);
    }
    EXPECT_EQ(Get(out, RecordKind::RuntimeApi, 1).a, 211u);
    const Record* drv = Find(out, RecordKind::DriverApi, 4);
    ASSERT_NE(drv, nullptr);
    EXPECT_EQ(drv->a, 307u);
    EXPECT_EQ(out.Name(*drv), "cuLaunchKernel");

    const Record* sync = Find(out, RecordKind::Sync, 5);
    ASSERT_NE(sync, nullptr);
    ExpectSameTimes(Get(in, RecordKind::Sync, 5), *sync);
    EXPECT_EQ(sync->flags, static_cast<uint8_t>(SyncKind::ContextSynchronize));

    const Record* op = FindNamed(out, RecordKind::Range, "aten::mm");
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(out.strings.Get(op->b), "cpu_op");
    EXPECT_EQ(op->start_ns, kT0 + 100);
    EXPECT_EQ(op->end_ns, kT0 + 9'001);
    const Record* step = FindNamed(out, RecordKind::Range, "step");
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(out.strings.Get(step->b), "user_annotation");
    EXPECT_EQ(step->start_ns, kT0);
    EXPECT_EQ(step->end_ns, kT0 + 62'001);

    // The projection spans the first to the last GPU activity launched inside "step".
    const Record* gr = FindNamed(out, RecordKind::GpuRange, "step");
    ASSERT_NE(gr, nullptr);
    EXPECT_EQ(gr->start_ns, kT0 + 7'777);
    EXPECT_EQ(gr->end_ns, kT0 + 52'345);
    EXPECT_EQ(gr->tid, 7u);

    const Record* alloc = Find(out, RecordKind::MemAlloc, 0);
    ASSERT_NE(alloc, nullptr);
    EXPECT_EQ(alloc->bytes, 1u << 20);
    EXPECT_EQ(alloc->start_ns, kT0 + 500);
    EXPECT_EQ((uint64_t{alloc->b} << 32) | alloc->a, (uint64_t{0x7f} << 32) | 0x1000);
    EXPECT_EQ(Get(out, RecordKind::MemFree, 0).bytes, 1u << 20);
  }
}

TEST(ChromeWriter, TwoProcessesKeepTheirGpuWork) {
  TempDir dir;
  kprof::Run run;
  run.processes.push_back(SampleProcess(100));
  run.processes.push_back(SampleProcess(200));
  // Second process: same correlation ids, later in time (CUPTI ids are per process).
  for (Record& r : run.processes[1].records) {
    r.start_ns += 1'000'000;
    r.end_ns += 1'000'000;
  }
  kprof::Run back = RoundTrip(run, dir, "two.json");
  ASSERT_EQ(back.processes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ProcessTrace& out = back.processes[i];
    const ProcessTrace& in = run.processes[i];
    EXPECT_EQ(out.pid, in.pid);
    size_t kernels = 0;
    for (const Record& r : out.records) kernels += r.Kind() == RecordKind::Kernel;
    EXPECT_EQ(kernels, 2u);
    ExpectSameTimes(Get(in, RecordKind::Kernel, 1), Get(out, RecordKind::Kernel, 1));
  }
}

TEST(ChromeWriter, OutputStructure) {
  kprof::Run run;
  run.processes.push_back(SampleProcess(1234));
  // An API record overlapping its neighbour partially (clock jitter) must be clamped.
  ProcessTrace& p = run.processes[0];
  p.records.push_back(Rec(RecordKind::RuntimeApi, 5'000, 7'000, p.strings.Intern("cudaX"), 4242));
  std::ostringstream os;
  WriteChromeTrace(os, BuildTimeline(run));
  nlohmann::json doc = nlohmann::json::parse(os.str());
  EXPECT_EQ(doc.at("schemaVersion"), 1);
  EXPECT_EQ(doc.at("baseTimeNanoseconds").get<uint64_t>(), kT0);
  ASSERT_EQ(doc.at("deviceProperties").size(), 1u);
  EXPECT_EQ(doc["deviceProperties"][0].at("numSms"), 132);
  EXPECT_EQ(doc["deviceProperties"][0].at("computeMajor"), 9);

  testing::ChromeCounts c = testing::CheckChromeStructure(doc);
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "C") {
      EXPECT_EQ(e.at("name"), "Device memory");
    }
  // NVTX pair + cpu_op + 5 runtime + driver + 2 kernels + memcpy + memset + sync + projection.
  EXPECT_EQ(c.x_events, 1u + 1u + 5u + 1u + 2u + 1u + 1u + 1u + 1u);
  EXPECT_EQ(c.counters, 2u);
  EXPECT_EQ(c.flow_starts.size(), 4u);  // kernels 1 and 4, memcpy 2, memset 3
}

// PM sampling (the H100 recording of counter_characters, every 100 us): a counter track per
// device and metric on the GPU's process, one point per sample, and a point at 0 where the
// samples stop.
TEST(ChromeWriter, SampledCountersBecomeCounterTracks) {
  kprof::Run run = ReadInputs(
      {std::string(KPROF_SOURCE_DIR) + "/tests/fixtures/gpu/counter_characters_sampled"});
  std::ostringstream os;
  WriteChromeTrace(os, BuildTimeline(run));
  nlohmann::json doc = nlohmann::json::parse(os.str());
  std::map<std::string, size_t> points, zeros;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "C" || e.value("cat", "") != "gpu_counter") continue;
    EXPECT_EQ(e.at("pid"), 0);  // device 0, as its kernels
    const double v = e.at("args").at("value").get<double>();
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 100.5);
    ++points[e.at("name").get<std::string>()];
    zeros[e.at("name").get<std::string>()] += v == 0.0;
  }
  ASSERT_EQ(points.size(), 5u);
  for (const char* track : {"SM throughput %", "DRAM throughput %", "tensor pipes active %",
                            "L2 throughput %", "achieved occupancy %"}) {
    ASSERT_TRUE(points.count(track)) << track;
    // 4364 samples without a hole: one point each, and the closing 0 after the last.
    EXPECT_EQ(points[track], 4364u + 1u) << track;
    EXPECT_GE(zeros[track], 1u) << track;
  }
}

TEST(ChromeWriter, HostileNamesRoundTrip) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"quote\"inside", "quote\"inside"},
      {"back\\slash", "back\\slash"},
      {std::string("ctl\x01\x1f\n\t", 7), std::string("ctl\x01\x1f\n\t", 7)},
      {"bad\xff", "bad\xEF\xBF\xBD"},
      {"lone\xc3", "lone\xEF\xBF\xBD"},
      {"\xc3(", "\xEF\xBF\xBD("},
      {"overlong\xc0\x80", "overlong\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"surrogate\xED\xA0\x80", "surrogate\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"ls\xE2\x80\xA8ps\xE2\x80\xA9", "ls\xE2\x80\xA8ps\xE2\x80\xA9"},
      {"emoji \xF0\x9F\x98\x80 \xC3\xA9", "emoji \xF0\x9F\x98\x80 \xC3\xA9"},
  };
  kprof::Run run;
  ProcessTrace& p = run.processes.emplace_back();
  p.pid = 1;
  uint64_t t = 0;
  for (const auto& [raw, expected] : cases) {
    Record r = Rec(RecordKind::Range, t, t + 10, p.strings.Intern(raw), 1);
    r.b = p.strings.Intern("user_annotation");
    p.records.push_back(r);
    t += 100;
  }
  std::ostringstream os;
  WriteChromeTrace(os, BuildTimeline(run));
  nlohmann::json doc;
  ASSERT_NO_THROW(doc = nlohmann::json::parse(os.str()));
  std::vector<std::string> parsed;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") parsed.push_back(e["name"]);
  ASSERT_EQ(parsed.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(parsed[i], cases[i].second) << i;

  TempDir dir;
  test::WriteFile(dir.File("names.json"), os.str());
  kprof::Run back = ReadChromeTrace(dir.File("names.json"));
  ASSERT_EQ(back.processes.size(), 1u);
  std::vector<std::string> read;
  for (const Record& r : back.processes[0].records) read.push_back(back.processes[0].Name(r));
  ASSERT_EQ(read.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(read[i], cases[i].second) << i;
}

TEST(ChromeWriter, AppendJsonStringEscapes) {
  std::string out;
  AppendJsonString(out, std::string("a\"b\\c\x01\x7f", 7));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\u0001\x7f\"");
  out.clear();
  AppendJsonString(out, "\xF4\x90\x80\x80");  // above U+10FFFF: 4 invalid bytes
  EXPECT_EQ(out, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

TEST(ChromeWriter, UnwritablePathIsInputError) {
  kprof::Run run;
  run.processes.push_back(SampleProcess(1));
  EXPECT_THROW(WriteChromeTrace("/nonexistent-dir/x.json", BuildTimeline(run)), InputError);
  EXPECT_THROW(WriteChromeTrace("/nonexistent-dir/x.json.gz", BuildTimeline(run)), InputError);
}

}  // namespace
}  // namespace kprof
