// The NVTX ranges: every (name, domain) with its calls, duration statistics and deepest nesting;
// Analysis::ranges and the run's count of ranges. Not a GroupBy view: the report's range table.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

class RangesView final : public View {
 public:
  bool Serves(GroupBy) const override { return false; }

  void BeginProcess(const ProcessPass& pp) override {
    const ProcessIndex& ix = pp.ix;
    // Looked up once per distinct (name, domain).
    std::unordered_map<uint64_t, Acc*> by_id;
    for (size_t i = 0; i < ix.ranges.size(); ++i) {
      const auto& r = ix.ranges[i];
      Acc*& acc = by_id[(uint64_t{r.start->name} << 32) | r.start->b];
      if (acc == nullptr) acc = &ranges_[{std::string(ix.Name(i)), pp.p.strings.Get(r.start->b)}];
      acc->durations.push_back(r.end_ns - r.begin_ns);
      acc->max_depth = std::max(acc->max_depth, r.depth);
      ++count_;
    }
  }

  void Finish(Analysis& an) override {
    an.summary.nvtx_ranges = count_;
    for (auto& [key, v] : ranges_) {
      RangeRow rr;
      rr.name = key.first;
      rr.domain = key.second;
      rr.stat = MakeStat(v.durations);
      rr.calls = rr.stat.count;
      rr.max_depth = v.max_depth;
      an.ranges.push_back(std::move(rr));
    }
    std::sort(an.ranges.begin(), an.ranges.end(), [](const RangeRow& x, const RangeRow& y) {
      return x.stat.total_ns != y.stat.total_ns ? x.stat.total_ns > y.stat.total_ns
                                                : x.name < y.name;
    });
  }

 private:
  struct Acc {
    std::vector<uint64_t> durations;
    uint32_t max_depth = 0;
  };
  std::map<std::pair<std::string, std::string>, Acc> ranges_;
  uint64_t count_ = 0;
};

}  // namespace

std::unique_ptr<View> MakeRangesView(const ViewContext&) { return std::make_unique<RangesView>(); }

}  // namespace kprof::detail
