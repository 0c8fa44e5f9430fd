// Hint rule memory-bound-chain: Chains of memory-bound element-wise/normalisation kernels that
// fusion would make one trip through memory. Catalogue entry, thresholds and the reasoning behind
// the estimate: docs/hints.md#memory-bound-chain.
#include <map>
#include <optional>

#include "analysis/hints/rule.h"

namespace kprof::hints {

/// Fewest memory-bound kernels in a row that make a chain worth fusing.
constexpr size_t kMinChain = 3;

std::optional<Hint> MemoryBoundChain(const RuleContext& c) {
  Hint h;
  KernelFamilies families;
  CounterLookup counters(c);
  uint64_t confirmed_ns = 0, refuted_ns = 0, by_counters_ns = 0, latency_ns = 0;
  double dram_sum = 0;
  std::vector<int> open;
  uint64_t chains = 0, kernels = 0, chain_ns = 0, compiled_ns = 0;
  Tally names;
  std::string best_desc;
  uint64_t best_save = 0;
  for (const ProcessTimeline& p : c.timeline.processes) {
    // Per stream, in order. A chain is broken by another kernel, a copy or memset, an idle gap
    // of kLongGapNs or more, or a change of the outermost NVTX range at launch (a new step).
    std::map<std::pair<uint16_t, uint32_t>, std::vector<size_t>> streams;  // indices in acts
    for (size_t i = 0; i < p.acts.size(); ++i)
      streams[{p.acts[i]->device, p.acts[i]->tid}].push_back(i);
    for (auto& [key, acts] : streams) {
      std::vector<size_t> chain;
      int chain_outer = -2;
      auto flush = [&] {
        if (chain.size() >= kMinChain) {
          uint64_t sum = 0, mx = 0;
          for (size_t i : chain) {
            const Record* k = p.acts[i];
            sum += k->DurationNs();
            mx = std::max(mx, k->DurationNs());
            names.Add(Short(p.KernelName(*k), 60), k->DurationNs());
            if (InCompiledCode(p, i)) compiled_ns += k->DurationNs();
          }
          ++chains;
          kernels += chain.size();
          chain_ns += sum;
          h.est_saving_ns += sum - mx;
          // Fused, the chain takes its longest member's time: each kernel keeps that share.
          for (size_t i : chain)
            Claim(h, p.acts[i]->start_ns, p.acts[i]->end_ns,
                  sum ? static_cast<double>(sum - mx) / static_cast<double>(sum) : 0);
          if (sum - mx > best_save) {
            best_save = sum - mx;
            best_desc.clear();
            for (size_t i = 0; i < chain.size() && i < 6; ++i)
              best_desc += (i ? " -> " : "") + Short(p.KernelName(*p.acts[chain[i]]), 40);
            if (chain.size() > 6) best_desc += fmt::format(" -> ... ({} kernels)", chain.size());
          }
        }
        chain.clear();
      };
      for (size_t ai : acts) {
        const Record* a = p.acts[ai];
        bool member = a->Kind() == RecordKind::Kernel && families.MemoryBound(p, *a);
        // Measured: memory-bound by its throughputs whatever its name; not a member when the
        // counters call it compute-bound (a latency-bound element-wise kernel stays one).
        if (a->Kind() == RecordKind::Kernel)
          if (const KernelCounters* kc = counters.Of(p, *a)) {
            if (kc->bound == Bound::Memory) {
              if (!member) by_counters_ns += a->DurationNs();
              member = true;
              confirmed_ns += a->DurationNs();
              if (Measured(kc->values.dram_pct))
                dram_sum += kc->values.dram_pct * static_cast<double>(a->DurationNs());
            } else if (kc->bound == Bound::Compute && member) {
              member = false;
              refuted_ns += a->DurationNs();
            } else if (member) {
              latency_ns += a->DurationNs();
            }
          }
        if (!member) {
          flush();
          continue;
        }
        int outer = -1;
        if (const Record* api = p.Api(*a)) {
          p.index.OpenAt(api->tid, api->start_ns, open);
          if (!open.empty()) outer = open.front();
        }
        if (!chain.empty() &&
            (outer != chain_outer || a->start_ns >= p.acts[chain.back()]->end_ns + kLongGapNs))
          flush();
        chain.push_back(ai);
        chain_outer = outer;
      }
      flush();
    }
  }
  if (!Price(h, c)) return std::nullopt;
  h.summary =
      fmt::format("{} chains of memory-bound element-wise/normalisation kernels take {}", chains,
                  Pct(PctOf(chain_ns, c.analysis.summary.gpu_busy_ns)) + " of GPU time");
  h.evidence.push_back(fmt::format("{} kernels in {} chains of {} or more, {}", kernels, chains,
                                   kMinChain, OfWall(chain_ns, c)));
  h.evidence.push_back("costliest chain: " + best_desc);
  if (confirmed_ns > 0)
    h.evidence.push_back(fmt::format(
        "hardware counters: {} of kernels measured memory-bound (DRAM {:.1f}% of peak on "
        "average){}",
        Dur(confirmed_ns), dram_sum / static_cast<double>(confirmed_ns),
        by_counters_ns ? fmt::format(", {} of them by their counters only", Dur(by_counters_ns))
                       : std::string()));
  if (latency_ns > 0)
    h.evidence.push_back(fmt::format(
        "hardware counters: {} of these kernels measured latency-bound (too small to load "
        "memory: fused, their launches and trips through memory still go)",
        Dur(latency_ns)));
  if (confirmed_ns == 0 && latency_ns == 0 && counters.Any())
    h.evidence.push_back("hardware counters: none of these kernels measured (names only)");
  if (refuted_ns > 0)
    h.evidence.push_back(
        fmt::format("left out: {} of kernels named like element-wise ones that the counters call "
                    "compute-bound",
                    Dur(refuted_ns)));
  for (const auto& [name, v] : names.Top(4))
    h.evidence.push_back(fmt::format("{}: {} runs in chains, {}", name, v.first, Dur(v.second)));
  h.assumption =
      "Each chain fused into one kernel that takes as long as its longest member (the data "
      "makes one trip through memory instead of one per kernel): the rest is saved.";
  h.fix_cuda =
      "Fuse the element-wise steps into one kernel (or into the preceding GEMM's epilogue with "
      "cuBLASLt/CUTLASS); use fused LayerNorm/softmax kernels (cuDNN, Apex, FlashAttention).";
  // Advice fits where the chains are: torch.compile is not advised for code it compiled.
  if (compiled_ns)
    h.evidence.push_back(
        fmt::format("{} of the chains' time is in torch.compile'd code", Dur(compiled_ns)));
  h.fix_pytorch =
      compiled_ns * 2 > chain_ns
          ? "These kernels are torch.compile's own (Inductor's fused kernels) and still run in "
            "chains: compiling again will not fuse them. Graph breaks between them stop fusion "
            "(find them with torch._dynamo.explain); mode=\"max-autotune\" tries more fusions; "
            "F.scaled_dot_product_attention for attention patterns."
          : "torch.compile the model (Inductor fuses element-wise chains); "
            "F.scaled_dot_product_attention instead of matmul+softmax+matmul; fused "
            "LayerNorm/RMSNorm (torch.nn.functional.rms_norm, Apex); fused optimizers "
            "(fused=True).";
  return h;
}

}  // namespace kprof::hints
