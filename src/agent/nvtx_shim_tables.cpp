// The tables kprof hands CUPTI's NVTX initialisation (nvtx_shim.h): CUPTI writes its handlers
// into them as into an NVTX instance's, and kprof's handlers call them from there.
#include <cstddef>
#include <cstdint>

#include "agent/nvtx_shim.h"

namespace kprof::agent::nvtx_shim::cupti_tables {

NvtxFunctionPointer g_c_core[NVTX_CBID_CORE_SIZE] = {};
NvtxFunctionPointer g_c_core2[NVTX_CBID_CORE2_SIZE] = {};
NvtxFunctionPointer g_c_cuda[NVTX_CBID_CUDA_SIZE] = {};
NvtxFunctionPointer g_c_cudart[NVTX_CBID_CUDART_SIZE] = {};

namespace {

NvtxFunctionPointer g_c_opencl[NVTX_CBID_OPENCL_SIZE] = {};  // (taken, never called)
NvtxFunctionPointer g_c_sync[NVTX_CBID_SYNC_SIZE] = {};

// kprof's export table, handed to CUPTI's NVTX initialisation: tables of kprof's slots.
template <size_t N>
struct Slots {
  NvtxFunctionPointer* p[N + 1];
  explicit Slots(NvtxFunctionPointer (&fns)[N]) {
    for (size_t i = 0; i < N; ++i) p[i] = i == 0 ? nullptr : &fns[i];
    p[N] = nullptr;
  }
};
int NVTX_API GetTable(NvtxCallbackModule m, NvtxFunctionTable* out, unsigned* size) {
  static Slots core(g_c_core);  // (one declaration each: each has its own size)
  static Slots core2(g_c_core2);
  static Slots cuda(g_c_cuda);
  static Slots cudart(g_c_cudart);
  static Slots opencl(g_c_opencl);
  static Slots sync(g_c_sync);
  struct Module {
    NvtxCallbackModule id;
    NvtxFunctionTable table;
    unsigned size;
  };
  static const Module modules[] = {{NVTX_CB_MODULE_CORE, core.p, NVTX_CBID_CORE_SIZE},
                                   {NVTX_CB_MODULE_CORE2, core2.p, NVTX_CBID_CORE2_SIZE},
                                   {NVTX_CB_MODULE_CUDA, cuda.p, NVTX_CBID_CUDA_SIZE},
                                   {NVTX_CB_MODULE_CUDART, cudart.p, NVTX_CBID_CUDART_SIZE},
                                   {NVTX_CB_MODULE_OPENCL, opencl.p, NVTX_CBID_OPENCL_SIZE},
                                   {NVTX_CB_MODULE_SYNC, sync.p, NVTX_CBID_SYNC_SIZE}};
  for (const Module& mod : modules) {
    if (mod.id != m) continue;
    if (out != nullptr) *out = mod.table;
    if (size != nullptr) *size = mod.size;
    return 1;
  }
  return 0;
}
void NVTX_API SetVersion(uint32_t) {}

}  // namespace

const void* NVTX_API Export(uint32_t id) {
  static const NvtxExportTableCallbacks callbacks{sizeof(NvtxExportTableCallbacks), &GetTable};
  static const NvtxExportTableVersionInfo version{sizeof(NvtxExportTableVersionInfo), NVTX_VERSION,
                                                  0, &SetVersion};
  if (id == NVTX_ETID_CALLBACKS) return &callbacks;
  if (id == NVTX_ETID_VERSIONINFO) return &version;
  return nullptr;
}

}  // namespace kprof::agent::nvtx_shim::cupti_tables
