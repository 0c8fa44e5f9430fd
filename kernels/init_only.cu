// init_only [STATUS=7] [SLEEP_MS=0]: initialises CUDA (the runtime's cudaGetDeviceCount: cuInit,
// no context, no kernel), sleeps SLEEP_MS and exits with STATUS. Under `kprof run --metrics
// sampled` the exit lands while the agent is still preparing PM sampling on a thread of its own
// (docs/counters.md): the process must end cleanly, with its own status.
#include <chrono>
#include <thread>

#include "common.h"

int main(int argc, char** argv) {
  const long status = ArgOr(argc, argv, 1, 7);
  const long sleep_ms = ArgOr(argc, argv, 2, 0);
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  std::printf("init_only: devices=%d\n", devices);
  return static_cast<int>(status);
}
