// kprof run --repeat: how far each hint's estimate spreads over the repetitions (docs/hints.md,
// "Estimates that repeat").
#include "cli/run_spread.h"

#include <gtest/gtest.h>

namespace kprof {
namespace {

TEST(SelfCost, RepetitionsSpreadIsMaxLessMinOverTheMedian) {
  const auto hint = [](const char* id, uint64_t ns) {
    Hint h;
    h.id = id;
    h.est_saving_ns = ns;
    h.base_ns = 10'000'000;
    return h;
  };
  const std::vector<std::vector<Hint>> reps = {
      {hint("launch-bound", 400)},
      {hint("launch-bound", 500), hint("pageable-memcpy", 90)},
      {hint("launch-bound", 440)},
      {hint("launch-bound", 460)}};
  const std::vector<cli::EstimateSpread> rows = cli::SpreadOf(reps);
  ASSERT_EQ(rows.size(), 3u);  // launch-bound, joint, pageable-memcpy
  EXPECT_EQ(rows[0].id, "launch-bound");
  EXPECT_EQ(rows[0].median_ns, 450u);  // (440 + 460) / 2
  EXPECT_EQ(rows[0].min_ns, 400u);
  EXPECT_EQ(rows[0].max_ns, 500u);
  EXPECT_DOUBLE_EQ(rows[0].spread, 100.0 / 450.0);
  EXPECT_EQ(rows[0].runs, 4u);
  EXPECT_EQ(rows[2].id, "pageable-memcpy");
  EXPECT_EQ(rows[2].runs, 1u);
  EXPECT_EQ(rows[2].median_ns, 0u);  // three of four repetitions did not raise it
  const std::string table = cli::SpreadTable(rows, 4);
  EXPECT_NE(table.find("Estimates over 4 repetitions"), std::string::npos) << table;
  EXPECT_NE(table.find("(raised in 1 of 4)"), std::string::npos) << table;
  EXPECT_EQ(cli::SpreadTable(rows, 1), "");
}

}  // namespace
}  // namespace kprof
