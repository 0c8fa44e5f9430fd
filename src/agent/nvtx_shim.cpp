// kprof's own NVTX injection for on-demand runs: see nvtx_shim.h.
#include "agent/nvtx_shim.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "agent/nvtx_shim_depths.h"

namespace kprof::agent::nvtx_shim {
namespace {

using cupti_tables::g_c_core;
using cupti_tables::g_c_core2;
using cupti_tables::g_c_cuda;
using cupti_tables::g_c_cudart;

using capture::NvtxEvent;
using depths::Depth;
using depths::DepthOf;
using depths::g_generation;
using depths::g_name;
using depths::Named;

// One adopted NVTX instance: its tables of pointers to its function slots.
struct Instance {
  NvtxFunctionTable core = nullptr, core2 = nullptr, cuda = nullptr, cudart = nullptr;
  unsigned core_n = 0, core2_n = 0, cuda_n = 0, cudart_n = 0;
};

// A domain and a registered string, as the program holds them (kprof's handles), with CUPTI's
// own made when first needed (null until then, and again after a finalization).
struct Domain {
  std::string name;
  std::wstring wname;
  bool wide = false;
  std::atomic<nvtxDomainHandle_t> cupti{nullptr};
};
struct String {
  Domain* domain = nullptr;
  std::string text;
  std::wstring wtext;
  bool wide = false;
  std::atomic<nvtxStringHandle_t> cupti{nullptr};
};

constexpr int kMaxInstances = 64;
constexpr uint64_t kOwnRange = 1ULL << 63;  // ids of ranges started while not forwarding

std::mutex g_mu;  // adoption, the registries, handing over
Instance g_instances[kMaxInstances];
std::atomic<int> g_count{0};
// The program's domains and strings, never freed (it may use them to its end), reachable from
// here to the end (leaked on purpose, like the registries themselves).
std::vector<Domain*>& g_domains = *new std::vector<Domain*>();
std::vector<String*>& g_strings = *new std::vector<String*>();
// Names given while CUPTI was not there, given again when it comes (category, thread id, name).
std::vector<std::pair<Domain*, std::pair<uint32_t, std::string>>> g_categories;
std::vector<std::pair<uint32_t, std::string>> g_threads;

std::atomic<Sink> g_sink{nullptr};
std::atomic<bool> g_watch{false};
std::atomic<bool> g_forward{false};
std::atomic<uint64_t> g_own_ids{0};
bool g_cupti_initialised = false;

// Calls CUPTI's handler in `slot` when CUPTI filled it (R{} otherwise).
template <typename R, typename... A>
R Call(NvtxFunctionPointer slot, A... a) {
  auto f = reinterpret_cast<R (*)(A...)>(slot);
  if constexpr (std::is_void_v<R>) {
    if (f != nullptr) f(a...);
  } else {
    return f != nullptr ? f(a...) : R{};
  }
}

bool Forward() { return g_forward.load(std::memory_order_acquire); }

void Give(const NvtxEvent& e) {
  if (Sink s = g_sink.load(std::memory_order_acquire)) s(e);
}

// The ASCII text of an event's message (registered strings included), or null.
const char* Text(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return nullptr;
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered != nullptr) {
    const auto* s = reinterpret_cast<const String*>(a->message.registered);
    return s->wide ? nullptr : s->text.c_str();
  }
  return nullptr;
}

// The handle `cached` holds, made by `make` (with g_mu held) when it holds none yet.
template <typename H, typename Make>
H Lazily(std::atomic<H>& cached, Make make) {
  H c = cached.load(std::memory_order_acquire);
  if (c != nullptr) return c;
  std::lock_guard<std::mutex> lock(g_mu);
  c = cached.load();
  if (c == nullptr) {
    c = make();
    cached.store(c, std::memory_order_release);
  }
  return c;
}

// CUPTI's handle for a domain or a string of the program's, made at its first use.
nvtxDomainHandle_t CuptiDomain(nvtxDomainHandle_t h) {
  if (h == nullptr) return nullptr;
  auto* d = reinterpret_cast<Domain*>(h);
  return Lazily(d->cupti, [d] {
    return d->wide ? Call<nvtxDomainHandle_t, const wchar_t*>(
                         g_c_core2[NVTX_CBID_CORE2_DomainCreateW], d->wname.c_str())
                   : Call<nvtxDomainHandle_t, const char*>(g_c_core2[NVTX_CBID_CORE2_DomainCreateA],
                                                           d->name.c_str());
  });
}

nvtxStringHandle_t CuptiString(nvtxStringHandle_t h) {
  if (h == nullptr) return nullptr;
  auto* s = reinterpret_cast<String*>(h);
  if (nvtxStringHandle_t c = s->cupti.load(std::memory_order_acquire)) return c;
  const nvtxDomainHandle_t d = CuptiDomain(reinterpret_cast<nvtxDomainHandle_t>(s->domain));
  return Lazily(s->cupti, [s, d] {
    return s->wide ? Call<nvtxStringHandle_t, nvtxDomainHandle_t, const wchar_t*>(
                         g_c_core2[NVTX_CBID_CORE2_DomainRegisterStringW], d, s->wtext.c_str())
                   : Call<nvtxStringHandle_t, nvtxDomainHandle_t, const char*>(
                         g_c_core2[NVTX_CBID_CORE2_DomainRegisterStringA], d, s->text.c_str());
  });
}

// The attributes CUPTI gets: a registered message becomes CUPTI's handle for it.
const nvtxEventAttributes_t* ForCupti(const nvtxEventAttributes_t* a, nvtxEventAttributes_t* copy) {
  if (a == nullptr || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED) return a;
  *copy = {};  // (an older, shorter struct leaves the rest zero)
  std::memcpy(copy, a, std::min<size_t>(sizeof *copy, a->size));
  copy->message.registered = CuptiString(a->message.registered);
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Pushes, pops, starts, ends and marks (the hot slots).

int Push(const void* domain, const char* text) {
  NvtxEvent e;
  e.kind = NvtxEvent::Kind::Push;
  e.message = text;
  e.domain = domain;
  if (!Forward()) {  // (its handler has turned away the pushes not watched: Named)
    // Depths count from the hand-over: a push whose sink made it (a window opening) is the first.
    e.depth = 0;
    e.generation = g_generation.load(std::memory_order_relaxed);
    Give(e);
    if (!Forward()) return NVTX_NO_PUSH_POP_TRACKING;  // what NVTX answers without a tool
    ++DepthOf(domain).depth;
    return 0;
  }
  Depth& d = DepthOf(domain);
  e.depth = d.depth++;
  e.generation = depths::t_thread.generation;  // (the one it was counted in)
  Give(e);
  // Handed to CUPTI anew since (by the sink, or another thread): depths start again, with this
  // push the first.
  if (g_generation.load(std::memory_order_relaxed) != e.generation) {
    ++DepthOf(domain).depth;
    return 0;
  }
  return e.depth;
}
// After a push went to CUPTI.
void Forwarded(const void* domain) { ++DepthOf(domain).forwarded; }
// A pop: kprof's depth back by one (the depth before and after); whether it goes to CUPTI (its
// push did). The event is given after CUPTI has had the pop (GivePop): a window that closes at it
// keeps the range's end.
struct Popped {
  int before, after;
  bool forward;
};
Popped Pop(const void* domain) {
  Depth& d = DepthOf(domain);
  const int before = d.depth;
  if (d.depth > 0) --d.depth;
  // The forwarded pushes are the newest on the stack: the pop ends one of them while any is left.
  const bool forward = d.forwarded > 0;
  if (forward) --d.forwarded;
  return {before, d.depth, forward && Forward()};
}
int GivePop(const void* domain, const Popped& p) {
  NvtxEvent e;
  e.kind = NvtxEvent::Kind::Pop;
  e.domain = domain;
  e.depth = p.after;
  Give(e);
  return p.before > 0 ? p.before - 1 : -1;
}
void Start(const void* domain, const char* text, const nvtxRangeId_t* id) {
  if (!Forward() && !Named(text)) return;
  NvtxEvent e;
  e.kind = NvtxEvent::Kind::Start;
  e.message = text;
  e.domain = domain;
  e.started = id;
  Give(e);
}
void End(nvtxRangeId_t id) {
  if (!Forward()) return;  // (no window can be open)
  NvtxEvent e;
  e.kind = NvtxEvent::Kind::End;
  e.end_id = id;
  Give(e);
}
nvtxRangeId_t OwnId() { return kOwnRange | g_own_ids.fetch_add(1, std::memory_order_relaxed); }
bool CuptiRange(nvtxRangeId_t id) { return id != 0 && (id & kOwnRange) == 0; }

// (Each push handler turns an unwatched push away first, without a call: NVTX's call of the
// handler is then all it costs.)
int PushA(const char* m) {
  if (!Forward() && !Named(m)) return NVTX_NO_PUSH_POP_TRACKING;
  const int depth = Push(nullptr, m);
  if (Forward()) {
    Call<int, const char*>(g_c_core[NVTX_CBID_CORE_RangePushA], m);
    Forwarded(nullptr);
  }
  return depth;
}
int PushW(const wchar_t* m) {
  if (!Forward() && !Named(nullptr)) return NVTX_NO_PUSH_POP_TRACKING;
  const int depth = Push(nullptr, nullptr);
  if (Forward()) {
    Call<int, const wchar_t*>(g_c_core[NVTX_CBID_CORE_RangePushW], m);
    Forwarded(nullptr);
  }
  return depth;
}
int PushEx(const nvtxEventAttributes_t* a) {
  if (!Forward() && !Named(Text(a))) return NVTX_NO_PUSH_POP_TRACKING;
  const int depth = Push(nullptr, Text(a));
  if (Forward()) {
    nvtxEventAttributes_t copy;
    Call<int, const nvtxEventAttributes_t*>(g_c_core[NVTX_CBID_CORE_RangePushEx],
                                            ForCupti(a, &copy));
    Forwarded(nullptr);
  }
  return depth;
}
int PopDefault() {
  if (!Forward()) return NVTX_NO_PUSH_POP_TRACKING;
  const Popped p = Pop(nullptr);
  if (p.forward) Call<int>(g_c_core[NVTX_CBID_CORE_RangePop]);
  return GivePop(nullptr, p);
}
int DomainPush(nvtxDomainHandle_t dom, const nvtxEventAttributes_t* a) {
  if (!Forward() && !Named(Text(a))) return NVTX_NO_PUSH_POP_TRACKING;
  const int depth = Push(dom, Text(a));
  if (Forward()) {
    nvtxEventAttributes_t copy;
    const nvtxEventAttributes_t* c = ForCupti(a, &copy);
    Call<int, nvtxDomainHandle_t, const nvtxEventAttributes_t*>(
        g_c_core2[NVTX_CBID_CORE2_DomainRangePushEx], CuptiDomain(dom), c);
    Forwarded(dom);
  }
  return depth;
}
int DomainPop(nvtxDomainHandle_t dom) {
  if (!Forward()) return NVTX_NO_PUSH_POP_TRACKING;
  const Popped p = Pop(dom);
  if (p.forward)
    Call<int, nvtxDomainHandle_t>(g_c_core2[NVTX_CBID_CORE2_DomainRangePop], CuptiDomain(dom));
  return GivePop(dom, p);
}

nvtxRangeId_t StartA(const char* m) {
  nvtxRangeId_t id = Forward()
                         ? Call<nvtxRangeId_t, const char*>(g_c_core[NVTX_CBID_CORE_RangeStartA], m)
                         : OwnId();
  Start(nullptr, m, &id);
  return id;
}
nvtxRangeId_t StartW(const wchar_t* m) {
  nvtxRangeId_t id =
      Forward() ? Call<nvtxRangeId_t, const wchar_t*>(g_c_core[NVTX_CBID_CORE_RangeStartW], m)
                : OwnId();
  Start(nullptr, nullptr, &id);
  return id;
}
nvtxRangeId_t StartEx(const nvtxEventAttributes_t* a) {
  nvtxEventAttributes_t copy;
  nvtxRangeId_t id = Forward() ? Call<nvtxRangeId_t, const nvtxEventAttributes_t*>(
                                     g_c_core[NVTX_CBID_CORE_RangeStartEx], ForCupti(a, &copy))
                               : OwnId();
  Start(nullptr, Text(a), &id);
  return id;
}
void EndDefault(nvtxRangeId_t id) {
  if (Forward() && CuptiRange(id)) Call<void, nvtxRangeId_t>(g_c_core[NVTX_CBID_CORE_RangeEnd], id);
  End(id);
}
nvtxRangeId_t DomainStart(nvtxDomainHandle_t dom, const nvtxEventAttributes_t* a) {
  nvtxEventAttributes_t copy;
  nvtxRangeId_t id =
      Forward()
          ? Call<nvtxRangeId_t, nvtxDomainHandle_t, const nvtxEventAttributes_t*>(
                g_c_core2[NVTX_CBID_CORE2_DomainRangeStartEx], CuptiDomain(dom), ForCupti(a, &copy))
          : OwnId();
  Start(dom, Text(a), &id);
  return id;
}
void DomainEnd(nvtxDomainHandle_t dom, nvtxRangeId_t id) {
  if (Forward() && CuptiRange(id))
    Call<void, nvtxDomainHandle_t, nvtxRangeId_t>(g_c_core2[NVTX_CBID_CORE2_DomainRangeEnd],
                                                  CuptiDomain(dom), id);
  End(id);
}
void MarkA(const char* m) {
  if (Forward()) Call<void, const char*>(g_c_core[NVTX_CBID_CORE_MarkA], m);
}
void MarkW(const wchar_t* m) {
  if (Forward()) Call<void, const wchar_t*>(g_c_core[NVTX_CBID_CORE_MarkW], m);
}
void MarkEx(const nvtxEventAttributes_t* a) {
  nvtxEventAttributes_t copy;
  if (Forward())
    Call<void, const nvtxEventAttributes_t*>(g_c_core[NVTX_CBID_CORE_MarkEx], ForCupti(a, &copy));
}
void DomainMark(nvtxDomainHandle_t dom, const nvtxEventAttributes_t* a) {
  nvtxEventAttributes_t copy;
  if (Forward())
    Call<void, nvtxDomainHandle_t, const nvtxEventAttributes_t*>(
        g_c_core2[NVTX_CBID_CORE2_DomainMarkEx], CuptiDomain(dom), ForCupti(a, &copy));
}

// ---------------------------------------------------------------------------------------------
// Domains, strings, resources and names (the slots always filled).

nvtxDomainHandle_t NewDomain(Domain* d) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_domains.push_back(d);
  return reinterpret_cast<nvtxDomainHandle_t>(d);
}
nvtxDomainHandle_t DomainCreateA(const char* name) {
  auto* d = new Domain();
  d->name = name != nullptr ? name : "";
  return NewDomain(d);
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) {
  auto* d = new Domain();
  d->wide = true;
  d->wname = name != nullptr ? name : L"";
  return NewDomain(d);
}
void DomainDestroy(nvtxDomainHandle_t) {}  // kept: a call in flight may still name it
nvtxStringHandle_t NewString(String* s) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_strings.push_back(s);
  return reinterpret_cast<nvtxStringHandle_t>(s);
}
nvtxStringHandle_t RegisterA(nvtxDomainHandle_t dom, const char* text) {
  auto* s = new String();
  s->domain = reinterpret_cast<Domain*>(dom);
  s->text = text != nullptr ? text : "";
  return NewString(s);
}
nvtxStringHandle_t RegisterW(nvtxDomainHandle_t dom, const wchar_t* text) {
  auto* s = new String();
  s->domain = reinterpret_cast<Domain*>(dom);
  s->wide = true;
  s->wtext = text != nullptr ? text : L"";
  return NewString(s);
}
nvtxResourceHandle_t ResourceCreate(nvtxDomainHandle_t dom, nvtxResourceAttributes_t* a) {
  if (!Forward() || a == nullptr) return nullptr;
  nvtxResourceAttributes_t copy{};
  std::memcpy(&copy, a, std::min<size_t>(sizeof copy, a->size));
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
    copy.message.registered = CuptiString(a->message.registered);
  return Call<nvtxResourceHandle_t, nvtxDomainHandle_t, nvtxResourceAttributes_t*>(
      g_c_core2[NVTX_CBID_CORE2_DomainResourceCreate], CuptiDomain(dom), &copy);
}
void ResourceDestroy(nvtxResourceHandle_t r) {
  if (Forward() && r != nullptr)
    Call<void, nvtxResourceHandle_t>(g_c_core2[NVTX_CBID_CORE2_DomainResourceDestroy], r);
}
void NameCategory(Domain* d, uint32_t category, const char* name) {
  if (name == nullptr) return;
  if (Forward()) {
    if (d == nullptr)
      Call<void, uint32_t, const char*>(g_c_core[NVTX_CBID_CORE_NameCategoryA], category, name);
    else
      Call<void, nvtxDomainHandle_t, uint32_t, const char*>(
          g_c_core2[NVTX_CBID_CORE2_DomainNameCategoryA],
          CuptiDomain(reinterpret_cast<nvtxDomainHandle_t>(d)), category, name);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_categories.push_back({d, {category, name}});
}
void NameCategoryA(uint32_t category, const char* name) { NameCategory(nullptr, category, name); }
void DomainNameCategoryA(nvtxDomainHandle_t dom, uint32_t category, const char* name) {
  NameCategory(reinterpret_cast<Domain*>(dom), category, name);
}
void NameThreadA(uint32_t tid, const char* name) {
  if (name == nullptr) return;
  if (Forward()) {
    Call<void, uint32_t, const char*>(g_c_core[NVTX_CBID_CORE_NameOsThreadA], tid, name);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_threads.push_back({tid, name});
}
void Initialize(const void*) {}

// ---------------------------------------------------------------------------------------------

template <typename Fn>
NvtxFunctionPointer P(Fn f) {
  return reinterpret_cast<NvtxFunctionPointer>(f);
}

void Set(NvtxFunctionTable t, unsigned n, unsigned id, NvtxFunctionPointer f) {
  if (t != nullptr && id < n && t[id] != nullptr)
    reinterpret_cast<std::atomic<NvtxFunctionPointer>*>(t[id])->store(f, std::memory_order_release);
}

// The hot slots of every adopted instance: kprof's handlers, or empty.
void FillHot(bool on) {
  const int n = g_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const Instance& in = g_instances[i];
    const auto c = [&](unsigned id, NvtxFunctionPointer f) {
      Set(in.core, in.core_n, id, on ? f : nullptr);
    };
    const auto c2 = [&](unsigned id, NvtxFunctionPointer f) {
      Set(in.core2, in.core2_n, id, on ? f : nullptr);
    };
    c(NVTX_CBID_CORE_MarkEx, P(&MarkEx));
    c(NVTX_CBID_CORE_MarkA, P(&MarkA));
    c(NVTX_CBID_CORE_MarkW, P(&MarkW));
    c(NVTX_CBID_CORE_RangeStartEx, P(&StartEx));
    c(NVTX_CBID_CORE_RangeStartA, P(&StartA));
    c(NVTX_CBID_CORE_RangeStartW, P(&StartW));
    c(NVTX_CBID_CORE_RangeEnd, P(&EndDefault));
    c(NVTX_CBID_CORE_RangePushEx, P(&PushEx));
    c(NVTX_CBID_CORE_RangePushA, P(&PushA));
    c(NVTX_CBID_CORE_RangePushW, P(&PushW));
    c(NVTX_CBID_CORE_RangePop, P(&PopDefault));
    c2(NVTX_CBID_CORE2_DomainMarkEx, P(&DomainMark));
    c2(NVTX_CBID_CORE2_DomainRangeStartEx, P(&DomainStart));
    c2(NVTX_CBID_CORE2_DomainRangeEnd, P(&DomainEnd));
    c2(NVTX_CBID_CORE2_DomainRangePushEx, P(&DomainPush));
    c2(NVTX_CBID_CORE2_DomainRangePop, P(&DomainPop));
  }
}

// The naming slots of CUDA and the runtime: CUPTI's own (they take no NVTX handle), or empty.
void FillNaming(bool on) {
  const int n = g_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const Instance& in = g_instances[i];
    for (unsigned id = 1; id < NVTX_CBID_CUDA_SIZE; ++id)
      Set(in.cuda, in.cuda_n, id, on ? g_c_cuda[id] : nullptr);
    for (unsigned id = 1; id < NVTX_CBID_CUDART_SIZE; ++id)
      Set(in.cudart, in.cudart_n, id, on ? g_c_cudart[id] : nullptr);
  }
}

bool Hot() { return g_watch.load() || g_forward.load(); }

}  // namespace

int Adopt(NvtxGetExportTableFunc_t get) {
  if (get == nullptr) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (cb == nullptr || cb->struct_size < sizeof(NvtxExportTableCallbacks) ||
      cb->GetModuleFunctionTable == nullptr)
    return 0;
  Instance in;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &in.core, &in.core_n) ||
      !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &in.core2, &in.core2_n))
    return 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &in.cuda, &in.cuda_n)) in.cuda = nullptr;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CUDART, &in.cudart, &in.cudart_n))
    in.cudart = nullptr;
  // The slots that make handles and names: always kprof's.
  Set(in.core, in.core_n, NVTX_CBID_CORE_NameCategoryA, P(&NameCategoryA));
  Set(in.core, in.core_n, NVTX_CBID_CORE_NameOsThreadA, P(&NameThreadA));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainCreateA, P(&DomainCreateA));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainCreateW, P(&DomainCreateW));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainDestroy, P(&DomainDestroy));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainRegisterStringA, P(&RegisterA));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainRegisterStringW, P(&RegisterW));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainResourceCreate, P(&ResourceCreate));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainResourceDestroy, P(&ResourceDestroy));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_DomainNameCategoryA, P(&DomainNameCategoryA));
  Set(in.core2, in.core2_n, NVTX_CBID_CORE2_Initialize, P(&Initialize));
  std::lock_guard<std::mutex> lock(g_mu);
  const int i = g_count.load();
  if (i >= kMaxInstances) return 0;
  g_instances[i] = in;
  g_count.store(i + 1, std::memory_order_release);
  if (Hot()) FillHot(true);
  if (Forward()) FillNaming(true);
  return 1;
}

void SetSink(Sink sink) { g_sink.store(sink, std::memory_order_release); }

void OnlyNamed(const char* name) { g_name.store(name, std::memory_order_release); }

uint64_t Unwatched() {
  uint64_t n = 0;
  for (const depths::Stripe& s : depths::g_unwatched) n += s.n.load();
  return n;
}

uint64_t Generation() { return g_generation.load(); }

void Watch(bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_watch = on;
  FillHot(Hot());
}

bool HandToCupti(CuptiInit init) {
  std::vector<std::pair<Domain*, std::pair<uint32_t, std::string>>> categories;
  std::vector<std::pair<uint32_t, std::string>> threads;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_cupti_initialised) {
      if (init == nullptr || init(&cupti_tables::Export) == 0) return false;
      g_cupti_initialised = true;
    }
    g_generation.fetch_add(1);
    g_forward.store(true, std::memory_order_release);
    FillHot(Hot());
    FillNaming(true);
    categories.swap(g_categories);
    threads.swap(g_threads);
  }
  // Names given while CUPTI was not there (forwarded now, as they would be from here on).
  for (const auto& [d, cat] : categories) NameCategory(d, cat.first, cat.second.c_str());
  for (const auto& [tid, name] : threads) NameThreadA(tid, name.c_str());
  return true;
}

void TakeBack(bool finalized) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_forward.store(false, std::memory_order_release);
  FillNaming(false);
  FillHot(Hot());
  if (finalized) {
    g_cupti_initialised = false;  // a CUPTI attached again initialises its NVTX again
    for (Domain* d : g_domains) d->cupti.store(nullptr);
    for (String* s : g_strings) s->cupti.store(nullptr);
  }
}

bool Forwarding() { return Forward(); }

int Instances() { return g_count.load(); }

}  // namespace kprof::agent::nvtx_shim
