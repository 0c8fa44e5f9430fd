// kprof-calibrate: what one event costs the host on this machine. `kprof run` starts it twice,
// without the agent and with it (docs/hints.md, "kprof's own cost"), and takes the difference of
// each figure as kprof's cost per event, which the analysis takes out of the idle gaps it
// prices. Plain C++ against the CUDA runtime (linked statically) and NVTX: no nvcc is needed to
// build it, and the kernel it launches is PTX the driver compiles.
//
// It measures, in ROUNDS rounds (the fastest of each: the machine's other load only ever adds
// time, and the difference of two fastest rounds is what repeats), the host time of
//   launch: cudaLaunchKernel of an empty kernel (the launch's API record and its kernel record)
//   api:    cudaEventRecord on an idle stream (one API record, no GPU record; a call the agent
//           records, unlike polling calls such as cudaStreamQuery)
//   range:  nvtxRangePushA + nvtxRangePop (one NVTX range)
// and prints one JSON object: {"launch_ns":..,"api_ns":..,"range_ns":..,"rounds":..}.
// Exit 0; 1 when CUDA cannot run the measurement (the message names the call), 2 on bad usage.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// An empty kernel, for any device from compute capability 5.0 (the driver compiles it).
const char kPtx[] = R"(.version 7.0
.target sm_50
.address_size 64
.visible .entry kprof_calibrate_empty()
{
  ret;
}
)";

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "kprof-calibrate: %s failed: %s\n", what, cudaGetErrorString(e));
  return false;
}

double Now() {
  using namespace std::chrono;
  return duration<double, std::nano>(steady_clock::now().time_since_epoch()).count();
}

double Fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  long per_round = 2000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      per_round = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: kprof-calibrate [--rounds N] [--events N]\n");
      return 2;
    }
  }
  if (rounds < 1 || rounds > 100 || per_round < 1 || per_round > 10000000) {
    std::fprintf(stderr, "kprof-calibrate: --rounds 1..100, --events 1..10000000\n");
    return 2;
  }
  cudaLibrary_t lib{};
  cudaKernel_t kernel{};
  cudaStream_t stream{};
  cudaEvent_t event{};
  if (!Ok(cudaFree(nullptr), "cudaFree(0) (making a context)") ||
      !Ok(cudaLibraryLoadData(&lib, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cudaLibraryLoadData") ||
      !Ok(cudaLibraryGetKernel(&kernel, lib, "kprof_calibrate_empty"), "cudaLibraryGetKernel") ||
      !Ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !Ok(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"))
    return 1;
  const void* fn = reinterpret_cast<const void*>(kernel);
  const dim3 one(1, 1, 1);
  auto launches = [&](long n) {
    for (long i = 0; i < n; ++i)
      if (!Ok(cudaLaunchKernel(fn, one, one, nullptr, 0, stream), "cudaLaunchKernel")) return false;
    return Ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
  if (!launches(200)) return 1;  // warm-up: the kernel loaded, the queue made
  std::vector<double> launch, api, range;
  for (int r = 0; r < rounds; ++r) {
    double t0 = Now();
    for (long i = 0; i < per_round; ++i)
      if (!Ok(cudaLaunchKernel(fn, one, one, nullptr, 0, stream), "cudaLaunchKernel")) return 1;
    double t1 = Now();
    if (!Ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return 1;
    launch.push_back((t1 - t0) / static_cast<double>(per_round));
    t0 = Now();
    for (long i = 0; i < per_round; ++i)
      if (!Ok(cudaEventRecord(event, stream), "cudaEventRecord")) return 1;
    api.push_back((Now() - t0) / static_cast<double>(per_round));
    t0 = Now();
    for (long i = 0; i < per_round; ++i) {
      nvtxRangePushA("kprof-calibrate");
      nvtxRangePop();
    }
    range.push_back((Now() - t0) / static_cast<double>(per_round));
  }
  if (!Ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize") ||
      !Ok(cudaEventDestroy(event), "cudaEventDestroy") ||
      !Ok(cudaStreamDestroy(stream), "cudaStreamDestroy") ||
      !Ok(cudaLibraryUnload(lib), "cudaLibraryUnload"))
    return 1;
  std::printf("{\"launch_ns\":%.1f,\"api_ns\":%.1f,\"range_ns\":%.1f,\"rounds\":%d}\n",
              Fastest(launch), Fastest(api), Fastest(range), rounds);
  return 0;
}
