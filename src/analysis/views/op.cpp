// The op view: GPU and CPU time by the innermost NVTX range open at each launch (the op), with
// its calls, kernels beneath it, memory it allocated, and the backward work of its autograd node.
// A graph launched as a whole is shared among the ranges its nodes were captured in, by node
// count (docs/analysis.md, "CUDA graphs"). Also the run's unattributed GPU time and backward
// time linked to forward ops.
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/accumulators.h"
#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

class OpView final : public View {
 public:
  bool Serves(GroupBy by) const override { return by == GroupBy::Op; }

  void BeginProcess(const ProcessPass& pp) override {
    const ProcessIndex& ix = pp.ix;
    op_of_.emplace_back(ix.ranges.size());
    no_op_.push_back(nullptr);
    std::vector<GroupAcc*>& op_of = op_of_.back();
    // Looked up once per distinct name: PyTorch traces hold millions of ranges over a few
    // hundred names.
    std::unordered_map<uint32_t, GroupAcc*> by_name;
    for (size_t i = 0; i < ix.ranges.size(); ++i) {
      const auto& r = ix.ranges[i];
      // A library's range inside a PyTorch op is part of that op (its GPU work goes there,
      // ProcessIndex::owner): no row, no call of its own. Owners come before what they own.
      if (!ix.owner.empty() && ix.owner[i] != static_cast<int>(i)) {
        op_of[i] = op_of[static_cast<size_t>(ix.owner[i])];
        continue;
      }
      GroupAcc*& op = by_name[r.start->name];
      if (op == nullptr) {
        op = &ops_[std::string(ix.Name(i))];
        aten_ |= ix.Name(i).starts_with("aten::");
      }
      op_of[i] = op;
      ++op->calls;
      op->cpu_ns += r.end_ns - r.begin_ns;
    }
  }

  void Memory(const ProcessPass& pp, int inner, int64_t delta) override {
    SatAdd(inner < 0 ? ops_[kNoRange].mem_delta
                     : op_of_[pp.index][static_cast<size_t>(inner)]->mem_delta,
           delta);
  }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    const Record& r = a.r;
    if (a.graph != nullptr) {
      ShareGraphTime(*a.graph, r.DurationNs(), a.inner_range, [&](int to, uint64_t ns) {
        if (to < 0) {
          NoRange(pp.index)->AddGraphShare(ns);
          unattributed_ns_ += ns;
        } else {
          op_of_[pp.index][static_cast<size_t>(to)]->AddGraphShare(ns);
        }
      });
      return;
    }
    if (a.inner_range < 0) {
      NoRange(pp.index)->AddActivity(r, a.kname);
      unattributed_ns_ += r.DurationNs();
      return;
    }
    op_of_[pp.index][static_cast<size_t>(a.inner_range)]->AddActivity(r, a.kname);
    // Backward work: also priced on the forward op whose autograd node ran it.
    if (const int fwd = pp.ix.ForwardOf(a.inner_range); fwd >= 0) {
      op_of_[pp.index][static_cast<size_t>(fwd)]->bwd_gpu_ns += r.DurationNs();
      backward_linked_ns_ += r.DurationNs();
    }
  }

  void Busy(size_t process, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e) override {
    const auto add = [&](int range) {
      (range < 0 ? no_op_[process] : op_of_[process][static_cast<size_t>(range)])->busy.Add(s, e);
    };
    if (const GraphInfo* g = CapturedGraph(t, *t.acts[i])) {
      for (const auto& [range, n] : g->capture_ranges) add(range >= 0 ? range : t.act_range[i]);
    } else {
      add(t.act_range[i]);
    }
  }

  void Finish(Analysis& an) override {
    std::vector<std::vector<GroupAcc*>>().swap(op_of_);
    const uint64_t busy = an.summary.gpu_busy_ns;
    for (auto& [name, acc] : ops_) {
      if (acc.gpu_ns == 0 && acc.kernels + acc.memcpys + acc.memsets == 0 && name == kNoRange)
        continue;
      an.ops.push_back(acc.Row(name, busy));
    }
    SortRows(an.ops, AnalysisOptions::Sort::Gpu);
    ClassifyGroups(an.counters, an.ops);
    an.unattributed_gpu_ns = unattributed_ns_;
    an.summary.backward_linked_ns = backward_linked_ns_;
    an.summary.aten_ranges = aten_;
  }

  std::vector<GroupRow> Rows(const Analysis& an) override { return an.ops; }

 private:
  GroupAcc* NoRange(size_t process) {
    if (no_op_[process] == nullptr) no_op_[process] = &ops_[kNoRange];
    return no_op_[process];
  }

  std::map<std::string, GroupAcc> ops_;
  std::vector<std::vector<GroupAcc*>> op_of_;  ///< per process, per range of its index
  std::vector<GroupAcc*> no_op_;               ///< per process: "(no range)", once it has work
  uint64_t unattributed_ns_ = 0, backward_linked_ns_ = 0;
  bool aten_ = false;
};

}  // namespace

std::unique_ptr<View> MakeOpView(const ViewContext&) { return std::make_unique<OpView>(); }

}  // namespace kprof::detail
