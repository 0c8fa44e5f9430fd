// kprof run's options: parsed and checked before the program starts (run_request.h), and what
// they ask of the agent.
#include "cli/run_request.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

#include "kprof/cli.h"
#include "kprof/output.h"
#include "kprof/trace.h"

namespace kprof::cli {
namespace {

/// What --metrics asks for: "sampled", "replay", "replay:top=N" (comma separated words parse,
/// so that asking for both can be answered with why not).
struct MetricsRequest {
  bool sampled = false, replay = false;
  int top = 10;
};
std::optional<MetricsRequest> ParseMetrics(const std::string& spec) {
  MetricsRequest m;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string word = spec.substr(at, comma - at);
    at = comma + 1;
    if (word == "sampled") {
      m.sampled = true;
    } else if (word == "replay") {
      m.replay = true;
    } else if (word.rfind("replay:top=", 0) == 0) {
      const std::string n = word.substr(11);
      if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      m.replay = true;
      m.top = std::stoi(n);
      if (m.top < 1) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return m;
}

/// The raw names of the `top` kernels with most GPU time in an earlier run, for the agent
/// (KPROF_METRICS_NAMES). Throws InputError for a run that cannot be read.
std::vector<std::string> TopKernelNames(const std::string& run_path, size_t top) {
  Run run = ReadInputs({run_path});
  std::map<std::string, uint64_t> by_name;
  for (const ProcessTrace& p : run.processes)
    for (const Record& r : p.records)
      if (r.Kind() == RecordKind::Kernel) by_name[p.Name(r)] += r.DurationNs();
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto& [name, ns] : by_name) order.emplace_back(ns, name);
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  std::vector<std::string> names;
  for (size_t i = 0; i < order.size() && i < top; ++i) names.push_back(order[i].second);
  if (names.empty()) throw InputError(run_path + ": no kernels recorded, nothing to measure");
  return names;
}

/// The capture windows' options together (--capture, --capture-count, --delay, --duration,
/// --on-demand) and with the counters: the exit status when they do not go together.
std::optional<int> CheckWindowOptions(const RunRequest& r, bool count_given, bool sampled,
                                      bool counters) {
  if (!r.capture.empty() && r.capture != "cuda-profiler-api" &&
      (r.capture.rfind("nvtx:", 0) != 0 || r.capture.size() == 5))
    return UsageError("run",
                      "--capture must be nvtx:NAME or cuda-profiler-api, not '" + r.capture + "'");
  if (count_given && r.capture.empty()) return UsageError("run", "--capture-count needs --capture");
  const bool windows = !r.capture.empty() || r.delay_s > 0 || r.duration_s > 0;
  if (r.on_demand && windows)
    return UsageError("run",
                      "--on-demand takes its windows from kprof capture: not with --capture, "
                      "--delay or --duration");
  // The counters need CUPTI from the program's start (a subscriber for replay, sampling from
  // the first context).
  if (r.on_demand && counters)
    return UsageError("run", "--on-demand records no hardware counters (--metrics)");
  // PM sampling runs GPU-wide from the first context to the exit: its samples would fall
  // outside the windows (replay only replays inside them).
  if (windows && sampled)
    return UsageError("run",
                      "--metrics sampled records the whole run; it cannot be limited by "
                      "--capture, --delay or --duration (use --metrics replay)");
  return std::nullopt;
}

}  // namespace

std::optional<int> ParseRunRequest(const std::vector<std::string>& args, RunRequest& r) {
  // Options end at "--" (or at the first word that is not an option).
  std::vector<std::string> opts;
  auto dd = std::find(args.begin(), args.end(), "--");
  if (dd != args.end()) {
    opts.assign(args.begin(), dd);
    r.program.assign(dd + 1, args.end());
  } else {
    opts = args;
  }
  CLI::App app{"Profile a CUDA program: kprof run [options] -- PROGRAM [ARGS...]", "kprof run"};
  std::string metrics, metrics_from;
  app.add_option("-o,--output", r.out_dir, "Run directory (default runs/<date-time>)");
  app.add_option("--kinds", r.kinds,
                 "What to record, comma separated: kernel,memcpy,memset,sync,runtime,driver,"
                 "nvtx,memory,overhead (default: all)");
  app.add_option(
         "--graph-trace", r.graph_trace,
         "CUDA graphs: graph = one record per graph launch (a 1000-node launch took "
         "0.1-0.2 ms of host time under kprof on an H100/H200, 2-7 us without); node = "
         "every kernel, copy and memset inside graphs, attributed to the op that "
         "captured it (0.94 ms of host time for such a launch on an H100; docs/benchmarks.md, "
         "\"CUDA graphs\"). Default: graph, or node in a process dormant until its window "
         "(--capture nvtx:NAME, --on-demand); graph given here keeps --capture nvtx:NAME "
         "attached from the start")
      ->check(CLI::IsMember({"graph", "node"}));
  app.add_option("--pytorch", r.pytorch,
                 "Python programs that import torch: auto = an NVTX range per aten op and per "
                 "nn.Module call; ops, modules = only those; stack = both and the program's "
                 "file:line of each torch call (slower); off = nothing added (docs/pytorch.md); "
                 "with --on-demand, auto adds nothing")
      ->check(CLI::IsMember({"auto", "ops", "modules", "stack", "off"}));
  app.add_option("--metrics", metrics,
                 "Hardware counters: sampled = GPU-wide throughputs sampled as the program runs "
                 "(no replay); replay[:top=N] = each of the N kernels with most GPU time so far "
                 "(default 10) replayed for its Speed Of Light counters; one of the two per run: "
                 "the GPU's counters serve one at a time (docs/counters.md)");
  app.add_option("--metrics-kernels", r.metrics_kernels,
                 "--metrics replay: replay the kernels whose names match this regular expression "
                 "instead of the top N");
  app.add_option("--metrics-from", metrics_from,
                 "--metrics replay: take the top N kernels from this earlier run");
  app.add_option("--metrics-interval", r.metrics_interval_us,
                 "--metrics sampled: microseconds between samples (default 100, the shortest an "
                 "H200 sustains; docs/counters.md)")
      ->check(CLI::Range(10, 1'000'000));
  app.add_option("--metrics-launches", r.metrics_launches,
                 "--metrics replay: launches replayed per kernel name (default 1)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--capture", r.capture,
                 "Record only inside windows: nvtx:NAME = from the push of the NVTX range NAME "
                 "to its pop (on the thread that pushed it); cuda-profiler-api = from "
                 "cudaProfilerStart to cudaProfilerStop; per process and rank (docs/capture.md)");
  auto* count_opt =
      app.add_option("--capture-count", r.capture_count,
                     "--capture: windows to record (default 1): the first N occurrences")
          ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
  app.add_option("--delay", r.delay_s,
                 "Seconds after each process's first CUDA context before recording (or, with "
                 "--capture, before a window may open)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--duration", r.duration_s,
                 "Seconds each window records at most, counted from its opening or the process's "
                 "first CUDA context, whichever is later (without --capture: one window, from the "
                 "start or the --delay)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--on-demand", r.on_demand,
               "Record nothing, CUPTI not even attached, until `kprof capture DIR` asks for a "
               "window (from another shell, while the job runs); every process of the job "
               "(docs/capture.md, \"On demand\")");
  app.add_option("--calibrate", r.calibrate,
                 "kprof's own cost per event on this machine, taken out of the priced idle time: "
                 "auto = measured once a day (about 5 s, then cached), fresh = measured now, off = "
                 "not taken out (docs/hints.md, \"kprof's own cost\")")
      ->check(CLI::IsMember({"auto", "fresh", "off"}));
  app.add_option("--repeat", r.repeat, "Run the program N times (DIR/rep1..repN), for kprof diff")
      ->check(CLI::Range(1, 1000));
  app.add_flag("-q,--quiet", r.quiet, "Print no report (the run is still saved)");
  app.add_flag("--force", r.force,
               "Reuse a run directory that already holds a run; overwrite the --trace and --html "
               "files and the per-rank traces in --trace-dir");
  AddViewOptions(app, r.view, false);
  if (dd == args.end()) app.prefix_command();
  if (auto rc = Parse(app, opts)) return *rc;
  if (dd == args.end()) r.program = app.remaining();
  if (r.program.empty()) {
    Error("run", "no program given (usage: kprof run [options] -- PROGRAM [ARGS...])");
    return kExitUsage;
  }
  // Options of the report are checked before the program runs, not after.
  if (!ParseFormat(r.view.format) || !ParseGroupBy(r.view.by) ||
      (r.view.sort != "gpu" && r.view.sort != "calls" && r.view.sort != "cpu" &&
       r.view.sort != "name")) {
    Error("run",
          "--format must be table|csv|json|md, --by "
          "kernel|op|range-path|stream|device|graph|module|source|compiled and "
          "--sort gpu|calls|cpu|name");
    return kExitUsage;
  }
  std::optional<MetricsRequest> counters;
  if (!metrics.empty()) {
    counters = ParseMetrics(metrics);
    if (!counters)
      return UsageError("run",
                        "--metrics must be sampled, replay or replay:top=N, not '" + metrics + "'");
    // The range profiler cannot start while PM sampling holds the counters (on the H100:
    // CUPTI_ERROR_HARDWARE_BUSY for every replay).
    if (counters->sampled && counters->replay)
      return UsageError("run",
                        "--metrics: sampled and replay cannot run together (the GPU's "
                        "counters serve one at a time); record twice");
  }
  if (auto rc = CheckWindowOptions(r, count_opt->count() > 0,
                                   counters.has_value() && counters->sampled, counters.has_value()))
    return *rc;
  if ((!r.metrics_kernels.empty() || !metrics_from.empty()) && !(counters && counters->replay))
    return UsageError("run", "--metrics-kernels and --metrics-from need --metrics replay");
  if (!r.metrics_kernels.empty()) {
    try {
      std::regex check(r.metrics_kernels);
    } catch (const std::regex_error&) {
      return UsageError("run", "--metrics-kernels: not a regular expression: " + r.metrics_kernels);
    }
  }
  if (!metrics_from.empty()) {
    try {
      r.metric_names = TopKernelNames(metrics_from, static_cast<size_t>(counters->top));
    } catch (const InputError& e) {
      return UsageError("run", std::string("--metrics-from: ") + e.what());
    }
  }
  r.view.force = r.force;
  try {
    // The places of --trace, --trace-dir and --html are checked before the program runs (and
    // again when they are written); the temporary files of this probe are removed at once.
    OpenOutputs(r.view);
  } catch (const InputError& e) {
    return UsageError("run", e.what());
  }
  if (counters) {
    r.replay = counters->replay;
    r.sampled = counters->sampled;
    r.metrics_top = counters->top;
  }
  return std::nullopt;
}

std::vector<std::string> AgentInjection(const std::string& agent, const AgentConfig& c) {
  std::vector<std::string> env = {"CUDA_INJECTION64_PATH=" + agent,
                                  "NVTX_INJECTION64_PATH=" + agent};
  for (std::string& kv : AgentEnvironment(c)) env.push_back(std::move(kv));
  return env;
}

AgentConfig AgentConfigFor(const RunRequest& r, const std::string& abs_dir,
                           const std::string& python_dir) {
  AgentConfig c;
  c.output_dir = abs_dir;
  c.kinds = r.kinds;
  c.graph_trace = r.graph_trace;
  // On demand, --pytorch auto adds nothing: op and module ranges cost the program all along,
  // windows or not (docs/capture.md "On demand"); --pytorch ops|modules|stack asks for them.
  if (!python_dir.empty()) c.pytorch = r.on_demand && r.pytorch == "auto" ? "off" : r.pytorch;
  c.replay = r.replay;
  c.sampled = r.sampled;
  c.metrics_top = static_cast<uint64_t>(r.metrics_top);
  c.metrics_launches = static_cast<uint64_t>(r.metrics_launches);
  c.metrics_interval_us = static_cast<uint64_t>(r.metrics_interval_us);
  c.metrics_kernels = r.metrics_kernels;
  if (!r.metric_names.empty()) {
    c.metrics_names = abs_dir + "/metrics-kernels.txt";
    std::ofstream f(c.metrics_names);
    for (const std::string& n : r.metric_names) f << n << '\n';
  }
  c.capture = r.on_demand ? "on-demand" : r.capture;
  c.capture_count = r.capture_count;
  const auto ms = [](double seconds) { return static_cast<uint64_t>(seconds * 1000.0 + 0.5); };
  if (r.delay_s > 0) c.delay_ms = ms(r.delay_s);
  if (r.duration_s > 0) c.duration_ms = ms(r.duration_s);
  return c;
}

}  // namespace kprof::cli
