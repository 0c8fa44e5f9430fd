// kprof's own NVTX injection (src/agent/nvtx_shim.h) against a fake NVTX instance (its slots and
// the export table NVTX hands a tool) and a fake CUPTI NVTX entry that fills kprof's tables with
// recording handlers: what the program's calls cost (empty slots while dormant), what the
// windows see, and what CUPTI gets once it is attached.
#include "agent/nvtx_shim.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kprof::agent {
namespace {

using capture::NvtxEvent;

// ---- The program's NVTX instance -------------------------------------------------------------
NvtxFunctionPointer g_core[NVTX_CBID_CORE_SIZE];
NvtxFunctionPointer g_core2[NVTX_CBID_CORE2_SIZE];
NvtxFunctionPointer g_cuda[NVTX_CBID_CUDA_SIZE];
NvtxFunctionPointer g_cudart[NVTX_CBID_CUDART_SIZE];
NvtxFunctionPointer* g_core_t[NVTX_CBID_CORE_SIZE + 1];
NvtxFunctionPointer* g_core2_t[NVTX_CBID_CORE2_SIZE + 1];
NvtxFunctionPointer* g_cuda_t[NVTX_CBID_CUDA_SIZE + 1];
NvtxFunctionPointer* g_cudart_t[NVTX_CBID_CUDART_SIZE + 1];

template <size_t N>
void Table(NvtxFunctionPointer (&slots)[N], NvtxFunctionPointer* (&table)[N + 1]) {
  for (size_t i = 0; i <= N; ++i) table[i] = i == 0 || i == N ? nullptr : &slots[i];
}
int ProgramTable(NvtxCallbackModule m, NvtxFunctionTable* out, unsigned* n) {
  switch (m) {
    case NVTX_CB_MODULE_CORE:
      *out = g_core_t, *n = NVTX_CBID_CORE_SIZE;
      return 1;
    case NVTX_CB_MODULE_CORE2:
      *out = g_core2_t, *n = NVTX_CBID_CORE2_SIZE;
      return 1;
    case NVTX_CB_MODULE_CUDA:
      *out = g_cuda_t, *n = NVTX_CBID_CUDA_SIZE;
      return 1;
    case NVTX_CB_MODULE_CUDART:
      *out = g_cudart_t, *n = NVTX_CBID_CUDART_SIZE;
      return 1;
    default:
      return 0;
  }
}
const void* ProgramExport(uint32_t id) {
  static const NvtxExportTableCallbacks cb{sizeof(NvtxExportTableCallbacks), &ProgramTable};
  return id == NVTX_ETID_CALLBACKS ? &cb : nullptr;
}
// The program's calls, as NVTX makes them: an empty slot is a no-op.
template <typename Fn, typename... A>
auto Call(NvtxFunctionPointer slot, A... a) {
  using R = decltype(reinterpret_cast<Fn>(slot)(a...));
  if (slot == nullptr) return R{};
  return reinterpret_cast<Fn>(slot)(a...);
}
int PushA(const char* m) {
  return Call<int (*)(const char*)>(g_core[NVTX_CBID_CORE_RangePushA], m);
}
int Pop() { return Call<int (*)()>(g_core[NVTX_CBID_CORE_RangePop]); }
nvtxDomainHandle_t DomainCreate(const char* n) {
  return Call<nvtxDomainHandle_t (*)(const char*)>(g_core2[NVTX_CBID_CORE2_DomainCreateA], n);
}
nvtxStringHandle_t Register(nvtxDomainHandle_t d, const char* t) {
  return Call<nvtxStringHandle_t (*)(nvtxDomainHandle_t, const char*)>(
      g_core2[NVTX_CBID_CORE2_DomainRegisterStringA], d, t);
}
int DomainPush(nvtxDomainHandle_t d, nvtxStringHandle_t s) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = s;
  return Call<int (*)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)>(
      g_core2[NVTX_CBID_CORE2_DomainRangePushEx], d, &a);
}
int DomainPop(nvtxDomainHandle_t d) {
  return Call<int (*)(nvtxDomainHandle_t)>(g_core2[NVTX_CBID_CORE2_DomainRangePop], d);
}

// ---- The windows (the sink) and CUPTI -------------------------------------------------------
std::vector<std::string> g_events;  // "push step 0", "pop 0", ...
std::vector<std::string> g_order;   // who had each call first: "window push", "cupti push", ...
void Sink(const NvtxEvent& e) {
  if (e.kind == NvtxEvent::Kind::Push) g_order.push_back("window push");
  if (e.kind == NvtxEvent::Kind::Pop) g_order.push_back("window pop");
  const std::string m = e.message != nullptr ? e.message : "-";
  const std::string d = e.domain != nullptr ? "D" : "";
  if (e.kind == NvtxEvent::Kind::Push)
    g_events.push_back("push" + d + " " + m + " " + std::to_string(e.depth));
  if (e.kind == NvtxEvent::Kind::Pop) g_events.push_back("pop" + d + " " + std::to_string(e.depth));
}

std::vector<std::string> g_cupti;  // what CUPTI's handlers were called with
int CuptiPushA(const char* m) {
  g_order.push_back("cupti push");
  g_cupti.push_back(std::string("push ") + m);
  return 0;
}
int CuptiPop() {
  g_order.push_back("cupti pop");
  g_cupti.push_back("pop");
  return 0;
}
nvtxDomainHandle_t CuptiDomainCreate(const char* n) {
  g_cupti.push_back(std::string("domain ") + n);
  return reinterpret_cast<nvtxDomainHandle_t>(uintptr_t{0xd0});
}
nvtxStringHandle_t CuptiRegister(nvtxDomainHandle_t d, const char* t) {
  g_cupti.push_back("string " + std::to_string(reinterpret_cast<uintptr_t>(d)) + " " + t);
  return reinterpret_cast<nvtxStringHandle_t>(uintptr_t{0x50});
}
int CuptiDomainPush(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  g_cupti.push_back("pushD " + std::to_string(reinterpret_cast<uintptr_t>(d)) + " " +
                    std::to_string(reinterpret_cast<uintptr_t>(a->message.registered)));
  return 0;
}
int CuptiDomainPop(nvtxDomainHandle_t d) {
  g_cupti.push_back("popD " + std::to_string(reinterpret_cast<uintptr_t>(d)));
  return 0;
}
void CuptiNameCategory(uint32_t c, const char* n) {
  g_cupti.push_back("category " + std::to_string(c) + " " + n);
}
int g_cupti_inits = 0;
int CuptiInit(NvtxGetExportTableFunc_t get) {
  ++g_cupti_inits;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned n = 0, n2 = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n) ||
      !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n2))
    return 0;
  *core[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&CuptiPushA);
  *core[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&CuptiPop);
  *core[NVTX_CBID_CORE_NameCategoryA] = reinterpret_cast<NvtxFunctionPointer>(&CuptiNameCategory);
  *core2[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&CuptiDomainCreate);
  *core2[NVTX_CBID_CORE2_DomainRegisterStringA] =
      reinterpret_cast<NvtxFunctionPointer>(&CuptiRegister);
  *core2[NVTX_CBID_CORE2_DomainRangePushEx] =
      reinterpret_cast<NvtxFunctionPointer>(&CuptiDomainPush);
  *core2[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&CuptiDomainPop);
  return 1;
}

// A sink that attaches CUPTI at the push of "window" (as a dormant --capture nvtx:window does),
// and at the push of "again" detaches it and attaches it again (a push that found a detachment
// done on another thread).
void AttachingSink(const NvtxEvent& e) {
  Sink(e);
  if (e.kind != NvtxEvent::Kind::Push || e.message == nullptr) return;
  if (std::string(e.message) == "window") nvtx_shim::HandToCupti(&CuptiInit);
  if (std::string(e.message) == "again") {
    nvtx_shim::TakeBack(false);
    nvtx_shim::HandToCupti(&CuptiInit);
  }
}

TEST(NvtxShim, DormantCallsAreNoOpsThenTheWindowsAndCuptiGetThemWithCuptisOwnHandles) {
  Table(g_core, g_core_t);
  Table(g_core2, g_core2_t);
  Table(g_cuda, g_cuda_t);
  Table(g_cudart, g_cudart_t);
  nvtx_shim::Watch(false);
  nvtx_shim::SetSink(&Sink);
  ASSERT_EQ(nvtx_shim::Adopt(&ProgramExport), 1);

  // Dormant: the hot slots stay empty (a push costs what it costs without a tool); handles are
  // made all the same, and a category named now reaches CUPTI later.
  EXPECT_EQ(g_core[NVTX_CBID_CORE_RangePushA], nullptr);
  EXPECT_EQ(g_core2[NVTX_CBID_CORE2_DomainRangePushEx], nullptr);
  PushA("lost");
  EXPECT_TRUE(g_events.empty());
  const nvtxDomainHandle_t nccl = DomainCreate("NCCL");
  ASSERT_NE(nccl, nullptr);
  const nvtxStringHandle_t allreduce = Register(nccl, "allreduce");
  ASSERT_NE(allreduce, nullptr);
  Call<void (*)(uint32_t, const char*)>(g_core[NVTX_CBID_CORE_NameCategoryA], 3u, "io");

  // A range watched, not attached: kprof's handlers give the pushes (registered names decoded)
  // and nothing else; no depth is kept (NVTX's answer without a tool), no pop given.
  nvtx_shim::Watch(true);
  ASSERT_NE(g_core[NVTX_CBID_CORE_RangePushA], nullptr);
  EXPECT_EQ(PushA("step"), NVTX_NO_PUSH_POP_TRACKING);
  EXPECT_EQ(DomainPush(nccl, allreduce), NVTX_NO_PUSH_POP_TRACKING);
  EXPECT_EQ(PushA("idx 0"), NVTX_NO_PUSH_POP_TRACKING);
  EXPECT_EQ(Pop(), NVTX_NO_PUSH_POP_TRACKING);
  EXPECT_EQ((std::vector<std::string>{"push step 0", "pushD allreduce 0", "push idx 0 0"}),
            g_events);
  EXPECT_TRUE(g_cupti.empty());

  // Attached: CUPTI's initialisation once, the category given again; pops of pushes CUPTI never
  // saw stay with kprof; CUPTI gets its own domain and string for the program's.
  g_events.clear();
  ASSERT_TRUE(nvtx_shim::HandToCupti(&CuptiInit));
  EXPECT_TRUE(nvtx_shim::Forwarding());
  EXPECT_EQ(g_cupti_inits, 1);
  EXPECT_EQ((std::vector<std::string>{"category 3 io"}), g_cupti);
  g_cupti.clear();
  EXPECT_EQ(DomainPop(nccl), -1);  // (pushed before the hand-over: depths start again)
  PushA("idx 1");
  PushA("inner");
  Pop();
  Pop();
  Pop();  // "step", pushed before
  DomainPush(nccl, allreduce);
  DomainPop(nccl);
  EXPECT_EQ((std::vector<std::string>{"push idx 1", "push inner", "pop", "pop", "domain NCCL",
                                      "string 208 allreduce", "pushD 208 80", "popD 208"}),
            g_cupti);
  EXPECT_EQ((std::vector<std::string>{"popD 0", "push idx 1 0", "push inner 1", "pop 1", "pop 0",
                                      "pop 0", "pushD allreduce 0", "popD 0"}),
            g_events);

  // A window opens at a push and closes at a pop: the push reaches the windows before CUPTI (the
  // window is open when CUPTI records it), the pop CUPTI before the windows (still open then).
  g_order.clear();
  PushA("step");
  Pop();
  EXPECT_EQ((std::vector<std::string>{"window push", "cupti push", "cupti pop", "window pop"}),
            g_order);

  // Taken back: CUPTI gets nothing; the slots stay kprof's while watched, empty after.
  g_cupti.clear();
  PushA("open across");
  nvtx_shim::TakeBack(false);
  EXPECT_FALSE(nvtx_shim::Forwarding());
  Pop();  // its push went to CUPTI, but CUPTI is not there any more
  PushA("after");
  EXPECT_EQ((std::vector<std::string>{"push open across"}), g_cupti);
  EXPECT_NE(g_core[NVTX_CBID_CORE_RangePushA], nullptr);
  nvtx_shim::Watch(false);
  EXPECT_EQ(g_core[NVTX_CBID_CORE_RangePushA], nullptr);
  EXPECT_EQ(g_core2[NVTX_CBID_CORE2_DomainRangePop], nullptr);
  // Attached again without a finalization: no second initialisation, handles kept.
  g_cupti.clear();
  ASSERT_TRUE(nvtx_shim::HandToCupti(&CuptiInit));
  EXPECT_EQ(g_cupti_inits, 1);
  DomainPush(nccl, allreduce);
  EXPECT_EQ((std::vector<std::string>{"pushD 208 80"}), g_cupti);
  // Watched, not attached (a dormant --capture nvtx:NAME): a sink that hands NVTX to CUPTI inside
  // a push (a window opening) makes that push the first of the thread's depths: CUPTI gets it,
  // and its pop closes over the nested range's (depth 1, then 0).
  nvtx_shim::Watch(true);
  nvtx_shim::TakeBack(false);
  g_events.clear();
  g_cupti.clear();
  // Only the range's own pushes reach the sink; the others are counted.
  nvtx_shim::OnlyNamed("window");
  EXPECT_EQ(PushA("outer"), NVTX_NO_PUSH_POP_TRACKING);  // (open before the window: lost)
  EXPECT_EQ(PushA("wrong"), NVTX_NO_PUSH_POP_TRACKING);
  EXPECT_EQ(Pop(), NVTX_NO_PUSH_POP_TRACKING);
  EXPECT_EQ(nvtx_shim::Unwatched(), 2u);
  EXPECT_TRUE(g_events.empty());
  nvtx_shim::SetSink(&AttachingSink);
  EXPECT_EQ(PushA("window"), 0);
  nvtx_shim::SetSink(&Sink);
  EXPECT_TRUE(nvtx_shim::Forwarding());
  EXPECT_EQ(PushA("inner"), 1);
  EXPECT_EQ(Pop(), 1);
  EXPECT_EQ(Pop(), 0);
  EXPECT_EQ(Pop(), -1);  // "outer": kprof's depth stays 0, CUPTI never saw it
  EXPECT_EQ((std::vector<std::string>{"push window", "push inner", "pop", "pop"}), g_cupti);
  EXPECT_EQ((std::vector<std::string>{"push window 0", "push inner 1", "pop 1", "pop 0", "pop 0"}),
            g_events);
  EXPECT_EQ(nvtx_shim::Unwatched(), 2u);  // (attached, every push is given)
  // Handed over again inside a push made while forwarding: depths start again, that push first.
  g_events.clear();
  EXPECT_EQ(PushA("deep"), 0);
  const uint64_t generation = nvtx_shim::Generation();
  nvtx_shim::SetSink(&AttachingSink);
  EXPECT_EQ(PushA("again"), 0);
  nvtx_shim::SetSink(&Sink);
  EXPECT_NE(nvtx_shim::Generation(), generation);
  EXPECT_EQ(PushA("nested"), 1);
  EXPECT_EQ(Pop(), 1);
  EXPECT_EQ(Pop(), 0);
  EXPECT_EQ(
      (std::vector<std::string>{"push deep 0", "push again 1", "push nested 1", "pop 1", "pop 0"}),
      g_events);
  Pop();  // "deep": below the depths kept since
  nvtx_shim::OnlyNamed(nullptr);
  nvtx_shim::Watch(false);
  nvtx_shim::TakeBack(true);
  nvtx_shim::SetSink(nullptr);
}

}  // namespace
}  // namespace kprof::agent
