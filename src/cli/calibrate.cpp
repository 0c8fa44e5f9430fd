// See calibrate.h. The cache: $KPROF_CACHE_DIR, else $XDG_CACHE_HOME/kprof, else
// ~/.cache/kprof; one JSON object in self_cost.json, by machine, agent and kinds.
#include "cli/calibrate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/child.h"
#include "cli/installed.h"
#include "cli/run_request.h"

extern char** environ;

namespace kprof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kTimeoutS = 20;            // one calibration run at most (it takes about 0.5 s)
constexpr int64_t kCacheAgeS = 86'400;   // a figure measured within a day is reused
constexpr int64_t kFailureAgeS = 3'600;  // a failure is not tried again within the hour
constexpr int kPairs = 5;                // runs without and with the agent, interleaved

/// Runs argv with the environment of kprof less the agent's variables plus `add`; its standard
/// output, or nothing when it failed, timed out (killed) or printed nothing.
std::optional<std::string> Capture(const std::vector<std::string>& argv,
                                   const std::vector<std::string>& add) {
  // Built before the fork: the child only calls async-signal-safe functions.
  std::vector<std::string> env_store;
  const std::vector<std::string_view>& owned = AgentConfigNames();
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv = *e;
    const std::string_view name = kv.substr(0, kv.find('='));
    if (name == "CUDA_INJECTION64_PATH" || name == "NVTX_INJECTION64_PATH" ||
        std::find(owned.begin(), owned.end(), name) != owned.end())
      continue;
    env_store.emplace_back(kv);
  }
  for (const std::string& kv : add) env_store.push_back(kv);
  std::vector<char*> cenv, cargv;
  for (std::string& s : env_store) cenv.push_back(s.data());
  cenv.push_back(nullptr);
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const ChildAnswer a = RunInChild(
      [&](int fd) {
        if (fd == 1)
          ::fcntl(1, F_SETFD, 0);  // already standard output: keep it open across exec
        else
          ::dup2(fd, 1);
        const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) ::dup2(null, 2);
        ::execve(cargv[0], cargv.data(), cenv.data());
        ::_exit(127);
      },
      kTimeoutS);
  if (!a.error.empty() || a.output.empty()) return std::nullopt;
  return a.output;
}

struct Figures {
  double launch = 0, api = 0, range = 0;
};

std::optional<Figures> Read(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  Figures f;
  for (auto [key, field] : {std::pair{"launch_ns", &f.launch}, std::pair{"api_ns", &f.api},
                            std::pair{"range_ns", &f.range}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number() || it->get<double>() < 0) return std::nullopt;
    *field = it->get<double>();
  }
  return f;
}

std::string CacheDir() {
  if (const char* d = std::getenv("KPROF_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kprof";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kprof";
  return "";
}

/// What a cached figure must match: this machine, this agent file, what it records.
std::string CacheKey(const std::string& agent, const AgentConfig& cfg) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  struct stat st {};
  const long long mtime = ::stat(agent.c_str(), &st) == 0 ? static_cast<long long>(st.st_mtime) : 0;
  return std::string(host) + "|" + agent + "|" + std::to_string(mtime) + "|" +
         (cfg.kinds.empty() ? "all" : cfg.kinds) + "|" + cfg.graph_trace;
}

json LoadCache(const std::string& file) {
  std::ifstream f(file);
  if (!f) return json::object();
  json j = json::parse(f, nullptr, false);
  return j.is_object() ? j : json::object();
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// The cached entry for `key` when it is of the form Store writes and younger than its age
/// limit (a day for figures, an hour for a failure): the figures, or `why` set for a failure.
std::optional<SelfCost> Cached(const json& cache, const std::string& key, int64_t now, bool& failed,
                               std::string& why) {
  failed = false;
  auto it = cache.find(key);
  if (it == cache.end() || !it->is_object()) return std::nullopt;
  const auto time = it->find("time");
  if (time == it->end() || !time->is_number_integer()) return std::nullopt;
  const int64_t t = time->get<int64_t>();
  if (t > now) return std::nullopt;
  if (const auto f = it->find("failed"); f != it->end() && f->is_string()) {
    failed = now - t < kFailureAgeS;
    why = f->get<std::string>() + " (cached)";
    return std::nullopt;
  }
  const auto text = it->find("text");
  if (now - t >= kCacheAgeS || text == it->end() || !text->is_string()) return std::nullopt;
  auto c = ParseSelfCost(text->get<std::string>());
  if (c) c->source += " (cached)";
  return c;
}

/// Writes `entry` for `key` into the cache file (replaced whole, atomically); errors ignored.
void Store(const std::string& dir, const std::string& file, json cache, const std::string& key,
           json entry) {
  if (file.empty()) return;
  cache[key] = std::move(entry);
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string part = file + ".tmp" + std::to_string(::getpid());
  // A host name or path that is not UTF-8 is written with replacement characters, not thrown.
  if (std::ofstream f(part); f << cache.dump(1, ' ', false, json::error_handler_t::replace) << '\n')
    fs::rename(part, file, ec);
  else
    fs::remove(part, ec);
}

}  // namespace

std::optional<SelfCost> MeasureSelfCost(const std::string& agent, const AgentConfig& cfg,
                                        const std::string& mode, std::string& why) {
  if (mode == "off") {
    why = "--calibrate off";
    return std::nullopt;
  }
  const std::string cache_dir = CacheDir();
  const std::string cache_file = cache_dir.empty() ? "" : cache_dir + "/self_cost.json";
  const std::string key = CacheKey(agent, cfg);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  const json cache = cache_file.empty() ? json::object() : LoadCache(cache_file);
  if (mode == "auto") {
    bool failed = false;
    if (auto c = Cached(cache, key, now, failed, why)) return c;
    if (failed) return std::nullopt;  // it failed here within the hour: not again at every run
  }
  const std::string tool = FindCalibrator();
  if (tool.empty()) {
    why = "kprof-calibrate not found next to kprof";
    return std::nullopt;
  }
  const auto fail = [&](const std::string& what) {
    why = what;
    Store(cache_dir, cache_file, cache, key, {{"failed", what}, {"time", now}});
    return std::nullopt;
  };
  // Pairs of runs, plain then under the agent as kprof run would inject it (no windows, no
  // counters: the recording's own cost), into a folder removed afterwards; the median of the
  // pairs' differences. A process's own speed varies on a shared machine (the H200's plain
  // launch took 3.3-4.2 us from one process to the next): one pair alone is noise. The first
  // failure ends it.
  std::error_code ec;
  const fs::path tmp =
      fs::temp_directory_path(ec) / ("kprof-calibrate-" + std::to_string(::getpid()));
  AgentConfig c;
  c.output_dir = tmp.string();
  c.kinds = cfg.kinds;
  c.graph_trace = cfg.graph_trace;
  const std::vector<std::string> env = AgentInjection(agent, c);
  std::vector<double> launch, api, range;
  for (int pair = 0; pair < kPairs; ++pair) {
    const auto plain = Capture({tool}, {});
    const auto p = plain ? Read(*plain) : std::nullopt;
    if (!p) return fail("kprof-calibrate could not run CUDA here (no GPU?)");
    fs::create_directories(tmp, ec);
    const auto traced = Capture({tool}, env);
    fs::remove_all(tmp, ec);
    const auto t = traced ? Read(*traced) : std::nullopt;
    if (!t) return fail("kprof-calibrate failed under the agent");
    launch.push_back(t->launch - p->launch);
    api.push_back(t->api - p->api);
    range.push_back(t->range - p->range);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return std::max(0.0, n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
  };
  SelfCost s;
  s.launch_ns = median(launch);
  s.api_ns = median(api);
  s.range_ns = median(range);
  s.source = "calibrated " + UtcNow();
  // Only figures the agent and the analysis will read back (below 1 ms an event).
  if (!ParseSelfCost(FormatSelfCost(s))) return fail("kprof-calibrate gave implausible figures");
  Store(cache_dir, cache_file, cache, key, {{"text", FormatSelfCost(s)}, {"time", now}});
  return s;
}

}  // namespace kprof::cli
