// kprof's PyTorch op observer (docs/pytorch.md "Op ranges without NVTX"): a RecordFunction
// observer, and the Python module _kprof_ops that kprof's layer (sitecustomize.py) drives. Built
// on first use against the torch the program imported (kprof_ops_build.py), never by kprof's own
// build: it needs that torch's headers and libraries, and Python's.
//
// Each aten op, autograd node and TorchScript function becomes one event in its thread's ring
// (kprof_op_abi.h, a copy of include/kprof/op_abi.h), which kprof's agent turns into a Range
// record: the op's name as PyTorch has it (no NVTX string is formatted, none goes through CUPTI)
// and autograd's sequence number in a field. User scopes (torch.profiler.record_function,
// torch.compile's compile phases) stay NVTX ranges when NVTX's headers were found, so that
// --capture nvtx:NAME still opens on them; else they are events too. nn.Module calls come from the
// layer's hooks through push() and pop().
//
// The observer records only while the agent does (it enables it: at its start, at each capture
// window), so outside a window it costs the program nothing but PyTorch's check for callbacks.
// It never raises into the program and never blocks: a full ring drops the event (counted).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
//
#include <ATen/record_function.h>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kprof_op_abi.h"
#ifdef KPROF_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace {

std::atomic<const kprof_op_agent*> g_agent{nullptr};
std::atomic<bool> g_on{false};     // the agent records
std::atomic<bool> g_probe{false};  // the layer times the observer: events go nowhere
// A child forked (without exec) from a process whose agent was bound: the agent's threads and
// rings are the parent's, so it never records. (A child of a process with no agent yet gets its
// own when it starts CUDA, and records.)
bool g_forked = false;
// The agent said the process ends (kKprofOpEnd): nothing more is recorded, and PyTorch, whose
// thread-local state exit may have destroyed, is not called again.
std::atomic<bool> g_ended{false};
// This thread's Thread has been destroyed (exit runs thread-local destructors before atexit
// handlers; ops may still run after): trivially destructible, so safe to read then.
thread_local bool t_gone = false;
std::mutex g_switch_mu;         // the callbacks' switching (Enable, Probe)
at::CallbackHandle g_ops = 0;   // ops, autograd nodes (and user scopes without NVTX)
at::CallbackHandle g_user = 0;  // user scopes as NVTX ranges (with NVTX)
std::string* g_describe = new std::string("PyTorch RecordFunction observer");

uint64_t Now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- names: one id per distinct text, for the process -------------------------------------

// Keys are views of the texts, kept for the process's life (leaked: threads may name ops during
// exit), so that a thread's cache keys on them too.
using NameMap = std::unordered_map<std::string_view, uint32_t>;

std::mutex g_names_mu;
std::deque<std::string>& g_texts = *new std::deque<std::string>();
NameMap& g_names = *new NameMap();
uint32_t g_next_name = 1;

// The id of `s`, and the text it is kept as (NUL-terminated).
std::pair<uint32_t, std::string_view> GlobalName(std::string_view s) {
  std::lock_guard<std::mutex> lock(g_names_mu);
  auto it = g_names.find(s);
  if (it != g_names.end()) return {it->second, it->first};
  const uint32_t id = g_next_name++;
  const std::string_view kept = g_texts.emplace_back(s);
  g_names.emplace(kept, id);
  // Defined to the agent before any event uses it (op_abi.h); one bound later gets them all.
  if (const kprof_op_agent* a = g_agent.load(std::memory_order_acquire))
    a->define_name(id, kept.data(), static_cast<uint32_t>(kept.size()));
  return {id, kept};
}

// ---- threads ------------------------------------------------------------------------------

struct Open {
  const void* fn;  // the RecordFunction (its address: one live object each), null for modules
  uint64_t begin;
  uint32_t name;
  uint32_t seq1;
  uint16_t depth;
  uint8_t kind;
  bool recording;  // a module range pushed while recording (else only kept for its pop)
};

struct Thread {
  kprof_op_ring* ring = nullptr;
  bool no_ring = false;  // the agent had none to give
  uint64_t tail_seen = 0;
  std::vector<Open> open;     // RecordFunctions begun, in order
  std::vector<Open> modules;  // the layer's module ranges
  NameMap names;              // this thread's copy of the ids it used
  // The names of ops come from their schemas, at the same address every call: looked up by
  // address first (and checked), before the text is hashed.
  struct Recent {
    const char* at = nullptr;
    const char* text = nullptr;  // the kept copy (NUL-terminated)
    uint32_t id = 0;
  };
  Recent recent[256];
  kprof_op_event scratch{};  // the probe's events

  Thread() {
    open.reserve(64);
    modules.reserve(32);
  }
  ~Thread() {
    t_gone = true;
    if (ring == nullptr) return;
    if (const kprof_op_agent* a = g_agent.load(std::memory_order_acquire)) a->thread_done(ring);
    ring = nullptr;
  }
  uint16_t Depth() const { return static_cast<uint16_t>(open.size() + modules.size()); }
  // The id of `s` (this thread's copy first), and the kept text.
  std::pair<uint32_t, std::string_view> Name(std::string_view s) {
    auto it = names.find(s);
    if (it != names.end()) return {it->second, it->first};
    const auto found = GlobalName(s);
    names.emplace(found.second, found.first);
    return found;
  }
  uint32_t Name(const char* s) {
    Recent& r = recent[(reinterpret_cast<uintptr_t>(s) >> 4) & 255];
    if (r.at == s && std::strcmp(r.text, s) == 0) return r.id;
    const auto [id, kept] = Name(std::string_view(s));
    r = {s, kept.data(), id};
    return id;
  }
  void Emit(const kprof_op_event& e) {
    if (g_probe.load(std::memory_order_relaxed)) {
      scratch = e;  // what a real event costs, kept nowhere
      return;
    }
    kprof_op_ring* r = ring;
    if (r == nullptr) {
      const kprof_op_agent* a = g_agent.load(std::memory_order_acquire);
      if (no_ring || a == nullptr) return;
      r = ring = a->thread_ring();
      if (r == nullptr) {
        no_ring = true;
        return;
      }
    }
    kprof_op_publish(r, e, &tail_seen);
  }
};

thread_local Thread t_thread;

// ---- the RecordFunction callbacks ---------------------------------------------------------

uint8_t KindOf(at::RecordScope scope) {
  switch (scope) {
    case at::RecordScope::BACKWARD_FUNCTION:
      return kKprofOpBackward;
    case at::RecordScope::USER_SCOPE:
      return kKprofOpUser;
    default:
      return kKprofOp;
  }
}

// Nothing is recorded (or touched) on this thread now.
bool Off() { return t_gone || g_forked || g_ended.load(std::memory_order_relaxed); }

// Autograd's sequence number + 1 (0: none), as the ring carries it.
uint32_t Seq1(int64_t seq) {
  return seq < 0 || seq >= int64_t{UINT32_MAX} ? 0 : static_cast<uint32_t>(seq) + 1;
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  if (Off()) return nullptr;
  Thread& t = t_thread;
  const char* name = fn.name();
  const uint16_t depth = t.Depth();
  t.open.push_back({&fn, Now(), t.Name(name != nullptr ? name : static_cast<const char*>("")),
                    Seq1(fn.seqNr()), depth, KindOf(fn.scope()), true});
  return nullptr;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* /*unused*/) {
  if (t_gone || g_forked) return;  // (after the end, ranges begun before still end)
  const uint64_t now = Now();
  Thread& t = t_thread;
  // Mostly the last one; a RecordFunction may end out of order (async scopes).
  for (size_t i = t.open.size(); i-- > 0;) {
    if (t.open[i].fn != &fn) continue;
    const Open o = t.open[i];
    t.open.erase(t.open.begin() + static_cast<std::ptrdiff_t>(i));
    t.Emit({o.begin, now, o.name, o.seq1, o.depth, o.kind, 0, 0});
    return;
  }
}

#ifdef KPROF_HAVE_NVTX
std::unique_ptr<at::ObserverContext> OnUserStart(const at::RecordFunction& fn) {
  const char* name = fn.name();
  nvtxRangePushA(name != nullptr ? name : "");
  return nullptr;
}
void OnUserEnd(const at::RecordFunction& /*fn*/, at::ObserverContext* /*unused*/) {
  nvtxRangePop();
}
#endif

// Switches the ops' callback to what the agent and the probe want (g_switch_mu held).
void Apply() {
  if (g_ops == 0) return;
  if (g_on.load() || g_probe.load())
    at::reenableCallback(g_ops);
  else
    at::disableCallback(g_ops);
}

// ---- the seam with the agent --------------------------------------------------------------

void Bind(const kprof_op_agent* agent) {
  if (agent == nullptr || agent->abi != kKprofOpAbi) return;
  std::lock_guard<std::mutex> lock(g_names_mu);
  if (g_agent.load() == agent) return;
  for (const auto& [text, id] : g_names)
    agent->define_name(id, text.data(), static_cast<uint32_t>(text.size()));
  g_agent.store(agent, std::memory_order_release);
}

void Enable(int on) {
  if (on == kKprofOpEnd) {  // the process ends: only the flags (Off), no call into PyTorch
    g_ended = true;
    g_on = false;
    return;
  }
  std::lock_guard<std::mutex> lock(g_switch_mu);
  g_on = on != 0;
  Apply();
}

const char* Describe() { return g_describe->c_str(); }

const kprof_op_observer kObserver = {kKprofOpAbi, &Bind, &Enable, &Describe};

// The agent, when CUDA started before torch was imported (it is loaded already); otherwise the
// agent finds the observer when it starts (kprof_op_observer_v1).
void OfferToLoadedAgent() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0') return;
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return;
  auto fn = reinterpret_cast<kprof_op_agent_fn>(dlsym(h, "kprof_op_agent_v1"));
  if (fn != nullptr) {
    const kprof_op_agent* a = fn();
    if (a != nullptr && a->abi == kKprofOpAbi) a->observer_ready(&kObserver);
  }
  dlclose(h);
}

// ---- the Python module --------------------------------------------------------------------

// install(description, ops) -> bool: whether user scopes are NVTX ranges. `ops`: observe
// PyTorch's ops (--pytorch ops, auto, stack); without, only the layer's module ranges and mark
// go through here (--pytorch modules).
PyObject* Install(PyObject* /*self*/, PyObject* args) {
  const char* describe = nullptr;
  int ops = 1;
  if (!PyArg_ParseTuple(args, "sp", &describe, &ops)) return nullptr;
  static bool installed = false;  // (under g_switch_mu)
  try {
    std::lock_guard<std::mutex> lock(g_switch_mu);
    if (!installed) {
      installed = true;
      *g_describe = describe;
      if (ops != 0) {
        bool nvtx = false;
#ifdef KPROF_HAVE_NVTX
        nvtx = true;
#endif
        std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes;
        for (size_t s = 0; s < static_cast<size_t>(at::RecordScope::NUM_SCOPES); ++s)
          if (!nvtx || static_cast<at::RecordScope>(s) != at::RecordScope::USER_SCOPE)
            scopes.insert(static_cast<at::RecordScope>(s));
        g_ops = at::addGlobalCallback(at::RecordFunctionCallback(&OnStart, &OnEnd)
                                          .needsInputs(false)
                                          .needsOutputs(false)
                                          .needsIds(false)
                                          .scopes(scopes));
        Apply();  // off until the agent records
#ifdef KPROF_HAVE_NVTX
        g_user = at::addGlobalCallback(at::RecordFunctionCallback(&OnUserStart, &OnUserEnd)
                                           .needsInputs(false)
                                           .scopes({at::RecordScope::USER_SCOPE}));
#endif
      }
      // Held across fork, so that a child finds them free (another thread could hold them).
      pthread_atfork(
          [] {
            g_switch_mu.lock();
            g_names_mu.lock();
          },
          [] {
            g_names_mu.unlock();
            g_switch_mu.unlock();
          },
          [] {
            g_names_mu.unlock();
            g_switch_mu.unlock();
            if (g_agent.load() != nullptr) g_forked = true;
          });
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  OfferToLoadedAgent();
  return PyBool_FromLong(g_user != 0 ? 1 : 0);
}

// name(text) -> int: the id of a name the layer gives its ranges and marks.
PyObject* Name(PyObject* /*self*/, PyObject* text) {
  if (g_forked) return PyLong_FromLong(0);  // (an id a forked child never records)
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(text, &n);
  if (s == nullptr) return nullptr;
  return PyLong_FromUnsignedLong(GlobalName(std::string_view(s, static_cast<size_t>(n))).first);
}

uint32_t IdOf(PyObject* id) {
  const unsigned long v = PyLong_AsUnsignedLong(id);
  if (PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    return 0;
  }
  return static_cast<uint32_t>(v);
}

// push(id): a module range begins on this thread (every push has its pop).
PyObject* Push(PyObject* /*self*/, PyObject* id) {
  if (t_gone || g_forked) Py_RETURN_NONE;
  Thread& t = t_thread;
  const bool on = g_on.load(std::memory_order_relaxed) || g_probe.load(std::memory_order_relaxed);
  const uint16_t depth = t.Depth();
  t.modules.push_back({nullptr, on ? Now() : 0, on ? IdOf(id) : 0, 0, depth, kKprofOpModule, on});
  Py_RETURN_NONE;
}

// pop(): the last module range of this thread ends.
PyObject* Pop(PyObject* /*self*/, PyObject* /*unused*/) {
  if (t_gone || g_forked) Py_RETURN_NONE;
  Thread& t = t_thread;
  if (t.modules.empty()) Py_RETURN_NONE;
  const Open o = t.modules.back();
  t.modules.pop_back();
  if (o.recording) t.Emit({o.begin, Now(), o.name, 0, o.depth, kKprofOpModule, 0, 0});
  Py_RETURN_NONE;
}

// mark(id): an instant of the layer's (what it added), while recording.
PyObject* Mark(PyObject* /*self*/, PyObject* id) {
  if (Off() || !g_on.load(std::memory_order_relaxed)) Py_RETURN_NONE;
  Thread& t = t_thread;
  const uint64_t now = Now();
  t.Emit({now, now, IdOf(id), 0, t.Depth(), kKprofOpMark, 0, 0});
  Py_RETURN_NONE;
}

// probe(on): the observer runs whether the agent records or not, its events kept nowhere: the
// layer times an op with it and without it (sitecustomize.py _Probe).
PyObject* Probe(PyObject* /*self*/, PyObject* on) {
  const int v = PyObject_IsTrue(on);
  if (v < 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_switch_mu);
  g_probe = v != 0;
  Apply();
  Py_RETURN_NONE;
}

// recording() -> bool: whether the agent has it record now (tests).
PyObject* Recording(PyObject* /*self*/, PyObject* /*unused*/) {
  return PyBool_FromLong(g_on.load() ? 1 : 0);
}

PyMethodDef kMethods[] = {{"install", Install, METH_VARARGS, "install(description, ops) -> bool"},
                          {"name", Name, METH_O, "name(text) -> int"},
                          {"push", Push, METH_O, "push(id)"},
                          {"pop", Pop, METH_NOARGS, "pop()"},
                          {"mark", Mark, METH_O, "mark(id)"},
                          {"probe", Probe, METH_O, "probe(on)"},
                          {"recording", Recording, METH_NOARGS, "recording() -> bool"},
                          {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_kprof_ops",
                       "kprof's PyTorch op observer (docs/pytorch.md)",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

/// Found by the agent (dlsym RTLD_DEFAULT: the layer loads this library RTLD_GLOBAL).
extern "C" __attribute__((visibility("default"))) const kprof_op_observer* kprof_op_observer_v1() {
  return &kObserver;
}

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__kprof_ops() {
  return PyModule_Create(&kModule);
}
