// Hardware counters in the agent: see counters.h. Call sequences follow CUPTI 13.0's headers
// (cupti_pmsampling.h, cupti_range_profiler.h, cupti_profiler_host.h) and NVIDIA's samples
// (pm_sampling, callback_profiling); docs/counters.md says what was checked on the H100.
//
// Rules of the agent hold here too: no exception escapes, every CUPTI call is checked, and a
// failure turns the counters off with one line saying why (stderr and the file's meta), while
// tracing goes on.
#include "agent/counters.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "agent/agent.h"
#include "agent/capture.h"
#include "agent/counters_internal.h"
#include "kprof/metrics.h"

namespace kprof::agent {
using namespace counters;
namespace {

std::atomic<bool> g_started{false};
bool g_prepare = false;  // PM sampling's preparation thread (Preparation)

// The driver calls that make a device's context: their entry queues the device's preparation.
constexpr CUpti_CallbackId kContextCreatingCalls[] = {
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3, CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4};

int ContextCallDevice(CUpti_CallbackId cbid, const CUpti_CallbackData& cb) {
  CUdevice dev = 0;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain:
      dev = static_cast<const cuDevicePrimaryCtxRetain_params*>(cb.functionParams)->dev;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2:
      dev = static_cast<const cuCtxCreate_v2_params*>(cb.functionParams)->dev;
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v3:
      dev = static_cast<const cuCtxCreate_v3_params*>(cb.functionParams)->dev;
      break;
    default:
      dev = static_cast<const cuCtxCreate_v4_params*>(cb.functionParams)->dev;
      break;
  }
  return static_cast<int>(dev);
}

}  // namespace

bool ConfigureCounters(const AgentConfig& cfg, const std::vector<ConfigProblem>& problems) {
  bool asked = cfg.replay || cfg.sampled;
  for (const ConfigProblem& p : problems) {
    if (p.area != "metrics") continue;
    Problem(p.message);
    asked = true;
  }
  if (!asked) return false;
  g_set.sampled = cfg.sampled;
  g_set.replay = cfg.replay;
  const DiagnosticKnobs& k = Knobs();
  g_debug = k.counters_debug;
  g_keep_enabled = k.replay_keep_enabled;
  g_evaluate = k.counters_evaluate;
  g_prepare = g_set.sampled && k.pm_prepare;
  g_availability = k.pm_availability;
  g_refuse_chip_config = k.pm_refuse_chip_config;
  g_set.interval_ns = cfg.metrics_interval_us * 1000;
  g_set.top = cfg.metrics_top;
  g_set.launches = cfg.metrics_launches;
  if (!cfg.metrics_kernels.empty()) {
    try {
      g_set.regex = std::regex(cfg.metrics_kernels, std::regex::ECMAScript | std::regex::optimize);
      g_set.use_regex = true;
    } catch (const std::regex_error&) {
      Problem("KPROF_METRICS_KERNELS is not a regular expression: " + cfg.metrics_kernels);
    }
  }
  if (!cfg.metrics_names.empty()) {
    std::ifstream f(cfg.metrics_names);
    std::string line;
    while (std::getline(f, line))
      if (!line.empty()) g_set.named.insert(line);
    if (g_set.named.empty()) Problem("no kernel names in " + cfg.metrics_names);
  }
  return g_set.sampled || g_set.replay;
}

void StartCounters(CUpti_SubscriberHandle subscriber,
                   std::vector<std::pair<std::string, std::string>>& meta) {
  g_counters_started_ns = Now();
  std::string mode = g_set.replay ? "replay" : "";
  if (g_set.sampled) mode += mode.empty() ? "sampled" : ",sampled";
  meta.emplace_back("counters", mode);
  if (g_set.sampled) meta.emplace_back("counters_interval_ns", std::to_string(g_set.interval_ns));
  if (g_set.replay) {
    meta.emplace_back("counters_launches_per_kernel", std::to_string(g_set.launches));
    if (!g_set.use_regex && g_set.named.empty())
      meta.emplace_back("counters_top", std::to_string(g_set.top));
  }
  if (subscriber == nullptr) {
    Problem("no CUPTI callback subscriber (another tool holds it): no counters");
    return;
  }
  bool ok = KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                            CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                        "watch CUDA contexts being made (no GPU will be sampled)");
  if (g_prepare)
    for (CUpti_CallbackId id : kContextCreatingCalls)
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                        "watch context creation (sampling's set-up will start later)");
  if (g_set.replay) {
    for (CUpti_CallbackId id :
         {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
          CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz})
      ok &= KPROF_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                        "watch kernel launches (no kernel will be replayed)");
  }
  if (!ok) Problem("enabling the counters' callbacks failed");
  Agent& a = A();
  a.counters_top_from_trace = g_set.replay && !g_set.use_regex && g_set.named.empty();
  // The top N comes from the kernels written so far: flush often enough for it to be current
  // (unless KPROF_FLUSH_MS says otherwise).
  if (a.counters_top_from_trace && Knobs().flush_ms == 0) a.flush_period_ms = 100;
  g_started = true;
}

bool OnCounterCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!g_started) return false;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      const auto* rd = static_cast<const CUpti_ResourceData*>(data);
      uint32_t device = 0;
      if (g_set.sampled && rd->context != nullptr &&
          cuptiGetDeviceId(rd->context, &device) == CUPTI_SUCCESS)
        StartSampling(device);
      return false;  // the agent's own context handling runs too
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && g_prepare &&
        std::find(std::begin(kContextCreatingCalls), std::end(kContextCreatingCalls), cbid) !=
            std::end(kContextCreatingCalls)) {
      const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
      if (cb.callbackSite == CUPTI_API_ENTER) AskPreparation(ContextCallDevice(cbid, cb));
      return false;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !IsLaunch(cbid) || !g_set.replay) return false;
    const auto& cb = *static_cast<const CUpti_CallbackData*>(data);
    if (cb.callbackSite == CUPTI_API_ENTER) {
      OnLaunchEnter(cbid, cb);
    } else {
      OnLaunchExit(cb);
    }
  } catch (...) {
    Problem("an error in the counters' callback; counters stop");
    g_started = false;
  }
  return true;
}

void NoteKernelTimes(std::vector<std::pair<std::string, uint64_t>>& batch) {
  if (!g_set.replay || g_set.use_regex || !g_set.named.empty() || batch.empty()) return;
  ReplayState& rs = Replay();
  std::lock_guard<std::mutex> lock(rs.tally_mu);
  for (auto& [name, ns] : batch) rs.tally[name] += ns;
  std::vector<std::pair<uint64_t, const std::string*>> order;
  order.reserve(rs.tally.size());
  for (const auto& [name, ns] : rs.tally) order.emplace_back(ns, &name);
  const size_t n = std::min(g_set.top, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [](const auto& x, const auto& y) { return x.first > y.first; });
  rs.top.clear();
  for (size_t i = 0; i < n; ++i) rs.top.insert(*order[i].second);
}

ReplayTimes ReplayedKernelTimes(uint32_t correlation, uint64_t* start_ns, uint64_t* end_ns) {
  if (!g_set.replay) return ReplayTimes::Unknown;
  ReplayState& rs = Replay();
  std::lock_guard<std::mutex> lock(rs.times_mu);
  auto it = rs.times.find(correlation);
  if (it == rs.times.end()) return ReplayTimes::Unknown;
  if (it->second.first == 0) return ReplayTimes::Pending;
  *end_ns = it->second.first;
  *start_ns = it->second.first - std::min(it->second.first, it->second.second);
  rs.times.erase(it);
  return ReplayTimes::Known;
}

void StopCounters(bool at_exit) {
  if (!g_set.sampled && !g_set.replay) return;
  if (g_set.sampled) Sampling().Stop(at_exit);
  g_started = false;  // replay ends with the first context to go
  static std::atomic<bool> meta_written{false};
  if (!at_exit || meta_written.exchange(true)) return;
  const std::string account = ReplayAccount();  // (takes replay's locks: before the others)
  std::lock_guard<std::mutex> lock(g_problem_mu);
  Agent& a = A();
  std::lock_guard<std::mutex> side(a.side_mu);
  if (!g_problems.empty()) a.side_meta.emplace_back("counters_problem", g_problems);
  if (!g_unavailable.empty()) a.side_meta.emplace_back("counters_unavailable", g_unavailable);
  if (g_set.replay) a.side_meta.emplace_back("counters_replay_account", account);
}

}  // namespace kprof::agent
