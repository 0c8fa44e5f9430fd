// Structural checks of a Chrome trace (the acceptance of the trace writer): every event has ph,
// ts, pid and tid; X events have dur and cat; flow starts and finishes pair up; X events nest
// properly on each track (pid, tid). Shared by the writer's unit tests and the fixture tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kprof::testing {

struct ChromeCounts {
  size_t x_events = 0;
  size_t counters = 0;
  std::map<uint64_t, int> flow_starts, flow_finishes;  ///< flow id -> events
  std::map<std::string, size_t> by_cat;                ///< X events by category
};

inline ChromeCounts CheckChromeStructure(const nlohmann::json& doc) {
  ChromeCounts c;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  for (const auto& e : doc.at("traceEvents")) {
    EXPECT_TRUE(e.contains("ph") && e.contains("ts") && e.contains("pid") && e.contains("tid"))
        << e.dump();
    if (!e.contains("ph")) continue;
    std::string ph = e["ph"];
    if (ph == "X") {
      EXPECT_TRUE(e.contains("dur") && e.contains("cat")) << e.dump();
      ++c.x_events;
      ++c.by_cat[e.value("cat", "")];
      auto ns = [](double us) { return static_cast<int64_t>(us * 1000.0 + 0.5); };
      int64_t s = ns(e["ts"].get<double>());
      tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].emplace_back(
          s, s + ns(e.value("dur", 0.0)));
    } else if (ph == "s") {
      EXPECT_EQ(e.at("cat"), "ac2g");
      ++c.flow_starts[e.at("id").get<uint64_t>()];
    } else if (ph == "f") {
      EXPECT_EQ(e.at("bp"), "e");
      ++c.flow_finishes[e.at("id").get<uint64_t>()];
    } else if (ph == "C") {
      ++c.counters;
    }
  }
  EXPECT_EQ(c.flow_starts, c.flow_finishes);
  for (auto& [track, v] : tracks) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<int64_t> open;
    for (auto [s, e] : v) {
      while (!open.empty() && open.back() <= s) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e, open.back()) << "track " << track.first << "/" << track.second;
      }
      open.push_back(e);
    }
  }
  return c;
}

}  // namespace kprof::testing
