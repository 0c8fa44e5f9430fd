// fault MODE PROGRESS_FILE [SECONDS [PAUSE_MS]]: the fault-matrix workload (docs/reliability.md,
// "Fault matrix"). Launches `fault_kernel` as fast as it can in batches of 256, synchronizing after
// each batch, and keeps a progress record in PROGRESS_FILE (mmap'ed, updated after every batch):
// its pid, the kernels known complete and the seconds spent. The test that kills or disturbs the
// program compares what the run file kept with that record: the difference is what was lost.
//
// PAUSE_MS (default 0) is a pause after each batch: a program that launches slowly fills CUPTI's
// buffers slowly, so that only the agent's periodic flush bounds what a kill loses.
//
// After SECONDS (default: forever, until killed) of launching, MODE says how the program ends:
//   wait     keep launching until a signal ends it (SIGKILL, SIGTERM, ...)
//   _exit    _exit(7): no atexit handlers, no CUDA teardown
//   exec     execv() the program named by $FAULT_EXEC (another CUDA program), with no arguments
//   reset    cudaDeviceReset() (the context is destroyed mid-run), then launch as many
//            `after_reset` kernels as `fault_kernel`s ran, synchronize and exit 0
//   exit     return from main (exit 0): the normal end, for comparison
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "common.h"

struct Progress {
  std::atomic<int64_t> pid;
  std::atomic<int64_t> completed;   // fault_kernel launches known finished on the GPU
  std::atomic<int64_t> elapsed_ns;  // time since the first launch, at `completed`
  std::atomic<int64_t> phase;       // 0 launching, 1 the end action started
};

__global__ void fault_kernel(int* p) { p[threadIdx.x] += 1; }
__global__ void after_reset(int* p) { p[threadIdx.x] += 2; }

static Progress* MapProgress(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 4096) != 0) {
    std::perror(path);
    std::exit(2);
  }
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    std::perror("mmap");
    std::exit(2);
  }
  return new (m) Progress{};
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: fault wait|_exit|exec|reset|exit PROGRESS_FILE [SECONDS [PAUSE_MS]]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const double seconds = argc > 3 ? std::atof(argv[3]) : 1e30;
  const long pause_ms = ArgOr(argc, argv, 4, 0);
  Progress* prog = MapProgress(argv[2]);
  prog->pid = getpid();
  int* d = nullptr;
  CHECK(cudaMalloc(&d, 32 * sizeof(int)));
  CHECK(cudaMemset(d, 0, 32 * sizeof(int)));
  CHECK(cudaDeviceSynchronize());
  const double start = NowSeconds();
  constexpr int kBatch = 256;
  int64_t done = 0;
  while (NowSeconds() - start < seconds) {
    for (int i = 0; i < kBatch; ++i) fault_kernel<<<1, 32>>>(d);
    CHECK_LAUNCH();
    CHECK(cudaDeviceSynchronize());
    done += kBatch;
    prog->elapsed_ns = static_cast<int64_t>((NowSeconds() - start) * 1e9);
    prog->completed = done;
    if (pause_ms > 0) usleep(static_cast<useconds_t>(pause_ms) * 1000);
  }
  prog->phase = 1;
  std::printf("fault: %lld kernels in %.3f s, now %s\n", static_cast<long long>(done),
              NowSeconds() - start, mode.c_str());
  std::fflush(stdout);
  if (mode == "_exit") _exit(7);
  if (mode == "exec") {
    const char* next = std::getenv("FAULT_EXEC");
    if (next == nullptr) {
      std::fprintf(stderr, "fault: exec needs FAULT_EXEC\n");
      return 2;
    }
    char* args[] = {const_cast<char*>(next), nullptr};
    execv(next, args);
    std::perror(next);
    return 2;
  }
  if (mode == "reset") {
    CHECK(cudaDeviceReset());
    CHECK(cudaMalloc(&d, 32 * sizeof(int)));
    CHECK(cudaMemset(d, 0, 32 * sizeof(int)));
    for (int64_t i = 0; i < done; ++i) after_reset<<<1, 32>>>(d);
    CHECK_LAUNCH();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(d));
    return 0;
  }
  if (mode == "exit") {
    CHECK(cudaFree(d));
    return 0;
  }
  std::fprintf(stderr, "fault: unknown mode %s\n", mode.c_str());
  return 2;
}
