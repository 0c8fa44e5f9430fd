// The agent's configuration in the environment: see kprof/agent_config.h.
#include "kprof/agent_config.h"

#include <cstdlib>
#include <cstring>

#include "kprof/self_cost.h"

namespace kprof {
namespace {

using Get = std::function<const char*(const char*)>;

// The variable's value, "" when unset.
std::string Value(const Get& get, const char* name) {
  const char* v = get(name);
  return v != nullptr ? v : "";
}

// A whole decimal number; false for anything else.
bool Number(const std::string& text, uint64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') return false;
  out = n;
  return true;
}

// A number within [lo, hi] as the counters read it: anything else keeps the default.
uint64_t Bounded(const Get& get, const char* name, uint64_t lo, uint64_t hi, uint64_t fallback) {
  const std::string v = Value(get, name);
  if (v.empty()) return fallback;
  const unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
  return n >= lo && n <= hi ? static_cast<uint64_t>(n) : fallback;
}

}  // namespace

const std::vector<std::string_view>& AgentConfigNames() {
  static const std::vector<std::string_view> names = {
      "KPROF_OUTPUT_DIR",       "KPROF_KINDS",
      "KPROF_GRAPH_TRACE",      "KPROF_PYTORCH",
      "KPROF_CAPTURE",          "KPROF_CAPTURE_COUNT",
      "KPROF_DELAY_MS",         "KPROF_DURATION_MS",
      "KPROF_METRICS",          "KPROF_METRICS_TOP",
      "KPROF_METRICS_LAUNCHES", "KPROF_METRICS_INTERVAL_US",
      "KPROF_METRICS_KERNELS",  "KPROF_METRICS_NAMES",
      "KPROF_SELF_COST"};
  return names;
}

std::vector<std::string> AgentEnvironment(const AgentConfig& c) {
  std::vector<std::string> env = {"KPROF_OUTPUT_DIR=" + c.output_dir};
  if (!c.kinds.empty()) env.push_back("KPROF_KINDS=" + c.kinds);
  if (c.replay || c.sampled) {
    std::string what = c.replay ? "replay" : "";
    if (c.sampled) what += what.empty() ? "sampled" : ",sampled";
    env.push_back("KPROF_METRICS=" + what);
    env.push_back("KPROF_METRICS_TOP=" + std::to_string(c.metrics_top));
    env.push_back("KPROF_METRICS_LAUNCHES=" + std::to_string(c.metrics_launches));
    env.push_back("KPROF_METRICS_INTERVAL_US=" + std::to_string(c.metrics_interval_us));
    if (!c.metrics_kernels.empty()) env.push_back("KPROF_METRICS_KERNELS=" + c.metrics_kernels);
    if (!c.metrics_names.empty()) env.push_back("KPROF_METRICS_NAMES=" + c.metrics_names);
  }
  if (!c.capture.empty()) {
    env.push_back("KPROF_CAPTURE=" + c.capture);
    env.push_back("KPROF_CAPTURE_COUNT=" + std::to_string(c.capture_count));
  }
  if (c.delay_ms > 0) env.push_back("KPROF_DELAY_MS=" + std::to_string(c.delay_ms));
  if (c.duration_ms > 0) env.push_back("KPROF_DURATION_MS=" + std::to_string(c.duration_ms));
  env.push_back("KPROF_GRAPH_TRACE=" + c.graph_trace);
  if (!c.pytorch.empty()) env.push_back("KPROF_PYTORCH=" + c.pytorch);
  if (!c.self_cost.empty()) env.push_back("KPROF_SELF_COST=" + c.self_cost);
  return env;
}

AgentConfig ReadAgentConfig(const Get& get, std::vector<ConfigProblem>& problems) {
  AgentConfig c;
  c.output_dir = Value(get, "KPROF_OUTPUT_DIR");
  c.kinds = Value(get, "KPROF_KINDS");
  c.pytorch = Value(get, "KPROF_PYTORCH");
  if (const std::string g = Value(get, "KPROF_GRAPH_TRACE");
      g == "graph" || g == "node" || g == "auto")
    c.graph_trace = g;
  else if (!g.empty())
    problems.push_back({"agent", "ignoring KPROF_GRAPH_TRACE=" + g + " (graph|node|auto)"});
  // Capture windows: a bad value disables them (the whole process is recorded).
  for (auto [name, field] :
       {std::pair{"KPROF_DELAY_MS", &c.delay_ms}, std::pair{"KPROF_DURATION_MS", &c.duration_ms}}) {
    const std::string v = Value(get, name);
    if (!v.empty() && !Number(v, *field))
      problems.push_back({"capture", std::string(name) + "=" + v + " is not milliseconds"});
  }
  if (const std::string n = Value(get, "KPROF_CAPTURE_COUNT"); !n.empty()) {
    uint64_t count = 0;
    if (Number(n, count) && count > 0)
      c.capture_count = count;
    else
      problems.push_back({"capture", "KPROF_CAPTURE_COUNT=" + n + " is not a positive count"});
  }
  if (const std::string cap = Value(get, "KPROF_CAPTURE");
      (cap.rfind("nvtx:", 0) == 0 && cap.size() > 5) || cap == "cuda-profiler-api" ||
      cap == "on-demand")
    c.capture = cap;
  else if (!cap.empty())
    problems.push_back(
        {"capture", "KPROF_CAPTURE=" + cap + " is not nvtx:NAME, cuda-profiler-api or on-demand"});
  // Hardware counters.
  const std::string list = Value(get, "KPROF_METRICS");
  for (size_t at = 0; !list.empty() && at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string word = list.substr(at, comma - at);
    if (word == "sampled")
      c.sampled = true;
    else if (word == "replay")
      c.replay = true;
    else if (!word.empty())
      problems.push_back(
          {"metrics", "unknown KPROF_METRICS entry '" + word + "' (sampled, replay)"});
    at = comma + 1;
  }
  c.metrics_interval_us = Bounded(get, "KPROF_METRICS_INTERVAL_US", 10, 1'000'000, 100);
  c.metrics_top = Bounded(get, "KPROF_METRICS_TOP", 1, 1000, 10);
  c.metrics_launches = Bounded(get, "KPROF_METRICS_LAUNCHES", 1, 1000, 1);
  c.metrics_kernels = Value(get, "KPROF_METRICS_KERNELS");
  c.metrics_names = Value(get, "KPROF_METRICS_NAMES");
  if (const std::string cost = Value(get, "KPROF_SELF_COST"); ParseSelfCost(cost))
    c.self_cost = cost;
  else if (!cost.empty())
    problems.push_back({"agent", "ignoring KPROF_SELF_COST=" + cost +
                                     " (launch_ns=N;api_ns=N;range_ns=N;source=TEXT)"});
  return c;
}

DiagnosticKnobs ReadDiagnosticKnobs(const Get& get) {
  DiagnosticKnobs k;
  const auto set = [&](const char* name) { return get(name) != nullptr; };
  const auto is = [&](const char* name, const char* value) {
    const char* v = get(name);
    return v != nullptr && std::strcmp(v, value) == 0;
  };
  k.backtrace = set("KPROF_AGENT_BACKTRACE");
  k.capture_debug = set("KPROF_CAPTURE_DEBUG");
  k.capture_api_ids = is("KPROF_CAPTURE_API", "id");
  k.counters_debug = set("KPROF_COUNTERS_DEBUG");
  k.replay_keep_enabled = set("KPROF_REPLAY_KEEP_ENABLED");
  k.counters_evaluate = !is("KPROF_COUNTERS_EVALUATE", "0");
  k.pm_prepare = !is("KPROF_PM_PREPARE", "0");
  k.pm_availability = is("KPROF_PM_AVAILABILITY", "1");
  k.pm_refuse_chip_config = is("KPROF_PM_REFUSE_CHIP_CONFIG", "1");
  k.graph_names = !is("KPROF_GRAPH_NAMES", "0");
  k.device_graphs = !is("KPROF_DEVICE_GRAPHS", "0");
  k.on_demand_detach = !is("KPROF_ON_DEMAND_DETACH", "0");
  k.on_demand_hold = !is("KPROF_ON_DEMAND_DETACH", "nohold");
  k.alloc_source = !is("KPROF_ALLOC_SOURCE", "0");
  k.dormant_nvtx = !is("KPROF_DORMANT", "0");
  if (const char* v = get("KPROF_BUFFER_MB"); v != nullptr && *v != '\0') {
    const long mb = std::atol(v);
    if (mb >= 1 && mb <= 256) k.buffer_mb = static_cast<uint64_t>(mb);
  }
  if (const char* v = get("KPROF_DEVICE_BUFFER_MB"); v != nullptr && *v != '\0') {
    const long mb = std::strtol(v, nullptr, 10);
    if (mb >= 1 && mb <= 1024) k.device_buffer_mb = static_cast<uint64_t>(mb);
  }
  if (const char* v = get("KPROF_FLUSH_MS"); v != nullptr && *v != '\0')
    k.flush_ms = static_cast<uint64_t>(std::max(10, std::atoi(v)));
  return k;
}

bool DormantCapture(const AgentConfig& c, const DiagnosticKnobs& k) {
  if (c.capture == "on-demand") return true;
  if (!k.dormant_nvtx || c.replay || c.sampled || c.graph_trace == "graph") return false;
  // --capture nvtx:NAME (its --duration counts from each opening), or a --delay alone: counted by
  // the agent's control thread from the first context it sees (on_demand.cpp, StartDelayed).
  return c.capture.rfind("nvtx:", 0) == 0 ? c.delay_ms == 0 : c.capture.empty() && c.delay_ms > 0;
}

}  // namespace kprof
