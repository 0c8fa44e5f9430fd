// Builds in-memory kprof traces for the hint tests: records with the times, correlation ids and
// launch configurations a test chooses, as the agent would write them.
#pragma once

#include <string>

#include "kprof/trace.h"

namespace kprof::testing {

class TraceBuilder {
 public:
  explicit TraceBuilder(uint32_t pid = 100) {
    t_.pid = pid;
    t_.source = "test:" + std::to_string(pid);
    t_.complete = true;
  }

  /// Device meta as the agent writes it from CUPTI's DEVICE record.
  TraceBuilder& Device(uint16_t id, const std::string& name, uint32_t sm_count) {
    const std::string p = "device." + std::to_string(id) + ".";
    t_.meta[p + "name"] = name;
    t_.meta[p + "sm_count"] = std::to_string(sm_count);
    t_.meta[p + "cc"] = "9.0";
    return *this;
  }

  /// A runtime API call on thread `tid`; returns its correlation id.
  uint32_t Api(const std::string& name, uint64_t start, uint64_t end, uint32_t tid = 1) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::RuntimeApi);
    r.device = kNoDevice;
    r.correlation = ++corr_;
    r.start_ns = start;
    r.end_ns = end;
    r.name = t_.strings.Intern(name);
    r.tid = tid;
    t_.records.push_back(r);
    return r.correlation;
  }

  TraceBuilder& Kernel(const std::string& name, uint64_t start, uint64_t end, uint32_t corr,
                       Dim3 grid = {1024, 1, 1}, uint32_t stream = 7, uint16_t device = 0) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::Kernel);
    r.device = device;
    r.correlation = corr;
    r.start_ns = start;
    r.end_ns = end;
    r.name = t_.strings.Intern(name);
    r.tid = stream;
    SetKernelLaunch(r, grid, {256, 1, 1}, 32, 0);
    t_.records.push_back(r);
    return *this;
  }

  /// cudaLaunchKernel on `tid` over [api_start, api_end) and its kernel over [k_start, k_end).
  TraceBuilder& Launch(const std::string& kernel, uint64_t api_start, uint64_t api_end,
                       uint64_t k_start, uint64_t k_end, Dim3 grid = {1024, 1, 1}, uint32_t tid = 1,
                       uint32_t stream = 7) {
    uint32_t c = Api("cudaLaunchKernel", api_start, api_end, tid);
    return Kernel(kernel, k_start, k_end, c, grid, stream);
  }

  TraceBuilder& Memcpy(CopyKind kind, MemKind src, MemKind dst, uint64_t bytes, uint64_t start,
                       uint64_t end, uint32_t corr, bool async, uint32_t stream = 7) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::Memcpy);
    r.flags = static_cast<uint8_t>(kind);
    r.correlation = corr;
    r.start_ns = start;
    r.end_ns = end;
    r.tid = stream;
    r.bytes = bytes;
    r.a = static_cast<uint32_t>(src);
    r.b = static_cast<uint32_t>(dst);
    r.c = async ? kCopyAsync : 0;
    t_.records.push_back(r);
    return *this;
  }

  TraceBuilder& Sync(SyncKind kind, uint64_t start, uint64_t end, uint32_t corr,
                     uint32_t stream = 0) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::Sync);
    r.flags = static_cast<uint8_t>(kind);
    r.device = kNoDevice;
    r.correlation = corr;
    r.start_ns = start;
    r.end_ns = end;
    r.a = stream;
    t_.records.push_back(r);
    return *this;
  }

  /// MemAlloc (alloc = true) or MemFree of `bytes` at `t`, made by the call `corr`.
  TraceBuilder& Mem(bool alloc, uint64_t bytes, uint64_t t, uint32_t corr, uint64_t addr) {
    Record r;
    r.kind = static_cast<uint8_t>(alloc ? RecordKind::MemAlloc : RecordKind::MemFree);
    r.correlation = corr;
    r.start_ns = r.end_ns = t;
    r.bytes = bytes;
    r.a = static_cast<uint32_t>(addr);
    r.b = static_cast<uint32_t>(addr >> 32);
    r.c = static_cast<uint32_t>(MemKind::Device);
    t_.records.push_back(r);
    return *this;
  }

  /// An NVTX mark at `t` (kprof's PyTorch layer writes its memory findings as one).
  TraceBuilder& Mark(const std::string& text, uint64_t t) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::MarkerInstant);
    r.device = kNoDevice;
    r.start_ns = r.end_ns = t;
    r.name = t_.strings.Intern(text);
    r.tid = 1;
    t_.records.push_back(r);
    return *this;
  }

  /// A meta entry, as the agent writes them.
  TraceBuilder& Meta(const std::string& key, const std::string& value) {
    t_.meta[key] = value;
    return *this;
  }

  /// NVTX push/pop pair on `tid` over [start, end).
  TraceBuilder& Range(const std::string& name, uint64_t start, uint64_t end, uint32_t tid = 1) {
    Record s;
    s.kind = static_cast<uint8_t>(RecordKind::MarkerStart);
    s.device = kNoDevice;
    s.start_ns = s.end_ns = start;
    s.name = t_.strings.Intern(name);
    s.tid = tid;
    s.a = ++marker_;
    Record e = s;
    e.kind = static_cast<uint8_t>(RecordKind::MarkerEnd);
    e.start_ns = e.end_ns = end;
    e.name = 0;
    t_.records.push_back(s);
    t_.records.push_back(e);
    return *this;
  }

  /// A range as kprof's op observer records it (a Range record in `domain`, "cpu_op" for an op,
  /// "kprof" for its layer's own; kprof/op_abi.h), with autograd's sequence number `seq` (-1:
  /// none).
  TraceBuilder& ObservedRange(const std::string& name, uint64_t start, uint64_t end,
                              const std::string& domain = "cpu_op", int64_t seq = -1,
                              uint32_t tid = 1) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::Range);
    r.device = kNoDevice;
    r.start_ns = start;
    r.end_ns = end;
    r.name = t_.strings.Intern(name);
    r.b = t_.strings.Intern(domain);
    r.d = seq < 0 ? 0 : static_cast<uint32_t>(seq) + 1;
    r.tid = tid;
    t_.records.push_back(r);
    return *this;
  }

  /// Replay's counters for the launch `corr` (KernelMetric records, as `--metrics replay`
  /// writes them): SM, memory (and DRAM), tensor pipes and achieved occupancy, % of peak.
  TraceBuilder& Counters(uint32_t corr, double sm, double mem, double tensor, double occupancy,
                         uint16_t device = 0) {
    const std::pair<const char*, double> metrics[] = {
        {"sm__throughput.avg.pct_of_peak_sustained_elapsed", sm},
        {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", mem},
        {"dram__throughput.avg.pct_of_peak_sustained_elapsed", mem},
        {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", tensor},
        {"sm__warps_active.avg.pct_of_peak_sustained_active", occupancy}};
    for (const auto& [name, value] : metrics) {
      Record r;
      r.kind = static_cast<uint8_t>(RecordKind::KernelMetric);
      r.device = device;
      r.correlation = corr;
      r.a = 10;
      r.name = t_.strings.Intern(name);
      SetMetricValue(r, value);
      t_.records.push_back(r);
    }
    return *this;
  }

  TraceBuilder& Overhead(OverheadKind kind, uint64_t start, uint64_t end, uint32_t tid = 1) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::Overhead);
    r.device = kNoDevice;
    r.start_ns = start;
    r.end_ns = end;
    r.tid = tid;
    r.a = static_cast<uint32_t>(kind);
    r.name = t_.strings.Intern("overhead");
    t_.records.push_back(r);
    return *this;
  }

  /// A capture window (kprof run --capture) over [start, end), opened on `tid` by `by` (as the
  /// agent records it); the process's meta names the trigger.
  TraceBuilder& Window(uint64_t start, uint64_t end, const std::string& trigger = "nvtx:step",
                       const std::string& by = "step", uint32_t tid = 1) {
    Record r;
    r.kind = static_cast<uint8_t>(RecordKind::CaptureWindow);
    r.device = kNoDevice;
    r.start_ns = start;
    r.end_ns = end;
    r.tid = tid;
    r.a = windows_++;
    r.flags = static_cast<uint8_t>(CaptureTrigger::Nvtx);
    r.c = static_cast<uint32_t>(CaptureEnd::RangeEnded);
    r.name = t_.strings.Intern(by);
    t_.records.push_back(r);
    t_.meta["capture"] = trigger;
    t_.meta["capture_windows"] = std::to_string(windows_);
    return *this;
  }

  CollectionStats& Stats() { return t_.stats; }
  ProcessTrace& Trace() { return t_; }

  Run Build() const {
    Run run;
    run.processes.push_back(t_);
    return run;
  }

 private:
  ProcessTrace t_;
  uint32_t corr_ = 0;
  uint32_t marker_ = 0;
  uint32_t windows_ = 0;
};

}  // namespace kprof::testing
