// graph_windows: the CUDA-graph program of the capture-window fault matrix (issue 30,
// docs/reliability.md "Capture windows"). It runs through fixed phases and can open and close a
// window of its own at any two of them, with an NVTX range or the profiler API, on its own thread
// or on another one:
//
//   init         before the first CUDA call
//   cuinit       after cuInit(0): CUDA (and kprof's agent) started, no context yet
//   precontext   10 ms later, still no context
//   ctx          after cudaFree(0) (the context exists)
//   eager        after EAGER eager kernels (and a synchronization)
//   capture      in the middle of a stream capture of the graph (NODES kernels)
//   captured     after the capture ended, before instantiation
//   instantiated after cudaGraphInstantiate, before the first launch
//   launch:I     before graph launch I (0 <= I < LAUNCHES); between launches, STORM eager
//                kernels follow each launch when --storm is given
//   end          after the last launch and its synchronization
//   exit         never reached: a window "closed at exit" stays open until the process ends
//
// Options: --nodes K (20) --launches N (200) --eager E (50) --storm S (0) --trigger
// nvtx|api|none (none) --open PHASE --close PHASE --window-thread (the window's calls are made
// on a second thread, in step with the phases) --close-after-us U (the close is made on the
// window thread U us after the program reached its phase, while the program goes on; the program
// waits for it at the next phase: the close lands inside the work between the two, such as the
// context's creation or the graph's instantiation) --iter-ranges (each launch, its storm and its
// synchronization inside an NVTX range "iter") --recapture R (capture and instantiate the graph
// again before every R-th launch) --sleep-us U (host sleep of U to 2U after each launch's
// synchronization)
// --log FILE (CLOCK_REALTIME ns of every phase and of each launch's call) --exit-code C.
//
// It checks its own results (every kernel of every launch ran: a counter per node) and prints
// one line, the same under any profiler:
//   graph_windows: ok nodes=K launches=N eager=E storm=S in_window: launches=A graph_kernels=B
//   eager_kernels=C storm_kernels=D recaptures=F
// where the in_window figures count the work the program launched between the window's opening
// and closing phases (zero without --trigger): what a recording of that window must hold,
// exactly. A wrong result prints "graph_windows: WRONG ..." and exits 3.
#include <cuda.h>
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

__global__ void node_kernel(unsigned* counts, int node) {
  if (threadIdx.x == 0) atomicAdd(&counts[node], 1u);
}
__global__ void eager_kernel(unsigned* total) {
  if (threadIdx.x == 0) atomicAdd(total, 1u);
}

namespace {

uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Options {
  int nodes = 20, launches = 200, eager = 50, storm = 0, recapture = 0, sleep_us = 0;
  int exit_code = 0, close_after_us = 0;
  bool iter_ranges = false;
  std::string trigger = "none", open = "none", close = "none", log;
  bool window_thread = false;
};

// A phase's position on one line: init < cuinit < precontext < ctx < eager < capture <
// captured < instantiated < launch:0 < ... < launch:N-1 < end < exit.
constexpr const char* kFixed[] = {"init",  "cuinit",  "precontext", "ctx",
                                  "eager", "capture", "captured",   "instantiated"};
constexpr long kLaunch0 = 8;  // the rank of launch:0
long Rank(const std::string& phase, int launches) {
  for (long i = 0; i < kLaunch0; ++i)
    if (phase == kFixed[i]) return i;
  if (phase.rfind("launch:", 0) == 0) {
    char* end = nullptr;
    const long i = std::strtol(phase.c_str() + 7, &end, 10);
    if (end != phase.c_str() + 7 && *end == '\0' && i >= 0 && i < launches) return kLaunch0 + i;
    return -1;
  }
  if (phase == "end") return kLaunch0 + launches;
  if (phase == "exit") return kLaunch0 + 1 + launches;
  return -1;
}

// The window's own calls, made where the program stands at a phase: on this thread, or handed to
// the window thread and waited for (so that the order of the phases holds either way); with
// --close-after-us, the close is handed over late and waited for at the next phase.
class Window {
 public:
  explicit Window(const Options& o) : o_(o) {
    open_ = Rank(o.open, o.launches);
    close_ = Rank(o.close, o.launches);
    if ((o.window_thread || o.close_after_us > 0) && o.trigger != "none")
      worker_ = std::thread([this] { Serve(); });
  }
  ~Window() {
    if (worker_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        quit_ = true;
      }
      cv_.notify_all();
      worker_.join();
    }
  }
  bool Valid() const {
    return o_.trigger == "none" || (open_ >= 0 && close_ >= 0 && open_ < close_);
  }
  // Before the work of phase `rank`.
  void At(long rank) {
    if (o_.trigger == "none") return;
    Settle();
    if (rank == open_) Do(true, 0);
    if (rank == close_) Do(false, o_.close_after_us);
  }
  // Waits for a close handed over late.
  void Settle() {
    if (!worker_.joinable()) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return job_ == 0; });
  }
  bool Inside(long rank) const { return o_.trigger != "none" && rank >= open_ && rank < close_; }

 private:
  void Call(bool open) {
    if (o_.trigger == "nvtx") {
      if (open)
        nvtxRangePushA("window");
      else
        nvtxRangePop();
    } else if (open) {
      CHECK(cudaProfilerStart());
    } else {
      CHECK(cudaProfilerStop());
    }
  }
  void Do(bool open, int after_us) {
    if (!worker_.joinable()) return Call(open);
    std::unique_lock<std::mutex> lock(mu_);
    job_ = open ? 1 : 2;
    after_us_ = after_us;
    cv_.notify_all();
    if (after_us > 0) return;  // Settle() at the next phase waits for it
    cv_.wait(lock, [&] { return job_ == 0; });
  }
  void Serve() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return quit_ || job_ != 0; });
      if (job_ != 0) {
        if (after_us_ > 0) {
          lock.unlock();
          std::this_thread::sleep_for(std::chrono::microseconds(after_us_));
          lock.lock();
        }
        Call(job_ == 1);
        job_ = 0;
        cv_.notify_all();
        continue;
      }
      if (quit_) return;
    }
  }
  const Options& o_;
  long open_ = -1, close_ = -1;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  int job_ = 0, after_us_ = 0;
  bool quit_ = false;
};

bool Parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const auto number = [&](int& out) {
      const char* v = value();
      if (v == nullptr) return false;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || n < 0 || n > 100'000'000) return false;
      out = static_cast<int>(n);
      return true;
    };
    const auto text = [&](std::string& out) {
      const char* v = value();
      if (v == nullptr) return false;
      out = v;
      return true;
    };
    bool ok = true;
    if (a == "--nodes")
      ok = number(o.nodes);
    else if (a == "--launches")
      ok = number(o.launches);
    else if (a == "--eager")
      ok = number(o.eager);
    else if (a == "--storm")
      ok = number(o.storm);
    else if (a == "--recapture")
      ok = number(o.recapture);
    else if (a == "--sleep-us")
      ok = number(o.sleep_us);
    else if (a == "--exit-code")
      ok = number(o.exit_code);
    else if (a == "--close-after-us")
      ok = number(o.close_after_us);
    else if (a == "--iter-ranges")
      o.iter_ranges = true;
    else if (a == "--trigger")
      ok = text(o.trigger);
    else if (a == "--open")
      ok = text(o.open);
    else if (a == "--close")
      ok = text(o.close);
    else if (a == "--log")
      ok = text(o.log);
    else if (a == "--window-thread")
      o.window_thread = true;
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "graph_windows: bad argument %s\n", a.c_str());
      return false;
    }
  }
  if (o.nodes < 1 || o.nodes > 100000 || o.launches < 1 ||
      (o.trigger != "none" && o.trigger != "nvtx" && o.trigger != "api")) {
    std::fprintf(stderr, "graph_windows: bad --nodes, --launches or --trigger\n");
    return false;
  }
  return true;
}

struct Graph {
  cudaGraphExec_t exec = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, o)) return 2;
  Window w(o);
  if (!w.Valid()) {
    std::fprintf(stderr, "graph_windows: --open must name a phase before --close's\n");
    return 2;
  }
  std::vector<std::pair<std::string, uint64_t>> phases;
  std::vector<std::pair<uint64_t, uint64_t>> calls;  // each launch's cudaGraphLaunch
  calls.reserve(static_cast<size_t>(o.launches));
  const auto phase = [&](const std::string& name, long rank) {
    w.At(rank);
    if (!o.log.empty()) phases.emplace_back(name, RealtimeNs());
  };
  const int n = o.launches;
  long in_launches = 0, in_eager = 0, in_storm = 0;

  phase("init", 0);
  if (cuInit(0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "graph_windows: cuInit failed\n");
    return 2;
  }
  phase("cuinit", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  phase("precontext", 2);
  CHECK(cudaFree(nullptr));
  phase("ctx", 3);
  unsigned *counts = nullptr, *total = nullptr;
  CHECK(cudaMalloc(&counts, sizeof(unsigned) * static_cast<size_t>(o.nodes)));
  CHECK(cudaMalloc(&total, sizeof(unsigned)));
  CHECK(cudaMemset(counts, 0, sizeof(unsigned) * static_cast<size_t>(o.nodes)));
  CHECK(cudaMemset(total, 0, sizeof(unsigned)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < o.eager; ++i) {
    eager_kernel<<<1, 32, 0, s>>>(total);
    CHECK_LAUNCH();
  }
  CHECK(cudaStreamSynchronize(s));
  if (w.Inside(3)) in_eager += o.eager;
  phase("eager", 4);

  // The capture: the window's call at "capture" falls between two captured launches. NVTX is
  // no CUDA call; the profiler API is one that a stricter capture mode refuses (relaxed lets it).
  int recaptures = 0;
  const auto capture = [&](bool marks) {
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(
        s, o.trigger == "api" ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < o.nodes; ++k) {
      if (marks && k == o.nodes / 2) phase("capture", 5);
      node_kernel<<<1, 32, 0, s>>>(counts, k);
      CHECK_LAUNCH();
    }
    CHECK(cudaStreamEndCapture(s, &graph));
    if (marks) phase("captured", 6);
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    return exec;
  };
  cudaGraphExec_t exec = capture(true);
  phase("instantiated", 7);
  for (int i = 0; i < n; ++i) {
    phase("launch:" + std::to_string(i), kLaunch0 + i);
    if (o.iter_ranges) nvtxRangePushA("iter");
    if (o.recapture > 0 && i > 0 && i % o.recapture == 0) {
      CHECK(cudaGraphExecDestroy(exec));
      exec = capture(false);
      ++recaptures;
    }
    const uint64_t t0 = o.log.empty() ? 0 : RealtimeNs();
    CHECK(cudaGraphLaunch(exec, s));
    const uint64_t t1 = o.log.empty() ? 0 : RealtimeNs();
    if (!o.log.empty()) calls.emplace_back(t0, t1);
    for (int k = 0; k < o.storm; ++k) {
      eager_kernel<<<1, 32, 0, s>>>(total);
      CHECK_LAUNCH();
    }
    CHECK(cudaStreamSynchronize(s));
    if (o.iter_ranges) nvtxRangePop();
    if (w.Inside(kLaunch0 + i)) {
      ++in_launches;
      in_storm += o.storm;
    }
    // Uneven gaps (U to 2U), so that a log of the calls lines up with a recording in one way only.
    if (o.sleep_us > 0)
      std::this_thread::sleep_for(
          std::chrono::microseconds(o.sleep_us + (i * 37 % 11) * o.sleep_us / 10));
  }
  phase("end", kLaunch0 + n);
  w.Settle();

  std::vector<unsigned> host(static_cast<size_t>(o.nodes));
  unsigned host_total = 0;
  CHECK(cudaMemcpy(host.data(), counts, sizeof(unsigned) * host.size(), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&host_total, total, sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(counts));
  CHECK(cudaFree(total));
  bool right = host_total == static_cast<unsigned>(o.eager + static_cast<long>(n) * o.storm);
  for (unsigned c : host) right &= c == static_cast<unsigned>(n);
  if (!o.log.empty()) {
    std::FILE* f = std::fopen(o.log.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "graph_windows: cannot write %s\n", o.log.c_str());
      return 2;
    }
    for (const auto& [name, ns] : phases)
      std::fprintf(f, "phase %s %llu\n", name.c_str(), static_cast<unsigned long long>(ns));
    for (const auto& [t0, t1] : calls)
      std::fprintf(f, "launch %llu %llu\n", static_cast<unsigned long long>(t0),
                   static_cast<unsigned long long>(t1));
    std::fclose(f);
  }
  std::printf(
      "graph_windows: %s nodes=%d launches=%d eager=%d storm=%d in_window: launches=%ld "
      "graph_kernels=%ld eager_kernels=%ld storm_kernels=%ld recaptures=%d\n",
      right ? "ok" : "WRONG", o.nodes, n, o.eager, o.storm, in_launches, in_launches * o.nodes,
      in_eager, in_storm, recaptures);
  std::fflush(stdout);
  if (!right) return 3;
  return o.exit_code;
}
