// The stream view: GPU work by (device, stream), when asked for (or for the HTML report).
#include <map>
#include <string>
#include <vector>

#include "analysis/accumulators.h"
#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

std::string StreamKey(uint16_t dev, uint32_t stream) {
  return "dev " + std::to_string(dev) + " stream " + std::to_string(stream);
}

class StreamView final : public View {
 public:
  explicit StreamView(const ViewOptions& o) : wanted_(o.Wants(GroupBy::Stream)) {}

  bool Serves(GroupBy by) const override { return by == GroupBy::Stream; }

  void Activity(const ProcessPass&, const ActivityEvent& a) override {
    if (wanted_) Row(a.r.device, a.r.tid).AddActivity(a.r, a.kname);
  }

  void Busy(size_t, const ProcessTimeline& t, size_t i, uint64_t s, uint64_t e) override {
    if (!wanted_) return;
    const Record& r = *t.acts[i];
    Row(r.device, r.tid).busy.Add(s, e);
  }

  std::vector<GroupRow> Rows(const Analysis& an) override {
    std::vector<GroupRow> rows;
    for (auto& [key, acc] : streams_) {
      acc.calls = acc.kernels + acc.memcpys + acc.memsets;
      rows.push_back(acc.Row(key, an.summary.gpu_busy_ns));
    }
    return rows;
  }

 private:
  GroupAcc& Row(uint16_t device, uint32_t stream) {
    GroupAcc*& row = by_id_[{device, stream}];
    if (row == nullptr) row = &streams_[StreamKey(device, stream)];
    return *row;
  }

  bool wanted_;
  std::map<std::string, GroupAcc> streams_;
  std::map<std::pair<uint16_t, uint32_t>, GroupAcc*> by_id_;
};

}  // namespace

std::unique_ptr<View> MakeStreamView(const ViewContext& c) {
  return std::make_unique<StreamView>(c.opts);
}

}  // namespace kprof::detail
