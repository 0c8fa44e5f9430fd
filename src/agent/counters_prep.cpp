// PM sampling's preparation thread, and its start in a context's callback: see
// counters_internal.h and docs/counters.md.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "agent/counters_internal.h"

namespace kprof::agent::counters {
// The preparation thread (`--metrics sampled`): when the program calls into the driver to make
// a device's context (cuDevicePrimaryCtxRetain, cuCtxCreate: the callbacks' API entry), that
// device is queued, and a thread of the agent's own prepares it (cuptiProfilerInitialize, which
// loads CUPTI's profiler libraries, and PrepareDevice: about 90 ms on the H100) while the driver
// makes the context. In the context's callback the program's thread takes the preparation
// (it was ready in every run on the H100), and enables and starts sampling itself (SetConfig,
// 0.13-0.15 s).
//
// Why then and not from the agent's start: the program's thread is inside the driver while the
// preparation runs, so the program cannot end under it. Started with the agent (inside cuInit),
// a program that exited 0-60 ms later crashed inside CUPTI (SIGSEGV, or std::out_of_range from
// CUPTI's host library) while the preparation ran, whatever exit handler waited for it: the
// objects CUPTI makes as it goes register their destructors after any handler of ours.
// PrepExitGuard (an exit handler, registered again after each step) still stops the preparation
// between steps and waits for the step under way, for a program's other thread that exits.
struct Preparation {
  std::mutex mu;
  std::condition_variable cv;
  // The process the thread runs in, read before `mu` is taken: a forked child has no thread,
  // and its copy of `mu` may be held by the thread it does not have.
  std::atomic<pid_t> pid{0};
  bool running = false;                    // the thread has not finished
  bool abort = false;                      // the process is exiting: stop between steps
  std::vector<uint32_t> queue;             // devices to prepare, in the order asked
  std::set<uint32_t> asked;                // every device ever queued (or started without)
  std::map<uint32_t, DevicePrep> devices;  // prepared (ok or not), not yet taken
};
Preparation& Prep() {
  static auto* p = new Preparation();  // leaked, as the agent's state
  return *p;
}

void PrepExitGuard() {
  Preparation& p = Prep();
  if (p.pid != getpid()) return;
  std::unique_lock<std::mutex> lock(p.mu);
  if (!p.running || p.abort) return;  // done, or an earlier copy of the guard waited already
  p.abort = true;
  p.cv.wait_for(lock, std::chrono::milliseconds(kExitFlushTimeoutMs), [&] { return !p.running; });
}

void PrepLoop() {
  BlockSignalsInThisThread();
  Preparation& p = Prep();
  // After each step: the guard again (after what the step registered), and whether to go on.
  const auto step_done = [&] {
    std::atexit(PrepExitGuard);
    std::lock_guard<std::mutex> lock(p.mu);
    return !p.abort;
  };
  try {
    while (true) {
      uint32_t d = 0;
      {
        std::lock_guard<std::mutex> lock(p.mu);
        if (p.queue.empty() || p.abort) break;
        d = p.queue.front();
        p.queue.erase(p.queue.begin());
      }
      uint64_t t = Now();
      DevicePrep prepared;
      if (InitProfiler()) {
        Step("cuptiProfilerInitialize (preparation thread)", t);
        if (step_done()) PrepareDevice(d, prepared, false);
      }
      step_done();
      std::lock_guard<std::mutex> lock(p.mu);
      p.devices.emplace(d, std::move(prepared));
      p.cv.notify_all();
    }
  } catch (...) {  // no exception leaves an agent's thread: the devices left are prepared in
                   // their contexts' callbacks
    Problem("an error in PM sampling's preparation");
  }
  std::lock_guard<std::mutex> lock(p.mu);
  p.queue.clear();
  p.running = false;
  p.cv.notify_all();
}

// A context-creating call's entry for `device`: queues its preparation (once per device and
// process), starting the thread if it is not running.
void AskPreparation(int device) {
  Preparation& p = Prep();
  const pid_t self = getpid();
  pid_t none = 0;
  if (device < 0) return;
  if (p.pid != self && !p.pid.compare_exchange_strong(none, self)) return;  // a forked child
  std::lock_guard<std::mutex> lock(p.mu);
  int count = 0;  // a call that will fail for a device that does not exist: nothing to prepare
  if (p.abort || p.asked.count(static_cast<uint32_t>(device)) != 0 ||
      cuDeviceGetCount(&count) != CUDA_SUCCESS || device >= count)
    return;
  p.asked.insert(static_cast<uint32_t>(device));
  p.queue.push_back(static_cast<uint32_t>(device));
  if (p.running) return;
  if (std::atexit(PrepExitGuard) != 0) {
    p.queue.clear();  // no guard, no thread: the context's callback prepares it
    return;
  }
  p.running = true;
  try {
    std::thread(PrepLoop).detach();  // it ends by itself; PrepExitGuard waits for it at exit
  } catch (...) {
    p.running = false;
    p.queue.clear();
  }
}

// How long a device's first context waits for its preparation (about 90 ms, ready before the
// context in every run on the H100): bounded, in case the preparation's CUPTI calls wait for
// the driver while the program's thread is inside the context's callback. Past it the device
// is not sampled, and the report says why.
constexpr int kPrepWaitMs = 1000;

enum class Taken : uint8_t {
  Here,      // `out` holds the device's preparation (ok or not): start the sampler here
  TimedOut,  // not ready in time: no sampling on this device
  None,      // no preparation was asked for it here (a forked child, a context made
             // otherwise): prepare it here
};

Taken TakePrepared(uint32_t device, DevicePrep& out) {
  Preparation& p = Prep();
  if (p.pid != getpid()) return Taken::None;
  std::unique_lock<std::mutex> lock(p.mu);
  const bool asked = !p.asked.insert(device).second;
  // Asked here, so the thread has it queued or under way, or it finished.
  const auto settled = [&] { return p.devices.count(device) != 0 || !p.running; };
  if (!asked) return Taken::None;
  if (!p.cv.wait_for(lock, std::chrono::milliseconds(kPrepWaitMs), settled)) return Taken::TimedOut;
  auto it = p.devices.find(device);
  if (it == p.devices.end()) return Taken::None;
  out = std::move(it->second);
  p.devices.erase(it);
  return Taken::Here;
}

// Enables and starts `device`'s sampler from its preparation and hands it to the sampling
// thread, on the program's thread in the device's first context. `t0`: when the program's
// thread began to wait for kprof there (an Overhead record).
void RunSampler(uint32_t device, DevicePrep& prepared, uint64_t t0) {
  PmSampling& st = Sampling();
  if (st.Stopping()) {
    FreeHost(prepared.config.host);
    return;
  }
  auto sp = std::make_unique<Sampler>();
  sp->config = std::move(prepared.config);
  bool refused = false;
  bool ok =
      prepared.ok && EnableSampler(device, *sp, prepared.with_availability ? nullptr : &refused);
  if (refused) {
    // Made from the chip's name, refused by the device (its counters differ from its chip's):
    // again with its counter availability, which leaves out the metrics it cannot give.
    if (g_debug)
      std::fprintf(stderr,
                   "kprof agent: counters: device %u refused the configuration made from its "
                   "chip's name; again with its counter availability\n",
                   device);
    StopSampler(*sp);
    sp = std::make_unique<Sampler>();
    DevicePrep again;
    ok = PrepareDevice(device, again, true);
    sp->config = std::move(again.config);
    ok = ok && EnableSampler(device, *sp);
  }
  if (!ok) StopSampler(*sp);
  const uint64_t end = Now();
  EmitOverhead(OverheadKind::CounterSetup, "Counter Setup", t0, end);
  if (g_debug)
    std::fprintf(stderr,
                 "kprof agent: counters: PM sampling set up on device %u; the program's thread "
                 "waited %.1f ms%s\n",
                 device, (end - t0) * 1e-6, ok ? "" : " (failed)");
  if (!ok) return;
  st.Add(std::move(sp));
}

// A device's first context (on the program's thread, which waits: see PmSampling): takes its
// preparation (Preparation) and starts its sampler.
void StartSampling(uint32_t device) {
  PmSampling& st = Sampling();
  std::lock_guard<std::mutex> lock(st.start_mu);
  if (!st.devices_tried.insert(device).second) return;
  if (st.Stopping()) return;
  const uint64_t t0 = Now();
  if (g_debug)
    std::fprintf(stderr,
                 "kprof agent: counters: device %u's first context %.1f ms after the agent "
                 "started\n",
                 device, (t0 - g_counters_started_ns) * 1e-6);
  DevicePrep prepared;
  uint64_t t = t0;
  switch (TakePrepared(device, prepared)) {
    case Taken::Here:
      Step("waiting for the preparation thread", t);
      break;
    case Taken::TimedOut:
      Step("waiting for the preparation thread, in vain", t);
      Problem("PM sampling on device " + std::to_string(device) + ": its preparation took over " +
              std::to_string(kPrepWaitMs) + " ms; the device is not sampled");
      EmitOverhead(OverheadKind::CounterSetup, "Counter Setup", t0, Now());
      return;
    case Taken::None:
      if (!InitProfiler()) return;
      Step("cuptiProfilerInitialize", t);
      PrepareDevice(device, prepared, false);
      break;
  }
  RunSampler(device, prepared, t0);
}
}  // namespace kprof::agent::counters
