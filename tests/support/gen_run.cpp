// kprof_gen_run: writes a synthetic kprof run file of a given number of kernels, shaped like a
// training loop (steps of NVTX op ranges, each launching kernels on a few streams, with copies,
// memsets and allocations), for tests and benchmarks that need a large run: the HTML report's
// limits, the SQLite export's speed. Deterministic: the same arguments give the same file.
//
//   kprof_gen_run OUT.kprof KERNELS [STREAMS]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "kprof/trace.h"

namespace {

using kprof::Record;
using kprof::RecordKind;

struct Gen {
  kprof::ProcessTrace t;
  uint32_t corr = 0, marker = 0;
  uint64_t state = 0x2545F4914F6CDD1DULL;

  uint64_t Next() {  // xorshift64
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  uint64_t Uniform(uint64_t lo, uint64_t hi) { return lo + Next() % (hi - lo + 1); }

  Record& Add(RecordKind k, uint64_t start, uint64_t end, const std::string& name, uint32_t tid,
              uint16_t device) {
    Record r;
    r.kind = static_cast<uint8_t>(k);
    r.start_ns = start;
    r.end_ns = end;
    r.name = name.empty() ? 0 : t.strings.Intern(name);
    r.tid = tid;
    r.device = device;
    t.records.push_back(r);
    return t.records.back();
  }
  uint32_t Api(const std::string& name, uint64_t start, uint64_t end) {
    Record& r = Add(RecordKind::RuntimeApi, start, end, name, 1, kprof::kNoDevice);
    r.correlation = ++corr;
    return r.correlation;
  }
  /// A 64 MiB device allocation or free at `at`, made by the call `by`.
  void Mem(RecordKind k, uint32_t by, uint64_t at, uint64_t addr) {
    Record& m = Add(k, at, at, "", 0, 0);
    m.correlation = by;
    m.bytes = 64ULL << 20;
    m.a = static_cast<uint32_t>(addr);
    m.b = static_cast<uint32_t>(addr >> 32);
    m.c = static_cast<uint32_t>(kprof::MemKind::Device);
  }
  void Range(const std::string& name, uint64_t start, uint64_t end) {
    Record& s = Add(RecordKind::MarkerStart, start, start, name, 1, kprof::kNoDevice);
    s.a = ++marker;
    Record& e = Add(RecordKind::MarkerEnd, end, end, "", 1, kprof::kNoDevice);
    e.a = marker;
  }
};

const char* const kOps[] = {"aten::linear", "aten::gelu",    "aten::layer_norm",
                            "aten::add",    "aten::softmax", "aten::mm"};
const char* const kKernels[] = {
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)",
    "void at::native::vectorized_layer_norm_kernel<float, float, false>(int, float)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
    "void at::native::cunn_SoftMaxForward<4, float, float, float>(float*, float const*, int)",
    "ampere_sgemm_128x64_tn"};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kprof_gen_run OUT.kprof KERNELS [STREAMS]\n");
    return 2;
  }
  const std::string out = argv[1];
  const uint64_t kernels = std::strtoull(argv[2], nullptr, 10);
  const uint32_t streams = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 4;
  if (kernels == 0 || streams == 0 || streams > 64) {
    std::fprintf(stderr, "kprof_gen_run: KERNELS >= 1 and 1 <= STREAMS <= 64\n");
    return 2;
  }
  Gen g;
  g.t.pid = 4242;
  g.t.complete = true;
  g.t.source = out;
  g.t.meta["program"] = "synthetic-train-loop";
  g.t.meta["device.0.name"] = "NVIDIA H100 80GB HBM3";
  g.t.meta["device.0.sm_count"] = "132";
  g.t.meta["device.0.cc"] = "9.0";
  g.t.meta["device.0.memory_bytes"] = "85031714816";
  g.t.records.reserve(kernels * 5 / 2 + 1000);

  uint64_t cpu = 1'790'000'000'000'000'000ULL;  // host clock (ns since the epoch)
  uint64_t gpu_free[64] = {};
  uint64_t made = 0, step = 0, addr = 0x7f0000000000ULL;
  while (made < kernels) {
    const uint64_t step_start = cpu;
    g.Mem(RecordKind::MemAlloc, g.Api("cudaMalloc", cpu, cpu + 2000), cpu + 1000, addr);
    cpu += 3000;
    // One HtoD copy of the batch per step (pinned, async) and one memset.
    const uint32_t c_corr = g.Api("cudaMemcpyAsync", cpu, cpu + 4000);
    const uint64_t c_start = std::max(cpu + 5000, gpu_free[0]);
    Record& cp = g.Add(RecordKind::Memcpy, c_start, c_start + 20'000, "", 7, 0);
    cp.flags = static_cast<uint8_t>(kprof::CopyKind::HtoD);
    cp.correlation = c_corr;
    cp.bytes = 8ULL << 20;
    cp.a = static_cast<uint32_t>(kprof::MemKind::Pinned);
    cp.b = static_cast<uint32_t>(kprof::MemKind::Device);
    cp.c = kprof::kCopyAsync;
    gpu_free[0] = c_start + 20'000;
    cpu += 5000;
    const uint32_t s_corr = g.Api("cudaMemsetAsync", cpu, cpu + 2000);
    const uint64_t s_start = std::max(cpu + 3000, gpu_free[0]);
    Record& ms = g.Add(RecordKind::Memset, s_start, s_start + 1500, "", 7, 0);
    ms.correlation = s_corr;
    ms.bytes = 1ULL << 20;
    ms.b = static_cast<uint32_t>(kprof::MemKind::Device);
    gpu_free[0] = s_start + 1500;
    cpu += 3000;
    // 200 ops per step, 1..3 kernels each, round robin over the streams.
    for (int op = 0; op < 200 && made < kernels; ++op) {
      const size_t which = g.Uniform(0, 5);
      const uint64_t op_start = cpu;
      cpu += g.Uniform(2000, 6000);  // Python and dispatcher time before the launch
      const uint64_t n = g.Uniform(1, 3);
      for (uint64_t k = 0; k < n && made < kernels; ++k, ++made) {
        const uint32_t stream = 7 + static_cast<uint32_t>(made % streams);
        const uint64_t api_end = cpu + g.Uniform(2500, 4000);
        const uint32_t corr = g.Api("cudaLaunchKernel", cpu, api_end);
        const uint64_t dur =
            which == 0 || which == 5 ? g.Uniform(20'000, 90'000) : g.Uniform(1500, 12'000);
        uint64_t& free_at = gpu_free[stream - 7];
        const uint64_t start = std::max(api_end + 1000, free_at);
        Record& r = g.Add(RecordKind::Kernel, start, start + dur, kKernels[which], stream, 0);
        r.correlation = corr;
        kprof::SetKernelLaunch(r, {static_cast<uint32_t>(g.Uniform(64, 4096)), 1, 1}, {256, 1, 1},
                               64, 16384);
        free_at = start + dur;
        cpu = api_end + 500;
      }
      g.Range(kOps[which], op_start, cpu);
      cpu += 1000;
    }
    // End of step: synchronize, free, mark the step.
    uint64_t last = 0;
    for (uint32_t s = 0; s < streams; ++s) last = std::max(last, gpu_free[s]);
    const uint32_t y_corr = g.Api("cudaDeviceSynchronize", cpu, std::max(cpu, last) + 3000);
    Record& sy = g.Add(RecordKind::Sync, cpu, std::max(cpu, last) + 2000, "", 0, kprof::kNoDevice);
    sy.flags = static_cast<uint8_t>(kprof::SyncKind::ContextSynchronize);
    sy.correlation = y_corr;
    cpu = std::max(cpu, last) + 4000;
    g.Mem(RecordKind::MemFree, g.Api("cudaFree", cpu, cpu + 3000), cpu + 1000, addr);
    cpu += 4000;
    g.Range("step " + std::to_string(step++), step_start, cpu);
    cpu += g.Uniform(10'000, 200'000);  // data loading between steps
  }
  g.t.stats.records_written = g.t.records.size();
  try {
    std::remove(out.c_str());  // a test tool: replaces an earlier output (WriteRunFile never does)
    kprof::WriteRunFile(out, g.t);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kprof_gen_run: %s\n", e.what());
    return 2;
  }
  std::printf("%s: %llu kernels, %zu records, %llu steps\n", out.c_str(),
              static_cast<unsigned long long>(made), g.t.records.size(),
              static_cast<unsigned long long>(step));
  return 0;
}
