// The kernel view: every kernel name with its executions' statistics, launch configuration and
// projected time (the union of its executions); Analysis::kernels.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/accumulators.h"
#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

class KernelView final : public View {
 public:
  bool Serves(GroupBy by) const override { return by == GroupBy::Kernel; }

  void BeginProcess(const ProcessPass&) override { kernel_of_.emplace_back(); }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    if (a.r.Kind() != RecordKind::Kernel) return;
    KernelAcc*& ka = kernel_of_[pp.index][a.r.name];
    if (ka == nullptr) ka = &kernels_[a.kname];
    ka->Add(a.r);
  }

  void Busy(size_t process, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e) override {
    const Record& r = *t.acts[i];
    if (r.Kind() == RecordKind::Kernel) kernel_of_[process].find(r.name)->second->busy.Add(s, e);
  }

  void Finish(Analysis& an) override {
    std::vector<std::unordered_map<uint32_t, KernelAcc*>>().swap(kernel_of_);
    for (auto& [name, acc] : kernels_) an.kernels.push_back(acc.Row(name, an.summary.gpu_busy_ns));
    std::sort(an.kernels.begin(), an.kernels.end(), [](const KernelRow& x, const KernelRow& y) {
      return x.stat.total_ns != y.stat.total_ns ? x.stat.total_ns > y.stat.total_ns
                                                : x.name < y.name;
    });
    if (an.counters.kernels.empty()) return;
    for (KernelRow& k : an.kernels) {
      const KernelCounters* c = an.counters.Find(k.name);
      k.bound = c != nullptr ? c->bound : Bound::Unknown;
    }
  }

  std::vector<GroupRow> Rows(const Analysis& an) override {
    std::vector<GroupRow> rows;
    for (const auto& k : an.kernels) {
      GroupRow g;
      g.key = k.name;
      g.calls = k.stat.count;
      g.kernels = k.stat.count;
      g.gpu_ns = k.stat.total_ns;
      g.share = k.share;
      g.bound = k.bound;
      auto it = kernels_.find(g.key);
      if (it != kernels_.end()) g.gpu_projected_ns = it->second.busy.Total();
      rows.push_back(g);
    }
    return rows;
  }

 private:
  std::map<std::string, KernelAcc> kernels_;
  /// Per process, by the timeline's kernel name id.
  std::vector<std::unordered_map<uint32_t, KernelAcc*>> kernel_of_;
};

}  // namespace

std::unique_ptr<View> MakeKernelView(const ViewContext&) { return std::make_unique<KernelView>(); }

}  // namespace kprof::detail
