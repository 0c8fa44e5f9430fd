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

#include "cli/calibrate.h"
#include "cli/common.h"
#include "cli/installed.h"
#include "cli/present.h"
#include "cli/run_request.h"
#include "cli/run_spread.h"
#include "kprof/agent_config.h"
#include "kprof/cli.h"
#include "kprof/on_demand.h"
#include "kprof/output.h"

extern char** environ;

namespace kprof {
namespace {

namespace fs = std::filesystem;
using cli::FindAgent;
using cli::FindPythonDir;

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

/// Makes the run directory `dir` ready: created, and without the files of an earlier run (with
/// --force; without it, an error). The exit status when it cannot be.
std::optional<int> PrepareRunDir(const std::string& dir, bool force) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    cli::Error("run", dir + ": cannot create: " + ec.message());
    return kExitUsage;
  }
  auto old = RunFiles(dir);
  if (old.empty()) return std::nullopt;
  if (!force) {
    cli::Error("run", dir + ": already holds a run (" + std::to_string(old.size()) +
                          " .kprof files); choose another -o or pass --force");
    return kExitUsage;
  }
  for (const auto& f : old) fs::remove(f, ec);
  return std::nullopt;
}

/// The environment the program starts with: the agent injected (for CUDA and NVTX), and what
/// it is asked (kprof/agent_config.h); with the PyTorch layer first on Python's path.
std::vector<std::string> ProgramEnvironment(const std::string& agent, const AgentConfig& cfg,
                                            const std::string& python_dir) {
  std::vector<std::string> env = cli::AgentInjection(agent, cfg);
  if (!python_dir.empty()) {
    // First on the path: Python imports kprof's sitecustomize, which imports the one the
    // environment had after it (src/pytorch/sitecustomize.py).
    const char* old_path = std::getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + python_dir +
                  (old_path && *old_path ? ":" + std::string(old_path) : std::string()));
  }
  if (const char* prev = std::getenv("CUDA_INJECTION64_PATH"); prev && *prev)
    std::fprintf(stderr, "kprof run: note: replacing CUDA_INJECTION64_PATH=%s\n", prev);
  return env;
}

/// Reads a repetition's run back: says what is wrong with it (another CUPTI client, nothing on
/// the GPU), and presents it when this is the report's repetition.
void ReadBack(const std::string& dir, bool present, cli::ViewOptions& v) {
  try {
    Run run = ReadInputs({dir});
    cli::WarnIncomplete("run", run);
    size_t records = 0, gpu = 0;
    bool windowed = false;
    std::string displaced;
    for (const auto& p : run.processes) {
      records += p.records.size();
      windowed |= !p.Meta("capture").empty();
      for (const auto& r : p.records) gpu += IsGpuKind(r.Kind()) ? 1 : 0;
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
    if (gpu == 0 && displaced.empty())
      std::fprintf(stderr, "kprof run: no GPU activity recorded%s (%zu records in %zu files)%s\n",
                   windowed ? " inside the capture windows" : "", records, run.processes.size(),
                   windowed ? "; the report's 'recorded' line says why" : "");
    if (!present) return;
    cli::ViewOutputs out = cli::OpenOutputs(v);
    cli::Present(run, v, dir, out);
  } catch (const InputError& e) {
    cli::Error("run", e.what());
  }
}

/// The estimates of every repetition that was recorded, and how far they spread.
std::string RepetitionSpread(const std::string& out_dir, int repeat) {
  std::vector<std::vector<Hint>> reps;
  for (int rep = 1; rep <= repeat; ++rep) {
    const std::string dir = out_dir + "/rep" + std::to_string(rep);
    if (RunFiles(dir).empty()) continue;
    try {
      const Run run = ReadInputs({dir});
      const Timeline tl = BuildTimeline(run);
      reps.push_back(ComputeHints(tl, Analyze(tl)));
    } catch (const std::exception&) {  // said when it was read back
    }
  }
  return cli::SpreadTable(cli::SpreadOf(reps), reps.size());
}

}  // namespace

int CmdRun(const std::vector<std::string>& args) {
  cli::RunRequest r;
  if (auto rc = cli::ParseRunRequest(args, r)) return *rc;
  const std::string agent = FindAgent();
  if (agent.empty()) {
    cli::Error("run",
               "libkprof_agent.so not found next to the kprof executable (set "
               "KPROF_AGENT to its path); was kprof built with the CUDA toolkit?");
    return kExitUsage;
  }
  std::string python_dir;
  if (r.pytorch != "off") {
    python_dir = FindPythonDir();
    if (python_dir.empty())
      std::fprintf(stderr,
                   "kprof run: note: python/sitecustomize.py not found next to kprof (set "
                   "KPROF_PYTHON_DIR); --pytorch %s adds nothing\n",
                   r.pytorch.c_str());
  }
  if (r.out_dir.empty()) r.out_dir = DefaultOutputDir();
  int repeat = r.repeat;
  for (int rep = 0; rep <= (repeat > 1 ? repeat : 0); ++rep) {
    const std::string why =
        BadRunDir(rep == 0 ? r.out_dir : r.out_dir + "/rep" + std::to_string(rep));
    if (!why.empty()) return cli::UsageError("run", why);
  }
  if (r.force) {
    // Repetitions of an earlier run in the same directory would be read as runs of this one.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(r.out_dir, ec)) {
      if (e.is_directory() && RepNumber(e.path().filename().string()) > 0)
        fs::remove_all(e.path(), ec);
    }
  }
  // kprof's own cost per event, measured once for all repetitions (with the agent as it is asked
  // to record, without windows or counters), for the analysis to take out of priced idle time.
  std::string self_cost;
  {
    std::string why;
    AgentConfig base;
    base.kinds = r.kinds;
    base.graph_trace = r.graph_trace;
    std::optional<SelfCost> c;
    try {  // (never a reason for the program not to run)
      c = cli::MeasureSelfCost(agent, base, r.calibrate, why);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (c)
      self_cost = FormatSelfCost(*c);
    else if (r.calibrate == "fresh")
      std::fprintf(stderr, "kprof run: note: kprof's own cost not measured: %s\n", why.c_str());
  }
  int status = 0;
  for (int rep = 1; rep <= repeat; ++rep) {
    const std::string dir = repeat == 1 ? r.out_dir : r.out_dir + "/rep" + std::to_string(rep);
    if (auto rc = PrepareRunDir(dir, r.force)) return *rc;
    // The directory as the program starts: if it is removed or replaced while the program
    // runs, what the agent wrote went with it.
    const auto identity = DirIdentity(dir);
    if (!identity) {
      const std::string why = BadRunDir(dir);
      return cli::UsageError("run", why.empty() ? dir + ": cannot create" : why);
    }
    AgentConfig cfg = cli::AgentConfigFor(r, fs::absolute(dir).string(), python_dir);
    cfg.self_cost = self_cost;
    if (r.on_demand) {
      // The folder kprof capture and the agents talk through (kprof/on_demand.h), empty.
      std::error_code ec;
      const std::string control = ondemand::ControlDir(dir);
      fs::remove_all(control, ec);
      fs::create_directories(control, ec);
      if (ec) return cli::UsageError("run", control + ": cannot create: " + ec.message());
      if (!r.quiet)
        std::fprintf(stderr,
                     "kprof run: on demand: nothing is recorded until, from another shell,\n"
                     "  kprof capture %s --step-range STEP_RANGE --steps N   (or --duration S)\n",
                     dir.c_str());
    }
    Launch l = Start(r.program, ProgramEnvironment(agent, cfg, python_dir));
    if (!l.started) return l.status;
    // kprof exits with the program's status; with --repeat, with the first failing one.
    if (status == 0) status = l.status;
    if (repeat > 1 && l.status != 0)
      std::fprintf(stderr, "kprof run: repetition %d of %d exited with status %d\n", rep, repeat,
                   l.status);
    if (g_stop != 0 && rep < repeat) {
      std::fprintf(stderr, "kprof run: signal %d: no further repetitions (%d of %d ran)\n",
                   static_cast<int>(g_stop), rep, repeat);
      repeat = rep;  // the report below (if any) is of this last repetition
    }
    if (DirIdentity(dir) != identity) {
      cli::Error("run", dir + " was removed while the program ran: its recording is lost");
      continue;
    }
    if (RunFiles(dir).empty()) {
      std::fprintf(stderr, "kprof run: nothing recorded: %s\n", WhyNothing(agent, dir).c_str());
      continue;
    }
    if (r.quiet && rep < repeat) continue;  // only the last repetition is read back
    // --quiet prints no report, but the --trace, --trace-dir and --html files asked for are
    // written.
    r.view.quiet = r.quiet;
    const bool outputs = !r.view.trace.empty() || !r.view.trace_dir.empty() || !r.view.html.empty();
    ReadBack(dir, (!r.quiet || outputs) && rep == repeat, r.view);
  }
  // With repetitions, how far each hint's estimate spread over them (docs/hints.md), after the
  // table report (other formats are one document each).
  if (repeat > 1 && !r.quiet && !r.view.no_hints && r.view.format == "table" &&
      r.view.output.empty())
    std::fputs(RepetitionSpread(r.out_dir, repeat).c_str(), stdout);
  return status;
}

}  // namespace kprof
