// Bottleneck hints: each rule reads the analysed run (and, where it needs timing detail, the raw
// records), names one problem, bounds what it costs and gives the fix. The catalogue, with the
// thresholds and the reasoning behind every estimate, is docs/hints.md; keep the two in step.
//
// Three rules price GPU idle time: excessive-sync, launch-bound and gpu-idle-gaps. They share one
// classification of the idle gaps inside each process's GPU window (GapAnalysis below), which
// hands every nanosecond of a gap to at most one of them, so their estimates never count the same
// idle time twice. Estimates of other rules can overlap (a small synchronous copy is both a small
// transfer and a host wait); each is an upper bound on its own, and they do not add up.
#include "kprof/hints.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "analysis/intervals.h"
#include "analysis/ranges.h"

namespace kprof {
namespace {

// ---------------------------------------------------------------------------------------------
// Thresholds (docs/hints.md, "Thresholds", explains each one).

constexpr double kEmitPct = 1.0;       ///< below this share of the wall a hint is noise
constexpr double kWarningPct = 5.0;    ///< material: worth fixing
constexpr double kCriticalPct = 20.0;  ///< dominates the run
/// A GPU idle gap at least this long is not launch latency (a launch costs a few us): the host
/// was doing something else.
constexpr uint64_t kLongGapNs = 1'000'000;
/// Copies below this size cost mostly their fixed per-call overhead (small-transfers); at and
/// above it bandwidth dominates and the host memory kind matters (pageable-memcpy).
constexpr uint64_t kSmallCopyBytes = 64 << 10;
/// Fewest small copies for batching to mean anything.
constexpr uint64_t kMinSmallCopies = 10;
/// Pinned copies at least this large are used to measure the link's pinned bandwidth.
constexpr uint64_t kPinnedReferenceBytes = 1 << 20;
/// Pinned host<->device bandwidth assumed when the run has no large pinned copy to measure it:
/// what a PCIe 5.0 x16 link sustains (bytes per ns = GB/s). Slower links make the real saving
/// smaller, so the estimate stays an upper bound there.
constexpr double kDefaultPinnedBytesPerNs = 50.0;
/// Kernels shorter than this are launch-bound's business, not underfilled-grid's.
constexpr uint64_t kUnderfilledMinNs = 20'000;
/// Peak BF16 tensor-core over FP32 FMA throughput, A100 (312/19.5) and H100 SXM (989/67).
constexpr uint64_t kTensorCoreSpeedup = 16;
/// Fewest memory-bound kernels in a row that make a chain worth fusing.
constexpr size_t kMinChain = 3;
/// One kernel's share of GPU busy time from which it is "dominant".
constexpr double kDominantShare = 0.5;
/// Steady state for alloc-churn: calls in this leading fraction of the run are start-up.
constexpr double kWarmupFraction = 0.10;
/// Dropped/missing records as a fraction of all records from which data loss is critical.
constexpr double kCriticalLossFraction = 0.01;

// ---------------------------------------------------------------------------------------------
// Small helpers.

using detail::Covered;
using detail::Interval;
using detail::Length;
using detail::Merge;
using detail::UnionAcc;

std::string Dur(uint64_t ns) { return FormatDuration(ns); }
std::string Pct(double p) { return fmt::format("{:.1f}%", p); }
double PctOf(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

Severity SeverityForPct(double pct) {
  if (pct >= kCriticalPct) return Severity::Critical;
  if (pct >= kWarningPct) return Severity::Warning;
  return Severity::Info;
}

/// Lower median; reorders `v`.
uint64_t Median(std::vector<uint64_t>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<long>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& s, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](const char* n) { return s.find(n) != std::string::npos; });
}

bool IsHostCopy(const Record& r) {
  auto k = static_cast<CopyKind>(r.flags);
  return k == CopyKind::HtoD || k == CopyKind::DtoH;
}

/// Host-side memory kind of a host<->device copy.
MemKind HostSide(const Record& r) {
  return static_cast<MemKind>(static_cast<CopyKind>(r.flags) == CopyKind::HtoD ? r.a : r.b);
}

/// Shortened name for evidence lines (template arguments can run to kilobytes).
std::string Short(const std::string& s, size_t n = 90) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

// Kernel name families (matched on the lowercased, demangled name).

/// GEMM/GEMV kernels computing in FP32 on the FMA pipes (no tensor cores): cuBLAS
/// (maxwell/volta/ampere_sgemm_*, gemmSN_*, gemv2*), CUTLASS SIMT (cutlass_*_simt_sgemm_*),
/// cuBLASLt/xmma FP32 (…_gemm_f32f32_f32f32_f32_…) and hand-written *sgemm* kernels.
bool IsFp32Gemm(const std::string& n) {
  if (Contains(n, {"tf32", "tensorop", "hmma", "s1688", "s16816", "bf16", "f16", "fp16", "half",
                   "i8", "int8", "dgemm", "double"}))
    return false;
  return Contains(n, {"sgemm", "gemmsn_", "gemv2n_", "gemv2t_", "gemm_f32f32_f32f32"});
}

/// Memory-bound kernel families: element-wise, normalisation, softmax, activation, dropout.
bool IsMemoryBound(const std::string& n) {
  if (Contains(n, {"gemm", "gemv", "conv", "xmma", "cutlass", "flash", "fmha", "attention", "nvjet",
                   "splitk"}))
    return false;
  return Contains(n, {"elementwise", "element_wise",  "softmax",    "layer_norm", "layernorm",
                      "rms_norm",    "rmsnorm",       "batch_norm", "batchnorm",  "group_norm",
                      "groupnorm",   "instance_norm", "dropout",    "relu",       "gelu",
                      "silu",        "sigmoid",       "tanh_",      "activation", "bias_add"});
}

bool IsSyncApi(const std::string& n) {
  static const std::unordered_set<std::string> k = {
      "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
      "cudaThreadSynchronize", "cuCtxSynchronize",      "cuStreamSynchronize",
      "cuEventSynchronize"};
  return k.count(n) != 0;
}

bool IsAllocApi(const std::string& n) {
  static const std::unordered_set<std::string> k = {"cudaMalloc",
                                                    "cudaFree",
                                                    "cudaMallocAsync",
                                                    "cudaFreeAsync",
                                                    "cudaMallocManaged",
                                                    "cudaMallocPitch",
                                                    "cudaMalloc3D",
                                                    "cudaMallocHost",
                                                    "cudaHostAlloc",
                                                    "cudaFreeHost",
                                                    "cudaMallocFromPoolAsync",
                                                    "cudaMallocArray",
                                                    "cudaFreeArray",
                                                    "cuMemAlloc",
                                                    "cuMemFree",
                                                    "cuMemAllocAsync",
                                                    "cuMemFreeAsync",
                                                    "cuMemAllocHost",
                                                    "cuMemFreeHost",
                                                    "cuMemAllocManaged",
                                                    "cuMemAllocPitch",
                                                    "cuMemHostAlloc",
                                                    "cuMemAllocFromPoolAsync"};
  return k.count(n) != 0;
}

const char* SyncKindName(uint8_t k) {
  switch (static_cast<SyncKind>(k)) {
    case SyncKind::EventSynchronize:
      return "event synchronize";
    case SyncKind::StreamWaitEvent:
      return "stream wait event";
    case SyncKind::StreamSynchronize:
      return "stream synchronize";
    case SyncKind::ContextSynchronize:
      return "device synchronize";
    case SyncKind::Unknown:
      break;
  }
  return "synchronize";
}

/// Per-key count and time, printed most costly first.
struct Tally {
  std::map<std::string, std::pair<uint64_t, uint64_t>> m;  // key -> (count, ns)
  void Add(const std::string& key, uint64_t ns, uint64_t n = 1) {
    m[key].first += n;
    m[key].second += ns;
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> Top(size_t n) const {
    std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.second.second != b.second.second ? a.second.second > b.second.second
                                                : a.first < b.first;
    });
    if (v.size() > n) v.resize(n);
    return v;
  }
};

// ---------------------------------------------------------------------------------------------
// Per-process context shared by the rules.

/// An idle interval between busy intervals of one process (40 bytes: there is one per kernel in
/// a launch-bound run). What is left after the host waits goes to launch-bound or gpu-idle-gaps.
struct Gap {
  uint64_t start = 0, end = 0;
  uint64_t sync_claim = 0;  ///< -> excessive-sync (host time blocked in waits released here)
  uint64_t rest_claim = 0;  ///< -> launch-bound or gpu-idle-gaps, as `idle` says
  uint32_t next_index = 0;  ///< index in Proc::acts of the first activity after the gap
  bool idle = false;        ///< rest_claim is gpu-idle-gaps' (else launch-bound's)
  bool warmup = false;      ///< the next kernel is a kernel's first execution (one-time cost)
  uint64_t Len() const { return end - start; }
  uint64_t launch_claim() const { return idle ? 0 : rest_claim; }
  uint64_t idle_claim() const { return idle ? rest_claim : 0; }
};

struct SyncPoint {
  const Record* api = nullptr;  ///< the call (may be null for a Sync record without its call)
  std::string what;             ///< "cudaStreamSynchronize", "cudaMemcpy (DtoH, synchronous)"
  uint64_t blocked = 0;
  uint64_t release = 0;
};

struct Proc {
  const ProcessTrace* p = nullptr;
  detail::ProcessIndex ix;
  std::vector<const Record*> acts;    ///< Kernel/Memcpy/Memset by start time
  std::vector<Interval> busy;         ///< merged activity intervals
  std::vector<Gap> gaps;              ///< between consecutive busy intervals
  std::vector<const Record*> apis;    ///< outermost API calls (runtime, unnested driver)
  std::vector<Interval> alloc_calls;  ///< merged intervals of outermost alloc/free calls
  std::vector<SyncPoint> syncs;
  std::unordered_set<const Record*> first_of_name;  ///< first execution of each kernel name
  std::unordered_map<uint32_t, std::string> kname;  ///< kernel display name by string id
  std::unordered_map<uint32_t, uint8_t> family;     ///< kernel name families by string id
  std::vector<int> open;

  static constexpr uint8_t kFp32Gemm = 1, kMemoryBound = 2;
  /// Name families of a kernel (bits above), classified once per name.
  uint8_t Family(const Record& k) {
    auto it = family.find(k.name);
    if (it == family.end()) {
      std::string lower = Lower(KernelName(k));
      uint8_t f = (IsFp32Gemm(lower) ? kFp32Gemm : 0) | (IsMemoryBound(lower) ? kMemoryBound : 0);
      it = family.emplace(k.name, f).first;
    }
    return it->second;
  }

  const Record* Api(const Record& r) const { return ix.api_by_correlation.Find(r.correlation); }
  const std::string& KernelName(const Record& k) {
    auto it = kname.find(k.name);
    if (it == kname.end()) {  // as the analysis shows it
      std::string name = Demangle(p->Name(k));
      it = kname.emplace(k.name, name.empty() ? "(unnamed)" : std::move(name)).first;
    }
    return it->second;
  }
  /// Innermost NVTX/CPU range open on `tid` at `t`, or "(no range)".
  std::string OpAt(uint32_t tid, uint64_t t) {
    ix.OpenAt(tid, t, open);
    return open.empty() ? "(no range)" : std::string(ix.Name(static_cast<size_t>(open.back())));
  }
  std::string OpOf(const Record* api) { return api ? OpAt(api->tid, api->start_ns) : "(no range)"; }
};

Proc BuildProc(const ProcessTrace& p) {
  Proc c;
  c.p = &p;
  c.ix = detail::BuildIndex(p);

  // Outermost API calls: driver calls made inside a runtime call on the same thread are that
  // runtime call's implementation and would count its time twice.
  std::map<uint32_t, std::vector<Interval>> runtime_by_tid;
  // (Only needed when there are driver calls: PyTorch profiler traces have none.)
  if (std::any_of(p.records.begin(), p.records.end(),
                  [](const Record& r) { return r.Kind() == RecordKind::DriverApi; }))
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::RuntimeApi)
        runtime_by_tid[r.tid].emplace_back(r.start_ns, r.end_ns);
  for (auto& [tid, v] : runtime_by_tid) std::sort(v.begin(), v.end());
  std::vector<Interval> allocs;
  for (const Record& r : p.records) {
    auto k = r.Kind();
    if (k != RecordKind::RuntimeApi && k != RecordKind::DriverApi) continue;
    if (k == RecordKind::DriverApi) {
      auto it = runtime_by_tid.find(r.tid);
      if (it != runtime_by_tid.end()) {
        auto& v = it->second;
        auto up = std::upper_bound(v.begin(), v.end(), Interval{r.start_ns, UINT64_MAX});
        if (up != v.begin() && std::prev(up)->second >= r.end_ns) continue;
      }
    }
    c.apis.push_back(&r);
    if (IsAllocApi(p.Name(r))) allocs.emplace_back(r.start_ns, r.end_ns);
  }
  c.alloc_calls = Merge(std::move(allocs));

  c.acts.reserve(
      static_cast<size_t>(std::count_if(p.records.begin(), p.records.end(),
                                        [](const Record& r) { return IsGpuActivity(r.Kind()); })));
  for (const Record& r : p.records)
    if (IsGpuActivity(r.Kind())) c.acts.push_back(&r);

  std::stable_sort(c.acts.begin(), c.acts.end(), [](const Record* a, const Record* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns < b->end_ns;
  });
  std::unordered_set<uint32_t> seen;
  for (const Record* a : c.acts)
    if (a->Kind() == RecordKind::Kernel && seen.insert(a->name).second) c.first_of_name.insert(a);

  // Busy intervals and the gaps between them, each with the activity that ends it (counted
  // first, so that the vectors are allocated once at their final size).
  {
    size_t runs = 0;
    uint64_t end = 0;
    for (const Record* a : c.acts) {
      if (runs == 0 || a->start_ns > end) {
        ++runs;
        end = std::max(a->start_ns, a->end_ns);
      } else {
        end = std::max(end, a->end_ns);
      }
    }
    c.busy.reserve(runs);
    c.gaps.reserve(runs);
  }
  for (size_t i = 0; i < c.acts.size(); ++i) {
    const Record* a = c.acts[i];
    uint64_t s = a->start_ns, e = std::max(a->start_ns, a->end_ns);
    if (!c.busy.empty() && s <= c.busy.back().second) {
      c.busy.back().second = std::max(c.busy.back().second, e);
      continue;
    }
    if (!c.busy.empty()) {
      Gap g;
      g.start = c.busy.back().second;
      g.end = s;
      g.next_index = static_cast<uint32_t>(i);
      c.gaps.push_back(g);
    }
    c.busy.emplace_back(s, e);
  }

  // Host waits: Sync records, synchronize calls without one, and synchronous copies.
  std::unordered_set<uint32_t> sync_corr;
  for (const Record& r : p.records) {
    if (r.Kind() != RecordKind::Sync) continue;
    if (static_cast<SyncKind>(r.flags) == SyncKind::StreamWaitEvent) continue;  // GPU-side wait
    if (r.correlation) sync_corr.insert(r.correlation);
    const Record* api = c.Api(r);
    c.syncs.push_back({api, api ? p.Name(*api) : SyncKindName(r.flags), r.DurationNs(), r.end_ns});
  }
  for (const Record* api : c.apis)
    if (IsSyncApi(p.Name(*api)) && !sync_corr.count(api->correlation))
      c.syncs.push_back({api, p.Name(*api), api->DurationNs(), api->end_ns});
  for (const Record* a : c.acts) {
    if (a->Kind() != RecordKind::Memcpy || (a->c & kCopyAsync)) continue;
    const Record* api = c.Api(*a);
    if (!api || p.Name(*api).find("Async") != std::string::npos) continue;
    // The wait is the part of the call before its copy began during which the GPU was busy
    // with earlier work (the implicit stream synchronization of a synchronous copy).
    uint64_t blocked = Covered(c.busy, api->start_ns, std::min(a->start_ns, api->end_ns));
    if (blocked == 0) continue;
    c.syncs.push_back(
        {api, fmt::format("{} ({}, synchronous)", p.Name(*api), CopyKindName(a->flags, "copy")),
         blocked, api->end_ns});
  }

  // Classify each gap: first the waits released in it (excessive-sync, capped by the time
  // blocked), then one-time warm-up, then host time in alloc/free calls (alloc-churn prices those
  // calls itself), then long gaps (gpu-idle-gaps) or short ones before a kernel (launch-bound).
  for (const SyncPoint& s : c.syncs) {
    auto it = std::upper_bound(c.gaps.begin(), c.gaps.end(), s.release,
                               [](uint64_t t, const Gap& g) { return t < g.start; });
    if (it == c.gaps.begin()) continue;
    --it;
    if (s.release < it->end) it->sync_claim += s.blocked;
  }
  // Index of the first kernel at or after each activity (one backward pass; acts.size() = none).
  std::vector<uint32_t> next_kernel(c.acts.size() + 1, static_cast<uint32_t>(c.acts.size()));
  for (size_t i = c.acts.size(); i-- > 0;)
    next_kernel[i] =
        c.acts[i]->Kind() == RecordKind::Kernel ? static_cast<uint32_t>(i) : next_kernel[i + 1];
  for (Gap& g : c.gaps) {
    g.sync_claim = std::min(g.Len(), g.sync_claim);
    uint64_t rest = g.Len() - g.sync_claim;
    // Warm-up: the first kernel after the gap (a library's first call often begins with a
    // memset or copy, a training loop with an input upload) runs for the first time: module
    // loading, library set-up, autotuning, the program's own initialisation.
    if (uint32_t k = next_kernel[g.next_index]; k < c.acts.size())
      g.warmup = c.first_of_name.count(c.acts[k]) > 0;
    if (g.warmup) continue;
    rest -= std::min(rest, Covered(c.alloc_calls, g.start, g.end));
    if (g.Len() >= kLongGapNs) {
      g.rest_claim = rest;
      g.idle = true;
    } else if (c.acts[g.next_index]->Kind() == RecordKind::Kernel)
      g.rest_claim = rest;
  }
  return c;
}

struct Ctx {
  const Run& run;
  const Analysis& an;
  std::vector<Proc> procs;
  uint64_t wall = 0;
};

/// Fills severity and percentage from the estimate; returns false when below the emit floor.
bool Price(Hint& h, const Ctx& c) {
  h.est_saving_ns = std::min(h.est_saving_ns, c.wall);
  h.est_saving_pct = PctOf(h.est_saving_ns, c.wall);
  h.severity = SeverityForPct(h.est_saving_pct);
  return h.est_saving_pct >= kEmitPct;
}

std::string OfWall(uint64_t ns, const Ctx& c) {
  return fmt::format("{} ({} of the run)", Dur(ns), Pct(PctOf(ns, c.wall)));
}

void AddTopOps(Hint& h, const Tally& ops, const char* what) {
  for (const auto& [op, v] : ops.Top(3))
    h.evidence.push_back(fmt::format("op '{}': {} {}, {}", op, v.first, what, Dur(v.second)));
}

// ---------------------------------------------------------------------------------------------
// Rules, in catalogue order.

std::optional<Hint> LaunchBound(Ctx& c) {
  Hint h;
  h.id = "launch-bound";
  uint64_t gaps = 0;
  std::vector<uint64_t> gap_len, kernel_ns, launch_ns;
  Tally ops;
  for (Proc& p : c.procs) {
    for (const Gap& g : p.gaps) {
      if (!g.launch_claim()) continue;
      h.est_saving_ns += g.launch_claim();
      ++gaps;
      gap_len.push_back(g.Len());
      ops.Add(p.OpOf(p.Api(*p.acts[g.next_index])), g.launch_claim());
    }
  }
  if (!Price(h, c)) return std::nullopt;
  for (Proc& p : c.procs) {
    std::vector<bool> seen(p.p->records.size());  // launching calls, by record index
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Kernel) continue;
      kernel_ns.push_back(a->DurationNs());
      const Record* api = p.Api(*a);
      if (api == nullptr) continue;
      auto idx = static_cast<size_t>(api - p.p->records.data());
      if (!seen[idx]) {
        seen[idx] = true;
        launch_ns.push_back(api->DurationNs());
      }
    }
  }
  const RunSummary& S = c.an.summary;
  h.summary =
      fmt::format("GPU idle {} between short kernels: the CPU does not launch work fast enough",
                  Pct(h.est_saving_pct));
  h.evidence.push_back(fmt::format("{} kernel launches at {:.0f}/s; GPU utilisation {}", S.launches,
                                   S.launch_rate_per_s, Pct(100 * S.utilisation)));
  h.evidence.push_back(fmt::format("median kernel {} vs median launch call {}",
                                   Dur(Median(kernel_ns)), Dur(Median(launch_ns))));
  h.evidence.push_back(fmt::format("{} idle gaps shorter than {} before a kernel (median {}), {}",
                                   gaps, Dur(kLongGapNs), Dur(Median(gap_len)),
                                   OfWall(h.est_saving_ns, c)));
  AddTopOps(h, ops, "gaps before its kernels");
  h.assumption =
      "The GPU could run these kernels back to back: at most the idle time between them (short "
      "gaps not explained by a host wait or an allocation) is saved; never more than wall time "
      "minus GPU busy time.";
  h.fix_cuda =
      "Capture the launch sequence once in a CUDA graph (cudaStreamBeginCapture / "
      "cudaGraphInstantiate / cudaGraphLaunch) and replay it; fuse small kernels; launch fewer, "
      "larger kernels (more work per launch).";
  h.fix_pytorch =
      "torch.compile(model, mode=\"reduce-overhead\") (fusion + CUDA graphs) or "
      "torch.cuda.graphs; fewer, larger ops (batch the work, avoid Python loops over tensors); "
      "use fused optimizers (fused=True / foreach=True).";
  return h;
}

std::optional<Hint> ExcessiveSync(Ctx& c) {
  Hint h;
  h.id = "excessive-sync";
  Tally calls, ops;
  uint64_t blocked = 0, n = 0, gaps = 0;
  for (Proc& p : c.procs) {
    for (const Gap& g : p.gaps)
      if (g.sync_claim) {
        h.est_saving_ns += g.sync_claim;
        ++gaps;
      }
    for (const SyncPoint& s : p.syncs) {
      ++n;
      blocked += s.blocked;
      calls.Add(s.what, s.blocked);
      ops.Add(p.OpOf(s.api), s.blocked);
    }
  }
  if (!Price(h, c)) return std::nullopt;
  h.summary =
      fmt::format("Host waits for the GPU {} times; the GPU then idles until new work comes", n);
  for (const auto& [what, v] : calls.Top(4))
    h.evidence.push_back(fmt::format("{}: {} calls, blocked {} (mean {})", what, v.first,
                                     Dur(v.second), Dur(v.first ? v.second / v.first : 0)));
  h.evidence.push_back(fmt::format("host blocked {} in total; GPU idle after {} of these waits",
                                   OfWall(blocked, c), gaps));
  AddTopOps(h, ops, "waits");
  h.assumption =
      "Without the wait the host would queue the next work while the GPU is still busy: per "
      "idle gap that follows a wait, the saving is at most the shorter of the gap and the time "
      "blocked, so never more than the time blocked in synchronizing calls.";
  h.fix_cuda =
      "Remove cudaDeviceSynchronize/cudaStreamSynchronize from the loop; order work with events "
      "(cudaEventRecord + cudaStreamWaitEvent); copy results with cudaMemcpyAsync into pinned "
      "memory and read them a step later.";
  h.fix_pytorch =
      "Take .item(), .cpu(), .tolist(), print(tensor) and data-dependent Python control flow "
      "out of the step loop (accumulate on the GPU, read once per N steps); use "
      "tensor.to('cpu', non_blocking=True) into pinned memory; torch.cuda.set_sync_debug_mode("
      "\"warn\") finds the hidden ones.";
  return h;
}

/// Pinned bandwidth reference for a direction: (bytes, ns) of the fastest large pinned copy.
struct PinnedRef {
  double bytes = 0, ns = 0;
  bool measured = false;
  uint64_t TimeFor(uint64_t b) const {
    double t = measured ? static_cast<double>(b) * ns / bytes
                        : static_cast<double>(b) / kDefaultPinnedBytesPerNs;
    return static_cast<uint64_t>(std::llround(t));
  }
};

std::map<uint8_t, PinnedRef> PinnedReferences(const Ctx& c) {
  std::map<uint8_t, PinnedRef> refs;
  for (const Proc& p : c.procs)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Memcpy || !IsHostCopy(*a) || HostSide(*a) != MemKind::Pinned ||
          a->bytes < kPinnedReferenceBytes || a->DurationNs() == 0)
        continue;
      PinnedRef& r = refs[a->flags];
      double bw = static_cast<double>(a->bytes) / static_cast<double>(a->DurationNs());
      if (!r.measured || bw > r.bytes / r.ns) {
        r = {static_cast<double>(a->bytes), static_cast<double>(a->DurationNs()), true};
      }
    }
  return refs;
}

std::string Bandwidth(uint64_t bytes, uint64_t ns) {
  return ns ? fmt::format("{:.1f} GB/s", static_cast<double>(bytes) / static_cast<double>(ns))
            : "n/a";
}

std::optional<Hint> PageableMemcpy(Ctx& c) {
  Hint h;
  h.id = "pageable-memcpy";
  auto refs = PinnedReferences(c);
  struct Dir {
    uint64_t n = 0, bytes = 0, ns = 0;
  };
  std::map<uint8_t, Dir> dirs;
  Tally ops;
  for (Proc& p : c.procs)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Memcpy || !IsHostCopy(*a) || HostSide(*a) != MemKind::Pageable ||
          a->bytes < kSmallCopyBytes)
        continue;
      uint64_t pinned = refs[a->flags].TimeFor(a->bytes);
      uint64_t save = a->DurationNs() > pinned ? a->DurationNs() - pinned : 0;
      h.est_saving_ns += save;
      Dir& d = dirs[a->flags];
      ++d.n;
      d.bytes += a->bytes;
      d.ns += a->DurationNs();
      ops.Add(p.OpOf(p.Api(*a)), a->DurationNs());
    }
  if (!Price(h, c)) return std::nullopt;
  uint64_t n = 0, bytes = 0;
  for (const auto& [k, d] : dirs) {
    n += d.n;
    bytes += d.bytes;
  }
  h.summary =
      fmt::format("{} large copies ({}) use pageable host memory and run below pinned speed", n,
                  FormatBytes(bytes));
  for (const auto& [k, d] : dirs) {
    const PinnedRef& r = refs[k];
    h.evidence.push_back(fmt::format(
        "{} from/to pageable memory: {} copies, {}, {} at {}; pinned estimate {} ({})",
        CopyKindName(k, "copy"), d.n, FormatBytes(d.bytes), Dur(d.ns), Bandwidth(d.bytes, d.ns),
        r.measured ? Bandwidth(static_cast<uint64_t>(r.bytes), static_cast<uint64_t>(r.ns))
                   : fmt::format("{:.1f} GB/s", kDefaultPinnedBytesPerNs),
        r.measured ? "fastest pinned copy of this run" : "assumed PCIe 5.0 x16"));
  }
  AddTopOps(h, ops, "pageable copies");
  h.assumption =
      "Each copy would run at the pinned bandwidth (the fastest large pinned copy of the same "
      "direction in this run, else 50 GB/s): the saving is the copy time above that.";
  h.fix_cuda =
      "Allocate host buffers with cudaMallocHost/cudaHostAlloc (or register existing ones with "
      "cudaHostRegister) and copy with cudaMemcpyAsync on a stream.";
  h.fix_pytorch =
      "DataLoader(..., pin_memory=True) and tensor.to(device, non_blocking=True); for your own "
      "staging tensors use torch.empty(..., pin_memory=True) or tensor.pin_memory().";
  return h;
}

std::optional<Hint> SmallTransfers(Ctx& c) {
  Hint h;
  h.id = "small-transfers";
  auto refs = PinnedReferences(c);
  std::vector<uint64_t> costs;
  uint64_t bytes = 0, total = 0, transfer = 0;
  std::map<uint8_t, uint64_t> by_dir;
  Tally apis, ops;
  for (Proc& p : c.procs)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Memcpy || !IsHostCopy(*a) || a->bytes >= kSmallCopyBytes)
        continue;
      // The operation's cost: its API call and its copy, counted once where they overlap.
      // A synchronous copy's wait for earlier GPU work is excessive-sync's, not this rule's.
      uint64_t cost = a->DurationNs();
      const Record* api = p.Api(*a);
      if (api) {
        uint64_t lo = std::max(api->start_ns, a->start_ns);
        uint64_t hi = std::min(api->end_ns, a->end_ns);
        cost += api->DurationNs() - (hi > lo ? hi - lo : 0);
        cost -= Covered(p.busy, api->start_ns, std::min(a->start_ns, api->end_ns));
        apis.Add(p.p->Name(*api), cost);
      }
      ops.Add(p.OpOf(api), cost);
      costs.push_back(cost);
      total += cost;
      bytes += a->bytes;
      transfer += refs[a->flags].TimeFor(a->bytes);
      ++by_dir[a->flags];
    }
  if (costs.size() < kMinSmallCopies) return std::nullopt;
  uint64_t batched = Median(costs) + transfer;
  h.est_saving_ns = total > batched ? total - batched : 0;
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("{} copies smaller than {} each pay the fixed cost of a transfer",
                          costs.size(), FormatBytes(kSmallCopyBytes));
  std::string dirs;
  for (const auto& [k, n] : by_dir)
    dirs += fmt::format("{}{} {}", dirs.empty() ? "" : ", ", CopyKindName(k, "copy"), n);
  h.evidence.push_back(fmt::format("{} copies ({}), {} in total, mean {} per copy", costs.size(),
                                   dirs, FormatBytes(bytes), FormatBytes(bytes / costs.size())));
  h.evidence.push_back(fmt::format("they take {} (call + copy), median {} each", OfWall(total, c),
                                   Dur(Median(costs))));
  for (const auto& [api, v] : apis.Top(3))
    h.evidence.push_back(fmt::format("{}: {} small copies, {}", api, v.first, Dur(v.second)));
  AddTopOps(h, ops, "small copies");
  h.assumption =
      "All these copies batched into one: it costs one median copy plus the bytes at pinned "
      "bandwidth; everything above that is saved.";
  h.fix_cuda =
      "Pack the values into one pinned staging buffer and issue one cudaMemcpyAsync; keep "
      "scalars on the device (pass device pointers to kernels) instead of copying each one.";
  h.fix_pytorch =
      "torch.stack/torch.cat the small tensors and move them with one .to(device, "
      "non_blocking=True); build tensors directly on the device (torch.tensor(..., device=...)); "
      "avoid per-element .item()/.cpu() in loops.";
  return h;
}

std::optional<Hint> AllocChurn(Ctx& c) {
  Hint h;
  h.id = "alloc-churn";
  const uint64_t steady_from =
      c.an.summary.start_ns + static_cast<uint64_t>(kWarmupFraction * static_cast<double>(c.wall));
  Tally calls, sizes, ops;
  uint64_t n = 0;
  for (Proc& p : c.procs) {
    std::unordered_map<uint32_t, uint64_t> bytes_of;  // correlation -> bytes
    for (const Record& r : p.p->records)
      if ((r.Kind() == RecordKind::MemAlloc || r.Kind() == RecordKind::MemFree) && r.correlation)
        bytes_of[r.correlation] = r.bytes;
    std::set<std::pair<std::string, uint64_t>> seen;
    for (const Record* api : p.apis) {
      const std::string& name = p.p->Name(*api);
      if (!IsAllocApi(name)) continue;
      auto b = bytes_of.find(api->correlation);
      uint64_t bytes = b == bytes_of.end() ? 0 : b->second;
      bool first = seen.insert({name, bytes}).second;
      if (first || api->start_ns < steady_from) continue;
      ++n;
      h.est_saving_ns += api->DurationNs();
      calls.Add(name, api->DurationNs());
      sizes.Add(bytes ? FormatBytes(bytes) : "size unknown", api->DurationNs());
      ops.Add(p.OpOf(api), api->DurationNs());
    }
  }
  if (n < 2 || !Price(h, c)) return std::nullopt;
  h.summary = fmt::format("{} device memory allocations/frees in the steady state", n);
  for (const auto& [name, v] : calls.Top(4))
    h.evidence.push_back(fmt::format("{}: {} calls, {} (mean {})", name, v.first, Dur(v.second),
                                     Dur(v.second / v.first)));
  std::string sz;
  for (const auto& [s, v] : sizes.Top(3))
    sz += fmt::format("{}{} x{}", sz.empty() ? "" : ", ", s, v.first);
  h.evidence.push_back("sizes: " + sz);
  AddTopOps(h, ops, "calls");
  h.assumption = fmt::format(
      "A pool makes these calls nearly free: at most their time is saved. Calls in the first "
      "{:.0f}% "
      "of the run and the first call of each size are start-up and not counted.",
      100 * kWarmupFraction);
  h.fix_cuda =
      "Allocate once before the loop and reuse the buffers, or use the stream-ordered pool "
      "(cudaMallocAsync/cudaFreeAsync with cudaMemPoolAttrReleaseThreshold raised); cudaFree "
      "also synchronizes the device.";
  h.fix_pytorch =
      "Keep the caching allocator on (do not set PYTORCH_NO_CUDA_MEMORY_CACHING; avoid "
      "torch.cuda.empty_cache() in the loop); preallocate and reuse tensors (out=, in-place "
      "ops); use PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.";
  return h;
}

std::optional<Hint> GpuIdleGaps(Ctx& c) {
  Hint h;
  h.id = "gpu-idle-gaps";
  struct Item {
    uint64_t claim, start, len;
    std::string cause;
  };
  std::vector<Item> items;
  Tally causes;
  uint64_t warm = 0, warm_ns = 0;
  for (Proc& p : c.procs) {
    // Outermost API calls per thread, by start (they do not overlap on one thread), so that the
    // calls inside a gap are found by binary search.
    std::unordered_map<uint32_t, std::vector<const Record*>> apis_of;
    for (const Record* a : p.apis) apis_of[a->tid].push_back(a);
    for (auto& [tid, v] : apis_of)
      std::sort(v.begin(), v.end(),
                [](const Record* x, const Record* y) { return x->start_ns < y->start_ns; });
    for (const Gap& g : p.gaps) {
      if (g.warmup && g.Len() >= kLongGapNs) {
        ++warm;
        warm_ns += g.Len();
      }
      if (!g.idle_claim()) continue;
      h.est_saving_ns += g.idle_claim();
      // What the host was doing: on the thread that launched the work ending the gap, the NVTX
      // range open at mid-gap and the API call that overlaps the gap most.
      const Record* api = p.Api(*p.acts[g.next_index]);
      std::string cause;
      if (api) {
        uint64_t mid = g.start + g.Len() / 2;
        std::string op = p.OpAt(api->tid, mid);
        const Record* best = nullptr;
        uint64_t best_ov = 0;
        const auto& calls = apis_of[api->tid];
        auto it = std::lower_bound(calls.begin(), calls.end(), g.start,
                                   [](const Record* a, uint64_t t) { return a->start_ns < t; });
        if (it != calls.begin()) --it;  // a call that began before the gap may reach into it
        for (; it != calls.end() && (*it)->start_ns < g.end; ++it) {
          const Record* a = *it;
          if (a->end_ns <= g.start) continue;
          uint64_t ov = std::min(a->end_ns, g.end) - std::max(a->start_ns, g.start);
          if (ov > best_ov) {
            best_ov = ov;
            best = a;
          }
        }
        if (op != "(no range)") cause = "in NVTX range '" + op + "'";
        if (best && best_ov * 10 >= g.Len())  // the call covers at least a tenth of the gap
          cause += fmt::format("{}in {} for {}", cause.empty() ? "" : ", ", p.p->Name(*best),
                               Dur(best_ov));
        if (cause.empty()) cause = "in host code outside CUDA calls and NVTX ranges";
        cause = fmt::format("thread {} {}", api->tid, cause);
      } else {
        cause = "host activity unknown (launching call not recorded)";
      }
      causes.Add(cause, g.idle_claim());
      items.push_back({g.idle_claim(), g.start - c.an.summary.start_ns, g.Len(), cause});
    }
  }
  if (!Price(h, c)) return std::nullopt;
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.claim > b.claim; });
  h.summary = fmt::format("GPU idle in {} gaps of {} or more while the host does other work",
                          items.size(), Dur(kLongGapNs));
  h.evidence.push_back(fmt::format("{} idle in {} gaps, longest {}", OfWall(h.est_saving_ns, c),
                                   items.size(), Dur(items.front().len)));
  for (const auto& [cause, v] : causes.Top(3))
    h.evidence.push_back(fmt::format("{} gaps ({}): {}", v.first, Dur(v.second), cause));
  for (size_t i = 0; i < std::min<size_t>(3, items.size()); ++i)
    h.evidence.push_back(
        fmt::format("gap at +{}: {}, {}", Dur(items[i].start), Dur(items[i].len), items[i].cause));
  if (warm)
    h.evidence.push_back(fmt::format(
        "not counted: {} gaps ({}) before a kernel's first run (module loading, warm-up)", warm,
        Dur(warm_ns)));
  h.assumption =
      "The host work in these gaps could overlap GPU work (queued ahead, on another thread, or "
      "prefetched): at most the idle time is saved. Time explained by host waits or "
      "allocation calls is priced by excessive-sync and alloc-churn instead.";
  h.fix_cuda =
      "Queue the next GPU work before the host work (the launches are asynchronous), move host "
      "preprocessing/IO to another thread with double-buffered pinned staging, or use "
      "cudaLaunchHostFunc to keep the stream fed.";
  h.fix_pytorch =
      "DataLoader(num_workers>0, pin_memory=True, prefetch_factor, persistent_workers=True); "
      "move CPU preprocessing to the GPU or to the workers; avoid checkpointing/logging inside "
      "the step; overlap with a prefetcher on a side torch.cuda.Stream.";
  return h;
}

std::optional<Hint> NoOverlap(Ctx& c) {
  Hint h;
  h.id = "no-copy-compute-overlap";
  uint64_t copy_alone = 0, kernel_alone = 0, copy_ns = 0, kernel_ns = 0, overlap = 0;
  struct StreamUse {
    uint64_t copies = 0, copy_ns = 0, kernels = 0, kernel_ns = 0;
  };
  std::map<std::pair<uint16_t, uint32_t>, StreamUse> streams;
  for (Proc& p : c.procs) {
    struct DevUse {
      UnionAcc copies, kernels, either;
    };
    std::map<uint16_t, DevUse> dev;  // p.acts is in start order: unions in one pass
    for (const Record* a : p.acts) {
      auto& s = streams[{a->device, a->tid}];
      if (a->Kind() == RecordKind::Kernel) {
        DevUse& d = dev[a->device];
        d.kernels.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        d.either.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        ++s.kernels;
        s.kernel_ns += a->DurationNs();
      } else if (a->Kind() == RecordKind::Memcpy && IsHostCopy(*a)) {
        DevUse& d = dev[a->device];
        d.copies.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        d.either.Add(a->start_ns, std::max(a->start_ns, a->end_ns));
        ++s.copies;
        s.copy_ns += a->DurationNs();
      }
    }
    for (auto& [d, u] : dev) {
      uint64_t cl = u.copies.Total(), kl = u.kernels.Total(), both = cl + kl - u.either.Total();
      copy_ns += cl;
      kernel_ns += kl;
      overlap += both;
      copy_alone += cl - both;
      kernel_alone += kl - both;
    }
  }
  h.est_saving_ns = std::min(copy_alone, kernel_alone);
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("Host<->device copies ({}) and kernels ({}) run one after the other",
                          Dur(copy_ns), Dur(kernel_ns));
  h.evidence.push_back(fmt::format("copies overlap kernels for {} ({} of copy time)", Dur(overlap),
                                   Pct(PctOf(overlap, copy_ns))));
  std::vector<std::pair<std::pair<uint16_t, uint32_t>, StreamUse>> v(streams.begin(),
                                                                     streams.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.copy_ns > b.second.copy_ns; });
  for (size_t i = 0; i < v.size() && i < 3 && v[i].second.copies; ++i)
    h.evidence.push_back(fmt::format(
        "dev {} stream {}: {} copies ({}) and {} kernels ({}){}", v[i].first.first,
        v[i].first.second, v[i].second.copies, Dur(v[i].second.copy_ns), v[i].second.kernels,
        Dur(v[i].second.kernel_ns), v[i].second.kernels ? " on the same stream" : ""));
  h.assumption =
      "Copies and kernels can be pipelined in chunks (copy chunk i+1 while computing chunk i): "
      "with perfect overlap the shorter of the non-overlapped copy and kernel times is hidden.";
  h.fix_cuda =
      "Split the data into chunks; issue cudaMemcpyAsync from pinned memory on one stream and "
      "the kernels on another, ordered with cudaEventRecord/cudaStreamWaitEvent (double "
      "buffering); the copy engines then run alongside the SMs.";
  h.fix_pytorch =
      "Pinned memory plus .to(device, non_blocking=True); prefetch the next batch on a side "
      "torch.cuda.Stream (with torch.cuda.stream(s): ...; then "
      "torch.cuda.current_stream().wait_stream(s)); DataLoader(pin_memory=True).";
  return h;
}

std::optional<Hint> UnderfilledGrid(Ctx& c) {
  Hint h;
  h.id = "underfilled-grid";
  std::map<uint16_t, uint32_t> sms;
  for (const DeviceInfo& d : c.an.summary.devices) sms[d.id] = d.sm_count;
  struct K {
    uint64_t n = 0, ns = 0, save = 0, blocks = 0;
    uint32_t sm = 0;
  };
  std::map<std::string, K> ks;
  for (Proc& p : c.procs)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Kernel || a->DurationNs() < kUnderfilledMinNs) continue;
      auto it = sms.find(a->device);
      if (it == sms.end() || it->second == 0) continue;
      uint64_t blocks = uint64_t{a->a} * a->b * a->c, sm = it->second, d = a->DurationNs();
      if (blocks == 0 || blocks >= sm) continue;
      // Same work spread over every SM with perfect scaling: d * blocks / sm.
      uint64_t save = d - d * blocks / sm;
      h.est_saving_ns += save;
      K& k = ks[p.KernelName(*a)];
      ++k.n;
      k.ns += d;
      k.save += save;
      k.blocks = std::max(k.blocks, blocks);
      k.sm = it->second;
    }
  if (!Price(h, c)) return std::nullopt;
  std::vector<std::pair<std::string, K>> v(ks.begin(), ks.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.save > b.second.save; });
  h.summary = fmt::format("{} long kernel(s) launch fewer blocks than the GPU has SMs", v.size());
  for (size_t i = 0; i < v.size() && i < 3; ++i)
    h.evidence.push_back(fmt::format("{}: {} launches, {} (mean {}), at most {} blocks for {} SMs",
                                     Short(v[i].first), v[i].second.n, Dur(v[i].second.ns),
                                     Dur(v[i].second.ns / v[i].second.n), v[i].second.blocks,
                                     v[i].second.sm));
  h.assumption = fmt::format(
      "The same work spread over all SMs with perfect scaling (time x blocks / SMs); kernels "
      "shorter than {} are left to launch-bound.",
      Dur(kUnderfilledMinNs));
  h.fix_cuda =
      "Launch at least one block per SM (better 2-4 per SM): split the work finer (smaller "
      "tiles, split-K, grid-stride loops sized from cudaOccupancyMaxActiveBlocksPerMultiprocessor "
      "x SM count), or run independent kernels concurrently on several streams.";
  h.fix_pytorch =
      "Increase the batch size or fuse small independent ops (torch.compile); for small GEMMs "
      "batch them (torch.bmm) instead of looping; run independent work on separate "
      "torch.cuda.Streams.";
  return h;
}

std::optional<Hint> Fp32Gemm(Ctx& c) {
  Hint h;
  h.id = "fp32-gemm";
  Tally ks;
  uint64_t total = 0;
  for (Proc& p : c.procs)
    for (const Record* a : p.acts) {
      if (a->Kind() != RecordKind::Kernel) continue;
      if (!(p.Family(*a) & Proc::kFp32Gemm)) continue;
      const std::string& name = p.KernelName(*a);
      uint64_t d = a->DurationNs();
      h.est_saving_ns += d - d / kTensorCoreSpeedup;
      total += d;
      ks.Add(Short(name), d);
    }
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("FP32 GEMMs without tensor cores take {} of GPU time",
                          Pct(PctOf(total, c.an.summary.gpu_busy_ns)));
  for (const auto& [name, v] : ks.Top(3))
    h.evidence.push_back(fmt::format("{}: {} calls, {}", name, v.first, Dur(v.second)));
  h.evidence.push_back(fmt::format("FP32 GEMM kernels: {} in total", OfWall(total, c)));
  h.assumption = fmt::format(
      "Tensor cores run the same GEMMs at most {}x faster (peak BF16 tensor-core vs FP32 FMA "
      "throughput on A100/H100): time x (1 - 1/{}) is saved at most.",
      kTensorCoreSpeedup, kTensorCoreSpeedup);
  h.fix_cuda =
      "cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH) for TF32, or store BF16/FP16 and "
      "call cublasGemmEx/cublasLtMatmul with CUBLAS_COMPUTE_32F (FP32 accumulation).";
  h.fix_pytorch =
      "torch.backends.cuda.matmul.allow_tf32 = True (or "
      "torch.set_float32_matmul_precision(\"high\")), torch.backends.cudnn.allow_tf32 = True, "
      "or run the model under torch.autocast(\"cuda\", dtype=torch.bfloat16).";
  return h;
}

std::optional<Hint> MemoryBoundChain(Ctx& c) {
  Hint h;
  h.id = "memory-bound-chain";
  uint64_t chains = 0, kernels = 0, chain_ns = 0;
  Tally names;
  std::string best_desc;
  uint64_t best_save = 0;
  for (Proc& p : c.procs) {
    // Per stream, in order. A chain is broken by another kernel, a copy or memset, an idle gap
    // of kLongGapNs or more, or a change of the outermost NVTX range at launch (a new step).
    std::map<std::pair<uint16_t, uint32_t>, std::vector<const Record*>> streams;
    for (const Record* a : p.acts) streams[{a->device, a->tid}].push_back(a);
    for (auto& [key, acts] : streams) {
      std::vector<const Record*> chain;
      int chain_outer = -2;
      auto flush = [&] {
        if (chain.size() >= kMinChain) {
          uint64_t sum = 0, mx = 0;
          for (const Record* k : chain) {
            sum += k->DurationNs();
            mx = std::max(mx, k->DurationNs());
            names.Add(Short(p.KernelName(*k), 60), k->DurationNs());
          }
          ++chains;
          kernels += chain.size();
          chain_ns += sum;
          h.est_saving_ns += sum - mx;
          if (sum - mx > best_save) {
            best_save = sum - mx;
            best_desc.clear();
            for (size_t i = 0; i < chain.size() && i < 6; ++i)
              best_desc += (i ? " -> " : "") + Short(p.KernelName(*chain[i]), 40);
            if (chain.size() > 6) best_desc += fmt::format(" -> ... ({} kernels)", chain.size());
          }
        }
        chain.clear();
      };
      for (const Record* a : acts) {
        if (a->Kind() != RecordKind::Kernel || !(p.Family(*a) & Proc::kMemoryBound)) {
          flush();
          continue;
        }
        int outer = -1;
        if (const Record* api = p.Api(*a)) {
          p.ix.OpenAt(api->tid, api->start_ns, p.open);
          if (!p.open.empty()) outer = p.open.front();
        }
        if (!chain.empty() &&
            (outer != chain_outer || a->start_ns >= chain.back()->end_ns + kLongGapNs))
          flush();
        chain.push_back(a);
        chain_outer = outer;
      }
      flush();
    }
  }
  if (!Price(h, c)) return std::nullopt;
  h.summary = fmt::format("{} chains of memory-bound element-wise/normalisation kernels take {}",
                          chains, Pct(PctOf(chain_ns, c.an.summary.gpu_busy_ns)) + " of GPU time");
  h.evidence.push_back(fmt::format("{} kernels in {} chains of {} or more, {}", kernels, chains,
                                   kMinChain, OfWall(chain_ns, c)));
  h.evidence.push_back("costliest chain: " + best_desc);
  for (const auto& [name, v] : names.Top(4))
    h.evidence.push_back(fmt::format("{}: {} runs in chains, {}", name, v.first, Dur(v.second)));
  h.assumption =
      "Each chain fused into one kernel that takes as long as its longest member (the data "
      "makes one trip through memory instead of one per kernel): the rest is saved.";
  h.fix_cuda =
      "Fuse the element-wise steps into one kernel (or into the preceding GEMM's epilogue with "
      "cuBLASLt/CUTLASS); use fused LayerNorm/softmax kernels (cuDNN, Apex, FlashAttention).";
  h.fix_pytorch =
      "torch.compile the model (Inductor fuses element-wise chains); "
      "F.scaled_dot_product_attention instead of matmul+softmax+matmul; fused LayerNorm/RMSNorm "
      "(torch.nn.functional.rms_norm, Apex); fused optimizers (fused=True).";
  return h;
}

std::optional<Hint> DominantKernel(Ctx& c) {
  if (c.an.kernels.empty()) return std::nullopt;
  const KernelRow& k = c.an.kernels.front();
  if (k.share < kDominantShare) return std::nullopt;
  Hint h;
  h.id = "dominant-kernel";
  h.severity = Severity::Info;
  h.summary = fmt::format("One kernel takes {} of GPU time: start there", Pct(100 * k.share));
  h.evidence.push_back(Short(k.name, 160));
  h.evidence.push_back(fmt::format("{} calls, total {}, mean {}, median {}, p95 {}, max {}",
                                   k.stat.count, Dur(k.stat.total_ns), Dur(k.stat.mean_ns),
                                   Dur(k.stat.median_ns), Dur(k.stat.p95_ns), Dur(k.stat.max_ns)));
  h.evidence.push_back(fmt::format(
      "grid ({},{},{}) block ({},{},{}), {} registers/thread, {} shared memory", k.grid.x, k.grid.y,
      k.grid.z, k.block.x, k.block.y, k.block.z, k.registers, FormatBytes(k.shared_mem)));
  for (const GroupRow& op : c.an.ops)
    for (const KernelRow& kr : op.kernel_rows)
      if (kr.name == k.name && kr.stat.total_ns * 2 >= k.stat.total_ns)
        h.evidence.push_back(
            fmt::format("launched mostly from op '{}' ({} calls)", op.key, kr.stat.count));
  h.est_saving_ns = 0;
  h.est_saving_pct = 0;
  h.assumption =
      "No estimate: without hardware counters kprof cannot say how far this kernel is from the "
      "GPU's limits. This is where to look first, not a diagnosed problem.";
  h.fix_cuda =
      "Profile this kernel with Nsight Compute (ncu --kernel-name <name> --set full) and compare "
      "its achieved memory/compute throughput with the roofline; check occupancy and "
      "coalescing.";
  h.fix_pytorch =
      "Find the op that launches it (the op view), then check its dtype (bf16/TF32), shapes "
      "(multiples of 8/16) and whether a fused or library implementation exists; torch.compile "
      "or a Triton kernel for custom ops.";
  return h;
}

std::optional<Hint> ProfilerDataLoss(Ctx& c) {
  const RunSummary& S = c.an.summary;
  uint64_t written = 0, setup_ns = 0;
  std::vector<Interval> overhead;
  for (const Proc& proc : c.procs) {
    const ProcessTrace& p = *proc.p;
    written += p.stats.records_written;
    // Overhead counts where it distorts the picture: inside the process's GPU window (first to
    // last GPU activity). CUPTI's one-time setup at context creation comes before any GPU work.
    // Only overhead on the program's own threads (those that call CUDA) slows it down; the
    // agent's flush thread waiting inside cuptiActivityFlushAll costs the program nothing.
    std::unordered_set<uint32_t> app_threads;
    for (const Record* a : proc.apis) app_threads.insert(a->tid);
    const uint64_t first = proc.busy.empty() ? UINT64_MAX : proc.busy.front().first;
    const uint64_t last = proc.busy.empty() ? 0 : proc.busy.back().second;
    for (const Record& r : p.records) {
      if (r.Kind() != RecordKind::Overhead) continue;
      // Only the profiler's own costs; module loading, compilation and command-buffer stalls
      // are the application's and would be there without kprof.
      auto k = static_cast<OverheadKind>(r.a);
      if (k != OverheadKind::BufferFlush && k != OverheadKind::Instrumentation &&
          k != OverheadKind::Resource && k != OverheadKind::ActivityBufferRequest)
        continue;
      if (!app_threads.count(r.tid)) continue;
      uint64_t b = std::max(r.start_ns, first), e = std::min(r.end_ns, last);
      if (b < e) overhead.emplace_back(b, e);
      setup_ns += r.DurationNs() - (b < e ? e - b : 0);
    }
  }
  Hint h;
  h.id = "profiler-data-loss";
  h.est_saving_ns = std::min(Length(Merge(std::move(overhead))), c.wall);
  h.est_saving_pct = PctOf(h.est_saving_ns, c.wall);
  uint64_t lost = S.dropped_records + S.missing_timestamps;
  if (lost == 0 && S.incomplete_processes == 0 && h.est_saving_pct < kEmitPct) return std::nullopt;
  h.severity = SeverityForPct(h.est_saving_pct);
  double lost_frac =
      written + lost ? static_cast<double>(lost) / static_cast<double>(written + lost) : 0;
  if (lost || S.incomplete_processes) h.severity = std::max(h.severity, Severity::Warning);
  if (lost_frac >= kCriticalLossFraction) h.severity = Severity::Critical;
  h.summary = lost ? fmt::format("The profiler lost {} records: totals and hints undercount", lost)
              : S.incomplete_processes
                  ? "A recorded process did not finish writing: the end of the run is missing"
                  : fmt::format("Profiler overhead is {} of the run", Pct(h.est_saving_pct));
  if (S.dropped_records)
    h.evidence.push_back(
        fmt::format("{} records dropped by CUPTI (buffers full)", S.dropped_records));
  if (S.missing_timestamps)
    h.evidence.push_back(
        fmt::format("{} records without timestamps not written", S.missing_timestamps));
  if (lost)
    h.evidence.push_back(fmt::format("{:.2f}% of {} records", 100 * lost_frac, written + lost));
  if (S.incomplete_processes)
    h.evidence.push_back(fmt::format("{} of {} processes without an End block (crash or kill)",
                                     S.incomplete_processes, S.processes));
  h.evidence.push_back(
      fmt::format("profiler overhead during GPU work (buffer flushes, instrumentation): {}",
                  OfWall(h.est_saving_ns, c)));
  if (setup_ns)
    h.evidence.push_back(fmt::format(
        "not counted: {} of one-time profiler setup outside the GPU work (context creation)",
        Dur(setup_ns)));
  h.assumption =
      "The estimate is the profiler's own overhead recorded in the run, which an unprofiled run "
      "does not pay. Lost records are not priced: every other figure is a lower bound.";
  h.fix_cuda =
      "Record fewer kinds (KPROF_KINDS), flush more often (KPROF_FLUSH_MS), profile fewer "
      "iterations; make sure the program exits normally (cudaDeviceReset or return from main) "
      "so that the agent writes its last buffers.";
  h.fix_pytorch =
      "Profile a few steps only (a short loop or torch.profiler.schedule(wait, warmup, active)); "
      "let the script exit normally so that buffers are flushed.";
  return h;
}

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::Info:
      return "info";
    case Severity::Warning:
      return "warning";
    case Severity::Critical:
      return "critical";
  }
  return "info";
}

const std::vector<std::string>& HintIds() {
  static const std::vector<std::string> ids = {
      "launch-bound", "excessive-sync",     "pageable-memcpy",         "small-transfers",
      "alloc-churn",  "gpu-idle-gaps",      "no-copy-compute-overlap", "underfilled-grid",
      "fp32-gemm",    "memory-bound-chain", "dominant-kernel",         "profiler-data-loss"};
  return ids;
}

std::vector<Hint> ComputeHints(const Run& run, const Analysis& analysis) {
  std::vector<Hint> out;
  Ctx c{run, analysis, {}, analysis.summary.wall_ns};
  if (c.wall == 0) return out;
  for (const ProcessTrace& p : run.processes) c.procs.push_back(BuildProc(p));
  // Percentages are of the run less its one-time start-up: GPU idle gaps of 1 ms or more that
  // end before a kernel's first execution (imports, initialisation, library set-up). Otherwise
  // a long import hides every steady-state problem of a short profiled run. With several
  // processes only what all of them spent in start-up is taken off.
  uint64_t startup = UINT64_MAX;
  for (const Proc& p : c.procs) {
    uint64_t warm = 0;
    for (const Gap& g : p.gaps)
      if (g.warmup && g.Len() >= kLongGapNs) warm += g.Len();
    startup = std::min(startup, warm);
  }
  if (startup != UINT64_MAX)
    c.wall = std::max(c.wall - std::min(c.wall, startup), analysis.summary.gpu_busy_ns);
  if (c.wall == 0) return out;
  using Rule = std::optional<Hint> (*)(Ctx&);
  for (Rule rule :
       {LaunchBound, ExcessiveSync, PageableMemcpy, SmallTransfers, AllocChurn, GpuIdleGaps,
        NoOverlap, UnderfilledGrid, Fp32Gemm, MemoryBoundChain, DominantKernel, ProfilerDataLoss})
    if (auto h = rule(c)) out.push_back(std::move(*h));
  std::sort(out.begin(), out.end(), [](const Hint& a, const Hint& b) {
    if (a.est_saving_ns != b.est_saving_ns) return a.est_saving_ns > b.est_saving_ns;
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.id < b.id;
  });
  return out;
}

}  // namespace kprof
