// The source view (kprof run --pytorch stack): GPU time by the program's source line (FILE:LINE)
// of the torch call that launched it, each line with the op it called most; and each op of the
// op view with its line (docs/pytorch.md).
#include <map>
#include <string>
#include <vector>

#include "analysis/views/view.h"
#include "analysis/views/view_acc.h"

namespace kprof::detail {
namespace {

class SourceView final : public View {
 public:
  bool Serves(GroupBy by) const override { return by == GroupBy::Source; }

  void BeginProcess(const ProcessPass& pp) override {
    const ProcessIndex& ix = pp.ix;
    source_of_.assign(ix.sources.ranges.size(), {nullptr, nullptr});
    for (size_t i = 0; i < ix.sources.ranges.size(); ++i) {
      const RangeInterval& r = ix.sources.ranges[i];
      std::string_view line = pp.p.strings.Get(r.start->name);
      line.remove_prefix(std::min(line.size(), kSourceRangePrefix.size()));
      auto it = sources_.try_emplace(std::string(line)).first;
      it->second.acc.with_kernels = false;
      source_of_[i] = {&it->first, &it->second};
      ++it->second.acc.calls;
      it->second.acc.cpu_ns += r.end_ns - r.begin_ns;
    }
  }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    const int src = pp.t.SourceOf(a.i);
    if (src < 0) return;
    auto [line, acc] = source_of_[static_cast<size_t>(src)];
    acc->Add(a.r, a.kname);
    if (pp.ix.InBackward(a.inner_range)) acc->acc.bwd_gpu_ns += a.r.DurationNs();
    if (a.inner_range < 0) return;
    // The op's row names the line; the line's row names the op it called (for backward work,
    // the forward op whose backward it is).
    const ProcessIndex& ix = pp.ix;
    op_lines_[std::string(ix.Name(a.inner_range))][*line] += a.r.DurationNs();
    const int fwd = ix.ForwardOf(a.inner_range);
    line_ops_[*line][std::string(ix.Name(fwd >= 0 ? fwd : a.inner_range))] += a.r.DurationNs();
  }

  // After the op view (views.def): the ops' lines.
  void Finish(Analysis& an) override {
    for (auto& [line, m] : sources_) {
      m.kind = Top(line_ops_[line]);
      an.sources.push_back(m.Row(line, an.summary.gpu_busy_ns));
    }
    SortRows(an.sources, AnalysisOptions::Sort::Gpu);
    if (op_lines_.empty()) return;
    for (GroupRow& op : an.ops)
      if (auto it = op_lines_.find(op.key); it != op_lines_.end()) op.source = Top(it->second);
  }

  std::vector<GroupRow> Rows(const Analysis& an) override { return an.sources; }

 private:
  std::map<std::string, ViewAcc> sources_;
  /// The process being read's, per source range: its line and accumulator.
  std::vector<std::pair<const std::string*, ViewAcc*>> source_of_;
  /// GPU time per (op, line) and per (line, op): the op's top line and the line's top op.
  std::map<std::string, std::map<std::string, uint64_t>> op_lines_, line_ops_;
};

}  // namespace

std::unique_ptr<View> MakeSourceView(const ViewContext&) { return std::make_unique<SourceView>(); }

}  // namespace kprof::detail
