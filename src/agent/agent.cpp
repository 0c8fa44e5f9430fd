// The kprof agent: loaded into the profiled process by the CUDA driver (CUDA_INJECTION64_PATH)
// and by NVTX (NVTX_INJECTION64_PATH). It captures CUPTI activity records, converts them to
// kprof records on its own writer thread and streams them to one file per process. It does
// nothing else: no analysis, no JSON, no formatting inside the profiled process.
//
// This file: the injection entry points, start-up (output file, subscriber, buffers, threads,
// handlers) and the meta data written first. The collection pipeline is in writer.cpp, the
// signal handling in signals.cpp; the rules all of them follow are in agent.h.
#include "agent/agent.h"

#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

#include "agent/capture.h"
#include "agent/convert.h"
#include "agent/counters.h"
#include "agent/cupti_setup.h"
#include "agent/nvtx_shim.h"
#include "agent/op_rings.h"
#include "kprof/on_demand.h"
#include "kprof/trace.h"

#define KPROF_EXPORT extern "C" __attribute__((visibility("default")))

namespace kprof::agent {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string FirstEnv(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    std::string v = Env(n);
    if (!v.empty()) return v;
  }
  return "";
}

uint32_t OsThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

}  // namespace

Agent& A() {
  static Agent* agent = new Agent();  // leaked on purpose
  return *agent;
}

bool HandBuffers(bool* configured) {
  *configured = ConfigureActivityAttributes(/*zeroed_buffers=*/true, Knobs().device_buffer_mb);
  return KPROF_CUPTI(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
                     "hand CUPTI kprof's record buffers (nothing will be recorded)");
}

namespace {

// ---------------------------------------------------------------------------------------------
// Callbacks: context destruction flushes (the context's records go away with it); graph
// resource callbacks record how graphs are built (graphs.cpp).

void CUPTIAPI OnCallback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (OnAttachCallback(domain, cbid, data)) return;  // (on demand: attach.cpp)
  if (OnAllocationCallback(domain, cbid, data)) return;
  if (OnCaptureCallback(domain, cbid, data)) return;
  if (OnCounterCallback(domain, cbid, data)) return;
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  if (OnGraphCallback(cbid, data)) return;
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    A().contexts++;
    return;
  }
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // PM sampling stops with the first context to go (at exit CUDA tears down before the
    // agent's own exit handler runs; sampling stopped earlier, in its own exit handler).
    StopCounters(false);
    if (A().active) {
      KPROF_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                  "collect the records of a CUDA context being destroyed (they may be lost)");
      A().flushes++;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Meta data written at start.

std::string ReadCmdline() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

std::string CuptiPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "";
}

MetaList StartMeta(const std::string& rank) {
  Agent& a = A();
  MetaList m;
  m.emplace_back("pid", std::to_string(getpid()));
  m.emplace_back("ppid", std::to_string(getppid()));
  if (!rank.empty()) m.emplace_back("rank", rank);
  std::string local_rank =
      FirstEnv({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"});
  if (!local_rank.empty()) m.emplace_back("local_rank", local_rank);
  std::string world = FirstEnv({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  if (!world.empty()) m.emplace_back("world_size", world);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.emplace_back("hostname", host);
  m.emplace_back("cmdline", ReadCmdline());
  uint64_t ts = 0;
  // Dormant, no CUPTI call is made before a window opens (any call attaches CUPTI):
  // CLOCK_REALTIME, which is CUPTI's clock on Linux.
  if (a.dormant)
    ts = ondemand::WallNs();
  else
    KPROF_CUPTI(cuptiGetTimestamp(&ts), "read CUPTI's clock for the run's start time");
  m.emplace_back("start_time_ns", std::to_string(ts));
  m.emplace_back("clock", "cupti");
  uint32_t cupti_version = 0;
  if (!a.dormant &&
      KPROF_CUPTI(cuptiGetVersion(&cupti_version), "read the loaded CUPTI's version")) {
    m.emplace_back("cupti_version", std::to_string(cupti_version));
  }
  int driver = 0;
  if (cuDriverGetVersion(&driver) == CUDA_SUCCESS) {
    m.emplace_back("driver_version", std::to_string(driver));
  }
  // The runtime is the application's (static or shared); ask it only if it is visible.
  using RtVersionFn = int (*)(int*);
  if (auto fn = reinterpret_cast<RtVersionFn>(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion"))) {
    int rt = 0;
    if (fn(&rt) == 0) m.emplace_back("runtime_version", std::to_string(rt));
  }
  m.emplace_back("cupti_path", CuptiPath());
  m.emplace_back("kinds", KindsToString(a.kinds));
  m.emplace_back("graph_trace", a.graph_level ? "graph" : "node");
  // What `kprof run --pytorch` asked Python programs to add (src/pytorch); absent: not asked.
  if (!a.pytorch.empty()) m.emplace_back("pytorch", a.pytorch);
  // kprof's own cost per event, measured by kprof run (kprof/self_cost.h); absent: not measured.
  if (!a.self_cost.empty()) m.emplace_back("self_cost", a.self_cost);
  m.emplace_back("agent_version", KPROF_VERSION);
  m.emplace_back("agent_tid", std::to_string(OsThreadId()));
  if (!a.subscriber_error.empty()) m.emplace_back("subscriber_error", a.subscriber_error);
  return m;
}

}  // namespace

bool Subscribe() {
  Agent& a = A();
  CUpti_SubscriberParams params{};
  params.structSize = sizeof(CUpti_SubscriberParams);
  params.subscriberName = "kprof";
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  CUptiResult sr = cuptiSubscribe_v2(&a.subscriber, OnCallback, nullptr, &params);
  if (sr == CUPTI_SUCCESS) {
    KPROF_CUPTI(cuptiEnableCallback(1, a.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                    CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
                "watch CUDA contexts being destroyed (their last records may be lost)");
    KPROF_CUPTI(cuptiEnableCallback(1, a.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                    CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                "watch CUDA contexts being made (the run will not count them)");
    // (Dormant, graphs are recorded per node, their kernels named by their records: the
    // building of graphs is not watched, since graphs are mostly built while CUPTI is off.)
    if (!a.dormant) EnableGraphCallbacks(a.subscriber);
    if (!a.dormant && (a.kinds & kKindMemory) != 0) EnableAllocationCallbacks(a.subscriber);
    return true;
  }
  a.subscriber = nullptr;
  const char* msg = nullptr;
  cuptiGetResultString(sr, &msg);
  a.subscriber_error =
      std::string(msg != nullptr ? msg : "cuptiSubscribe failed") +
      (old_name[0] != '\0' ? std::string(" (existing subscriber: ") + old_name + ")"
                           : std::string());
  std::fprintf(stderr, "kprof agent: %s\n", a.subscriber_error.c_str());
  return false;
}

namespace {

void StartCollecting();

int Initialize() {
  Agent& a = A();
  std::lock_guard<std::mutex> lock(a.init_mu);
  if (a.initialized) return 1;
  a.initialized = true;

  // What kprof run asked for (kprof/agent_config.h), read once; what cannot be read is said.
  std::vector<ConfigProblem> problems;
  const AgentConfig cfg = ReadAgentConfig(std::getenv, problems);
  for (const ConfigProblem& p : problems)
    if (p.area == "agent") std::fprintf(stderr, "kprof agent: %s\n", p.message.c_str());
  std::string dir = cfg.output_dir.empty() ? "." : cfg.output_dir;
  std::string unknown;
  a.kinds = ParseKinds(cfg.kinds.c_str(), &unknown);
  if (!unknown.empty()) {
    std::fprintf(stderr, "kprof agent: ignoring unknown KPROF_KINDS entries: %s\n",
                 unknown.c_str());
  }
  SetAllocationSource(Knobs().alloc_source);
  if (Knobs().buffer_mb != 0) g_buffer_bytes = static_cast<size_t>(Knobs().buffer_mb) << 20;
  if (Knobs().flush_ms != 0) a.flush_period_ms = static_cast<int>(Knobs().flush_ms);
  a.pytorch = cfg.pytorch;
  a.self_cost = cfg.self_cost;
  std::string rank = FirstEnv({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  mkdir(dir.c_str(), 0755);  // usually made by the launcher; EEXIST is fine
  const std::string stem =
      dir + "/kprof." + (rank.empty() ? "" : "rank" + rank + ".") + std::to_string(getpid());

  a.on_demand = cfg.capture == "on-demand";
  a.dormant = DormantCapture(cfg, Knobs());
  // Dormant, graphs are recorded per node: graph-level tracing cannot be switched on for a
  // graph instantiated while it was off (capture.md), and CUPTI is off until a window. (An
  // explicit --graph-trace graph keeps --capture nvtx:NAME attached: DormantCapture.)
  a.graph_level = cfg.graph_trace == "graph" || (cfg.graph_trace == "auto" && !a.dormant);
  if (a.on_demand) a.graph_level = false;
  if (!a.dormant) Subscribe();

  // A program that execs another CUDA program keeps its pid: the second image's agent takes the
  // next free name (kprof.PID.1.kprof, ...) and never opens an existing file (O_EXCL).
  bool opened = false;
  for (int n = 0; n < 100 && !opened; ++n) {
    a.path = stem + (n == 0 ? std::string() : "." + std::to_string(n)) + ".kprof";
    opened = a.writer.Open(a.path);
    if (!opened && errno != EEXIST) break;
  }
  if (!opened) {
    std::fprintf(stderr, "kprof agent: cannot create %s: %s; not recording\n", a.path.c_str(),
                 std::strerror(errno));
    return 1;  // never fail the program's CUDA initialisation
  }
  a.writer.WriteMeta(StartMeta(rank));

  // Pre-fault two buffers off the hot path.
  for (int i = 0; i < 2; ++i) {
    auto* buf = static_cast<uint8_t*>(std::aligned_alloc(8, g_buffer_bytes));
    if (buf == nullptr) break;
    std::memset(buf, 0, g_buffer_bytes);
    a.ours.insert(buf);
    a.free_buffers.push_back(buf);
    ++a.allocated;
  }

  if (a.dormant) {
    // No CUPTI at all until a window opens: kprof capture asks (on_demand.cpp), or the program
    // pushes the range of --capture nvtx:NAME (capture_on_demand.cpp).
    MetaList setup;
    ConfigureCapture(cfg, problems, setup);
    StartCapture(nullptr, a.kinds);
    const bool delayed = cfg.capture.empty();  // a --delay: the control thread times it
    setup.emplace_back(a.on_demand ? "on_demand" : "dormant", a.on_demand
                                                                  ? "dormant until kprof capture"
                                                              : delayed ? "until the delay"
                                                                        : "until the range");
    a.writer.WriteMeta(setup);
    StartCollecting();
    ops::FindObserver();  // (enabled by the windows: capture.cpp)
    if (a.on_demand ? !StartOnDemand(dir, rank)
        : delayed   ? !StartDelayed(cfg.delay_ms, cfg.duration_ms)
                    : !StartDormant())
      a.writer.WriteMeta({{"on_demand_problem", "no control thread"}});
    if (!a.on_demand) DormantReady();
    return 1;
  }
  a.attached = true;
  bool configured = true;
  bool ok = HandBuffers(&configured) && configured;
  // Graphs launched from the device are recorded only at graph level, and only when asked for
  // before CUDA is initialised (the injection runs inside cuInit, before any context).
  // KPROF_DEVICE_GRAPHS=0 leaves them out (to measure what recording them costs).
  std::string device_graphs = "off";
  if (a.graph_level && (a.kinds & (kKindKernel | kKindMemcpy | kKindMemset)) != 0 &&
      Knobs().device_graphs &&
      KPROF_CUPTI(cuptiActivityEnableDeviceGraph(1),
                  "turn on the records of graphs launched from the GPU (they will be missing)"))
    device_graphs = "on";
  int apis = 0;
  // Graph-level tracing is on from the start, windows or not, and stays on (cupti_setup.h).
  if (a.graph_level) ok &= EnableGraphTrace(a.kinds);
  // Capture windows (--capture, --delay, --duration): nothing else but the device records until
  // the first window opens; each window enables the kinds and closing it disables them.
  MetaList setup;
  const bool windows =
      ConfigureCapture(cfg, problems, setup) && StartCapture(a.subscriber, a.kinds);
  if (windows) {
    ok &= KPROF_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE),
                      "record the devices' properties (the run's meta will lack them)");
  } else {
    ok &= EnableActivityKinds(a.kinds, &apis);
  }
  setup.emplace_back("api_callbacks_enabled", std::to_string(apis));
  setup.emplace_back("device_graph_trace", device_graphs);
  if (!ok) setup.emplace_back("agent_error", "CUPTI activity setup failed; see stderr");
  // Hardware counters (--metrics): after the activity kinds, on kprof's subscriber.
  if (ConfigureCounters(cfg, problems)) StartCounters(a.subscriber, setup);
  a.writer.WriteMeta(setup);
  StartCollecting();
  // The op observer (kprof/op_abi.h), if the program loaded one before CUDA started: it records
  // from now on, or with each window (capture.cpp switches it).
  ops::FindObserver();
  if (!windows) {
    ops::TakeClockOffset(&CuptiTimestamp);
    ops::SetRecording(true);
  }
  return 1;
}

void StartCollecting() {
  Agent& a = A();
  a.pid = getpid();
  // A child forked without exec has no writer, flusher or signal thread: it records nothing
  // (CUDA is not usable there either) and must not finish the parent's file at its exit.
  pthread_atfork(nullptr, nullptr, [] { A().active = false; });
  a.active = true;
  a.writer_thread = std::thread(WriterLoop);
  a.flusher_thread = std::thread(FlusherLoop);
  InstallSignalHandlers();
  std::atexit(AtExit);
}

}  // namespace

}  // namespace kprof::agent

/// Called by the CUDA driver while it initialises (CUDA_INJECTION64_PATH). Idempotent.
KPROF_EXPORT int InitializeInjection(void) {
  try {
    return kprof::agent::Initialize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kprof agent: initialisation failed: %s; not recording\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "kprof agent: initialisation failed; not recording\n");
  }
  return 1;
}

namespace {

// CUPTI's NVTX injection entry: in the libcupti this process actually uses, the copy the agent is
// bound to (PyTorch's own copy when PyTorch loaded one first: libraries resolve by soname).
kprof::agent::nvtx_shim::CuptiInit CuptiNvtxEntry() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) == 0 || info.dli_fname == nullptr) {
    std::fprintf(stderr, "kprof agent: cannot locate libcupti for NVTX\n");
    return nullptr;
  }
  void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    std::fprintf(stderr, "kprof agent: dlopen(%s) for NVTX failed: %s\n", info.dli_fname,
                 dlerror());
    return nullptr;
  }
  auto fn = reinterpret_cast<kprof::agent::nvtx_shim::CuptiInit>(
      dlsym(handle, "InitializeInjectionNvtx2"));
  if (fn == nullptr)
    std::fprintf(stderr, "kprof agent: %s has no NVTX injection entry\n", info.dli_fname);
  return fn;
}

// What the agent will decide (Initialize), decided alike at the first NVTX call, which may come
// before CUDA's: 0 attached from the start, 1 on demand, 2 dormant until --capture nvtx:NAME, 3
// dormant until --delay has passed.
int DormantRun() {
  static const int kind = [] {
    std::vector<kprof::ConfigProblem> problems;
    const kprof::AgentConfig cfg = kprof::ReadAgentConfig(std::getenv, problems);
    if (!kprof::DormantCapture(cfg, kprof::agent::Knobs())) return 0;
    return cfg.capture == "on-demand" ? 1 : cfg.capture.empty() ? 3 : 2;
  }();
  return kind;
}

}  // namespace

namespace kprof::agent {

bool HandNvtxToCupti() { return DormantRun() == 0 || nvtx_shim::HandToCupti(CuptiNvtxEntry()); }

}  // namespace kprof::agent

/// Called by each NVTX instance at its first NVTX call (NVTX_INJECTION64_PATH names this
/// library). Dormant, kprof adopts the instance (nvtx_shim.h: CUPTI gets NVTX only once it is
/// attached), and for --capture nvtx:NAME watches it from the start; otherwise it forwards to
/// CUPTI's entry at once.
KPROF_EXPORT int InitializeInjectionNvtx2(const void* get_export_table) {
  const auto get = reinterpret_cast<NvtxGetExportTableFunc_t>(get_export_table);
  if (const int dormant = DormantRun(); dormant != 0) {
    namespace shim = kprof::agent::nvtx_shim;
    shim::SetSink(dormant == 2 ? &kprof::agent::capture::DormantNvtx
                               : &kprof::agent::capture::OnDemandNvtx);
    if (dormant == 2) kprof::agent::capture::WatchDormantRange();
    return shim::Adopt(get);
  }
  const auto fn = CuptiNvtxEntry();
  return fn != nullptr ? fn(get) : 0;
}
