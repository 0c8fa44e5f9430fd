// Chrome trace: the document header (base time, device properties, rank) and the metadata
// events that name and order the tracks: processes, CPU threads, GPUs and their streams.
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "output/chrome_writer.h"

namespace kprof::chrome {

uint64_t ChromeWriter::BaseTime() const {
  uint64_t base = UINT64_MAX;
  for (const auto& p : run_.processes)
    for (const Record& r : p.records)
      if (r.start_ns != 0 && r.start_ns < base) base = r.start_ns;
  return base == UINT64_MAX ? 0 : base;
}

void ChromeWriter::Header() {
  Raw("{\n\"schemaVersion\": 1,\n\"displayTimeUnit\": \"ms\",\n\"baseTimeNanoseconds\": ");
  UInt(base_);
  Raw(",\n\"traceName\": \"kprof\",\n\"deviceProperties\": [");
  // Devices from the processes' meta: device.<i>.name / sm_count / memory_bytes / cc.
  std::map<long, std::map<std::string, std::string>> devices;
  for (const auto& p : run_.processes) {
    for (const auto& [k, v] : p.meta) {
      if (k.rfind("device.", 0) != 0) continue;
      size_t dot = k.find('.', 7);
      if (dot == std::string::npos) continue;
      char* endp = nullptr;
      std::string id = k.substr(7, dot - 7);
      long d = std::strtol(id.c_str(), &endp, 10);
      if (id.empty() || *endp != '\0') continue;
      devices[d].emplace(k.substr(dot + 1), v);
    }
  }
  bool first = true;
  for (const auto& [id, f] : devices) {
    Raw(first ? "\n  {" : ",\n  {");
    first = false;
    Raw("\"id\": ");
    Int(id);
    const auto& fields = f;  // clang 14 cannot capture a structured binding
    auto get = [&](const char* key) -> const std::string* {
      auto it = fields.find(key);
      return it == fields.end() ? nullptr : &it->second;
    };
    auto num = [&](const char* json_key, const char* meta_key) {
      const std::string* v = get(meta_key);
      if (v == nullptr || v->empty()) return;
      char* endp = nullptr;
      unsigned long long n = std::strtoull(v->c_str(), &endp, 10);
      if (*endp != '\0') return;
      Raw(", \"");
      Raw(json_key);
      Raw("\": ");
      UInt(n);
    };
    if (const std::string* name = get("name")) {
      Raw(", \"name\": ");
      Str(*name);
    }
    num("totalGlobalMem", "memory_bytes");
    num("numSms", "sm_count");
    if (const std::string* cc = get("cc")) {
      size_t dot = cc->find('.');
      std::string major = cc->substr(0, dot);
      std::string minor = dot == std::string::npos ? "0" : cc->substr(dot + 1);
      char* e1 = nullptr;
      char* e2 = nullptr;
      long mj = std::strtol(major.c_str(), &e1, 10);
      long mn = std::strtol(minor.c_str(), &e2, 10);
      if (!major.empty() && *e1 == '\0' && !minor.empty() && *e2 == '\0') {
        Raw(", \"computeMajor\": ");
        Int(mj);
        Raw(", \"computeMinor\": ");
        Int(mn);
      }
    }
    Raw("}");
  }
  Raw(first ? "],\n" : "\n],\n");
  if (run_.processes.size() == 1 && run_.processes[0].rank >= 0) {
    Raw("\"distributedInfo\": {\"rank\": ");
    Int(run_.processes[0].rank);
    Raw("},\n");
  }
  Raw("\"traceEvents\": [\n");
}

void ChromeWriter::MetaEvent(const char* name, int64_t pid, int64_t tid, std::string_view key,
                             std::string_view value, bool value_is_number) {
  Begin();
  Raw("{\"ph\": \"M\", \"name\": \"");
  Raw(name);
  Raw("\", \"pid\": ");
  Int(pid);
  Raw(", \"tid\": ");
  Int(tid);
  Raw(", \"ts\": 0, \"args\": {\"");
  Raw(key);
  Raw("\": ");
  if (value_is_number)
    Raw(value);
  else
    Str(value);
  Raw("}}");
}

void ChromeWriter::Metadata(uint32_t i) {
  const ProcessTrace& p = run_.processes[i];
  auto pn = p.meta.find("process_name");
  std::string pname = pn != p.meta.end() ? pn->second : p.Label();
  MetaEvent("process_name", p.pid, 0, "name", pname, false);
  MetaEvent("process_sort_index", p.pid, 0, "sort_index", std::to_string(i), true);
  if (p.rank >= 0)
    MetaEvent("process_labels", p.pid, 0, "labels", "rank " + std::to_string(p.rank), false);
  std::set<uint32_t> threads;
  std::set<std::pair<uint16_t, uint32_t>> streams;
  for (const Record& r : p.records) {
    RecordKind k = r.Kind();
    if (IsGpuKind(k)) {
      streams.emplace(r.device, r.tid);
    } else if (k == RecordKind::RuntimeApi || k == RecordKind::DriverApi ||
               k == RecordKind::Range || k == RecordKind::MarkerStart ||
               k == RecordKind::Overhead) {
      threads.insert(r.tid);
    }
  }
  for (uint32_t t : threads) {
    auto tn = p.meta.find("thread." + std::to_string(t) + ".name");
    MetaEvent("thread_name", p.pid, t, "name",
              tn != p.meta.end() ? tn->second : "thread " + std::to_string(t), false);
  }
  for (auto [dev, stream] : streams) {
    if (devices_named_.insert(dev).second) {
      auto dn = p.meta.find("device." + std::to_string(dev) + ".name");
      std::string label = "GPU " + std::to_string(dev);
      if (dn != p.meta.end()) label += " (" + dn->second + ")";
      MetaEvent("process_name", dev, 0, "name", label, false);
      MetaEvent("process_sort_index", dev, 0, "sort_index", std::to_string(1000000 + dev), true);
    }
    std::string label = "stream " + std::to_string(stream);
    if (run_.processes.size() > 1) label += " (" + p.Label() + ")";
    MetaEvent("thread_name", dev, StreamTrack(i, stream), "name", label, false);
  }
}

}  // namespace kprof::chrome
