// The compiled view (torch.compile): GPU time by compiled region, the work run while Inductor
// compiles, and the rest (eager); each region with its calls, CPU time and the module that called
// it (docs/pytorch.md).
#include <map>
#include <string>
#include <vector>

#include "analysis/views/view.h"
#include "analysis/views/view_acc.h"

namespace kprof::detail {
namespace {

class CompiledView final : public View {
 public:
  bool Serves(GroupBy by) const override { return by == GroupBy::Compiled; }

  void BeginProcess(const ProcessPass& pp) override {
    const ProcessIndex& ix = pp.ix;
    // The outermost op range of each entry into a compiled region gives the region's calls, CPU
    // time and the module that called it.
    region_acc_.assign(ix.regions.size(), nullptr);
    for (size_t g = 0; g < ix.regions.size(); ++g) region_acc_[g] = &compiled_[ix.regions[g]];
    for (size_t i = 0; i < ix.region_of.size(); ++i) {
      const int reg = ix.region_of[i];
      const RangeInterval& r = ix.ranges[i];
      if (reg < 0 || (r.parent >= 0 && ix.region_of[static_cast<size_t>(r.parent)] == reg))
        continue;
      ViewAcc& acc = *region_acc_[static_cast<size_t>(reg)];
      ++acc.acc.calls;
      acc.acc.cpu_ns += r.end_ns - r.begin_ns;
      if (!acc.kind.empty() || reg == ProcessIndex::kCompiling) continue;
      const int fwd = ix.ForwardOf(static_cast<int>(i));
      const RangeInterval& at = fwd >= 0 ? ix.ranges[static_cast<size_t>(fwd)] : r;
      if (const int m = ix.modules.InnermostAt(at.tid, at.begin_ns); m >= 0)
        acc.kind =
            SplitModuleName(pp.p.strings.Get(ix.modules.ranges[static_cast<size_t>(m)].start->name))
                .first;
    }
    eager_ = ix.regions.empty() ? nullptr : &compiled_[std::string(kEagerRegion)];
  }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    if (eager_ == nullptr) return;
    const int reg = pp.ix.RegionOf(a.inner_range);
    (reg < 0 ? eager_ : region_acc_[static_cast<size_t>(reg)])->Add(a.r, a.kname);
  }

  void Finish(Analysis& an) override {
    for (auto& [name, m] : compiled_) an.compiled.push_back(m.Row(name, an.summary.gpu_busy_ns));
    SortRows(an.compiled, AnalysisOptions::Sort::Gpu);
  }

  std::vector<GroupRow> Rows(const Analysis& an) override { return an.compiled; }

 private:
  std::map<std::string, ViewAcc> compiled_;
  std::vector<ViewAcc*> region_acc_;  ///< the process being read's, per region
  ViewAcc* eager_ = nullptr;          ///< the process being read's eager work (null: no regions)
};

}  // namespace

std::unique_ptr<View> MakeCompiledView(const ViewContext&) {
  return std::make_unique<CompiledView>();
}

}  // namespace kprof::detail
