// kprof's own cost per event (kprof/self_cost.h): the text kprof run passes to the agent and the
// agent writes into the meta reads back figure for figure; anything else reads as nothing.
#include "kprof/self_cost.h"

#include <gtest/gtest.h>

namespace kprof {

TEST(SelfCost, TheTextReadsBackFigureForFigure) {
  SelfCost c;
  c.launch_ns = 2351.4;
  c.api_ns = 620.0;
  c.range_ns = 0.5;
  c.source = "calibrated 2026-11-27T07:32:59Z (cached); a source may hold ';' and '='";
  const std::string text = FormatSelfCost(c);
  EXPECT_EQ(text.rfind("launch_ns=2351.4;api_ns=620.0;range_ns=0.5;source=calibrated", 0), 0u);
  EXPECT_EQ(ParseSelfCost(text), c);
  SelfCost zero;
  EXPECT_EQ(ParseSelfCost(FormatSelfCost(zero)), zero);
}

TEST(SelfCost, AnythingElseIsNothing) {
  for (const char* bad :
       {"", "launch_ns=1;api_ns=1;range_ns=1",  // no source
        "launch_ns=1;api_ns=1;range_ns=1;source=a\nb",
        "api_ns=1;launch_ns=1;range_ns=1;source=",  // out of order
        "launch_ns=-1;api_ns=1;range_ns=1;source=", "launch_ns=nan;api_ns=1;range_ns=1;source=",
        "launch_ns=inf;api_ns=1;range_ns=1;source=",
        "launch_ns=2000000;api_ns=1;range_ns=1;source=",  // above 1 ms
        "launch_ns=1x;api_ns=1;range_ns=1;source=", "launch_ns=;api_ns=1;range_ns=1;source=",
        "launch_ns=1;api_ns=1;range_ns=1;"})
    EXPECT_FALSE(ParseSelfCost(bad).has_value()) << bad;
}

}  // namespace kprof
