// The agent's configuration (kprof/agent_config.h): what kprof run writes into the program's
// environment is what the agent reads back, value for value; and each value the agent cannot
// read is named, with its area, and left at its default.
#include "kprof/agent_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kprof {
namespace {

// The environment as a map, and a getter over it.
struct Env {
  std::map<std::string, std::string> vars;
  explicit Env(const std::vector<std::string>& kvs) {
    for (const std::string& kv : kvs)
      vars[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  std::function<const char*(const char*)> Get() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

AgentConfig RoundTrip(const AgentConfig& c, std::vector<ConfigProblem>& problems) {
  const Env env(AgentEnvironment(c));
  return ReadAgentConfig(env.Get(), problems);
}

}  // namespace

TEST(AgentConfig, WhatTheLauncherWritesIsWhatTheAgentReads) {
  std::vector<AgentConfig> configs(5);
  configs[0].output_dir = "/runs/a";  // the defaults otherwise
  configs[1].output_dir = "/runs/b";
  configs[1].kinds = "kernel,memcpy";
  configs[1].graph_trace = "node";
  configs[1].pytorch = "stack";
  configs[1].capture = "nvtx:train step";
  configs[1].capture_count = 3;
  configs[1].duration_ms = 250;
  configs[1].self_cost = "launch_ns=2350.0;api_ns=620.5;range_ns=240.0;source=calibrated x";
  configs[2].output_dir = "/runs/c";
  configs[2].replay = true;
  configs[2].metrics_top = 4;
  configs[2].metrics_launches = 2;
  configs[2].metrics_kernels = "gemm|attention.*";
  configs[2].metrics_names = "/runs/c/metrics-kernels.txt";
  configs[2].capture = "cuda-profiler-api";
  configs[3].output_dir = "/runs/d";
  configs[3].sampled = true;
  configs[3].metrics_interval_us = 50;
  configs[3].delay_ms = 12000;
  configs[4].output_dir = "/runs/e";
  configs[4].replay = configs[4].sampled = true;
  configs[4].capture = "on-demand";
  for (const AgentConfig& c : configs) {
    std::vector<ConfigProblem> problems;
    EXPECT_EQ(RoundTrip(c, problems), c) << c.output_dir;
    EXPECT_TRUE(problems.empty()) << c.output_dir;
  }
  // Only what differs from the defaults travels, and the directory and graph mode always.
  const std::vector<std::string> plain = AgentEnvironment(configs[0]);
  EXPECT_EQ(plain,
            (std::vector<std::string>{"KPROF_OUTPUT_DIR=/runs/a", "KPROF_GRAPH_TRACE=graph"}));
  for (const std::string& kv : AgentEnvironment(configs[1])) {
    const std::string name = kv.substr(0, kv.find('='));
    EXPECT_NE(std::find(AgentConfigNames().begin(), AgentConfigNames().end(), name),
              AgentConfigNames().end())
        << name;
  }
}

TEST(AgentConfig, WhatCannotBeReadIsNamedAndLeftAtItsDefault) {
  const Env env({"KPROF_CAPTURE=nvtx:", "KPROF_CAPTURE_COUNT=0", "KPROF_DELAY_MS=1s",
                 "KPROF_DURATION_MS=20", "KPROF_METRICS=replay,flops", "KPROF_GRAPH_TRACE=nodes",
                 "KPROF_METRICS_TOP=5000",
                 "KPROF_SELF_COST=launch_ns=-1;api_ns=1;range_ns=1;source="});
  std::vector<ConfigProblem> problems;
  const AgentConfig c = ReadAgentConfig(env.Get(), problems);
  EXPECT_EQ(c.capture, "");
  EXPECT_EQ(c.capture_count, 1u);
  EXPECT_EQ(c.delay_ms, 0u);
  EXPECT_EQ(c.duration_ms, 20u);
  EXPECT_TRUE(c.replay);
  EXPECT_FALSE(c.sampled);
  EXPECT_EQ(c.graph_trace, "graph");
  EXPECT_EQ(c.metrics_top, 10u);  // out of its range: the default, as the counters read it
  EXPECT_EQ(c.self_cost, "");
  std::vector<std::string> said;
  for (const ConfigProblem& p : problems) said.push_back(p.area + ": " + p.message);
  EXPECT_EQ(said,
            (std::vector<std::string>{
                "agent: ignoring KPROF_GRAPH_TRACE=nodes (graph|node|auto)",
                "capture: KPROF_DELAY_MS=1s is not milliseconds",
                "capture: KPROF_CAPTURE_COUNT=0 is not a positive count",
                "capture: KPROF_CAPTURE=nvtx: is not nvtx:NAME, cuda-profiler-api or on-demand",
                "metrics: unknown KPROF_METRICS entry 'flops' (sampled, replay)",
                "agent: ignoring KPROF_SELF_COST=launch_ns=-1;api_ns=1;range_ns=1;source= "
                "(launch_ns=N;api_ns=N;range_ns=N;source=TEXT)"}));
}

TEST(AgentConfig, DiagnosticKnobsAreApartFromTheSettings) {
  const Env env({"KPROF_CAPTURE_DEBUG=", "KPROF_PM_PREPARE=0", "KPROF_PM_AVAILABILITY=1",
                 "KPROF_FLUSH_MS=abc", "KPROF_BUFFER_MB=300", "KPROF_DEVICE_BUFFER_MB=64",
                 "KPROF_GRAPH_NAMES=0", "KPROF_CAPTURE_API=id", "KPROF_ON_DEMAND_DETACH=0"});
  const DiagnosticKnobs k = ReadDiagnosticKnobs(env.Get());
  EXPECT_TRUE(k.capture_debug);  // set, whatever its value
  EXPECT_FALSE(k.pm_prepare);
  EXPECT_TRUE(k.pm_availability);
  EXPECT_EQ(k.flush_ms, 10u);  // atoi, raised to 10 (docs/cli.md)
  EXPECT_EQ(k.buffer_mb, 0u);  // outside 1..256: the default
  EXPECT_EQ(k.device_buffer_mb, 64u);
  EXPECT_FALSE(k.graph_names);
  EXPECT_TRUE(k.capture_api_ids);
  EXPECT_FALSE(k.on_demand_detach);
  EXPECT_TRUE(k.on_demand_hold);
  EXPECT_TRUE(ReadDiagnosticKnobs(Env({}).Get()).on_demand_detach);  // by default
  const DiagnosticKnobs nohold = ReadDiagnosticKnobs(Env({"KPROF_ON_DEMAND_DETACH=nohold"}).Get());
  EXPECT_FALSE(nohold.on_demand_hold);
  EXPECT_TRUE(nohold.on_demand_detach);
  EXPECT_TRUE(k.counters_evaluate);
  EXPECT_FALSE(k.backtrace);
  // None of them is a setting kprof run writes.
  for (const auto& [name, value] : env.vars)
    EXPECT_EQ(std::find(AgentConfigNames().begin(), AgentConfigNames().end(), name),
              AgentConfigNames().end())
        << name;
}

TEST(AgentConfig, DormantUntilAWindowForOnDemandNvtxAndDelayTriggersOnly) {
  const DiagnosticKnobs knobs = ReadDiagnosticKnobs(Env({}).Get());
  AgentConfig c;
  c.graph_trace = "auto";                  // as kprof run passes it unless --graph-trace is given
  EXPECT_FALSE(DormantCapture(c, knobs));  // the whole process: attached from the start
  c.capture = "on-demand";
  EXPECT_TRUE(DormantCapture(c, knobs));
  c.capture = "cuda-profiler-api";  // its trigger is a CUPTI callback
  EXPECT_FALSE(DormantCapture(c, knobs));
  c.capture = "nvtx:step";
  EXPECT_TRUE(DormantCapture(c, knobs));
  c.duration_ms = 50;  // a duration counts from the window's opening
  EXPECT_TRUE(DormantCapture(c, knobs));
  AgentConfig delayed = c;
  delayed.delay_ms = 1000;  // nvtx:NAME armed after a delay: attached from the start
  EXPECT_FALSE(DormantCapture(delayed, knobs));
  AgentConfig timed;
  timed.graph_trace = "auto";
  timed.duration_ms = 300;  // --duration alone: its window opens at the start
  EXPECT_FALSE(DormantCapture(timed, knobs));
  timed.delay_ms = 1000;  // --delay: dormant until it has passed
  EXPECT_TRUE(DormantCapture(timed, knobs));
  EXPECT_FALSE(DormantCapture(timed, ReadDiagnosticKnobs(Env({"KPROF_DORMANT=0"}).Get())));
  timed.sampled = true;
  EXPECT_FALSE(DormantCapture(timed, knobs));
  AgentConfig counted = c;
  counted.replay = true;  // the counters are set up at the start
  EXPECT_FALSE(DormantCapture(counted, knobs));
  counted = c;
  counted.sampled = true;
  EXPECT_FALSE(DormantCapture(counted, knobs));
  EXPECT_FALSE(DormantCapture(c, ReadDiagnosticKnobs(Env({"KPROF_DORMANT=0"}).Get())));
  AgentConfig graph_level = c;
  graph_level.graph_trace = "graph";  // --graph-trace graph given: CUPTI from the start
  EXPECT_FALSE(DormantCapture(graph_level, knobs));
  graph_level.graph_trace = "node";
  EXPECT_TRUE(DormantCapture(graph_level, knobs));
  AgentConfig on_demand;
  on_demand.capture = "on-demand";  // the knob is --capture nvtx:'s only
  EXPECT_TRUE(DormantCapture(on_demand, ReadDiagnosticKnobs(Env({"KPROF_DORMANT=0"}).Get())));
}

}  // namespace kprof
