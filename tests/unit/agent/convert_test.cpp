// The agent's conversion of CUPTI records into kprof records, on CUPTI structs built in memory
// with values the test chooses (no GPU needed).
#include "agent/convert.h"

#include <cstring>
#include <map>
#include <utility>

#include "agent/cupti_setup.h"
#include "gtest/gtest.h"

using namespace kprof;
using namespace kprof::agent;

namespace {
template <typename T>
T Zeroed() {
  T v;
  std::memset(&v, 0, sizeof(v));
  return v;
}
ConvertResult Convert(const void* rec, Interner& in, Record& out, MetaList* meta_out = nullptr) {
  MetaList meta;
  auto r = ConvertRecord(static_cast<const CUpti_Activity*>(rec), in, out, meta);
  if (meta_out) *meta_out = meta;
  return r;
}
}  // namespace

TEST(AgentConvert, KernelKeepsLaunchConfigurationAndTimes) {
  auto k = Zeroed<CUpti_ActivityKernel10>();
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'700'000'000'000'000'100ull;
  k.end = 1'700'000'000'000'002'600ull;
  k.deviceId = 1;
  k.streamId = 7;
  k.correlationId = 42;
  k.gridX = 132;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 4096;
  k.name = "_Z10vector_addPKfS0_Pfi";
  Interner in;
  Record r;
  ASSERT_EQ(Convert(&k, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::Kernel);
  EXPECT_EQ(r.start_ns, k.start);
  EXPECT_EQ(r.DurationNs(), 2500u);
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.tid, 7u);
  EXPECT_EQ(r.correlation, 42u);
  EXPECT_EQ(KernelGrid(r).x, 132u);
  EXPECT_EQ(KernelGrid(r).y, 2u);
  EXPECT_EQ(KernelBlock(r).x, 256u);
  EXPECT_EQ(KernelBlock(r).z, 1u);
  EXPECT_EQ(KernelRegisters(r), 40u);
  EXPECT_EQ(KernelSharedMem(r), 5120u);
  auto fresh = in.TakeNew();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].first, r.name);
  EXPECT_EQ(fresh[0].second, "_Z10vector_addPKfS0_Pfi");
  // The same name again is not new.
  Record r2;
  ASSERT_EQ(Convert(&k, in, r2), ConvertResult::Converted);
  EXPECT_EQ(r2.name, r.name);
  EXPECT_TRUE(in.TakeNew().empty());
}

TEST(AgentConvert, MissingTimestampsAreCountedNotWritten) {
  auto k = Zeroed<CUpti_ActivityKernel10>();
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 100;
  k.end = 0;
  k.name = "k";
  Interner in;
  Record r;
  EXPECT_EQ(Convert(&k, in, r), ConvertResult::MissingTimestamp);
}

TEST(AgentConvert, MemcpyDirectionAndHostMemoryKind) {
  auto m = Zeroed<CUpti_ActivityMemcpy6>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  m.bytes = 8 << 20;
  m.start = 10;
  m.end = 20;
  m.streamId = 3;
  m.correlationId = 9;
  Interner in;
  Record r;
  ASSERT_EQ(Convert(&m, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::Memcpy);
  EXPECT_EQ(r.flags, static_cast<uint8_t>(CopyKind::DtoH));
  EXPECT_EQ(r.a, static_cast<uint32_t>(MemKind::Device));
  EXPECT_EQ(r.b, static_cast<uint32_t>(MemKind::Pinned));
  EXPECT_EQ(r.c, kCopyAsync);
  EXPECT_EQ(r.bytes, 8u << 20);
  EXPECT_EQ(r.tid, 3u);
}

TEST(AgentConvert, SyncKindsMapOneToOne) {
  for (auto [cupti, kp] :
       {std::pair{CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
                  SyncKind::EventSynchronize},
        std::pair{CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, SyncKind::StreamWaitEvent},
        std::pair{CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                  SyncKind::StreamSynchronize},
        std::pair{CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
                  SyncKind::ContextSynchronize}}) {
    auto s = Zeroed<CUpti_ActivitySynchronization2>();
    s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    s.type = cupti;
    s.start = 5;
    s.end = 500;
    s.correlationId = 77;
    s.streamId = 0xFFFFFFFFu;
    Interner in;
    Record r;
    ASSERT_EQ(Convert(&s, in, r), ConvertResult::Converted);
    EXPECT_EQ(r.Kind(), RecordKind::Sync);
    EXPECT_EQ(r.flags, static_cast<uint8_t>(kp));
    EXPECT_EQ(r.correlation, 77u);
    EXPECT_EQ(r.a, 0u);  // "no stream" is 0 in kprof
  }
}

TEST(AgentConvert, ApiRecordsAreNamedWithoutVersionSuffix) {
  auto a = Zeroed<CUpti_ActivityAPI>();
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.start = 1;
  a.end = 4001;
  a.threadId = 1234;
  a.correlationId = 5;
  Interner in;
  Record r;
  ASSERT_EQ(Convert(&a, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::RuntimeApi);
  EXPECT_EQ(r.tid, 1234u);
  EXPECT_EQ(r.a, static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  auto fresh = in.TakeNew();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].second, "cudaLaunchKernel");
}

TEST(AgentConvert, MarkersKeepIdDomainAndThread) {
  auto m = Zeroed<CUpti_ActivityMarker2>();
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  m.timestamp = 99;
  m.id = 12;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.threadId = 4321;
  m.name = "forward";
  m.domain = "my.domain";
  Interner in;
  Record r;
  ASSERT_EQ(Convert(&m, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::MarkerStart);
  EXPECT_EQ(r.a, 12u);
  EXPECT_EQ(r.tid, 4321u);
  auto fresh = in.TakeNew();
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].second, "forward");
  EXPECT_EQ(fresh[1].second, "my.domain");
  EXPECT_EQ(r.b, fresh[1].first);
  m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  m.name = nullptr;
  ASSERT_EQ(Convert(&m, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::MarkerEnd);
  EXPECT_EQ(r.name, 0u);
}

TEST(AgentConvert, MemoryAllocationsAndReleases) {
  auto m = Zeroed<CUpti_ActivityMemory4>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = 0x7f0012345678ull;
  m.bytes = 1 << 30;
  m.timestamp = 1000;
  m.deviceId = 0;
  Interner in;
  Record r;
  ASSERT_EQ(Convert(&m, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::MemAlloc);
  EXPECT_EQ(r.bytes, 1u << 30);
  EXPECT_EQ((static_cast<uint64_t>(r.b) << 32) | r.a, 0x7f0012345678ull);
  EXPECT_EQ(r.name, 0u);  // no allocation source, no variable
  EXPECT_EQ(r.e, 0u);
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  ASSERT_EQ(Convert(&m, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::MemFree);
}

// CUPTI's allocation source (cuptiActivityEnableAllocationSource) names the library that asked;
// static memory carries its variable's name.
TEST(AgentConvert, MemoryKeepsTheAllocatingLibraryAndTheVariable) {
  auto m = Zeroed<CUpti_ActivityMemory4>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;
  m.bytes = 4096;
  m.timestamp = 1000;
  m.isAsync = 1;
  m.source = "/opt/torch/lib/libc10_cuda.so";
  m.name = "table";
  Interner in;
  Record r;
  ASSERT_EQ(Convert(&m, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.c, static_cast<uint32_t>(MemKind::DeviceStatic));
  EXPECT_EQ(r.d, 1u);
  const auto strings = in.TakeNew();
  ASSERT_EQ(strings.size(), 2u);
  EXPECT_EQ(strings[0].first, r.name);
  EXPECT_EQ(strings[0].second, "/opt/torch/lib/libc10_cuda.so");
  EXPECT_EQ(strings[1].first, r.e);
  EXPECT_EQ(strings[1].second, "table");
}

TEST(AgentConvert, DevicePropertiesBecomeMeta) {
  auto d = Zeroed<CUpti_ActivityDevice5>();
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.numMultiprocessors = 132;
  d.globalMemorySize = 85'000'000'000ull;
  d.computeCapabilityMajor = 9;
  d.computeCapabilityMinor = 0;
  Interner in;
  Record r;
  MetaList meta;
  ASSERT_EQ(Convert(&d, in, r, &meta), ConvertResult::Meta);
  std::map<std::string, std::string> m(meta.begin(), meta.end());
  EXPECT_EQ(m["device.0.name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(m["device.0.sm_count"], "132");
  EXPECT_EQ(m["device.0.cc"], "9.0");
  EXPECT_EQ(m["device.0.memory_bytes"], "85000000000");
}

// Every record with a start and an end: device (kNoDevice for CPU-side records), interval
// and correlation id, for the kinds the tests above do not check field by field.
TEST(AgentConvert, TimedRecordsKeepDeviceIntervalAndCorrelation) {
  Interner in;
  Record r;
  auto ms = Zeroed<CUpti_ActivityMemset4>();
  ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  ms.start = 30;
  ms.end = 70;
  ms.deviceId = 2;
  ms.streamId = 14;
  ms.correlationId = 31;
  ms.bytes = 4096;
  ms.value = 0xAB;
  ms.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  ASSERT_EQ(Convert(&ms, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::Memset);
  EXPECT_EQ(r.device, 2);
  EXPECT_EQ(r.start_ns, 30u);
  EXPECT_EQ(r.end_ns, 70u);
  EXPECT_EQ(r.correlation, 31u);
  EXPECT_EQ(r.tid, 14u);
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.a, 0xABu);
  EXPECT_EQ(r.b, static_cast<uint32_t>(MemKind::Device));

  auto o = Zeroed<CUpti_ActivityOverhead3>();
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.threadId = 321;
  o.start = 100;
  o.end = 250;
  o.correlationId = 8;
  ASSERT_EQ(Convert(&o, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::Overhead);
  EXPECT_EQ(r.device, kNoDevice);
  EXPECT_EQ(r.start_ns, 100u);
  EXPECT_EQ(r.end_ns, 250u);
  EXPECT_EQ(r.correlation, 8u);
  EXPECT_EQ(r.tid, 321u);

  auto d = Zeroed<CUpti_ActivityAPI>();
  d.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  d.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  d.start = 7;
  d.end = 9;
  d.threadId = 55;
  d.correlationId = 6;
  ASSERT_EQ(Convert(&d, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.Kind(), RecordKind::DriverApi);
  EXPECT_EQ(r.device, kNoDevice);
  EXPECT_EQ(r.start_ns, 7u);
  EXPECT_EQ(r.end_ns, 9u);
  EXPECT_EQ(r.correlation, 6u);
  EXPECT_EQ(r.tid, 55u);

  auto s = Zeroed<CUpti_ActivitySynchronization2>();
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.start = 40;
  s.end = 90;
  s.streamId = 3;
  s.correlationId = 12;
  ASSERT_EQ(Convert(&s, in, r), ConvertResult::Converted);
  EXPECT_EQ(r.device, kNoDevice);
  EXPECT_EQ(r.start_ns, 40u);
  EXPECT_EQ(r.end_ns, 90u);
  EXPECT_EQ(r.a, 3u);
}

TEST(AgentConvert, UnknownKindsAreSkipped) {
  auto c = Zeroed<CUpti_ActivityContext3>();
  c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  Interner in;
  Record r;
  EXPECT_EQ(Convert(&c, in, r), ConvertResult::Skipped);
}

TEST(AgentSetup, KindsListParsesAndRoundTrips) {
  std::string unknown;
  uint32_t k = ParseKinds("kernel,memcpy,nvtx,bogus", &unknown);
  EXPECT_EQ(k, kKindKernel | kKindMemcpy | kKindNvtx);
  EXPECT_EQ(unknown, "bogus");
  EXPECT_EQ(KindsToString(k), "kernel,memcpy,nvtx");
  EXPECT_EQ(ParseKinds("", nullptr), kKindAll);
  EXPECT_EQ(ParseKinds("all", nullptr), kKindAll);
}

TEST(AgentSetup, TracedApiFamilies) {
  EXPECT_TRUE(IsTracedApiName("cudaLaunchKernel_v7000"));
  EXPECT_TRUE(IsTracedApiName("cuLaunchKernelEx"));
  EXPECT_TRUE(IsTracedApiName("cudaMemcpyAsync_ptsz_v7000"));
  EXPECT_TRUE(IsTracedApiName("cudaStreamSynchronize_v3020"));
  EXPECT_TRUE(IsTracedApiName("cudaGraphLaunch_v10000"));
  EXPECT_FALSE(IsTracedApiName("cudaGetDevice_v3020"));
  EXPECT_FALSE(IsTracedApiName("cudaStreamIsCapturing_v10000"));
  EXPECT_FALSE(IsTracedApiName("cudaEventQuery_v3020"));
  EXPECT_EQ(ApiBaseName("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(ApiBaseName("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(ApiBaseName("cuLaunchKernel"), "cuLaunchKernel");
}
