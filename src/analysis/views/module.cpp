// The module view (kprof run --pytorch): every nn.Module by qualified name, in tree order, with
// the work launched while it or a module inside it ran; backward work counts for the module whose
// forward made it (docs/pytorch.md).
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/views/view.h"
#include "analysis/views/view_acc.h"

namespace kprof::detail {
namespace {

/// Module rows in tree order: each module after its parent (the longest dotted prefix that is
/// a module too), siblings by GPU time; depth set.
std::vector<GroupRow> ModuleTree(std::vector<GroupRow> rows) {
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < rows.size(); ++i) at[rows[i].key] = i;
  std::vector<std::vector<size_t>> children(rows.size());
  std::vector<size_t> roots;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string_view k = rows[i].key;
    size_t parent = SIZE_MAX;
    for (size_t dot = k.rfind('.'); dot != std::string_view::npos && dot > 0;
         dot = k.rfind('.', dot - 1)) {
      auto it = at.find(std::string(k.substr(0, dot)));
      if (it != at.end()) {
        parent = it->second;
        break;
      }
    }
    (parent == SIZE_MAX ? roots : children[parent]).push_back(i);
  }
  const auto by_gpu = [&](size_t a, size_t b) {
    return rows[a].gpu_ns != rows[b].gpu_ns ? rows[a].gpu_ns > rows[b].gpu_ns
                                            : rows[a].key < rows[b].key;
  };
  std::vector<GroupRow> out;
  std::vector<std::pair<size_t, uint32_t>> stack;  // (row, depth), depth first
  std::sort(roots.begin(), roots.end(), by_gpu);
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.emplace_back(*it, 0);
  while (!stack.empty()) {
    auto [i, depth] = stack.back();
    stack.pop_back();
    rows[i].depth = depth;
    out.push_back(rows[i]);
    std::sort(children[i].begin(), children[i].end(), by_gpu);
    for (auto it = children[i].rbegin(); it != children[i].rend(); ++it)
      stack.emplace_back(*it, depth + 1);
  }
  return out;
}

class ModuleView final : public View {
 public:
  bool Serves(GroupBy by) const override { return by == GroupBy::Module; }

  void BeginProcess(const ProcessPass& pp) override {
    const ProcessIndex& ix = pp.ix;
    module_of_.assign(ix.modules.ranges.size(), nullptr);
    std::unordered_map<uint32_t, ViewAcc*> by_name;
    for (size_t i = 0; i < ix.modules.ranges.size(); ++i) {
      const RangeInterval& r = ix.modules.ranges[i];
      ViewAcc*& m = by_name[r.start->name];
      if (m == nullptr) {
        auto [name, kind] = SplitModuleName(pp.p.strings.Get(r.start->name));
        m = &modules_[std::string(name)];
        m->acc.with_kernels = false;
        if (m->kind.empty()) m->kind = kind;
      }
      module_of_[i] = m;
      ++m->acc.calls;
      m->acc.cpu_ns += r.end_ns - r.begin_ns;
    }
  }

  void Activity(const ProcessPass& pp, const ActivityEvent& a) override {
    // The module open at the launch and every module around it (each once).
    chain_.clear();
    for (int m = pp.t.ModuleOf(a.i); m >= 0;
         m = pp.ix.modules.ranges[static_cast<size_t>(m)].parent) {
      ViewAcc* acc = module_of_[static_cast<size_t>(m)];
      if (std::find(chain_.begin(), chain_.end(), acc) == chain_.end()) chain_.push_back(acc);
    }
    const bool backward = pp.ix.InBackward(a.inner_range);
    for (ViewAcc* acc : chain_) {
      acc->Add(a.r, a.kname);
      if (backward) acc->acc.bwd_gpu_ns += a.r.DurationNs();
    }
  }

  void Finish(Analysis& an) override {
    for (auto& [name, m] : modules_) an.modules.push_back(m.Row(name, an.summary.gpu_busy_ns));
    an.modules = ModuleTree(std::move(an.modules));
  }

  std::vector<GroupRow> Rows(const Analysis& an) override { return an.modules; }

 private:
  std::map<std::string, ViewAcc> modules_;
  std::vector<ViewAcc*> module_of_;  ///< the process being read's, per module range
  std::vector<ViewAcc*> chain_;
};

}  // namespace

std::unique_ptr<View> MakeModuleView(const ViewContext&) { return std::make_unique<ModuleView>(); }

}  // namespace kprof::detail
