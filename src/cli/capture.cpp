// kprof capture RUN_DIR [--steps N --step-range NAME | --duration S]: one window in every
// process of a job started with `kprof run --on-demand` (kprof/on_demand.h has the files,
// docs/capture.md "On demand" the protocol). Exit 0: every process recorded its window; 1: some
// did not (each says why); 2: no such job, it has ended, a capture is in progress, bad options.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli/common.h"
#include "kprof/analysis.h"
#include "kprof/cli.h"
#include "kprof/on_demand.h"

namespace kprof {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long the processes have to answer: acks (their step range's first begins), and the gap
// between the choice of the moment and the moment itself (they read the choice every 2 ms).
constexpr auto kAckWait = 35s;
constexpr uint64_t kLeadNs = 50'000'000;

struct Process {
  ondemand::Presence presence;
  bool acked = false, done = false;
  ondemand::Ack ack;
  ondemand::Done result;
};

bool Alive(uint64_t pid) {
  return pid != 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// The processes of the job that are still running (PID.agent, state not ended, pid alive).
std::vector<Process> LiveProcesses(const std::string& control, size_t& ended, bool& capturing) {
  std::vector<Process> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(control, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 7 || name.substr(name.size() - 6) != ".agent") continue;
    auto text = ondemand::ReadSmall(e.path().string());
    if (!text) continue;
    auto p = ondemand::ParsePresence(*text, nullptr);
    if (!p) continue;
    if (p->state == "ended" || !Alive(p->pid)) {
      ++ended;
      continue;
    }
    capturing |= p->state == "capturing";
    out.push_back({*p, false, false, {}, {}});
  }
  std::sort(out.begin(), out.end(),
            [](const Process& a, const Process& b) { return a.presence.pid < b.presence.pid; });
  return out;
}

// capture.lock: made with O_EXCL; one left by a kprof capture that died is taken over.
bool Lock(const std::string& path, std::string& holder) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const std::string me = std::to_string(getpid());
      const bool ok = ::write(fd, me.data(), me.size()) == static_cast<ssize_t>(me.size());
      ::close(fd);
      return ok;
    }
    auto text = ondemand::ReadSmall(path);
    uint64_t pid = 0;
    try {
      pid = text ? std::stoull(*text) : 0;
    } catch (...) {
    }
    if (Alive(pid)) {
      holder = std::to_string(pid);
      return false;
    }
    ::unlink(path.c_str());  // stale
  }
  holder = "?";
  return false;
}

std::string Describe(const Process& p) {
  return "pid " + std::to_string(p.presence.pid) +
         (p.presence.rank.empty() ? "" : " (rank " + p.presence.rank + ")");
}

// Waits until each process has written ID.PID.<what> (or has ended), or until `until`; `take`
// reads one such file into its process, true when it could.
template <typename Take>
void WaitFor(std::vector<Process>& ps, const std::string& control, uint64_t id, const char* what,
             Clock::time_point until, Take take) {
  std::vector<bool> got(ps.size(), false);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < ps.size(); ++i) {
      const uint64_t pid = ps[i].presence.pid;
      if (!got[i])
        if (auto text = ondemand::ReadSmall(ondemand::ReplyPath(control, id, pid, what)))
          got[i] = take(ps[i], *text);
      all &= got[i] || !Alive(pid);
    }
    if (all || Clock::now() >= until) return;
    std::this_thread::sleep_for(2ms);
  }
}

}  // namespace

int CmdCapture(const std::vector<std::string>& args) {
  CLI::App app{"Open one window in every process of a job started with kprof run --on-demand",
               "kprof capture"};
  std::string dir, range;
  uint64_t steps = 0;
  double duration = 0, timeout = 600;
  app.add_option("RUN_DIR", dir, "The run directory of kprof run --on-demand")->required();
  app.add_option("--steps", steps, "Steps to record (with --step-range)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000}));
  app.add_option("--step-range", range,
                 "The NVTX range the program pushes once per step, by exact name: every process "
                 "opens at the same step and records --steps of them");
  app.add_option("--duration", duration, "Seconds to record (without --step-range; default 1)")
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--timeout", timeout, "Seconds to wait for the windows to end (default 600)")
      ->check(CLI::Range(1.0, 1e7));
  if (auto rc = cli::Parse(app, args)) return *rc;
  if (!range.empty() && duration > 0)
    return cli::UsageError("capture", "--step-range and --duration exclude each other");
  if (range.empty() && steps > 0) return cli::UsageError("capture", "--steps needs --step-range");
  if (!range.empty() && steps == 0) steps = 1;
  if (range.empty() && duration == 0) duration = 1;

  const std::string control = ondemand::ControlDir(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return cli::UsageError("capture", dir + ": no such run directory");
  if (!fs::is_directory(control, ec))
    return cli::UsageError("capture",
                           dir + ": not a run of kprof run --on-demand (no control folder)");
  size_t ended = 0;
  bool capturing = false;
  std::vector<Process> ps = LiveProcesses(control, ended, capturing);
  if (ps.empty())
    return cli::UsageError(
        "capture",
        dir + (ended == 0 ? ": no process of the job has started yet"
                          : ": the job has ended (" + std::to_string(ended) + " process" +
                                (ended == 1 ? "" : "es") + ", none running)"));
  const std::string lock = control + "/capture.lock";
  std::string holder;
  if (capturing || !Lock(lock, holder))
    return cli::UsageError("capture",
                           dir + ": already capturing" +
                               (holder.empty() ? "" : " (kprof capture pid " + holder + ")"));
  struct Unlock {
    std::string path;
    ~Unlock() { ::unlink(path.c_str()); }
  } unlock{lock};

  ondemand::Request req;
  if (auto text = ondemand::ReadSmall(ondemand::RequestPath(control)))
    if (auto old = ondemand::ParseRequest(*text, nullptr)) req.id = old->id;
  for (const Process& p : ps) req.id = std::max(req.id, p.presence.last_request);
  ++req.id;
  req.range = range;
  req.steps = range.empty() ? 0 : steps;
  req.duration_ms = range.empty() ? static_cast<uint64_t>(duration * 1000 + 0.5) : 0;
  req.issued_ns = ondemand::WallNs();
  std::string why;
  const std::string go = ondemand::GoPath(control, req.id);
  // One process needs no agreement: it opens at its next step.
  if (!range.empty() && ps.size() == 1 && !ondemand::WriteWhole(go, ondemand::FormatGo(0), &why))
    return cli::UsageError("capture", why);
  if (!ondemand::WriteWhole(ondemand::RequestPath(control), ondemand::FormatRequest(req), &why))
    return cli::UsageError("capture", why);

  if (!range.empty() && ps.size() > 1) {
    // Every process says when its recent steps began; the moment is half a step after the
    // latest boundary, so that all open at the same step.
    WaitFor(ps, control, req.id, "ack", Clock::now() + kAckWait,
            [](Process& p, const std::string& text) {
              auto a = ondemand::ParseAck(text, nullptr);
              if (a) p.ack = *a;
              return p.acked = a.has_value();
            });
    std::vector<std::vector<uint64_t>> begins;
    for (const Process& p : ps)
      if (p.acked && p.ack.problem.empty()) begins.push_back(p.ack.step_ns);
    const uint64_t at = ondemand::ChooseStart(begins, ondemand::WallNs() + kLeadNs);
    if (!ondemand::WriteWhole(go, ondemand::FormatGo(at), &why))
      return cli::UsageError("capture", why);
  }
  const auto until = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout * 1e3));
  WaitFor(ps, control, req.id, "done", until, [](Process& p, const std::string& text) {
    auto d = ondemand::ParseDone(text, nullptr);
    if (d) p.result = *d;
    return p.done = d.has_value();
  });
  int rc = kExitOk;
  for (const Process& p : ps) {
    const ondemand::Done& d = p.result;
    std::string line = "kprof capture: " + Describe(p) + ": ";
    if (!p.done) {
      line += Alive(p.presence.pid) ? "no answer within the timeout"
                                    : "ended before it said what it recorded";
      rc = kExitRegression;
    } else if (d.window == 0) {
      line += "no window: " + (d.problem.empty() ? std::string("(no reason given)") : d.problem);
      rc = kExitRegression;
    } else {
      line += "window " + std::to_string(d.window) + ", " +
              (range.empty() ? "" : std::to_string(d.steps) + " step(s) of '" + range + "', ") +
              FormatDuration(d.closed_ns - d.opened_ns) + ", opened " +
              FormatDuration(d.request_to_open_ns) + " after the request";
      if (!d.problem.empty()) line += " (" + d.problem + ")";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (rc == kExitOk)
    std::fprintf(stderr, "kprof capture: kprof report %s --window %llu\n", dir.c_str(),
                 static_cast<unsigned long long>(ps.front().result.window));
  return rc;
}

}  // namespace kprof
