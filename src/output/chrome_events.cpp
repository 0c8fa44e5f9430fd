// Chrome trace: the complete ("X") events collected from the records, each placed on its
// track: CPU-side API calls, synchronization, CPU ops and NVTX ranges on their threads; kernels,
// copies and memsets on their streams; user ranges projected onto the streams of the GPU work
// they launched. Then sorted per track and clamped so that the slices of a track nest.
#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "output/chrome_writer.h"

namespace kprof::chrome {
namespace {

/// User ranges (NVTX, or Range records of the program's own domains), as opposed to the
/// cpu_op / python_function ranges of the PyTorch profiler.
bool IsUserDomain(const ProcessTrace& p, const Record& r) {
  if (r.Kind() == RecordKind::MarkerStart) return true;
  if (r.Kind() != RecordKind::Range) return false;
  const std::string& d = p.strings.Get(r.b);
  return d != "cpu_op" && d != "python_function";
}

}  // namespace

std::vector<Ev> ChromeWriter::CollectEvents() {
  std::vector<Ev> ev;
  size_t total = 0;
  for (uint32_t i = 0; i < run_.processes.size(); ++i)
    if (Wanted(i)) total += run_.processes[i].records.size();
  ev.reserve(total);
  api_by_corr_.assign(run_.processes.size(), {});

  // Projected annotations need the attribution of GPU work to ranges; only computed when a
  // process has user ranges and no GpuRange records of its own (those are written as is).
  std::vector<bool> project(run_.processes.size(), false);
  bool any_projection = false;
  for (uint32_t i = 0; i < run_.processes.size(); ++i) {
    if (!Wanted(i)) continue;
    const ProcessTrace& p = run_.processes[i];
    bool has_gpu_range = false, has_user = false;
    for (const Record& r : p.records) {
      if (r.Kind() == RecordKind::GpuRange) has_gpu_range = true;
      if (IsUserDomain(p, r)) has_user = true;
    }
    project[i] = has_user && !has_gpu_range;
    any_projection = any_projection || project[i];
  }

  for (uint32_t i = 0; i < run_.processes.size(); ++i) {
    if (!Wanted(i)) continue;
    const ProcessTrace& p = run_.processes[i];
    std::unordered_map<uint32_t, const Record*> api_by_corr;
    std::unordered_map<uint32_t, const Record*> open_markers;
    uint64_t last_end = 0;
    for (const Record& r : p.records) {
      last_end = std::max(last_end, r.end_ns);
      if ((r.Kind() == RecordKind::RuntimeApi || r.Kind() == RecordKind::DriverApi) &&
          r.correlation != 0) {
        auto [it, inserted] = api_by_corr.emplace(r.correlation, &r);
        if (!inserted && it->second->Kind() == RecordKind::DriverApi &&
            r.Kind() == RecordKind::RuntimeApi)
          it->second = &r;
      }
    }
    const auto pid = static_cast<int64_t>(p.pid);
    for (const Record& r : p.records) {
      Ev e;
      e.rec = &r;
      e.proc = i;
      e.start = r.start_ns;
      e.end = std::max(r.start_ns, r.end_ns);
      e.pid = pid;
      e.tid = r.tid;
      switch (r.Kind()) {
        case RecordKind::Kernel:
        case RecordKind::Memcpy:
        case RecordKind::Memset:
        case RecordKind::GpuRange:
          e.type = r.Kind() == RecordKind::Kernel   ? EvType::Kernel
                   : r.Kind() == RecordKind::Memcpy ? EvType::Memcpy
                   : r.Kind() == RecordKind::Memset ? EvType::Memset
                                                    : EvType::GpuRange;
          e.pid = r.device;
          e.tid = StreamTrack(i, r.tid);
          break;
        case RecordKind::GraphLaunch:
          e.type = EvType::Graph;
          e.pid = r.device;
          e.tid = StreamTrack(i, r.tid);
          break;
        case RecordKind::RuntimeApi:
        case RecordKind::DriverApi:
          e.type = r.Kind() == RecordKind::RuntimeApi ? EvType::Runtime : EvType::Driver;
          break;
        case RecordKind::Sync: {
          e.type = EvType::Sync;
          auto it = r.correlation != 0 ? api_by_corr.find(r.correlation) : api_by_corr.end();
          if (it != api_by_corr.end()) {
            e.tid = it->second->tid;  // host thread blocked in the API call
          } else if (r.device != kNoDevice) {
            e.pid = r.device;
            e.tid = StreamTrack(i, r.a);
            e.gpu_track = true;
          } else {
            e.tid = 0;
          }
          break;
        }
        case RecordKind::Range: {
          const std::string& d = p.strings.Get(r.b);
          e.type = d == "cpu_op"            ? EvType::CpuOp
                   : d == "python_function" ? EvType::PythonFunc
                                            : EvType::UserRange;
          break;
        }
        case RecordKind::MarkerStart:
          open_markers[r.a] = &r;
          continue;
        case RecordKind::MarkerEnd: {
          auto it = open_markers.find(r.a);
          if (it == open_markers.end()) continue;
          e.rec = it->second;
          e.start = it->second->start_ns;
          e.end = std::max(e.start, r.end_ns);
          e.tid = it->second->tid;
          e.type = EvType::UserRange;
          open_markers.erase(it);
          break;
        }
        case RecordKind::Overhead:
          e.type = EvType::Overhead;
          break;
        default:
          continue;  // instants, memory, invalid: written elsewhere or not at all
      }
      ev.push_back(e);
    }
    // Ranges never closed (process killed): they last until the end of the recording.
    for (auto& [id, start] : open_markers) {
      Ev e;
      e.rec = start;
      e.proc = i;
      e.pid = pid;
      e.tid = start->tid;
      e.start = start->start_ns;
      e.end = std::max(start->start_ns, last_end);
      e.type = EvType::UserRange;
      ev.push_back(e);
    }
    api_by_corr_[i] = std::move(api_by_corr);
  }

  if (any_projection) Project(ev, project);
  return ev;
}

void ChromeWriter::Project(std::vector<Ev>& ev, const std::vector<bool>& project) {
  struct Key {
    const Record* range;
    uint16_t device;
    uint32_t stream;
    bool operator==(const Key& o) const {
      return range == o.range && device == o.device && stream == o.stream;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.range) ^ (size_t{k.device} << 40) ^
             (size_t{k.stream} * 0x9E3779B97F4A7C15ull);
    }
  };
  struct Span {
    uint64_t start = UINT64_MAX, end = 0;
    uint32_t proc = 0;
  };
  std::unordered_map<Key, Span, KeyHash> spans;
  std::vector<Key> order;
  std::unordered_map<const ProcessTrace*, uint32_t> index;
  for (uint32_t i = 0; i < run_.processes.size(); ++i) index[&run_.processes[i]] = i;
  for (const Attributed& a : attribution_.Get()) {
    uint32_t proc = index[a.process];
    if (!project[proc]) continue;
    const Record& act = *a.activity;
    for (const Record* range : a.ranges) {
      if (!IsUserDomain(*a.process, *range)) continue;
      Key k{range, act.device, act.tid};
      auto [it, inserted] = spans.try_emplace(k);
      if (inserted) order.push_back(k);
      Span& s = it->second;
      s.start = std::min(s.start, act.start_ns);
      s.end = std::max(s.end, std::max(act.start_ns, act.end_ns));
      s.proc = proc;
    }
  }
  for (const Key& k : order) {
    const Span& s = spans[k];
    Ev e;
    e.rec = k.range;
    e.proc = s.proc;
    e.pid = k.device;
    e.tid = StreamTrack(s.proc, k.stream);
    e.start = s.start;
    e.end = s.end;
    e.type = EvType::GpuAnnotation;
    ev.push_back(e);
  }
}

void ChromeWriter::Nest(std::vector<Ev>& ev) {
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) {
    if (a.pid != b.pid) return a.pid < b.pid;
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;  // enclosing first
    // Same interval: annotations enclose the work they annotate.
    return a.type > b.type;
  });
  std::vector<uint64_t> open;  // ends of the enclosing slices of the current track
  for (size_t i = 0; i < ev.size(); ++i) {
    if (i == 0 || ev[i].pid != ev[i - 1].pid || ev[i].tid != ev[i - 1].tid) open.clear();
    Ev& e = ev[i];
    while (!open.empty() && open.back() <= e.start) open.pop_back();
    if (!open.empty() && e.end > open.back()) e.end = open.back();
    open.push_back(e.end);
  }
}

}  // namespace kprof::chrome
