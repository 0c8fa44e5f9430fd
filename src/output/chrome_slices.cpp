// Chrome trace: writing one complete ("X") event: its category, its name (demangled kernel
// names, copy and memset descriptions, sync kinds) and the arguments of its kind (launch
// configuration, bytes and bandwidth, correlation ids, streams).
#include <charconv>
#include <string>

#include "output/chrome_writer.h"

namespace kprof::chrome {
namespace {

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
    case EvType::Graph:
      return "cuda_graph";
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

}  // namespace

const std::string& ChromeWriter::KernelName(const ProcessTrace& p, uint32_t proc, uint32_t id) {
  auto& cache = demangled_[proc];
  auto it = cache.find(id);
  if (it != cache.end()) return it->second;
  return cache.emplace(id, Demangle(p.strings.Get(id))).first->second;
}

void ChromeWriter::WriteX(const Ev& e) {
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
  PidTidTs(e.pid, e.tid, e.start);
  Raw(", \"dur\": ");
  Micros(e.end - e.start);
  switch (e.type) {
    case EvType::Kernel: {
      Dim3 g = KernelGrid(r), b = KernelBlock(r);
      GpuArgs(r, e.proc);
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
      GpuArgs(r, e.proc);
      Raw(", \"bytes\": ");
      UInt(r.bytes);
      uint64_t dur = r.DurationNs();
      if (dur > 0) {
        // bytes per ns = GB/s
        char b[32];
        auto res =
            std::to_chars(b, b + sizeof b, static_cast<double>(r.bytes) / static_cast<double>(dur));
        Raw(", \"memory bandwidth (GB/s)\": ");
        out_.append(b, static_cast<size_t>(res.ptr - b));
      }
      Raw("}");
      break;
    }
    case EvType::Graph:
      GpuArgs(r, e.proc);
      Raw(", \"graph id\": ");
      UInt(r.a);
      Raw("}");
      break;
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
      // In a per-rank trace an event with a stream is GPU work to HTA: the sync of a CPU
      // thread names none there.
      if (only_ < 0 || e.gpu_track) {
        Raw(", \"stream\": ");
        UInt(r.a);
      }
      if (r.device != kNoDevice) {
        Raw(", \"device\": ");
        UInt(r.device);
      }
      Raw("}");
      break;
    case EvType::CpuOp:
      // Autograd's sequence number of an op (kprof's observer keeps it in the record), under
      // the key PyTorch's own traces give it: backward nodes link to their forward ops again when
      // the trace is read back.
      if (r.Kind() == RecordKind::Range && r.d != 0) {
        Raw(", \"args\": {\"Sequence number\": ");
        UInt(r.d - 1);
        Raw("}");
      }
      break;
    default:
      break;
  }
  Raw("}");
}

void ChromeWriter::GpuArgs(const Record& r, uint32_t proc) {
  Raw(", \"args\": {\"device\": ");
  UInt(r.device);
  Raw(", \"stream\": ");
  UInt(r.tid);
  Raw(", \"correlation\": ");
  // A per-rank trace links each activity to its launch for HTA: graph work that CUPTI gives no
  // correlation id gets that of the launch of its graph.
  UInt(only_ >= 0 ? timeline_.processes[proc].Correlation(r) : r.correlation);
}

}  // namespace kprof::chrome
