// The helpers every hint rule shares (rule.h): pricing, wording, copies, kernel families.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>

#include "analysis/hints/rule.h"
#include "analysis/intervals.h"

namespace kprof::hints {
namespace {

/// Pinned copies at least this large are used to measure the link's pinned bandwidth.
constexpr uint64_t kPinnedReferenceBytes = 1 << 20;

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

}  // namespace

Severity SeverityForPct(double pct) {
  if (pct >= kCriticalPct) return Severity::Critical;
  if (pct >= kWarningPct) return Severity::Warning;
  return Severity::Info;
}

bool Price(Hint& h, const RuleContext& c) {
  h.base_ns = c.wall;
  h.est_saving_ns = std::min(h.est_saving_ns, c.wall);
  h.est_saving_pct = PctOf(h.est_saving_ns, c.wall);
  h.severity = SeverityForPct(h.est_saving_pct);
  return h.est_saving_pct >= kEmitPct;
}

bool InCompiledCode(const ProcessTimeline& p, size_t i) {
  const int region = p.index.RegionOf(p.act_range[i]);
  return region >= 0 && region != ProcessIndex::kCompiling;
}

void Claim(Hint& h, uint64_t start, uint64_t end, double fraction) {
  if (end <= start || fraction <= 0) return;
  fraction = std::min(fraction, 1.0);
  if (!h.claims.empty()) {
    SavingClaim& last = h.claims.back();
    if (last.end_ns == start && last.fraction == fraction) {
      last.end_ns = end;
      return;
    }
  }
  h.claims.push_back({start, end, fraction});
}

uint64_t ClaimUncovered(Hint& h, const std::vector<NsInterval>& busy, uint64_t start,
                        uint64_t end) {
  uint64_t n = 0;
  detail::ForEachUncovered(busy, start, end, [&](uint64_t from, uint64_t to) {
    Claim(h, from, to);
    n += to - from;
    return true;
  });
  return n;
}

const Record* ReadbackBefore(const ProcessTimeline& p, const Gap& g) {
  if (g.wait_ns == 0 || g.next == 0 || g.next >= p.acts.size()) return nullptr;
  if (p.acts[g.next]->Kind() != RecordKind::Kernel) return nullptr;
  // The activity that ends the busy interval before the gap: among the few that started last.
  for (size_t i = g.next, looked = 0; i-- > 0 && looked < 8; ++looked) {
    const Record& a = *p.acts[i];
    if (a.end_ns != g.start_ns) continue;
    const bool readback = a.Kind() == RecordKind::Memcpy &&
                          static_cast<CopyKind>(a.flags) == CopyKind::DtoH &&
                          a.bytes < kSmallCopyBytes;
    return readback ? &a : nullptr;
  }
  return nullptr;
}

bool ReadbacksPriced(const RuleContext& c) {
  uint64_t n = 0, ns = 0;
  for (const ProcessTimeline& p : c.timeline.processes)
    for (const Gap& g : p.gaps)
      if (g.launch_ns() && ReadbackBefore(p, g) != nullptr) {
        ++n;
        ns += g.launch_ns();
      }
  return n >= kMinReadbacks && PctOf(ns, c.wall) >= kEmitPct;
}

void ClaimGapPart(Hint& h, const ProcessTimeline& p, const Gap& g, uint64_t skip, uint64_t len) {
  // The gap's time outside alloc/free calls, walked from its start.
  detail::ForEachUncovered(p.alloc_calls, g.start_ns, g.end_ns, [&](uint64_t from, uint64_t to) {
    const uint64_t skipped = std::min(skip, to - from);
    skip -= skipped;
    from += skipped;
    const uint64_t take = std::min(len, to - from);
    Claim(h, from, from + take);
    len -= take;
    return len > 0;
  });
}

std::string OfWall(uint64_t ns, const RuleContext& c) {
  return fmt::format("{} ({} of the steady state)", Dur(ns), Pct(PctOf(ns, c.wall)));
}

uint64_t Median(std::vector<uint64_t>& v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<long>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

std::string Short(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Contains(const std::string& s, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](const char* n) { return s.find(n) != std::string::npos; });
}

std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> Tally::Top(size_t n) const {
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second.second != b.second.second ? a.second.second > b.second.second
                                              : a.first < b.first;
  });
  if (v.size() > n) v.resize(n);
  return v;
}

void AddTopOps(Hint& h, const Tally& ops, const char* what) {
  for (const auto& [op, v] : ops.Top(3))
    h.evidence.push_back(fmt::format("op '{}': {} {}, {}", op, v.first, what, Dur(v.second)));
}

bool IsHostCopy(const Record& r) {
  auto k = static_cast<CopyKind>(r.flags);
  return k == CopyKind::HtoD || k == CopyKind::DtoH;
}

MemKind HostSide(const Record& r) {
  return static_cast<MemKind>(static_cast<CopyKind>(r.flags) == CopyKind::HtoD ? r.a : r.b);
}

uint64_t PinnedRef::TimeFor(uint64_t b) const {
  double t = measured ? static_cast<double>(b) * ns / bytes
                      : static_cast<double>(b) / kDefaultPinnedBytesPerNs;
  return static_cast<uint64_t>(std::llround(t));
}

std::map<uint8_t, PinnedRef> PinnedReferences(const Timeline& tl) {
  std::map<uint8_t, PinnedRef> refs;
  for (const ProcessTimeline& t : tl.processes)
    for (const Record* a : t.acts) {
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

uint8_t KernelFamilies::Get(const ProcessTimeline& t, const Record& k) {
  const std::string* name = &t.KernelName(k);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    std::string lower = Lower(*name);
    uint8_t f = (IsFp32Gemm(lower) ? kFp32Gemm : 0) | (IsMemoryBound(lower) ? kMemoryBound : 0);
    it = by_name_.emplace(name, f).first;
  }
  return it->second;
}

std::string CounterLine(const CounterValues& v) {
  std::string out;
  const auto add = [&](const char* what, double pct) {
    if (!Measured(pct)) return;
    out += fmt::format("{}{} {:.1f}%", out.empty() ? "" : ", ", what, pct);
  };
  add("SM", v.sm_pct);
  add("memory", MemoryPct(v));
  add("tensor pipes", v.tensor_pct);
  add("achieved occupancy", v.occupancy_pct);
  return out;
}

}  // namespace kprof::hints
