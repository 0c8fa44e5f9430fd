// kprof's own NVTX injection for dormant runs (on demand, and --capture nvtx:NAME; docs/capture.md
// "On demand" and "Dormant"). NVTX hands its
// calls to one injection library per process; handing them to CUPTI's initialises CUPTI, and an
// initialised CUPTI costs every graph launch (H200: a 1000-node launch 200-400 us instead of
// 3 us) while nothing is recorded. So each NVTX instance of the program is adopted by kprof:
//   - dormant, nothing watched: the hot slots (push, pop, start, end, mark) are empty, and NVTX
//     calls cost what they cost without a tool;
//   - a range watched, not attached: kprof's handlers fill the hot slots and give pushes and
//     starts to the sink (which compares their names); pops cost nothing (no window can be open);
//   - attached: the handlers keep each thread's depth per domain (from the hand-over on), give
//     pushes, pops, starts and ends to the sink (the windows) and call CUPTI's, which CUPTI's NVTX
//     initialisation filled into kprof's own tables (HandToCupti) when CUPTI was attached. A push
//     whose sink attached CUPTI (a window opening) is the first of its thread's depths.
// Domains and registered strings are kprof's handles from the start (the slots that make them
// are always filled); CUPTI gets its own for each, made when a call forwarded first needs it.
// A pop is forwarded only when its push was; a range started before forwarding ends unforwarded.
// Order: a push or start reaches the sink before CUPTI (a window it opens records it), a pop or
// end reaches CUPTI before the sink (a window it closes still records it).
#pragma once

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#undef NVTX_NO_IMPL

#include "agent/capture_internal.h"

namespace kprof::agent::nvtx_shim {

using Sink = void (*)(const capture::NvtxEvent&);
using CuptiInit = int (*)(NvtxGetExportTableFunc_t);

/// Adopts one NVTX instance (InitializeInjectionNvtx2). 1: adopted; 0: its export table was not
/// understood (NVTX then makes every call of that instance a no-op).
int Adopt(NvtxGetExportTableFunc_t get);
/// The sink of the handlers' events (capture::OnDemandNvtx in the agent; a test's recorder).
void SetSink(Sink sink);
/// kprof's handlers in the hot slots (on) or the slots empty again (off, unless forwarding).
void Watch(bool on);
/// Not forwarding, only pushes and starts named `name` reach the sink (null: all); the others
/// are only counted (Unwatched). `name` must outlive the shim.
void OnlyNamed(const char* name);
/// Pushes and starts kept from the sink by OnlyNamed so far (approximately, under threads).
uint64_t Unwatched();
/// Changes at each hand-over to CUPTI, when each thread's depths start again.
uint64_t Generation();
/// From now CUPTI gets the calls too: its NVTX initialisation runs once (filling kprof's tables),
/// and CUDA's and the runtime's naming calls go straight to it. False when CUPTI refused.
bool HandToCupti(CuptiInit init);
/// CUPTI gets no call any more; `finalized`: CUPTI was finalized, its handles are gone too.
void TakeBack(bool finalized);
/// Whether calls go to CUPTI.
bool Forwarding();
/// NVTX instances adopted so far.
int Instances();

}  // namespace kprof::agent::nvtx_shim

namespace kprof::agent::nvtx_shim::cupti_tables {

// nvtx_shim_tables.cpp: CUPTI's NVTX handlers, as its NVTX initialisation leaves them in the
// tables kprof hands it (index: NVTX's callback id of the module), and that export table.
extern NvtxFunctionPointer g_c_core[NVTX_CBID_CORE_SIZE];
extern NvtxFunctionPointer g_c_core2[NVTX_CBID_CORE2_SIZE];
extern NvtxFunctionPointer g_c_cuda[NVTX_CBID_CUDA_SIZE];
extern NvtxFunctionPointer g_c_cudart[NVTX_CBID_CUDART_SIZE];
/// The export table CUPTI's InitializeInjectionNvtx2 is given (its function tables are those).
const void* NVTX_API Export(uint32_t id);

}  // namespace kprof::agent::nvtx_shim::cupti_tables
