// zoo_graphs_streams [--steps N=200] [--warmup W=3] (or a lone N): the C++ entry of the workload
// zoo (examples/zoo/README.md). A forward-like chain of 41 small kernels is captured ONCE into a
// CUDA graph by stream capture across two streams, then the graph is instantiated and launched N
// times. The chain is 4 "layers" of a gated MLP block on a 1024 x 1024 float activation X:
//   main stream s0:  H = X.W (tiled matmul), H = gelu(H + b)            | fork: s1 waits on s0
//   side stream s1:  r = rowsum(X^2), Xn = X / rms(r), G = sigmoid(Xn.V) | (tiled matmul too)
//   join, then s0:   H *= G, X += 0.5 H, loss[l] = sum |X| (block partials, then one block)
// plus a first node that resets X from X0, so every launch computes the same result.
// Outside the graph, every 50th step copies the 4 losses to pinned memory on a third stream
// (event s0 -> s2, cudaMemcpyAsync device-to-host, event s2 -> s0 before the next launch).
// NVTX: "step" around each launch (and its copy), "measured" around the whole timed loop, which
// starts after the warm-up launches and a device synchronize and ends after the final one.
// Checks: every CUDA call (CHECK); the copied losses must be finite and equal, bit for bit, to
// the first copy's (every launch computes the same: the reductions are deterministic), else
// exit 1.
// Prints one line on stdout: loop_s=<seconds of the measured loop>; a summary on stderr.
#include <nvtx3/nvToolsExt.h>

#include <cmath>
#include <vector>

#include "common.h"

namespace {

constexpr int kN = 1024;  // every matrix is kN x kN floats
constexpr int kLayers = 4;
constexpr int kTile = 32;       // matmul tile: 32 x 32 threads, one output each
constexpr int kThreads = 256;   // element-wise and reduction blocks
constexpr int kPartials = 264;  // blocks of the first pass of sum |X|
constexpr int kCopyEvery = 50;  // steps between device-to-host copies of the losses

}  // namespace

__global__ void copy_kernel(float* dst, const float* src, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) dst[i] = src[i];
}

// C = A.B for n x n row-major matrices, n a multiple of kTile: each block stages one kTile-wide
// strip of A and of B in shared memory per iteration.
__global__ void matmul_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < n; t += kTile) {
    as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
    bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = acc;
}

__global__ void bias_gelu(float* h, const float* bias, int n, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float x = h[i] + bias[i % n];
  h[i] = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

// One block per row: r[row] = sum of squares of the row (shared-memory tree reduction).
__global__ void row_sumsq(const float* x, float* r, int n) {
  __shared__ float part[kThreads];
  const float* p = x + static_cast<size_t>(blockIdx.x) * n;
  float s = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) s += p[j] * p[j];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) r[blockIdx.x] = part[0];
}

__global__ void rms_scale(const float* x, const float* r, float* out, int n, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = x[i] * rsqrtf(r[i / n] / n + 1e-5f);
}

__global__ void sigmoid_inplace(float* g, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) g[i] = 1.0f / (1.0f + expf(-g[i]));
}

__global__ void mul_inplace(float* h, const float* g, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) h[i] *= g[i];
}

__global__ void residual_add(float* x, const float* h, float alpha, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) x[i] += alpha * h[i];
}

// First pass of sum |x|: a grid-stride loop, then one partial sum per block (fixed order: the
// result is the same every launch).
__global__ void partial_abs_sum(const float* x, float* partials, int count) {
  __shared__ float part[kThreads];
  float s = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    s += fabsf(x[i]);
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = part[0];
}

// Second pass: one block sums the partials into out[slot].
__global__ void final_sum(const float* partials, int parts, float* out, int slot) {
  __shared__ float part[kThreads];
  float s = 0.0f;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += partials[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[slot] = part[0];
}

namespace {

struct Buffers {
  float *x0, *x, *h, *g, *xn, *r, *partials, *loss;
  float *w[kLayers], *v[kLayers], *b[kLayers];
};

// Deterministic values in [-scale, scale) (a 32-bit LCG).
std::vector<float> HostValues(size_t count, unsigned seed, float scale) {
  std::vector<float> out(count);
  unsigned s = seed * 2654435761u + 12345u;
  for (auto& v : out) {
    s = s * 1664525u + 1013904223u;
    v = scale * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f);
  }
  return out;
}

float* DeviceValues(size_t count, unsigned seed, float scale) {
  float* d;
  CHECK(cudaMalloc(&d, count * sizeof(float)));
  const std::vector<float> h = HostValues(count, seed, scale);
  CHECK(cudaMemcpy(d, h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

// The forward chain, launched on s0 and s1 while both are being captured.
void Forward(const Buffers& m, cudaStream_t s0, cudaStream_t s1, cudaEvent_t* fork,
             cudaEvent_t* join) {
  const int count = kN * kN;
  const int blocks = (count + kThreads - 1) / kThreads;
  const dim3 mm_grid(kN / kTile, kN / kTile), mm_block(kTile, kTile);
  copy_kernel<<<blocks, kThreads, 0, s0>>>(m.x, m.x0, count);
  CHECK_LAUNCH();
  for (int l = 0; l < kLayers; ++l) {
    CHECK(cudaEventRecord(fork[l], s0));
    CHECK(cudaStreamWaitEvent(s1, fork[l], 0));
    // Side branch: the gate, from the RMS-normalized input.
    row_sumsq<<<kN, kThreads, 0, s1>>>(m.x, m.r, kN);
    CHECK_LAUNCH();
    rms_scale<<<blocks, kThreads, 0, s1>>>(m.x, m.r, m.xn, kN, count);
    CHECK_LAUNCH();
    matmul_tiled<<<mm_grid, mm_block, 0, s1>>>(m.xn, m.v[l], m.g, kN);
    CHECK_LAUNCH();
    sigmoid_inplace<<<blocks, kThreads, 0, s1>>>(m.g, count);
    CHECK_LAUNCH();
    CHECK(cudaEventRecord(join[l], s1));
    // Main branch: the up projection, concurrent with the side branch.
    matmul_tiled<<<mm_grid, mm_block, 0, s0>>>(m.x, m.w[l], m.h, kN);
    CHECK_LAUNCH();
    bias_gelu<<<blocks, kThreads, 0, s0>>>(m.h, m.b[l], kN, count);
    CHECK_LAUNCH();
    CHECK(cudaStreamWaitEvent(s0, join[l], 0));
    mul_inplace<<<blocks, kThreads, 0, s0>>>(m.h, m.g, count);
    CHECK_LAUNCH();
    residual_add<<<blocks, kThreads, 0, s0>>>(m.x, m.h, 0.5f, count);
    CHECK_LAUNCH();
    partial_abs_sum<<<kPartials, kThreads, 0, s0>>>(m.x, m.partials, count);
    CHECK_LAUNCH();
    final_sum<<<1, kThreads, 0, s0>>>(m.partials, kPartials, m.loss, l);
    CHECK_LAUNCH();
  }
}

int ArgValue(int argc, char** argv, const char* flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0)
      return static_cast<int>(std::strtol(argv[i + 1], nullptr, 10));
  }
  // A lone positional number is the step count.
  if (std::strcmp(flag, "--steps") == 0 && argc == 2 && argv[1][0] != '-') {
    return static_cast<int>(std::strtol(argv[1], nullptr, 10));
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = ArgValue(argc, argv, "--steps", 200);
  const int warmup = ArgValue(argc, argv, "--warmup", 3);
  if (steps < 1 || warmup < 0) {
    std::fprintf(stderr, "usage: zoo_graphs_streams [--steps N>=1] [--warmup W>=0]\n");
    return 2;
  }
  const size_t count = static_cast<size_t>(kN) * kN;
  const float w_scale = std::sqrt(3.0f / kN);  // unit-variance outputs for unit-variance inputs
  Buffers m{};
  m.x0 = DeviceValues(count, 1, 1.0f);
  for (int l = 0; l < kLayers; ++l) {
    m.w[l] = DeviceValues(count, 10 + l, w_scale);
    m.v[l] = DeviceValues(count, 20 + l, w_scale);
    m.b[l] = DeviceValues(kN, 30 + l, 0.1f);
  }
  for (float** p : {&m.x, &m.h, &m.g, &m.xn}) CHECK(cudaMalloc(p, count * sizeof(float)));
  CHECK(cudaMalloc(&m.r, kN * sizeof(float)));
  CHECK(cudaMalloc(&m.partials, kPartials * sizeof(float)));
  CHECK(cudaMalloc(&m.loss, kLayers * sizeof(float)));

  cudaStream_t s0, s1, s2;
  for (cudaStream_t* s : {&s0, &s1, &s2})
    CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  cudaEvent_t fork[kLayers], join[kLayers], done, copied;
  for (int l = 0; l < kLayers; ++l) {
    CHECK(cudaEventCreateWithFlags(&fork[l], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join[l], cudaEventDisableTiming));
  }
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));

  // Capture once: s1 joins the capture through the fork events and leaves it through the joins.
  nvtxRangePushA("capture");
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
  Forward(m, s0, s1, fork, join);
  CHECK(cudaStreamEndCapture(s0, &graph));
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));
  nvtxRangePop();

  for (int i = 0; i < warmup; ++i) CHECK(cudaGraphLaunch(exec, s0));
  CHECK(cudaStreamSynchronize(s0));

  const int copies = (steps + kCopyEvery - 1) / kCopyEvery;  // steps 0, 50, 100, ...
  float* host_loss;
  CHECK(cudaMallocHost(&host_loss, static_cast<size_t>(copies) * kLayers * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("measured");
  const double t0 = NowSeconds();
  int slot = 0;
  for (int i = 0; i < steps; ++i) {
    nvtxRangePushA("step");
    CHECK(cudaGraphLaunch(exec, s0));
    if (i % kCopyEvery == 0) {
      CHECK(cudaEventRecord(done, s0));
      CHECK(cudaStreamWaitEvent(s2, done, 0));
      CHECK(cudaMemcpyAsync(host_loss + slot * kLayers, m.loss, kLayers * sizeof(float),
                            cudaMemcpyDeviceToHost, s2));
      CHECK(cudaEventRecord(copied, s2));
      CHECK(cudaStreamWaitEvent(s0, copied, 0));  // the next launch rewrites the losses
      ++slot;
    }
    nvtxRangePop();
  }
  CHECK(cudaDeviceSynchronize());
  const double loop_s = NowSeconds() - t0;
  nvtxRangePop();

  const float* reference = host_loss;  // the first copy
  int bad = 0;
  for (int c = 0; c < copies; ++c) {
    for (int l = 0; l < kLayers; ++l) {
      const float v = host_loss[c * kLayers + l];
      if (!std::isfinite(v) || std::memcmp(&v, &reference[l], sizeof(float)) != 0) ++bad;
    }
  }
  std::fprintf(stderr,
               "zoo_graphs_streams: steps=%d warmup=%d graph_nodes=%zu copies=%d loss=%.6g %.6g "
               "%.6g %.6g mismatches=%d\n",
               steps, warmup, nodes, copies, reference[0], reference[1], reference[2], reference[3],
               bad);
  if (bad != 0) {
    std::fprintf(stderr, "zoo_graphs_streams: the copied losses are not all equal and finite\n");
    return 1;
  }

  CHECK(cudaGraphExecDestroy(exec));
  for (int l = 0; l < kLayers; ++l) {
    CHECK(cudaEventDestroy(fork[l]));
    CHECK(cudaEventDestroy(join[l]));
    CHECK(cudaFree(m.w[l]));
    CHECK(cudaFree(m.v[l]));
    CHECK(cudaFree(m.b[l]));
  }
  CHECK(cudaEventDestroy(done));
  CHECK(cudaEventDestroy(copied));
  for (cudaStream_t s : {s0, s1, s2}) CHECK(cudaStreamDestroy(s));
  for (float* p : {m.x0, m.x, m.h, m.g, m.xn, m.r, m.partials, m.loss}) CHECK(cudaFree(p));
  CHECK(cudaFreeHost(host_loss));
  std::printf("loop_s=%.6f\n", loop_s);
  return 0;
}
