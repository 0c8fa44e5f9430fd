// Chrome trace JSON writer (PyTorch-profiler conventions; docs/chrome-trace.md). Streaming: the
// document is produced piece by piece into a small buffer that is flushed to the stream or the
// gzip file; no JSON tree is built. Only per-event descriptors (a few words each) are held, to
// sort events by track and keep the slices of each track properly nested.
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kprof/output.h"

namespace kprof {

// ---- JSON strings -----------------------------------------------------------------------------

namespace {

/// Length of the valid UTF-8 sequence starting at s[i] (2..4), or 0 if it is not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  uint32_t min;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, min = 0x80, cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, min = 0x800, cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, min = 0x10000, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t run = 0;  // start of the pending run of bytes copied as they are
  size_t i = 0;
  auto flush = [&](size_t upto) { out.append(s.data() + run, upto - run); };
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t n = Utf8SequenceLength(s, i);
      if (n == 3 && c == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
          (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
           static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
        // U+2028 / U+2029: valid JSON but line terminators for JavaScript; escape them.
        flush(i);
        out.append(static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029");
        i += 3;
        run = i;
        continue;
      }
      if (n != 0) {
        i += n;
        continue;
      }
      flush(i);
      out.append("\\ufffd");
      ++i;
      run = i;
      continue;
    }
    flush(i);
    if (c == '"') {
      out.append("\\\"");
    } else if (c == '\\') {
      out.append("\\\\");
    } else {
      char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, 6);
    }
    ++i;
    run = i;
  }
  flush(i);
  out.push_back('"');
}

namespace {

// ---- output sinks -----------------------------------------------------------------------------

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Write(const char* data, size_t n) = 0;
};

class StreamSink : public Sink {
 public:
  explicit StreamSink(std::ostream& out) : out_(out) {}
  void Write(const char* data, size_t n) override {
    out_.write(data, static_cast<std::streamsize>(n));
  }

 private:
  std::ostream& out_;
};

class GzipSink : public Sink {
 public:
  explicit GzipSink(const std::string& path) : path_(path) {
    gz_ = gzopen(path.c_str(), "wb6");
    if (gz_ == nullptr) throw InputError(path + ": cannot open for writing");
    gzbuffer(gz_, 1u << 18);
  }
  ~GzipSink() override {
    if (gz_ != nullptr) gzclose(gz_);
  }
  GzipSink(const GzipSink&) = delete;
  GzipSink& operator=(const GzipSink&) = delete;
  void Write(const char* data, size_t n) override {
    while (n > 0) {
      auto chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      if (gzwrite(gz_, data, chunk) != static_cast<int>(chunk))
        throw InputError(path_ + ": write error");
      data += chunk;
      n -= chunk;
    }
  }
  void Close() {
    int rc = gzclose(gz_);
    gz_ = nullptr;
    if (rc != Z_OK) throw InputError(path_ + ": write error");
  }

 private:
  std::string path_;
  gzFile gz_ = nullptr;
};

// ---- event model ------------------------------------------------------------------------------

enum class EvType : uint8_t {
  Kernel,
  Memcpy,
  Memset,
  GpuRange,       // GpuRange record of the input
  GpuAnnotation,  // an NVTX / user range projected onto a stream
  Runtime,
  Driver,
  Sync,
  CpuOp,
  UserRange,  // Range record not from cpu_op / python_function, or an NVTX start/end pair
  PythonFunc,
  Overhead,
};

/// One complete ("X") event to write: where it goes and what it shows.
struct Ev {
  int64_t pid = 0;
  int64_t tid = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  const Record* rec = nullptr;
  uint32_t proc = 0;
  EvType type = EvType::Kernel;
};

const char* CategoryOf(EvType t) {
  switch (t) {
    case EvType::Kernel:
      return "kernel";
    case EvType::Memcpy:
      return "gpu_memcpy";
    case EvType::Memset:
      return "gpu_memset";
    case EvType::GpuRange:
    case EvType::GpuAnnotation:
      return "gpu_user_annotation";
    case EvType::Runtime:
      return "cuda_runtime";
    case EvType::Driver:
      return "cuda_driver";
    case EvType::Sync:
      return "cuda_sync";
    case EvType::CpuOp:
      return "cpu_op";
    case EvType::UserRange:
      return "user_annotation";
    case EvType::PythonFunc:
      return "python_function";
    case EvType::Overhead:
      return "overhead";
  }
  return "unknown";
}

const char* MemKindName(uint32_t k) {
  switch (static_cast<MemKind>(k)) {
    case MemKind::Pageable:
      return "Pageable";
    case MemKind::Pinned:
      return "Pinned";
    case MemKind::Device:
      return "Device";
    case MemKind::Array:
      return "Array";
    case MemKind::Managed:
      return "Managed";
    case MemKind::DeviceStatic:
      return "Device Static";
    case MemKind::ManagedStatic:
      return "Managed Static";
    case MemKind::Unknown:
      break;
  }
  return "Unknown";
}

const char* SyncKindName(uint8_t k) {
  switch (static_cast<SyncKind>(k)) {
    case SyncKind::EventSynchronize:
      return "Event Sync";
    case SyncKind::StreamWaitEvent:
      return "Stream Wait Event";
    case SyncKind::StreamSynchronize:
      return "Stream Sync";
    case SyncKind::ContextSynchronize:
      return "Context Sync";
    case SyncKind::Unknown:
      break;
  }
  return "Unknown Sync";
}

bool IsUserDomain(const ProcessTrace& p, const Record& r) {
  if (r.Kind() == RecordKind::MarkerStart) return true;
  if (r.Kind() != RecordKind::Range) return false;
  const std::string& d = p.strings.Get(r.b);
  return d != "cpu_op" && d != "python_function";
}

// ---- the writer -------------------------------------------------------------------------------

class ChromeWriter {
 public:
  ChromeWriter(Sink& sink, const Run& run) : sink_(sink), run_(run) { out_.reserve(2u << 20); }

  void Write() {
    base_ = BaseTime();
    Header();
    for (uint32_t i = 0; i < run_.processes.size(); ++i) Metadata(i);
    std::vector<Ev> events = CollectEvents();
    Nest(events);
    for (const Ev& e : events) WriteX(e);
    std::vector<Ev>().swap(events);
    for (uint32_t i = 0; i < run_.processes.size(); ++i) {
      Flows(i);
      Memory(i);
      Instants(i);
    }
    Raw("\n]}\n");
    Flush();
  }

 private:
  // --- low level ---
  void Raw(std::string_view s) {
    out_.append(s);
    if (out_.size() >= (1u << 20)) Flush();
  }
  void Flush() {
    sink_.Write(out_.data(), out_.size());
    out_.clear();
  }
  void Int(int64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    out_.append(b, static_cast<size_t>(r.ptr - b));
  }
  void UInt(uint64_t v) {
    char b[24];
    auto r = std::to_chars(b, b + sizeof b, v);
    out_.append(b, static_cast<size_t>(r.ptr - b));
  }
  /// Nanoseconds as microseconds with three decimals (exact).
  void Micros(uint64_t ns) {
    UInt(ns / 1000);
    char frac[4] = {'.', static_cast<char>('0' + ns / 100 % 10),
                    static_cast<char>('0' + ns / 10 % 10), static_cast<char>('0' + ns % 10)};
    out_.append(frac, 4);
  }
  void Ts(uint64_t abs_ns) { Micros(abs_ns > base_ ? abs_ns - base_ : 0); }
  void Str(std::string_view s) { AppendJsonString(out_, s); }
  /// Starts a new element of traceEvents.
  void Begin() {
    if (!first_event_) out_.append(",\n");
    first_event_ = false;
    if (out_.size() >= (1u << 20)) Flush();
  }

  uint64_t BaseTime() const {
    uint64_t base = UINT64_MAX;
    for (const auto& p : run_.processes)
      for (const Record& r : p.records)
        if (r.start_ns != 0 && r.start_ns < base) base = r.start_ns;
    return base == UINT64_MAX ? 0 : base;
  }

  void Header() {
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
      auto get = [&](const char* key) -> const std::string* {
        auto it = f.find(key);
        return it == f.end() ? nullptr : &it->second;
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

  /// Track id of a stream: the stream for the first process; offset for the others so that
  /// streams of different processes on one device do not share a track.
  static int64_t StreamTrack(uint32_t proc, uint32_t stream) {
    return static_cast<int64_t>(stream) + static_cast<int64_t>(proc) * 1000000;
  }

  void MetaEvent(const char* name, int64_t pid, int64_t tid, std::string_view key,
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

  void Metadata(uint32_t i) {
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

  std::vector<Ev> CollectEvents() {
    std::vector<Ev> ev;
    size_t total = 0;
    for (const auto& p : run_.processes) total += p.records.size();
    ev.reserve(total);

    // Projected annotations need the attribution of GPU work to ranges; only computed when a
    // process has user ranges and no GpuRange records of its own (those are written as is).
    std::vector<bool> project(run_.processes.size(), false);
    bool any_projection = false;
    for (size_t i = 0; i < run_.processes.size(); ++i) {
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
      api_by_corr_.push_back(std::move(api_by_corr));
    }

    if (any_projection) Project(ev, project);
    return ev;
  }

  /// Adds one gpu_user_annotation per (user range, device, stream): the span from the first to
  /// the last GPU activity attributed to the range on that stream.
  void Project(std::vector<Ev>& ev, const std::vector<bool>& project) {
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
    for (const Attributed& a : Attribute(BuildTimeline(run_))) {
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

  /// Sorts events by track and start, and clamps partial overlaps so that the slices of each
  /// track nest (clock jitter between API records can produce overlaps of a few ns).
  static void Nest(std::vector<Ev>& ev) {
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

  const std::string& KernelName(const ProcessTrace& p, uint32_t proc, uint32_t id) {
    auto& cache = demangled_[proc];
    auto it = cache.find(id);
    if (it != cache.end()) return it->second;
    return cache.emplace(id, Demangle(p.strings.Get(id))).first->second;
  }

  void WriteX(const Ev& e) {
    const ProcessTrace& p = run_.processes[e.proc];
    const Record& r = *e.rec;
    Begin();
    Raw("{\"ph\": \"X\", \"cat\": \"");
    Raw(CategoryOf(e.type));
    Raw("\", \"name\": ");
    switch (e.type) {
      case EvType::Kernel:
        Str(KernelName(p, e.proc, r.name));
        break;
      case EvType::Memcpy:
        if (r.name != 0) {
          Str(p.Name(r));
        } else {
          Str(std::string("Memcpy ") + CopyKindName(r.flags) + " (" + MemKindName(r.a) + " -> " +
              MemKindName(r.b) + ")");
        }
        break;
      case EvType::Memset:
        if (r.name != 0)
          Str(p.Name(r));
        else
          Str(std::string("Memset (") + MemKindName(r.b) + ")");
        break;
      case EvType::Sync:
        Str(r.name != 0 ? p.Name(r) : std::string(SyncKindName(r.flags)));
        break;
      default:
        Str(p.Name(r));
        break;
    }
    Raw(", \"pid\": ");
    Int(e.pid);
    Raw(", \"tid\": ");
    Int(e.tid);
    Raw(", \"ts\": ");
    Ts(e.start);
    Raw(", \"dur\": ");
    Micros(e.end - e.start);
    switch (e.type) {
      case EvType::Kernel: {
        Dim3 g = KernelGrid(r), b = KernelBlock(r);
        GpuArgs(r);
        Raw(", \"registers per thread\": ");
        UInt(KernelRegisters(r));
        Raw(", \"shared memory\": ");
        UInt(KernelSharedMem(r));
        Raw(", \"grid\": [");
        UInt(g.x);
        Raw(", ");
        UInt(g.y);
        Raw(", ");
        UInt(g.z);
        Raw("], \"block\": [");
        UInt(b.x);
        Raw(", ");
        UInt(b.y);
        Raw(", ");
        UInt(b.z);
        Raw("]}");
        break;
      }
      case EvType::Memcpy:
      case EvType::Memset: {
        GpuArgs(r);
        Raw(", \"bytes\": ");
        UInt(r.bytes);
        uint64_t dur = r.DurationNs();
        if (dur > 0) {
          // bytes per ns = GB/s
          char b[32];
          auto res = std::to_chars(b, b + sizeof b,
                                   static_cast<double>(r.bytes) / static_cast<double>(dur));
          Raw(", \"memory bandwidth (GB/s)\": ");
          out_.append(b, static_cast<size_t>(res.ptr - b));
        }
        Raw("}");
        break;
      }
      case EvType::Runtime:
      case EvType::Driver:
        Raw(", \"args\": {\"cbid\": ");
        UInt(r.a);
        Raw(", \"correlation\": ");
        UInt(r.correlation);
        Raw("}");
        break;
      case EvType::Sync:
        Raw(", \"args\": {\"correlation\": ");
        UInt(r.correlation);
        Raw(", \"stream\": ");
        UInt(r.a);
        if (r.device != kNoDevice) {
          Raw(", \"device\": ");
          UInt(r.device);
        }
        Raw("}");
        break;
      default:
        break;
    }
    Raw("}");
  }

  void GpuArgs(const Record& r) {
    Raw(", \"args\": {\"device\": ");
    UInt(r.device);
    Raw(", \"stream\": ");
    UInt(r.tid);
    Raw(", \"correlation\": ");
    UInt(r.correlation);
  }

  /// ac2g flow arrows from each launching API call to its GPU work.
  uint64_t flow_ids_ = 0;

  void Flows(uint32_t i) {
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

  /// Device memory: PyTorch-style "[memory]" instants (read back by kprof) and a counter track.
  void Memory(uint32_t i) {
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

  /// NVTX marks as thread-scoped instant events.
  void Instants(uint32_t i) {
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

  Sink& sink_;
  const Run& run_;
  std::string out_;
  uint64_t base_ = 0;
  bool first_event_ = true;
  std::set<uint16_t> devices_named_;
  std::vector<std::unordered_map<uint32_t, const Record*>> api_by_corr_;
  std::unordered_map<uint32_t, std::unordered_map<uint32_t, std::string>> demangled_;
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

}  // namespace

void WriteChromeTrace(std::ostream& out, const Run& run) {
  StreamSink sink(out);
  ChromeWriter(sink, run).Write();
}

void WriteChromeTrace(const std::string& path, const Run& run) {
  if (EndsWith(path, ".gz")) {
    GzipSink sink(path);
    ChromeWriter(sink, run).Write();
    sink.Close();
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError(path + ": cannot open for writing");
  StreamSink sink(f);
  ChromeWriter(sink, run).Write();
  f.flush();
  if (!f) throw InputError(path + ": write error");
}

}  // namespace kprof
