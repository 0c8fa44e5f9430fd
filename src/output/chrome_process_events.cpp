// Chrome trace: the events written per process after the slices: ac2g flow arrows from each
// launching API call to its GPU work, device memory ("[memory]" instants and a counter track)
// and NVTX marks as instants.
#include <algorithm>
#include <vector>

#include "output/chrome_writer.h"

namespace kprof::chrome {

void ChromeWriter::Flows(uint32_t i) {
  const ProcessTrace& p = run_.processes[i];
  const auto& api = api_by_corr_[i];
  if (api.empty()) return;
  for (const Record& r : p.records) {
    if (!IsGpuActivity(r.Kind()) || r.correlation == 0) continue;
    auto it = api.find(r.correlation);
    if (it == api.end()) continue;
    // One flow per GPU activity: graph replays share a correlation id among many kernels,
    // and a flow id used twice would chain them instead of pairing each with its launch.
    uint64_t id = ++flow_ids_;
    Begin();
    Raw("{\"ph\": \"s\", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"id\": ");
    UInt(id);
    Raw(", \"pid\": ");
    UInt(p.pid);
    Raw(", \"tid\": ");
    UInt(it->second->tid);
    Raw(", \"ts\": ");
    Ts(it->second->start_ns);
    Raw("}");
    Begin();
    Raw("{\"ph\": \"f\", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"id\": ");
    UInt(id);
    Raw(", \"pid\": ");
    UInt(r.device);
    Raw(", \"tid\": ");
    Int(StreamTrack(i, r.tid));
    Raw(", \"ts\": ");
    Ts(r.start_ns);
    Raw(", \"bp\": \"e\"}");
  }
}

void ChromeWriter::Memory(uint32_t i) {
  const ProcessTrace& p = run_.processes[i];
  std::vector<const Record*> mem;
  for (const Record& r : p.records)
    if (r.Kind() == RecordKind::MemAlloc || r.Kind() == RecordKind::MemFree) mem.push_back(&r);
  if (mem.empty()) return;
  std::stable_sort(mem.begin(), mem.end(),
                   [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
  int64_t in_use = 0;
  for (const Record* r : mem) {
    bool alloc = r->Kind() == RecordKind::MemAlloc;
    auto bytes = static_cast<int64_t>(r->bytes);
    in_use += alloc ? bytes : -bytes;
    uint64_t addr = (uint64_t{r->b} << 32) | r->a;
    Begin();
    Raw("{\"ph\": \"i\", \"s\": \"t\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", "
        "\"pid\": ");
    UInt(p.pid);
    Raw(", \"tid\": ");
    UInt(r->tid);
    Raw(", \"ts\": ");
    Ts(r->start_ns);
    Raw(", \"args\": {\"Bytes\": ");
    Int(alloc ? bytes : -bytes);
    Raw(", \"Device Id\": ");
    UInt(r->device);
    Raw(", \"Device Type\": 1, \"Addr\": ");
    UInt(addr);
    Raw("}}");
    Begin();
    Raw("{\"ph\": \"C\", \"name\": \"Device memory\", \"pid\": ");
    UInt(p.pid);
    Raw(", \"tid\": 0, \"ts\": ");
    Ts(r->start_ns);
    Raw(", \"args\": {\"bytes\": ");
    Int(in_use);
    Raw("}}");
  }
}

void ChromeWriter::Instants(uint32_t i) {
  const ProcessTrace& p = run_.processes[i];
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::MarkerInstant) continue;
    Begin();
    Raw("{\"ph\": \"i\", \"s\": \"t\", \"cat\": \"user_annotation\", \"name\": ");
    Str(p.Name(r));
    Raw(", \"pid\": ");
    UInt(p.pid);
    Raw(", \"tid\": ");
    UInt(r.tid);
    Raw(", \"ts\": ");
    Ts(r.start_ns);
    Raw("}");
  }
}

}  // namespace kprof::chrome
