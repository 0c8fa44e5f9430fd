// The control thread of an on-demand run (kprof run --on-demand; kprof/on_demand.h has the
// files, docs/capture.md "On demand" the whole). The process stays dormant, CUPTI not attached,
// until kprof capture writes a request into RUN_DIR/control; then this thread attaches CUPTI,
// opens the window (now, for a duration; at a step of an NVTX range, for steps), waits for it to
// close, says what it recorded, and detaches CUPTI again.
#include "kprof/on_demand.h"

#include <cuda.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/capture.h"
#include "agent/nvtx_shim.h"

namespace kprof::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPoll{20};         // how often the request file is read while dormant
constexpr milliseconds kFastPoll{2};      // while a request is in progress
constexpr int kDetachWaitMs = 2000;       // for the synchronization CUPTI's detachment waits for
constexpr int kCloseWaitMs = 1000;        // for the one a duration window's closing waits for
constexpr milliseconds kAckAfter{3000};   // one step begin is enough after this long
constexpr milliseconds kStepWait{30000};  // no begin of the range within this: no window
constexpr milliseconds kGoWait{60000};    // kprof capture chose no moment within this

struct Control {
  std::string dir;
  ondemand::Presence presence;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> stop{false};
  bool wake = false;  // (mu) a window closed: the dormant loop looks at once
  bool started = false;
};
Control& C() {
  static Control* c = new Control();  // leaked: used at exit
  return *c;
}

void SetState(const char* state) {
  Control& c = C();
  if (c.dir.empty()) return;  // a dormant --capture nvtx:NAME run: kprof capture has no part
  c.presence.state = state;
  c.presence.windows = CaptureStatus().windows;
  std::string why;
  if (!ondemand::WriteWhole(ondemand::PresencePath(c.dir, c.presence.pid),
                            ondemand::FormatPresence(c.presence), &why))
    std::fprintf(stderr, "kprof agent: on demand: %s\n", why.c_str());
}

// Sleeps `d` unless the control thread is stopped (then false) or woken (WakeControl).
bool Sleep(milliseconds d) {
  Control& c = C();
  std::unique_lock<std::mutex> lock(c.mu);
  c.cv.wait_for(lock, d, [&] { return c.stop.load() || c.wake; });
  c.wake = false;
  return !c.stop.load();
}

std::string File(uint64_t id, const char* what) {
  return ondemand::ReplyPath(C().dir, id, C().presence.pid, what);
}

// The moment kprof capture chose for request `id` (0: at once), if it has chosen.
std::optional<uint64_t> GoAt(uint64_t id) {
  auto text = ondemand::ReadSmall(ondemand::GoPath(C().dir, id));
  return text ? ondemand::ParseGo(*text, nullptr) : std::nullopt;
}

// A step window: the range's begins are watched, reported (ID.PID.ack) and the window armed at
// the moment kprof capture chose. Returns a problem, or "" once the window has opened.
std::string StepWindow(const ondemand::Request& r) {
  const auto no_step = [&](const char* after) {
    return "no range '" + r.range + "' began within " + std::to_string(kStepWait.count() / 1000) +
           " s" + after;
  };
  WatchSteps(r.range);
  const auto begun = Clock::now();
  bool acked = false;
  std::optional<uint64_t> at;
  while (!at) {
    if (!Sleep(kFastPoll)) return "the process ended before its window opened";
    at = GoAt(r.id);
    std::vector<uint64_t> begins = StepBegins();
    const auto waited = Clock::now() - begun;
    if (!acked && (begins.size() >= 2 || (begins.size() == 1 && waited >= kAckAfter))) {
      ondemand::Ack ack{r.id, C().presence.pid, std::move(begins), ""};
      ondemand::WriteWhole(File(r.id, "ack"), ondemand::FormatAck(ack), nullptr);
      acked = true;
    }
    if (!acked && waited >= kStepWait) {
      const std::string why = no_step("");
      ondemand::Ack ack{r.id, C().presence.pid, {}, why};
      ondemand::WriteWhole(File(r.id, "ack"), ondemand::FormatAck(ack), nullptr);
      return why;
    }
    if (!at && waited >= kGoWait) return "kprof capture chose no step to open at";
  }
  const uint64_t before = CaptureStatus().windows;
  ArmSteps(r.steps, *at);
  SetState("capturing");
  const auto armed = Clock::now();
  while (CaptureStatus().windows == before) {
    if (!Sleep(kFastPoll)) return "the process ended before its window opened";
    if (Clock::now() - armed >= kStepWait) return no_step(" of the chosen moment");
  }
  return "";
}

void Handle(const ondemand::Request& r) {
  Control& c = C();
  c.presence.last_request = r.id;
  ondemand::Done done;
  done.id = r.id;
  done.pid = c.presence.pid;
  std::string why;
  const uint64_t before = CaptureStatus().windows;
  if (!AttachCupti(&why)) {
    done.problem = "CUPTI could not be attached: " + why;
  } else if (r.range.empty()) {
    if (OpenOnDemand()) {
      SetState("capturing");
      // Closed at the program's next synchronization after the duration (attach.cpp), or at once
      // when none comes within kCloseWait.
      if (Sleep(milliseconds(r.duration_ms)) && !CloseAtSync(kCloseWaitMs, c.stop) && !c.stop)
        CloseOnDemand(CaptureEnd::Duration);
    } else {
      done.problem = "a window was open already";
    }
  } else {
    done.problem = StepWindow(r);
    if (done.problem.empty()) {
      while (CaptureStatus().open && Sleep(kFastPoll)) {
      }
    }
  }
  WatchSteps("");
  const WindowStatus st = CaptureStatus();
  if (st.windows > before) {
    done.window = st.windows;
    done.opened_ns = st.opened_wall_ns;
    done.closed_ns = st.open ? ondemand::WallNs() : st.closed_wall_ns;
    done.steps = r.range.empty() ? 0 : st.steps_done;
    if (r.issued_ns != 0 && st.opened_wall_ns > r.issued_ns)
      done.request_to_open_ns = st.opened_wall_ns - r.issued_ns;
    if (st.open) done.problem = "the process ended with its window open (kept up to then)";
  }
  ondemand::WriteWhole(File(r.id, "done"), ondemand::FormatDone(done), nullptr);
  if (c.stop) return;  // the process is ending: its end flushes, attached or not
  // Detaching (cuptiFinalize) gives the program its plain speed back; the next window attaches
  // again. Not with KPROF_ON_DEMAND_DETACH=0.
  if (Knobs().on_demand_detach) DetachCupti(kDetachWaitMs, c.stop);
  SetState(A().attached ? "attached" : "dormant");
}

// Waits until the program has made a device's primary context (false: the process is ending).
// Attaching CUPTI while the program's cuInit or its first context was still being made hung the
// process (H200, CUDA 13.0: requests 20-300 ms after the start; docs/capture.md), and attached
// after cuInit but before any context, the program crashed making it (capture_on_demand.cpp,
// CudaSettled). The driver starts this thread from inside cuInit: cuInit here returns once the
// program's has; retaining an active primary context returns once its making has finished. A
// program that makes no primary context (its own cuCtxCreate) is never attached: no window.
bool WaitForCuda() {
  if (const CUresult r = cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "kprof agent: on demand: cuInit answered %s; no window can open\n",
                 name != nullptr ? name : "an error");
    return false;
  }
  while (true) {
    if (CUdevice dev = 0; ActivePrimaryContext(&dev)) {
      CUcontext ctx = nullptr;
      if (cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS) cuDevicePrimaryCtxRelease(dev);
      return true;
    }
    if (!Sleep(kPoll)) return false;
  }
}

void Loop() {
  BlockSignalsInThisThread();
  Control& c = C();
  // A request already there was meant for the processes running when it was made; one made
  // while this process starts is answered once it can be.
  uint64_t last = 0;
  if (auto text = ondemand::ReadSmall(ondemand::RequestPath(c.dir)))
    if (auto r = ondemand::ParseRequest(*text, nullptr)) last = r->id;
  c.presence.last_request = last;
  SetState("starting");
  if (!WaitForCuda()) {
    SetState("ended");
    return;
  }
  SetState("dormant");
  do {
    auto text = ondemand::ReadSmall(ondemand::RequestPath(c.dir));
    if (!text) continue;
    auto r = ondemand::ParseRequest(*text, nullptr);
    if (!r || r->id <= last) continue;
    last = r->id;
    Handle(*r);
  } while (Sleep(kPoll));
}

// A dormant --capture nvtx:NAME run: the program's threads attach CUPTI as a window opens
// (capture_on_demand.cpp); this thread detaches it once the window has closed (at the program's
// next synchronization: attach.cpp), and after the last window stops kprof's NVTX handlers.
void DormantLoop() {
  BlockSignalsInThisThread();
  Control& c = C();
  // AttachRequests() when detaching was last asked for: each attachment (or a push that found
  // CUPTI attached, calling a detachment off) is followed by one once no window is open, even
  // when that push opened none.
  uint64_t asked = 0;
  bool watching = true;
  do {
    const WindowStatus st = CaptureStatus();
    if (watching && st.ended && !st.open) {
      nvtx_shim::Watch(false);  // (the handlers stay while CUPTI gets NVTX: nvtx_shim.h)
      watching = false;
    }
    const uint64_t requests = AttachRequests();
    if (st.open || !A().attached || requests == asked) continue;
    if (Knobs().on_demand_detach) {
      if (!DetachAfterWindow(c.stop)) continue;  // the next window is open already
    }
    asked = requests;
  } while (Sleep(kPoll));
}

// Sleeps until `d` has passed (woken early, it sleeps again); false: the process is ending.
bool SleepFor(milliseconds d) {
  const auto until = Clock::now() + d;
  for (auto now = Clock::now(); now < until; now = Clock::now())
    if (!Sleep(std::chrono::duration_cast<milliseconds>(until - now) + milliseconds(1)))
      return false;
  return true;
}

milliseconds g_delay{0}, g_duration{0};  // a dormant --delay's (StartDelayed)

// A dormant --delay run: the delay counts from the program's first primary context, as this
// thread sees it (within kPoll); CUPTI is attached then and the window opened; with a --duration
// the window closes at the program's first synchronization after it, and CUPTI is detached.
// Without one the window lasts until the process ends.
void DelayLoop() {
  BlockSignalsInThisThread();
  Control& c = C();
  if (!WaitForCuda()) {
    // (Only CUPTI sees a context of the program's own cuCtxCreate: KPROF_DORMANT=0.)
    if (!ActivePrimaryContext(nullptr)) {
      Agent& a = A();
      std::lock_guard<std::mutex> lock(a.side_mu);
      a.side_meta.emplace_back("capture_problem",
                               "no primary CUDA context was made: the dormant --delay never began "
                               "(KPROF_DORMANT=0 counts it from any context)");
    }
    return;
  }
  if (!SleepFor(g_delay) || c.stop || !AttachForWindow()) return;
  if (c.stop || !OpenOnDemand(CaptureTrigger::Time, "delay") || g_duration.count() == 0) return;
  if (SleepFor(g_duration) && !CloseAtSync(kCloseWaitMs, c.stop) && !c.stop)
    CloseOnDemand(CaptureEnd::Duration);
  if (!c.stop && Knobs().on_demand_detach) DetachCupti(kDetachWaitMs, c.stop);
}

// Starts the control thread running `loop`; false (with a line on stderr) when none was made.
bool StartThread(void (*loop)(), const char* what) {
  Control& c = C();
  try {
    c.thread = std::thread(loop);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kprof agent: %s: no control thread: %s\n", what, e.what());
    return false;
  }
  c.started = true;
  return true;
}

}  // namespace

void WakeControl() {
  Control& c = C();
  std::lock_guard<std::mutex> lock(c.mu);
  c.wake = true;
  c.cv.notify_all();
}

bool StartDormant() { return StartThread(DormantLoop, "dormant capture"); }

bool StartDelayed(uint64_t delay_ms, uint64_t duration_ms) {
  g_delay = milliseconds(delay_ms);
  g_duration = milliseconds(duration_ms);
  return StartThread(DelayLoop, "dormant --delay");
}

bool StartOnDemand(const std::string& run_dir, const std::string& rank) {
  Control& c = C();
  c.dir = ondemand::ControlDir(run_dir);
  ::mkdir(c.dir.c_str(), 0755);  // made by kprof run; EEXIST is fine
  c.presence.pid = static_cast<uint64_t>(getpid());
  c.presence.rank = rank;
  return StartThread(Loop, "on demand");
}

void EndOnDemand() {
  Control& c = C();
  if (!c.started || c.stop.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.cv.notify_all();
  }
  if (c.thread.joinable()) {
    if (c.thread.get_id() == std::this_thread::get_id())
      c.thread.detach();
    else
      c.thread.join();
  }
  CancelDetach();
  {
    Agent& a = A();
    std::lock_guard<std::mutex> lock(a.side_mu);
    a.side_meta.emplace_back("cupti_detachments", std::to_string(Detachments()));
    if (const uint64_t waits = LaunchesThatWaitedForDetachment(); waits != 0)
      a.side_meta.emplace_back("graph_launches_waited_for_detach", std::to_string(waits));
    // (CUPTI attached, no window open: launched with the GPU work's records on; attach.cpp.)
    const auto [outside, unswitched] = GraphLaunchesOutsideWindows();
    a.side_meta.emplace_back("graph_launches_outside_windows", std::to_string(outside));
    if (unswitched != 0)
      a.side_meta.emplace_back("graph_launches_outside_unswitched", std::to_string(unswitched));
  }
  SetState("ended");
}

}  // namespace kprof::agent
