// The overhead benchmark's floor: a bare injection agent that enables exactly the activity kinds
// and API filters the kprof agent enables (src/agent/cupti_setup.cpp) and only counts records.
// kprof's wall time over this one's isolates what kprof itself adds on top of CUPTI.
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "agent/cupti_setup.h"

namespace {
constexpr size_t kBufferBytes = 4u << 20;
std::mutex g_mu;
std::vector<uint8_t*> g_free;
std::atomic<uint64_t> g_records{0}, g_dropped{0};
bool g_init = false;

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  std::lock_guard<std::mutex> lock(g_mu);
  uint8_t* buf;
  if (!g_free.empty()) {
    buf = g_free.back();
    g_free.pop_back();
  } else {
    buf = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    if (buf != nullptr) std::memset(buf, 0, kBufferBytes);
  }
  *buffer = buf;
  *size = buf != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  uint64_t n = 0;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++n;
  g_records += n;
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    g_dropped += dropped;
  std::memset(buffer, 0, valid);
  std::lock_guard<std::mutex> lock(g_mu);
  g_free.push_back(buffer);
}

void AtExit() {
  KPROF_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "collect the last buffers");
  std::fprintf(stderr, "floor agent: %llu records, %llu dropped\n",
               static_cast<unsigned long long>(g_records.load()),
               static_cast<unsigned long long>(g_dropped.load()));
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init) return 1;
  g_init = true;
  uint32_t kinds = kprof::agent::ParseKinds(std::getenv("KPROF_KINDS"), nullptr);
  kprof::agent::ConfigureActivityAttributes(true);
  KPROF_CUPTI(cuptiActivityRegisterCallbacks(Requested, Completed), "register the buffers");
  int apis = 0;
  const char* graph = std::getenv("KPROF_GRAPH_TRACE");  // as the kprof agent: graph by default
  const bool graph_level = graph == nullptr || std::strcmp(graph, "node") != 0;
  if (graph_level) kprof::agent::EnableGraphTrace(kinds);
  kprof::agent::EnableActivityKinds(kinds, &apis);
  std::atexit(AtExit);
  return 1;
}
