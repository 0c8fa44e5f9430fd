// Chrome trace: the document header (base time, device properties, distributedInfo) and the
// metadata events that name and order the tracks: processes, CPU threads, GPUs and their
// streams. Also the distributedInfo of a process (ProcessDistributedInfo).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "kprof/distributed.h"
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
  for (uint32_t i = 0; i < run_.processes.size(); ++i) {
    if (!Wanted(i)) continue;
    for (const auto& [k, v] : run_.processes[i].meta) {
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
  // Before traceEvents: readers that stream the document (HTA's ijson path) stop reading the
  // top-level keys there.
  if (only_ >= 0)
    Distributed(ProcessDistributedInfo(timeline_, static_cast<size_t>(only_)));
  else if (run_.processes.size() == 1 && run_.processes[0].rank >= 0)
    Distributed(ProcessDistributedInfo(timeline_, 0));
  Raw("\"traceEvents\": [\n");
}

void ChromeWriter::Distributed(const DistributedInfo& info) {
  if (info.rank < 0) return;
  // PyTorch's key order. HTA finds a file's rank with the regular expression
  // "rank":\s+(\d+) on its lines, first match: the space after the colon is needed.
  Raw("\"distributedInfo\": {");
  if (!info.backend.empty()) {
    Raw("\"backend\": ");
    Str(info.backend);
    Raw(", ");
  }
  Raw("\"rank\": ");
  Int(info.rank);
  if (info.world_size > 0) {
    Raw(", \"world_size\": ");
    UInt(info.world_size);
  }
  Raw("},\n");
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
    if (run_.processes.size() > 1 && only_ < 0) label += " (" + p.Label() + ")";
    MetaEvent("thread_name", dev, StreamTrack(i, stream), "name", label, false);
  }
}

}  // namespace kprof::chrome

namespace kprof {

DistributedInfo ProcessDistributedInfo(const Timeline& timeline, size_t i) {
  const Run& run = *timeline.run;
  const ProcessTrace& p = run.processes.at(i);
  DistributedInfo info;
  std::set<int> ranks;
  for (const auto& q : run.processes)
    if (q.rank >= 0) ranks.insert(q.rank);
  if (p.rank >= 0)
    info.rank = p.rank;
  else if (ranks.empty())
    info.rank = static_cast<int>(i);  // no ranks in the run: each file loads as its own
  info.world_size = p.MetaU64("world_size");
  if (info.world_size == 0) {
    if (ranks.empty())
      info.world_size = run.processes.size();
    else
      info.world_size =
          std::max<uint64_t>(ranks.size(), static_cast<uint64_t>(*ranks.rbegin()) + 1);
  }
  if (i < timeline.processes.size()) {
    const ProcessTimeline& t = timeline.processes[i];
    for (const Record* a : t.acts) {
      if (a->Kind() == RecordKind::Kernel && IsCommKernel(t.KernelName(*a))) {
        info.backend = "nccl";
        break;
      }
    }
  }
  if (info.backend.empty()) info.backend = p.Meta("distributed.backend");
  return info;
}

}  // namespace kprof
