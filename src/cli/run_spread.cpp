// See run_spread.h.
#include "cli/run_spread.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kprof/analysis.h"

namespace kprof::cli {

std::vector<EstimateSpread> SpreadOf(const std::vector<std::vector<Hint>>& reps) {
  std::map<std::string, std::vector<uint64_t>> by_id;
  for (size_t r = 0; r < reps.size(); ++r) {
    const auto put = [&](const std::string& id, uint64_t ns) {
      std::vector<uint64_t>& v = by_id[id];
      v.resize(reps.size(), 0);
      v[r] += ns;
    };
    for (const Hint& h : reps[r]) put(h.id, h.est_saving_ns);
    if (!reps[r].empty()) put("joint", EstimateJoint(reps[r]).est_saving_ns);
  }
  std::vector<EstimateSpread> rows;
  for (auto& [id, v] : by_id) {
    v.resize(reps.size(), 0);
    EstimateSpread s;
    s.id = id;
    s.runs = static_cast<uint64_t>(std::count_if(v.begin(), v.end(), [](uint64_t x) { return x; }));
    std::sort(v.begin(), v.end());
    s.min_ns = v.front();
    s.max_ns = v.back();
    // The median of an even count: the mean of the middle two.
    const size_t n = v.size();
    s.median_ns = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    s.spread = s.median_ns
                   ? static_cast<double>(s.max_ns - s.min_ns) / static_cast<double>(s.median_ns)
                   : 0.0;
    rows.push_back(std::move(s));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const EstimateSpread& a, const EstimateSpread& b) {
    return a.median_ns > b.median_ns;
  });
  return rows;
}

std::string SpreadTable(const std::vector<EstimateSpread>& rows, size_t reps) {
  if (reps < 2 || rows.empty()) return "";
  std::string out = fmt::format(
      "\nEstimates over {} repetitions (median, range; spread = (max - min) / median)\n", reps);
  for (const EstimateSpread& s : rows)
    out +=
        fmt::format("  {:<26} {:>10}   {} - {}   {:>4.0f}%{}\n", s.id, FormatDuration(s.median_ns),
                    FormatDuration(s.min_ns), FormatDuration(s.max_ns), 100 * s.spread,
                    s.runs < reps ? fmt::format("   (raised in {} of {})", s.runs, reps) : "");
  return out;
}

}  // namespace kprof::cli
