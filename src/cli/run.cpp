// kprof run [options] -- PROGRAM ARGS: starts the program with the agent injected, forwards
// signals, waits, then reads the run directory and prints the report. Exits with the
// program's own status (128+N when it was killed by signal N).
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string_view>
#include <utility>

#include "cli/common.h"
#include "cli/present.h"
#include "kprof/cli.h"
#include "kprof/output.h"

extern char** environ;

namespace kprof {
namespace {

namespace fs = std::filesystem;

std::atomic<pid_t> g_child{0};
/// A signal kprof received while the program ran: no further --repeat repetition starts.
volatile sig_atomic_t g_stop = 0;

// Signals sent to kprof itself (kill, a CI runner's timeout) go on to the program. Signals from
// the terminal (Ctrl-C) already reach the whole foreground process group: forwarding those too
// would deliver them twice.
void Forward(int sig, siginfo_t* info, void*) {
  g_stop = sig;
  pid_t child = g_child.load();
  if (child > 0 && info != nullptr && info->si_code <= 0) ::kill(child, sig);
}

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

std::string SelfDir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

/// The first readable of `beside` (paths relative to the kprof executable's folder), made
/// canonical; "" when none.
std::string FindInstalled(std::initializer_list<const char*> beside) {
  const std::string dir = SelfDir();
  for (const char* rel : beside)
    if (const std::string c = dir + "/" + rel; ::access(c.c_str(), R_OK) == 0)
      return fs::weakly_canonical(c).string();
  return "";
}

/// The PyTorch layer's folder (holding sitecustomize.py): $KPROF_PYTHON_DIR, else python/ next
/// to the kprof executable, else ../share/kprof/python; "" when none.
std::string FindPythonDir() {
  if (const char* env = std::getenv("KPROF_PYTHON_DIR"); env && *env) return env;
  const std::string file =
      FindInstalled({"python/sitecustomize.py", "../share/kprof/python/sitecustomize.py"});
  return file.empty() ? file : fs::path(file).parent_path().string();
}

/// The agent: $KPROF_AGENT, else next to the kprof executable, else ../lib/.
std::string FindAgent() {
  if (const char* env = std::getenv("KPROF_AGENT"); env && *env) return env;
  return FindInstalled({"libkprof_agent.so", "../lib/libkprof_agent.so"});
}

std::string DefaultOutputDir() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::vector<std::string> RunFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".kprof") files.push_back(e.path());
  return files;
}

/// Why `dir` cannot be a run directory ("" when it can: absent, or a directory). A symbolic
/// link is refused: kprof writes where it was told, not where a link planted there points.
std::string BadRunDir(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // "link/" would follow the link
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return "";
  if (S_ISLNK(st.st_mode)) return dir + ": is a symbolic link; give the directory itself";
  if (!S_ISDIR(st.st_mode)) return dir + ": exists and is not a directory";
  return "";
}

/// The identity of a directory (not followed through a link), to notice it replaced or removed.
std::optional<std::pair<dev_t, ino_t>> DirIdentity(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return std::make_pair(st.st_dev, st.st_ino);
}

struct Launch {
  int status = 0;        ///< exit code as kprof reports it
  bool started = false;  ///< exec succeeded
};

/// fork/exec with no shell. Returns the program's status, 127/126 if it could not be started.
Launch Start(const std::vector<std::string>& argv, const std::vector<std::string>& env_add) {
  Launch out;
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    cli::Error("run", std::string("pipe: ") + std::strerror(errno));
    out.status = kExitLaunchFailed;
    return out;
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  // Environment built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> env_store;
  // What the options set, when the options leave it unset, is not taken from kprof's own
  // environment either (a kprof run started from inside another would inherit its windows).
  static constexpr std::string_view kOwned[] = {
      "KPROF_CAPTURE=", "KPROF_CAPTURE_COUNT=",   "KPROF_DELAY_MS=",     "KPROF_DURATION_MS=",
      "KPROF_METRICS=", "KPROF_METRICS_KERNELS=", "KPROF_METRICS_NAMES="};
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (std::any_of(std::begin(kOwned), std::end(kOwned),
                    [&](std::string_view k) { return kv.rfind(k, 0) == 0; }))
      continue;
    bool replaced = false;
    for (const auto& add : env_add)
      if (kv.compare(0, add.find('=') + 1, add, 0, add.find('=') + 1) == 0) replaced = true;
    if (!replaced) env_store.push_back(kv);
  }
  for (const auto& add : env_add) env_store.push_back(add);
  std::vector<char*> cenv;
  for (auto& s : env_store) cenv.push_back(s.data());
  cenv.push_back(nullptr);

  struct sigaction sa {};
  sa.sa_sigaction = Forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction old[4];
  const int sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

  // Handlers go in before fork, so that a signal in between is not lost (g_child is 0 until the
  // program exists: the signal is remembered in g_stop). The child restores the old actions
  // before exec.
  for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &sa, &old[i]);
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &old[i], nullptr);
    cli::Error("run", std::string("fork: ") + std::strerror(errno));
    out.status = kExitLaunchFailed;
    return out;
  }
  if (pid == 0) {
    for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &old[i], nullptr);
    ::close(pipefd[0]);
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    int err = errno;
    ssize_t w = ::write(pipefd[1], &err, sizeof err);
    (void)w;
    ::_exit(err == ENOENT ? 127 : 126);
  }
  g_child = pid;
  if (g_stop != 0) ::kill(pid, g_stop);  // arrived before the program existed
  ::close(pipefd[1]);
  int err = 0;
  ssize_t n;
  do {
    n = ::read(pipefd[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(pipefd[0]);
  int st = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &st, 0);
  } while (w < 0 && errno == EINTR);
  for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &old[i], nullptr);
  g_child = 0;
  if (n == static_cast<ssize_t>(sizeof err)) {
    cli::Error("run", argv[0] + ": " +
                          (err == ENOENT ? std::string("command not found") : std::strerror(err)));
    out.status = err == ENOENT ? kExitLaunchFailed : 126;
    return out;
  }
  out.started = true;
  if (WIFEXITED(st))
    out.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st))
    out.status = 128 + WTERMSIG(st);
  return out;
}

/// One line on why a run directory holds nothing useful.
std::string WhyNothing(const std::string& agent, const std::string& dir) {
  if (!RunFiles(dir).empty()) return "";
  // The agent is loaded by the CUDA driver at cuInit: without a driver, no program can have
  // used the GPU; with one, either the agent fails to load (say why) or CUDA was never started.
  if (void* cuda = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    ::dlclose(cuda);
  } else if (void* c2 = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(c2);
  } else {
    return "there is no CUDA driver (libcuda.so.1) on this machine, so the program could not "
           "use a GPU";
  }
  void* h = ::dlopen(agent.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    return std::string("the agent did not load: ") + (e ? e : "unknown loader error");
  }
  ::dlclose(h);
  return "the program never initialised CUDA (no CUDA context was created), so the agent was "
         "never started";
}

}  // namespace

int CmdRun(const std::vector<std::string>& args) {
  // Options end at "--" (or at the first word that is not an option).
  std::vector<std::string> opts, prog;
  auto dd = std::find(args.begin(), args.end(), "--");
  if (dd != args.end()) {
    opts.assign(args.begin(), dd);
    prog.assign(dd + 1, args.end());
  } else {
    opts = args;
  }
  CLI::App app{"Profile a CUDA program: kprof run [options] -- PROGRAM [ARGS...]", "kprof run"};
  std::string out_dir, kinds, graph_trace = "graph", pytorch = "auto";
  int repeat = 1;
  bool quiet = false, force = false;
  std::string metrics, metrics_kernels, metrics_from;
  int metrics_interval_us = 200, metrics_launches = 1;
  std::string capture;
  uint64_t capture_count = 1;
  double delay_s = 0, duration_s = 0;
  cli::ViewOptions v;
  app.add_option("-o,--output", out_dir, "Run directory (default runs/<date-time>)");
  app.add_option("--kinds", kinds,
                 "What to record, comma separated: kernel,memcpy,memset,sync,runtime,driver,"
                 "nvtx,memory,overhead (default: all)");
  app.add_option("--graph-trace", graph_trace,
                 "CUDA graphs: graph = one record per graph launch (a 1000-node launch took "
                 "0.1-0.2 ms of host time under kprof on an H100/H200, 2-7 us without); node = "
                 "every kernel, copy and memset inside graphs, attributed to the op that "
                 "captured it (about 0.8 ms for such a launch; docs/benchmarks.md)")
      ->check(CLI::IsMember({"graph", "node"}));
  app.add_option("--pytorch", pytorch,
                 "Python programs that import torch: auto = an NVTX range per aten op and per "
                 "nn.Module call; ops, modules = only those; stack = both and the program's "
                 "file:line of each torch call (slower); off = nothing added (docs/pytorch.md)")
      ->check(CLI::IsMember({"auto", "ops", "modules", "stack", "off"}));
  app.add_option("--metrics", metrics,
                 "Hardware counters: sampled = GPU-wide throughputs sampled as the program runs "
                 "(no replay); replay[:top=N] = each of the N kernels with most GPU time so far "
                 "(default 10) replayed for its Speed Of Light counters; one of the two per run: "
                 "the GPU's counters serve one at a time (docs/counters.md)");
  app.add_option("--metrics-kernels", metrics_kernels,
                 "--metrics replay: replay the kernels whose names match this regular expression "
                 "instead of the top N");
  app.add_option("--metrics-from", metrics_from,
                 "--metrics replay: take the top N kernels from this earlier run");
  app.add_option("--metrics-interval", metrics_interval_us,
                 "--metrics sampled: microseconds between samples (default 200)")
      ->check(CLI::Range(10, 1'000'000));
  app.add_option("--metrics-launches", metrics_launches,
                 "--metrics replay: launches replayed per kernel name (default 1)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--capture", capture,
                 "Record only inside windows: nvtx:NAME = from the push of the NVTX range NAME "
                 "to its pop (on the thread that pushed it); cuda-profiler-api = from "
                 "cudaProfilerStart to cudaProfilerStop; per process and rank (docs/capture.md)");
  auto* count_opt =
      app.add_option("--capture-count", capture_count,
                     "--capture: windows to record (default 1): the first N occurrences")
          ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
  app.add_option("--delay", delay_s,
                 "Seconds after each process's first CUDA context before recording (or, with "
                 "--capture, before a window may open)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--duration", duration_s,
                 "Seconds each window records at most, counted from its opening or the process's "
                 "first CUDA context, whichever is later (without --capture: one window, from the "
                 "start or the --delay)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--repeat", repeat, "Run the program N times (DIR/rep1..repN), for kprof diff")
      ->check(CLI::Range(1, 1000));
  app.add_flag("-q,--quiet", quiet, "Print no report (the run is still saved)");
  app.add_flag("--force", force,
               "Reuse a run directory that already holds a run; overwrite the --trace and --html "
               "files and the per-rank traces in --trace-dir");
  cli::AddViewOptions(app, v, false);
  if (dd == args.end()) app.prefix_command();
  if (auto rc = cli::Parse(app, opts)) return *rc;
  if (dd == args.end()) prog = app.remaining();
  if (prog.empty()) {
    cli::Error("run", "no program given (usage: kprof run [options] -- PROGRAM [ARGS...])");
    return kExitUsage;
  }
  // Options of the report are checked before the program runs, not after.
  if (!ParseFormat(v.format) || !ParseGroupBy(v.by) ||
      (v.sort != "gpu" && v.sort != "calls" && v.sort != "cpu" && v.sort != "name")) {
    cli::Error("run",
               "--format must be table|csv|json|md, --by "
               "kernel|op|range-path|stream|device|graph|module|source|compiled and "
               "--sort gpu|calls|cpu|name");
    return kExitUsage;
  }
  std::optional<MetricsRequest> counters;
  if (!metrics.empty()) {
    counters = ParseMetrics(metrics);
    if (!counters)
      return cli::UsageError(
          "run", "--metrics must be sampled, replay or replay:top=N, not '" + metrics + "'");
    // The range profiler cannot start while PM sampling holds the counters (on the H100:
    // CUPTI_ERROR_HARDWARE_BUSY for every replay).
    if (counters->sampled && counters->replay)
      return cli::UsageError("run",
                             "--metrics: sampled and replay cannot run together (the GPU's "
                             "counters serve one at a time); record twice");
  }
  if (!capture.empty() && capture != "cuda-profiler-api" &&
      (capture.rfind("nvtx:", 0) != 0 || capture.size() == 5))
    return cli::UsageError(
        "run", "--capture must be nvtx:NAME or cuda-profiler-api, not '" + capture + "'");
  if (count_opt->count() > 0 && capture.empty())
    return cli::UsageError("run", "--capture-count needs --capture");
  const bool windows = !capture.empty() || delay_s > 0 || duration_s > 0;
  // PM sampling runs GPU-wide from the first context to the exit: its samples would fall
  // outside the windows (replay only replays inside them).
  if (windows && counters && counters->sampled)
    return cli::UsageError("run",
                           "--metrics sampled records the whole run; it cannot be limited by "
                           "--capture, --delay or --duration (use --metrics replay)");
  if ((!metrics_kernels.empty() || !metrics_from.empty()) && !(counters && counters->replay))
    return cli::UsageError("run", "--metrics-kernels and --metrics-from need --metrics replay");
  if (!metrics_kernels.empty()) {
    try {
      std::regex check(metrics_kernels);
    } catch (const std::regex_error&) {
      return cli::UsageError("run",
                             "--metrics-kernels: not a regular expression: " + metrics_kernels);
    }
  }
  std::vector<std::string> metric_names;
  if (!metrics_from.empty()) {
    try {
      metric_names = TopKernelNames(metrics_from, static_cast<size_t>(counters->top));
    } catch (const InputError& e) {
      return cli::UsageError("run", std::string("--metrics-from: ") + e.what());
    }
  }
  v.force = force;
  try {
    // The places of --trace, --trace-dir and --html are checked before the program runs (and
    // again when they are written); the temporary files of this probe are removed at once.
    cli::OpenOutputs(v);
  } catch (const InputError& e) {
    return cli::UsageError("run", e.what());
  }
  const std::string agent = FindAgent();
  if (agent.empty()) {
    cli::Error("run",
               "libkprof_agent.so not found next to the kprof executable (set "
               "KPROF_AGENT to its path); was kprof built with the CUDA toolkit?");
    return kExitUsage;
  }
  std::string python_dir;
  if (pytorch != "off") {
    python_dir = FindPythonDir();
    if (python_dir.empty())
      std::fprintf(stderr,
                   "kprof run: note: python/sitecustomize.py not found next to kprof (set "
                   "KPROF_PYTHON_DIR); --pytorch %s adds nothing\n",
                   pytorch.c_str());
  }
  if (out_dir.empty()) out_dir = DefaultOutputDir();
  for (int rep = 0; rep <= (repeat > 1 ? repeat : 0); ++rep) {
    const std::string why = BadRunDir(rep == 0 ? out_dir : out_dir + "/rep" + std::to_string(rep));
    if (!why.empty()) return cli::UsageError("run", why);
  }

  if (force) {
    // Repetitions of an earlier run in the same directory would be read as runs of this one.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out_dir, ec)) {
      if (e.is_directory() && RepNumber(e.path().filename().string()) > 0)
        fs::remove_all(e.path(), ec);
    }
  }
  int status = 0;
  for (int rep = 1; rep <= repeat; ++rep) {
    std::string dir = repeat == 1 ? out_dir : out_dir + "/rep" + std::to_string(rep);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      cli::Error("run", dir + ": cannot create: " + ec.message());
      return kExitUsage;
    }
    auto old = RunFiles(dir);
    if (!old.empty()) {
      if (!force) {
        cli::Error("run", dir + ": already holds a run (" + std::to_string(old.size()) +
                              " .kprof files); choose another -o or pass --force");
        return kExitUsage;
      }
      for (const auto& f : old) fs::remove(f, ec);
    }
    // The directory as the program starts: if it is removed or replaced while the program
    // runs, what the agent wrote went with it.
    const auto identity = DirIdentity(dir);
    if (!identity) {
      const std::string why = BadRunDir(dir);
      return cli::UsageError("run", why.empty() ? dir + ": cannot create" : why);
    }
    std::string abs_dir = fs::absolute(dir).string();
    std::vector<std::string> env = {"CUDA_INJECTION64_PATH=" + agent,
                                    "NVTX_INJECTION64_PATH=" + agent,
                                    "KPROF_OUTPUT_DIR=" + abs_dir};
    if (!kinds.empty()) env.push_back("KPROF_KINDS=" + kinds);
    if (counters) {
      std::string what = counters->replay ? "replay" : "";
      if (counters->sampled) what += what.empty() ? "sampled" : ",sampled";
      env.push_back("KPROF_METRICS=" + what);
      env.push_back("KPROF_METRICS_TOP=" + std::to_string(counters->top));
      env.push_back("KPROF_METRICS_LAUNCHES=" + std::to_string(metrics_launches));
      env.push_back("KPROF_METRICS_INTERVAL_US=" + std::to_string(metrics_interval_us));
      if (!metrics_kernels.empty()) env.push_back("KPROF_METRICS_KERNELS=" + metrics_kernels);
      if (!metric_names.empty()) {
        const std::string list = abs_dir + "/metrics-kernels.txt";
        std::ofstream f(list);
        for (const std::string& n : metric_names) f << n << '\n';
        env.push_back("KPROF_METRICS_NAMES=" + list);
      }
    }
    if (!capture.empty()) {
      env.push_back("KPROF_CAPTURE=" + capture);
      env.push_back("KPROF_CAPTURE_COUNT=" + std::to_string(capture_count));
    }
    const auto ms = [](double seconds) {
      return std::to_string(static_cast<uint64_t>(seconds * 1000.0 + 0.5));
    };
    if (delay_s > 0) env.push_back("KPROF_DELAY_MS=" + ms(delay_s));
    if (duration_s > 0) env.push_back("KPROF_DURATION_MS=" + ms(duration_s));
    env.push_back("KPROF_GRAPH_TRACE=" + graph_trace);
    if (!python_dir.empty()) {
      // First on the path: Python imports kprof's sitecustomize, which imports the one the
      // environment had after it (src/pytorch/sitecustomize.py).
      const char* old_path = std::getenv("PYTHONPATH");
      env.push_back("PYTHONPATH=" + python_dir +
                    (old_path && *old_path ? ":" + std::string(old_path) : std::string()));
      env.push_back("KPROF_PYTORCH=" + pytorch);
    }
    if (const char* prev = std::getenv("CUDA_INJECTION64_PATH"); prev && *prev)
      std::fprintf(stderr, "kprof run: note: replacing CUDA_INJECTION64_PATH=%s\n", prev);

    Launch l = Start(prog, env);
    if (!l.started) return l.status;
    // kprof exits with the program's status; with --repeat, with the first failing one.
    if (status == 0) status = l.status;
    if (repeat > 1 && l.status != 0)
      std::fprintf(stderr, "kprof run: repetition %d of %d exited with status %d\n", rep, repeat,
                   l.status);
    const bool stop = g_stop != 0 && rep < repeat;
    if (stop)
      std::fprintf(stderr, "kprof run: signal %d: no further repetitions (%d of %d ran)\n",
                   static_cast<int>(g_stop), rep, repeat);
    if (stop) repeat = rep;  // the report below (if any) is of this last repetition

    if (DirIdentity(dir) != identity) {
      cli::Error("run", dir + " was removed while the program ran: its recording is lost");
      continue;
    }
    auto files = RunFiles(dir);
    if (files.empty()) {
      std::fprintf(stderr, "kprof run: nothing recorded: %s\n", WhyNothing(agent, dir).c_str());
      continue;
    }
    if (quiet && rep < repeat) continue;  // only the last repetition is read back
    try {
      Run run = ReadInputs({dir});
      cli::WarnIncomplete("run", run);
      size_t records = 0;
      std::string displaced;
      for (const auto& p : run.processes) {
        records += p.records.size();
        auto it = p.meta.find("displaced");
        if (it != p.meta.end() && it->second == "1") {
          auto d = p.meta.find("displaced_detail");
          displaced = d != p.meta.end() ? d->second : "another CUPTI client took over";
        }
      }
      if (!displaced.empty())
        std::fprintf(stderr,
                     "kprof run: warning: another CUPTI client inside the program (such as "
                     "torch.profiler) displaced kprof's collection: %s\n",
                     displaced.c_str());
      size_t gpu = 0;
      bool windowed = false;
      for (const auto& p : run.processes) {
        windowed |= !p.Meta("capture").empty();
        for (const auto& r : p.records) gpu += IsGpuKind(r.Kind()) ? 1 : 0;
      }
      if (gpu == 0 && displaced.empty())
        std::fprintf(stderr, "kprof run: no GPU activity recorded%s (%zu records in %zu files)%s\n",
                     windowed ? " inside the capture windows" : "", records, run.processes.size(),
                     windowed ? "; the report's 'recorded' line says why" : "");
      // --quiet prints no report, but the --trace, --trace-dir and --html files asked for are
      // written.
      v.quiet = quiet;
      const bool outputs = !v.trace.empty() || !v.trace_dir.empty() || !v.html.empty();
      if ((!quiet || outputs) && rep == repeat) {
        cli::ViewOutputs out = cli::OpenOutputs(v);
        cli::Present(run, v, dir, out);
      }
    } catch (const InputError& e) {
      cli::Error("run", e.what());
    }
  }
  return status;
}

}  // namespace kprof
