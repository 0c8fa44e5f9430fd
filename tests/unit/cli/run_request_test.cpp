// What kprof run hands the agent (src/cli/run_request.h, AgentConfigFor), from its options.
#include "cli/run_request.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace kprof::cli {
namespace {

AgentConfig For(const std::vector<std::string>& args) {
  RunRequest r;
  const std::optional<int> status = ParseRunRequest(args, r);
  EXPECT_FALSE(status.has_value()) << "exit " << status.value_or(0);
  return AgentConfigFor(r, "/tmp/run", "/opt/kprof/python");
}

// On demand, --pytorch auto adds nothing (its ranges would cost the program while it waits for a
// window); an explicit mode is kept; without --on-demand auto stays auto.
TEST(RunRequest, OnDemandLeavesThePytorchLayerOffUnlessAsked) {
  const AgentConfig dormant = For({"--on-demand", "--", "python3", "train.py"});
  EXPECT_EQ(dormant.capture, "on-demand");
  EXPECT_EQ(dormant.pytorch, "off");
  EXPECT_EQ(For({"--on-demand", "--pytorch", "ops", "--", "python3", "t.py"}).pytorch, "ops");
  EXPECT_EQ(For({"--", "python3", "t.py"}).pytorch, "auto");
  EXPECT_EQ(For({"--pytorch", "off", "--", "python3", "t.py"}).pytorch, "off");
}

}  // namespace
}  // namespace kprof::cli
