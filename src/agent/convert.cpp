#include "agent/convert.h"

#include <cctype>
#include <string>

namespace kprof::agent {

uint32_t Interner::Intern(std::string_view s) {
  if (s.empty()) return 0;
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  uint32_t id = next_++;
  ids_.emplace(std::string(s), id);
  new_.emplace_back(id, std::string(s));
  return id;
}

std::vector<std::pair<uint32_t, std::string>> Interner::TakeNew() {
  std::vector<std::pair<uint32_t, std::string>> out;
  out.swap(new_);
  return out;
}

std::string_view ApiBaseName(std::string_view name) {
  // Strip a trailing "_v<digits>" (CUPTI appends the API version to callback names).
  size_t pos = name.rfind("_v");
  if (pos == std::string_view::npos || pos + 2 >= name.size()) return name;
  for (size_t i = pos + 2; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return name;
  }
  return name.substr(0, pos);
}

namespace {

// API names by callback id, resolved once (cuptiGetCallbackName is not free).
class ApiNames {
 public:
  uint32_t Get(CUpti_CallbackDomain domain, uint32_t cbid, Interner& strings) {
    std::vector<uint32_t>& table = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_ : driver_;
    if (cbid < table.size() && table[cbid] != 0) return table[cbid];
    const char* name = nullptr;
    uint32_t id;
    if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) {
      id = strings.Intern(ApiBaseName(name));
    } else {
      id = strings.Intern((domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "cudaApi#" : "cuApi#") +
                          std::to_string(cbid));
    }
    if (cbid < table.size()) table[cbid] = id;
    return id;
  }

 private:
  std::vector<uint32_t> runtime_ = std::vector<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_SIZE, 0);
  std::vector<uint32_t> driver_ = std::vector<uint32_t>(CUPTI_DRIVER_TRACE_CBID_SIZE, 0);
};

ApiNames& Names() {
  // Writer thread only. Leaked on purpose: exit() runs static destructors on the main thread
  // while the writer may still be converting (and the exit flush converts after them).
  static ApiNames* names = new ApiNames();
  return *names;
}

/// "GPU-1a2b3c4d-...": a device UUID's 16 bytes as nvidia-smi -L writes them.
std::string GpuUuid(const unsigned char* u) {
  static const char* kHex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[u[i] >> 4];
    s += kHex[u[i] & 15];
  }
  return s;
}

uint16_t Device(uint32_t id) { return static_cast<uint16_t>(id < kNoDevice ? id : kNoDevice - 1); }

CopyKind ToCopyKind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return CopyKind::HtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return CopyKind::DtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return CopyKind::DtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return CopyKind::HtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return CopyKind::PtoP;
    default:
      return CopyKind::Unknown;
  }
}

uint32_t ToMemKind(uint32_t k) {
  // CUPTI's memory kinds 0..7 are kprof's MemKind values by design (docs/format.md).
  return k <= static_cast<uint32_t>(MemKind::ManagedStatic) ? k : 0;
}

const char* OverheadName(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "CUPTI resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "activity buffer request";
    default:
      return "CUPTI overhead";
  }
}

uint32_t ToOverheadKind(uint32_t kind) {
  if (kind == CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER) {
    return static_cast<uint32_t>(OverheadKind::DriverCompiler);
  }
  uint32_t k = kind >> 16;
  return k <= static_cast<uint32_t>(OverheadKind::UvmActivityInit) ? k : 0;
}

uint32_t ObjectThread(CUpti_ActivityObjectKind kind, const CUpti_ActivityObjectKindId& id) {
  return kind == CUPTI_ACTIVITY_OBJECT_THREAD || kind == CUPTI_ACTIVITY_OBJECT_PROCESS
             ? id.pt.threadId
             : 0;
}

/// What every CUPTI record with a start and an end becomes first: kind, device, interval and
/// correlation id (which ties GPU work, API calls and syncs together).
template <class Activity>
void SetTimed(Record& out, RecordKind kind, uint16_t device, const Activity& a) {
  out.kind = static_cast<uint8_t>(kind);
  out.device = device;
  out.correlation = a.correlationId;
  out.start_ns = a.start;
  out.end_ns = a.end;
}

// One converter per kind of CUPTI record (ConvertRecord).

ConvertResult ConvertKernel(const CUpti_Activity* rec, Interner& strings, Record& out,
                            MetaList& /*meta*/) {
  const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
  SetTimed(out, RecordKind::Kernel, Device(k->deviceId), *k);
  out.flags = k->graphId != 0 ? 1 : 0;
  out.bytes = k->graphNodeId;
  out.name = strings.Intern(k->name != nullptr ? k->name : "(unnamed kernel)");
  out.tid = k->streamId;
  SetKernelLaunch(out,
                  {static_cast<uint32_t>(k->gridX), static_cast<uint32_t>(k->gridY),
                   static_cast<uint32_t>(k->gridZ)},
                  {static_cast<uint32_t>(k->blockX), static_cast<uint32_t>(k->blockY),
                   static_cast<uint32_t>(k->blockZ)},
                  k->registersPerThread,
                  static_cast<uint32_t>(k->staticSharedMemory + k->dynamicSharedMemory));
  // Filled all the same: a kernel replayed for its counters has no timestamps, and the
  // writer gives it the replay's (counters.cpp).
  if (k->start == 0 || k->end == 0) return ConvertResult::MissingTimestamp;
  return ConvertResult::Converted;
}

ConvertResult ConvertMemcpy(const CUpti_Activity* rec, Interner& /*strings*/, Record& out,
                            MetaList& /*meta*/) {
  const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
  if (m->start == 0 || m->end == 0) return ConvertResult::MissingTimestamp;
  SetTimed(out, RecordKind::Memcpy, Device(m->deviceId), *m);
  out.flags = static_cast<uint8_t>(ToCopyKind(m->copyKind));
  out.tid = m->streamId;
  out.bytes = m->bytes;
  out.a = ToMemKind(m->srcKind);
  out.b = ToMemKind(m->dstKind);
  out.c = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? kCopyAsync : 0;
  out.d = m->deviceId;
  out.e = m->deviceId;
  out.f = static_cast<uint32_t>(m->graphNodeId);
  out.c |= static_cast<uint32_t>(m->graphNodeId >> 32) << 1;
  return ConvertResult::Converted;
}

ConvertResult ConvertMemset(const CUpti_Activity* rec, Interner& /*strings*/, Record& out,
                            MetaList& /*meta*/) {
  const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
  if (m->start == 0 || m->end == 0) return ConvertResult::MissingTimestamp;
  SetTimed(out, RecordKind::Memset, Device(m->deviceId), *m);
  out.tid = m->streamId;
  out.bytes = m->bytes;
  out.a = m->value;
  out.b = ToMemKind(m->memoryKind);
  out.c = static_cast<uint32_t>(m->graphNodeId);
  out.d = static_cast<uint32_t>(m->graphNodeId >> 32);
  return ConvertResult::Converted;
}

ConvertResult ConvertGraphTrace(const CUpti_Activity* rec, Interner& strings, Record& out,
                                MetaList& /*meta*/) {
  const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(rec);
  if (g->start == 0 || g->end == 0) return ConvertResult::MissingTimestamp;
  SetTimed(out, RecordKind::GraphLaunch, Device(g->deviceId), *g);
  out.tid = g->streamId;
  out.name = strings.Intern("CUDA graph " + std::to_string(g->graphId));
  out.a = g->graphId;
  out.b = g->endDeviceId;
  return ConvertResult::Converted;
}

ConvertResult ConvertDeviceGraphTrace(const CUpti_Activity* rec, Interner& strings, Record& out,
                                      MetaList& /*meta*/) {
  // A graph launched by a kernel (cudaGraphLaunch in device code): no API call, so no
  // correlation id; the graph whose kernel launched it says where it came from.
  const auto* g = reinterpret_cast<const CUpti_ActivityDeviceGraphTrace*>(rec);
  if (g->start == 0 || g->end == 0) return ConvertResult::MissingTimestamp;
  out.kind = static_cast<uint8_t>(RecordKind::GraphLaunch);
  out.device = Device(g->deviceId);
  out.start_ns = g->start;
  out.end_ns = g->end;
  out.flags = kGraphLaunchFromDevice;
  out.tid = static_cast<uint32_t>(g->streamId);
  out.name = strings.Intern("CUDA graph " + std::to_string(g->graphId));
  out.a = g->graphId;
  out.b = g->deviceId;
  out.c = g->launcherGraphId;
  out.d = g->deviceLaunchMode;
  return ConvertResult::Converted;
}

ConvertResult ConvertSync(const CUpti_Activity* rec, Interner& /*strings*/, Record& out,
                          MetaList& /*meta*/) {
  const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
  if (s->start == 0 || s->end == 0) return ConvertResult::MissingTimestamp;
  SetTimed(out, RecordKind::Sync, kNoDevice, *s);
  uint32_t type = static_cast<uint32_t>(s->type);
  out.flags = static_cast<uint8_t>(type <= 4 ? type : 0);  // CUPTI's values are SyncKind's
  out.a = s->streamId == 0xFFFFFFFFu ? 0 : s->streamId;
  return ConvertResult::Converted;
}

ConvertResult ConvertApi(const CUpti_Activity* rec, Interner& strings, Record& out,
                         MetaList& /*meta*/) {
  const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
  if (a->start == 0 || a->end == 0) return ConvertResult::MissingTimestamp;
  bool runtime = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
  SetTimed(out, runtime ? RecordKind::RuntimeApi : RecordKind::DriverApi, kNoDevice, *a);
  out.tid = a->threadId;
  out.name = Names().Get(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
                         a->cbid, strings);
  out.a = a->cbid;
  out.b = a->returnValue;
  return ConvertResult::Converted;
}

ConvertResult ConvertMarker(const CUpti_Activity* rec, Interner& strings, Record& out,
                            MetaList& /*meta*/) {
  const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(rec);
  if (m->timestamp == 0) return ConvertResult::MissingTimestamp;
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
    out.kind = static_cast<uint8_t>(RecordKind::MarkerStart);
  } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
    out.kind = static_cast<uint8_t>(RecordKind::MarkerEnd);
  } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
    out.kind = static_cast<uint8_t>(RecordKind::MarkerInstant);
  } else {
    return ConvertResult::Skipped;  // sync acquire/release markers
  }
  out.device = kNoDevice;
  out.start_ns = out.end_ns = m->timestamp;
  out.tid = ObjectThread(m->objectKind, m->objectId);
  out.name = m->name != nullptr ? strings.Intern(m->name) : 0;
  out.a = m->id;
  out.b = m->domain != nullptr ? strings.Intern(m->domain) : 0;
  return ConvertResult::Converted;
}

ConvertResult ConvertMemory(const CUpti_Activity* rec, Interner& strings, Record& out,
                            MetaList& /*meta*/) {
  const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(rec);
  if (m->timestamp == 0) return ConvertResult::MissingTimestamp;
  if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
    out.kind = static_cast<uint8_t>(RecordKind::MemAlloc);
  } else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
    out.kind = static_cast<uint8_t>(RecordKind::MemFree);
  } else {
    return ConvertResult::Skipped;
  }
  out.device = Device(m->deviceId);
  out.correlation = m->correlationId;
  out.start_ns = out.end_ns = m->timestamp;
  out.tid = m->streamId;
  out.bytes = m->bytes;
  out.a = static_cast<uint32_t>(m->address & 0xFFFFFFFFu);
  out.b = static_cast<uint32_t>(m->address >> 32);
  out.c = ToMemKind(m->memoryKind);
  out.d = m->isAsync != 0 ? 1 : 0;
  if (m->source != nullptr && m->source[0] != '\0') out.name = strings.Intern(m->source);
  if (m->name != nullptr && m->name[0] != '\0') out.e = strings.Intern(m->name);
  return ConvertResult::Converted;
}

ConvertResult ConvertOverhead(const CUpti_Activity* rec, Interner& strings, Record& out,
                              MetaList& /*meta*/) {
  const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(rec);
  if (o->start == 0 || o->end == 0) return ConvertResult::MissingTimestamp;
  SetTimed(out, RecordKind::Overhead, kNoDevice, *o);
  out.tid = ObjectThread(o->objectKind, o->objectId);
  out.name = strings.Intern(OverheadName(o->overheadKind));
  out.a = ToOverheadKind(o->overheadKind);
  return ConvertResult::Converted;
}

ConvertResult ConvertDevice(const CUpti_Activity* rec, Interner& /*strings*/, Record& /*out*/,
                            MetaList& meta) {
  const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(rec);
  std::string p = "device." + std::to_string(d->id) + ".";
  meta.emplace_back(p + "name", d->name != nullptr ? d->name : "");
  meta.emplace_back(p + "sm_count", std::to_string(d->numMultiprocessors));
  meta.emplace_back(p + "memory_bytes", std::to_string(d->globalMemorySize));
  meta.emplace_back(p + "cc", std::to_string(d->computeCapabilityMajor) + "." +
                                  std::to_string(d->computeCapabilityMinor));
  meta.emplace_back(p + "clock_khz", std::to_string(d->coreClockRate));
  meta.emplace_back(p + "memory_bandwidth_kbps", std::to_string(d->globalMemoryBandwidth));
  meta.emplace_back(p + "l2_bytes", std::to_string(d->l2CacheSize));
  // As nvidia-smi writes it: which GPU an ordinal is, across processes that each see their
  // own ordinals (CUDA_VISIBLE_DEVICES) (docs/distributed.md).
  meta.emplace_back(p + "uuid", GpuUuid(reinterpret_cast<const unsigned char*>(&d->uuid)));
  return ConvertResult::Meta;
}

}  // namespace

const char* KernelActivityName(const CUpti_Activity* rec) {
  if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
    return "";
  const char* name = reinterpret_cast<const CUpti_ActivityKernel10*>(rec)->name;
  return name != nullptr ? name : "";
}

ConvertResult ConvertRecord(const CUpti_Activity* rec, Interner& strings, Record& out,
                            MetaList& meta) {
  out = Record{};
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
      return ConvertKernel(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return ConvertMemcpy(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return ConvertMemset(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
      return ConvertGraphTrace(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE:
      return ConvertDeviceGraphTrace(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return ConvertSync(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return ConvertApi(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_MARKER:
      return ConvertMarker(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return ConvertMemory(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return ConvertOverhead(rec, strings, out, meta);
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return ConvertDevice(rec, strings, out, meta);
    default:
      return ConvertResult::Skipped;
  }
}

}  // namespace kprof::agent
