// Hint rule shape-setup: one-time set-up inside an op (GapKind::Setup): a few calls of an op wait
// for a library to build a plan, compile or autotune for a shape or configuration it had not
// seen, while the op's other calls run without that wait. Catalogue entry, thresholds and the
// reasoning behind the estimate: docs/hints.md#shape-setup.
#include <algorithm>
#include <optional>
#include <set>

#include "analysis/hints/rule.h"

namespace kprof::hints {

std::optional<Hint> ShapeSetup(const RuleContext& c) {
  Hint h;
  struct Op {
    std::set<int> setup_calls;  // range indices, within one process
    uint64_t setups = 0;        // over all processes
    uint64_t ns = 0, calls = 0, longest = 0;
    std::vector<uint64_t> other_call_ns;
  };
  std::map<std::string, Op> ops;
  uint64_t gaps = 0;
  for (const ProcessTimeline& p : c.timeline.processes) {
    std::map<std::string_view, Op> here;  // names live in the process's string table
    for (const Gap& g : p.gaps) {
      if (!g.setup_ns()) continue;
      h.est_saving_ns += g.setup_ns();
      ClaimGapPart(h, p, g, g.explained_ns(), g.rest_ns);
      ++gaps;
      // The op call it lies in, found as the timeline found it (SetupGaps).
      const Record* api = p.Api(*p.acts[g.next]);
      const int r = api ? p.index.OpRangeAt(api->tid, g.start_ns + g.Len() / 2) : -1;
      if (r < 0) continue;
      Op& op = here[p.index.Name(static_cast<size_t>(r))];
      op.setup_calls.insert(r);
      op.ns += g.setup_ns();
      op.longest = std::max(op.longest, g.Len());
    }
    if (here.empty()) continue;
    for (size_t i = 0; i < p.index.ranges.size(); ++i) {
      auto it = here.find(p.index.Name(i));
      if (it == here.end()) continue;
      ++it->second.calls;
      if (!it->second.setup_calls.count(static_cast<int>(i)))
        it->second.other_call_ns.push_back(p.index.ranges[i].end_ns - p.index.ranges[i].begin_ns);
    }
    for (auto& [name, op] : here) {
      Op& all = ops[std::string(name)];
      all.ns += op.ns;
      all.calls += op.calls;
      all.longest = std::max(all.longest, op.longest);
      all.setups += op.setup_calls.size();
      all.other_call_ns.insert(all.other_call_ns.end(), op.other_call_ns.begin(),
                               op.other_call_ns.end());
    }
  }
  if (!Price(h, c)) return std::nullopt;
  std::vector<std::pair<std::string, Op>> v(ops.begin(), ops.end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  h.summary = fmt::format(
      "The GPU idles {} in {} one-time set-ups inside op '{}'{}: a library builds for a shape it "
      "had not seen",
      Dur(h.est_saving_ns), gaps, Short(v.front().first, 60),
      v.size() > 1 ? fmt::format(" and {} other op(s)", v.size() - 1) : "");
  for (size_t i = 0; i < v.size() && i < 3; ++i) {
    Op& op = v[i].second;
    h.evidence.push_back(fmt::format(
        "op '{}': {} of its {} calls waited {} (longest gap {}); its other calls take {} "
        "(median)",
        Short(v[i].first, 60), op.setups, op.calls, Dur(op.ns), Dur(op.longest),
        Dur(Median(op.other_call_ns))));
  }
  h.evidence.push_back(fmt::format("set-up inside ops: {}", OfWall(h.est_saving_ns, c)));
  h.assumption =
      "Each new shape or configuration pays its set-up (a plan, a compiled kernel, autotuning) "
      "once, inside the op's first call with it; with fixed or bucketed shapes, or the set-up "
      "done before the part that matters, those calls run like the others: at most the idle "
      "time inside them is saved. Set-up in an op's first calls is start-up and not counted.";
  h.fix_cuda =
      "Use a few fixed (padded, bucketed) sizes so each plan or kernel is made once; make the "
      "plans for every size before the loop (warm-up) and cache them across runs; or a library "
      "path that does not plan per shape.";
  h.fix_pytorch =
      "Pad or bucket the dynamic dimensions (sequence length, batch) to a few sizes; run each "
      "size once before serving or timing; for attention, a backend without per-shape plans "
      "(torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)); "
      "torch.backends.cudnn.benchmark=False when shapes keep changing; under torch.compile, "
      "torch._dynamo.mark_dynamic instead of a recompile per shape.";
  return h;
}

}  // namespace kprof::hints
