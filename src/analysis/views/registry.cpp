// The list of views (views.def).
#include "analysis/views/view.h"

namespace kprof::detail {

std::vector<std::unique_ptr<View>> MakeViews(const ViewContext& ctx) {
  std::vector<std::unique_ptr<View>> views;
#define KPROF_VIEW(make) views.push_back(make(ctx));
#include "analysis/views/views.def"
#undef KPROF_VIEW
  return views;
}

}  // namespace kprof::detail
