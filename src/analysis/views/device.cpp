// The device view: GPU work by physical GPU (the same GPU seen by several processes is one row,
// docs/distributed.md), when asked for (or for the HTML report). A device's share is its busy
// time's, not its work's (which overlaps itself across streams): the shares add up to 100%.
#include <map>
#include <string>
#include <vector>

#include "analysis/accumulators.h"
#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

class DeviceView final : public View {
 public:
  DeviceView(const ViewOptions& o, const DeviceKeys& keys)
      : wanted_(o.Wants(GroupBy::Device)),
        keys_(keys),
        row_(keys.Devices().size()),
        busy_(keys.Devices().size()) {}

  bool Serves(GroupBy by) const override { return by == GroupBy::Device; }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    if (!wanted_) return;
    const size_t d = keys_.Index(pp.index, a.r.device);
    if (row_[d] == nullptr) row_[d] = &devices_[keys_.Devices()[d]];
    row_[d]->AddActivity(a.r, a.kname);
  }

  void Busy(size_t process, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e) override {
    if (wanted_) busy_[keys_.Index(process, t.acts[i]->device)].Add(s, e);
  }

  void Finish(Analysis&) override {
    for (size_t d = 0; d < row_.size(); ++d)
      if (row_[d] != nullptr) row_[d]->busy = busy_[d];
  }

  std::vector<GroupRow> Rows(const Analysis& an) override {
    const uint64_t busy = an.summary.gpu_busy_ns;
    std::vector<GroupRow> rows;
    for (auto& [key, acc] : devices_) {
      acc.calls = acc.kernels + acc.memcpys + acc.memsets;
      rows.push_back(acc.Row(key, busy));
      rows.back().share =
          busy ? static_cast<double>(rows.back().gpu_projected_ns) / static_cast<double>(busy) : 0;
    }
    return rows;
  }

 private:
  bool wanted_;
  const DeviceKeys& keys_;
  std::map<std::string, GroupAcc> devices_;
  std::vector<GroupAcc*> row_;  ///< per physical device (DeviceKeys' index)
  std::vector<UnionAcc> busy_;  ///< the same
};

}  // namespace

std::unique_ptr<View> MakeDeviceView(const ViewContext& c) {
  return std::make_unique<DeviceView>(c.opts, c.devices);
}

}  // namespace kprof::detail
