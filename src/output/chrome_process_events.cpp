// Chrome trace: the events written per process after the slices: ac2g flow arrows from each
// launching API call to its GPU work, device memory ("[memory]" instants and a counter track)
// NVTX marks as instants, and PM sampling's counter tracks.
#include <algorithm>
#include <charconv>
#include <map>
#include <vector>

#include "kprof/counters.h"
#include "kprof/metrics.h"
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
    PidTidTs(p.pid, it->second->tid, it->second->start_ns);
    Raw("}");
    Begin();
    Raw("{\"ph\": \"f\", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"id\": ");
    UInt(id);
    PidTidTs(r.device, StreamTrack(i, r.tid), r.start_ns);
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
    PidTidTs(p.pid, r.tid, r.start_ns);
    Raw("}");
  }
}

void ChromeWriter::Windows(uint32_t i) {
  const ProcessTrace& p = run_.processes[i];
  const std::string& capture = p.Meta("capture");
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::CaptureWindow) continue;
    Begin();
    Raw("{\"ph\": \"X\", \"cat\": \"kprof_capture\", \"name\": ");
    Str(capture.empty() ? std::string_view("capture") : std::string_view(capture));
    PidTidTs(p.pid, r.tid, r.start_ns);
    Raw(", \"dur\": ");
    Micros(r.DurationNs());
    Raw(", \"args\": {\"window\": ");
    UInt(r.a);
    Raw(", \"opened by\": ");
    Str(p.Name(r));
    Raw("}}");
  }
}

void ChromeWriter::Counters(uint32_t i) {
  // One track per (device, metric), on the GPU's process, as the GPU's slices are.
  for (const CounterTrack& t : CounterTracks(run_.processes[i])) {
    const std::string_view label = MetricLabel(t.metric);
    const auto point = [&](uint64_t ts, double value) {
      Begin();
      Raw("{\"ph\": \"C\", \"cat\": \"gpu_counter\", \"name\": ");
      Str(label);
      Raw(", \"pid\": ");
      UInt(t.device);
      Raw(", \"tid\": 0, \"ts\": ");
      Ts(ts);
      Raw(", \"args\": {\"value\": ");
      char b[32];
      auto r = std::to_chars(b, b + sizeof b, value, std::chars_format::fixed, 2);
      out_.append(b, static_cast<size_t>(r.ptr - b));
      Raw("}}");
    };
    for (size_t j = 0; j < t.t_ns.size(); ++j) {
      point(t.t_ns[j], t.value[j]);
      // A track holds its value until the next point: end it where the samples stop (the last
      // one, or a hole of more than half a sample before the next).
      const uint64_t len = t.end_ns[j] > t.t_ns[j] ? t.end_ns[j] - t.t_ns[j] : 0;
      if (j + 1 == t.t_ns.size() || t.t_ns[j + 1] > t.end_ns[j] + len / 2) point(t.end_ns[j], 0.0);
    }
  }
}

}  // namespace kprof::chrome
