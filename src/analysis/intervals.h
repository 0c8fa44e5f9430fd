// Internal to the analysis library: time intervals [start, end) in ns, their unions and
// intersections. Shared by the views (analysis.cpp) and the hints (hints.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

namespace kprof::detail {

using Interval = std::pair<uint64_t, uint64_t>;

/// Merged (sorted, disjoint, non-empty) form of a list of intervals.
inline std::vector<Interval> Merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

/// Total length of merged intervals.
inline uint64_t Length(const std::vector<Interval>& merged) {
  uint64_t n = 0;
  for (const auto& iv : merged) n += iv.second - iv.first;
  return n;
}

/// Length of [lo, hi) covered by the merged, sorted intervals `m`.
inline uint64_t Covered(const std::vector<Interval>& m, uint64_t lo, uint64_t hi) {
  if (hi <= lo) return 0;
  auto it = std::upper_bound(m.begin(), m.end(), Interval{lo, UINT64_MAX});
  if (it != m.begin()) --it;
  uint64_t n = 0;
  for (; it != m.end() && it->first < hi; ++it) {
    uint64_t a = std::max(lo, it->first), b = std::min(hi, it->second);
    if (b > a) n += b - a;
  }
  return n;
}

/// Calls fn(from, to) for each stretch of [lo, hi) that the merged, sorted intervals `m` do not
/// cover, in order, while fn returns true.
template <typename Fn>
void ForEachUncovered(const std::vector<Interval>& m, uint64_t lo, uint64_t hi, Fn fn) {
  auto it = std::upper_bound(m.begin(), m.end(), Interval{lo, UINT64_MAX});
  if (it != m.begin() && std::prev(it)->second > lo) --it;
  for (uint64_t at = lo; at < hi;) {
    const uint64_t stop = it != m.end() ? std::min(hi, std::max(at, it->first)) : hi;
    if (stop > at && !fn(at, stop)) return;
    if (it == m.end() || it->first >= hi) return;
    at = std::max(stop, it->second);
    ++it;
  }
}

/// Length of the union of intervals fed in order of their start: O(1) memory, one pass.
/// Intersections follow from unions: |A ∩ B| = |A| + |B| - |A ∪ B|.
struct UnionAcc {
  uint64_t begin = 0, end = 0, done = 0;
  bool any = false;
  void Add(uint64_t s, uint64_t e) {
    if (!any) {
      begin = s;
      end = e;
      any = true;
    } else if (s > end) {
      done += end - begin;
      begin = s;
      end = e;
    } else {
      end = std::max(end, e);
    }
  }
  uint64_t Total() const { return any ? done + (end - begin) : 0; }
};

}  // namespace kprof::detail
