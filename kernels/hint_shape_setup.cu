// hint_shape_setup [STEPS] [SHAPES] [--fixed]: planted bottleneck for `shape-setup` (issue 15:
// one-time set-up on new shapes inside a library op).
// A "library" op, row_softmax (NVTX range library_op), generates its kernel for each new row
// length the first time it sees it: it compiles CUDA source with that length built in (NVRTC)
// and loads the module, as libraries that generate code per shape do (Triton, cuDNN's runtime
// fusion, CuPy). Each of STEPS steps (NVTX range step) queues a 300 us kernel (prep) and then
// calls the op on a 1024-row matrix whose row length grows every STEPS / SHAPES steps (1024,
// 2048, ...: a sequence that grows, as in decoding) and then waits for the step's result, as a
// decoder waits for each token (without the wait, queued steps would hide part of each compile
// and the saving would vary from run to run). The GPU idles while each new length is compiled
// (tens of ms each). Expected top hint: shape-setup.
// --fixed: the hint's fix, bucketed shapes. The op's kernel is generated once, for the largest
// bucket (its row length built in, as for every planted shape, so that a set-up costs the same
// in both modes), and every call runs on rows padded to it: one set-up, at the first call.
// One step before the timed part in both modes (the prep kernel's module); links NVRTC and the
// driver API.
#include <cuda.h>
#include <nvrtc.h>
#include <nvtx3/nvToolsExt.h>

#include <map>
#include <string>
#include <vector>

#include "common.h"

#define CHECK_NVRTC(call)                                                       \
  do {                                                                          \
    nvrtcResult r_ = (call);                                                    \
    if (r_ != NVRTC_SUCCESS) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   nvrtcGetErrorString(r_));                                    \
      std::exit(2);                                                             \
    }                                                                           \
  } while (0)
#define CHECK_CU(call)                                                                          \
  do {                                                                                          \
    CUresult r_ = (call);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                   \
      const char* m_ = nullptr;                                                                 \
      cuGetErrorString(r_, &m_);                                                                \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, m_ ? m_ : "?"); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

__global__ void prep(float* x, unsigned long long ns) {
  const unsigned long long t0 = GlobalTimerNs();
  float v = threadIdx.x;
  while (GlobalTimerNs() - t0 < ns) v = v * 0.9999f + 1.0f;
  if (threadIdx.x == 0) x[blockIdx.x] = v;
}

namespace {

// The op's kernel source: a softmax over each row of length COLS, built in.
const char* kSource = R"(
extern "C" __global__ void row_softmax(float* x) {
  const int cols = COLS;
  float* row = x + (size_t)blockIdx.x * cols;
  __shared__ float red[32];
  float m = -3.0e38f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0;
  for (int w = 0; w < blockDim.x / 32; ++w) s += red[w];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) row[c] = __expf(row[c] - m) / s;
  // A per-row epilogue, unrolled: generated code of a realistic size, so that making the kernel
  // takes as long as a real library's per-shape set-up (tens of ms; cuDNN's attention plans took
  // 41-50 ms on the H100, tests/gpu/scripts/decode_shapes.py).
  if (threadIdx.x == 0) {
    float v = row[0];
#pragma unroll
    for (int i = 0; i < 1024; ++i) v = __sinf(v) * 0.5f + __cosf(v * 1.0001f + i);
    row[0] = v;
  }
}
)";

// The library: a plan (a loaded kernel) per key, made on first use.
class RowSoftmax {
 public:
  explicit RowSoftmax(bool bucketed, int max_cols) : bucketed_(bucketed), max_cols_(max_cols) {
    int dev = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&major_, cudaDevAttrComputeCapabilityMajor, dev));
    CHECK(cudaDeviceGetAttribute(&minor_, cudaDevAttrComputeCapabilityMinor, dev));
  }
  ~RowSoftmax() {
    for (auto& [key, plan] : plans_) cuModuleUnload(plan.module);
  }
  void operator()(float* x, int rows, int cols) {
    nvtxRangePushA("library_op");
    CUfunction f = Plan(bucketed_ ? max_cols_ : cols);
    void* args[] = {&x};
    CHECK_CU(cuLaunchKernel(f, rows, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    nvtxRangePop();
  }

 private:
  struct Compiled {
    CUmodule module;
    CUfunction fn;
  };
  CUfunction Plan(int key) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.fn;
    nvrtcProgram prog;
    CHECK_NVRTC(nvrtcCreateProgram(&prog, kSource, "row_softmax.cu", 0, nullptr, nullptr));
    const std::string arch = "--gpu-architecture=sm_" + std::to_string(major_ * 10 + minor_);
    const std::string cols = "-DCOLS=" + std::to_string(key);
    std::vector<const char*> opts = {arch.c_str(), cols.c_str()};
    if (nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data()) != NVRTC_SUCCESS) {
      size_t n = 0;
      nvrtcGetProgramLogSize(prog, &n);
      std::string log(n, '\0');
      nvrtcGetProgramLog(prog, log.data());
      std::fprintf(stderr, "hint_shape_setup: NVRTC: %s\n", log.c_str());
      std::exit(2);
    }
    size_t size = 0;
    CHECK_NVRTC(nvrtcGetCUBINSize(prog, &size));
    std::string cubin(size, '\0');
    CHECK_NVRTC(nvrtcGetCUBIN(prog, cubin.data()));
    CHECK_NVRTC(nvrtcDestroyProgram(&prog));
    Compiled c;
    CHECK_CU(cuModuleLoadData(&c.module, cubin.data()));
    CHECK_CU(cuModuleGetFunction(&c.fn, c.module, "row_softmax"));
    plans_[key] = c;
    return c.fn;
  }
  bool bucketed_;
  int max_cols_;
  int major_ = 0, minor_ = 0;
  std::map<int, Compiled> plans_;
};

}  // namespace

int main(int argc, char** argv) {
  const bool fixed = TakeFlag(argc, argv, "--fixed");
  const long steps = ArgOr(argc, argv, 1, 200);
  const long shapes = std::max(1L, ArgOr(argc, argv, 2, 4));
  const int rows = 1024;
  const int max_cols = static_cast<int>(1024 * shapes);
  float *x, *scratch;
  CHECK(cudaMalloc(&x, size_t(rows) * max_cols * sizeof(float)));
  CHECK(cudaMemset(x, 0, size_t(rows) * max_cols * sizeof(float)));
  CHECK(cudaMalloc(&scratch, 1024 * sizeof(float)));
  RowSoftmax softmax(fixed, max_cols);
  prep<<<1024, 128>>>(scratch, 1000);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  const long per_shape = std::max(1L, steps / shapes);
  const double t0 = NowSeconds();
  for (long i = 0; i < steps; ++i) {
    nvtxRangePushA("step");
    prep<<<1024, 128>>>(scratch, 300'000);
    CHECK_LAUNCH();
    const int cols = static_cast<int>(1024 * std::min(shapes, 1 + i / per_shape));
    softmax(x, rows, cols);
    CHECK(cudaStreamSynchronize(nullptr));
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("hint_shape_setup: steps=%ld shapes=%ld fixed=%d wall_s=%.6f\n", steps, shapes,
              fixed ? 1 : 0, NowSeconds() - t0);
  CHECK(cudaFree(x));
  CHECK(cudaFree(scratch));
  return 0;
}
