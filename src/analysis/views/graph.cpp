// The graph view: each launched CUDA graph, its launches and their GPU time (the rows of
// GraphRows, analysis/graphs.cpp); Analysis::graphs.
#include <vector>

#include "analysis/graphs.h"
#include "analysis/views/view.h"

namespace kprof::detail {
namespace {

class GraphView final : public View {
 public:
  explicit GraphView(const Timeline* tl) : tl_(tl) {}

  bool Serves(GroupBy by) const override { return by == GroupBy::Graph; }

  void Finish(Analysis& an) override { an.graphs = GraphRows(*tl_); }

  std::vector<GroupRow> Rows(const Analysis& an) override {
    const uint64_t busy = an.summary.gpu_busy_ns;
    std::vector<GroupRow> rows;
    for (const GraphRow& gr : an.graphs) {
      GroupRow g;
      g.key = gr.Key();
      g.calls = gr.launches;
      g.gpu_ns = gr.per_launch.total_ns;
      // GPU time: the launches' spans (first node's start to last node's end); projected: the
      // union of the work, without the idle time inside launches (node-level).
      g.gpu_projected_ns = gr.busy_ns;
      g.kernels = gr.node_activities;
      g.share = busy ? static_cast<double>(gr.busy_ns) / static_cast<double>(busy) : 0;
      rows.push_back(std::move(g));
    }
    return rows;
  }

 private:
  const Timeline* tl_;
};

}  // namespace

std::unique_ptr<View> MakeGraphView(const ViewContext& c) {
  return std::make_unique<GraphView>(&c.tl);
}

}  // namespace kprof::detail
