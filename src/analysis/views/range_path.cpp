// The range-path view: like the op view, keyed by the whole stack of NVTX ranges open at each
// launch ("step/forward/aten::mm"), with the kernels beneath each path when this view is asked
// for.
#include <map>
#include <string>
#include <vector>

#include "analysis/accumulators.h"
#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

class RangePathView final : public View {
 public:
  explicit RangePathView(const ViewOptions& o) : with_kernels_(o.Wants(GroupBy::RangePath)) {}

  bool Serves(GroupBy by) const override { return by == GroupBy::RangePath; }

  void BeginProcess(const ProcessPass& pp) override {
    const ProcessIndex& ix = pp.ix;
    path_of_.emplace_back(ix.ranges.size());
    no_path_.push_back(nullptr);
    std::vector<GroupAcc*>& path_of = path_of_.back();
    std::vector<const std::string*> key_of(ix.ranges.size());
    std::map<std::pair<const GroupAcc*, uint32_t>, std::map<std::string, GroupAcc>::iterator>
        by_parent_and_name;
    for (size_t i = 0; i < ix.ranges.size(); ++i) {
      const auto& r = ix.ranges[i];
      const uint32_t name_id = r.start->name;
      const GroupAcc* parent = r.parent >= 0 ? path_of[static_cast<size_t>(r.parent)] : nullptr;
      auto pit = by_parent_and_name.find({parent, name_id});
      if (pit == by_parent_and_name.end()) {
        std::string path =
            r.parent >= 0 ? *key_of[static_cast<size_t>(r.parent)] + "/" + std::string(ix.Name(i))
                          : std::string(ix.Name(i));
        pit = by_parent_and_name
                  .emplace(std::make_pair(parent, name_id), paths_.try_emplace(path).first)
                  .first;
        // Kernel rows beneath a path are shown only in the range-path view.
        pit->second->second.with_kernels = with_kernels_;
      }
      key_of[i] = &pit->second->first;
      path_of[i] = &pit->second->second;
      ++path_of[i]->calls;
      path_of[i]->cpu_ns += r.end_ns - r.begin_ns;
    }
  }

  void Memory(const ProcessPass& pp, int inner, int64_t delta) override {
    if (inner >= 0) SatAdd(path_of_[pp.index][static_cast<size_t>(inner)]->mem_delta, delta);
  }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    if (a.graph != nullptr) {
      ShareGraphTime(*a.graph, a.r.DurationNs(), a.inner_range,
                     [&](int to, uint64_t ns) { At(pp.index, to)->AddGraphShare(ns); });
      return;
    }
    At(pp.index, a.inner_range)->AddActivity(a.r, a.kname);
  }

  void Busy(size_t process, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e) override {
    if (const GraphInfo* g = CapturedGraph(t, *t.acts[i])) {
      for (const auto& [range, n] : g->capture_ranges)
        At(process, range >= 0 ? range : t.act_range[i])->busy.Add(s, e);
    } else {
      At(process, t.act_range[i])->busy.Add(s, e);
    }
  }

  void Finish(Analysis&) override { std::vector<std::vector<GroupAcc*>>().swap(path_of_); }

  std::vector<GroupRow> Rows(const Analysis& an) override {
    std::vector<GroupRow> rows;
    for (auto& [key, acc] : paths_)
      if (acc.gpu_ns || acc.calls) rows.push_back(acc.Row(key, an.summary.gpu_busy_ns));
    ClassifyGroups(an.counters, rows);
    return rows;
  }

 private:
  // The path of range `range` of `process` ("(no range)" for -1).
  GroupAcc* At(size_t process, int range) {
    if (range >= 0) return path_of_[process][static_cast<size_t>(range)];
    if (no_path_[process] == nullptr) {
      no_path_[process] = &paths_[kNoRange];
      no_path_[process]->with_kernels = with_kernels_;
    }
    return no_path_[process];
  }

  bool with_kernels_;
  std::map<std::string, GroupAcc> paths_;
  std::vector<std::vector<GroupAcc*>> path_of_;  ///< per process, per range of its index
  std::vector<GroupAcc*> no_path_;               ///< per process
};

}  // namespace

std::unique_ptr<View> MakeRangePathView(const ViewContext& c) {
  return std::make_unique<RangePathView>(c.opts);
}

}  // namespace kprof::detail
