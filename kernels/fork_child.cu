// fork_child [KERNELS]: launches KERNELS kernels, forks a child that does no CUDA work and exits
// normally (running atexit handlers, like a fork-started worker), waits for it, then launches
// KERNELS more. Exact: 2 * KERNELS kernels, all in the parent's file; the child records nothing
// and must neither hang at exit nor finish the parent's file.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "common.h"

__global__ void parent_kernel(int* p) { p[threadIdx.x] += 1; }

int main(int argc, char** argv) {
  const long kernels = ArgOr(argc, argv, 1, 100);
  int* p;
  CHECK(cudaMalloc(&p, 32 * sizeof(int)));
  for (long i = 0; i < kernels; ++i) parent_kernel<<<1, 32>>>(p);
  CHECK(cudaDeviceSynchronize());
  pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    usleep(100 * 1000);
    std::exit(0);  // atexit handlers run in the child
  }
  int st = 0;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "fork_child: child failed (status %d)\n", st);
    return 4;
  }
  for (long i = 0; i < kernels; ++i) parent_kernel<<<1, 32>>>(p);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(p));
  std::printf("fork_child: kernels=%ld\n", 2 * kernels);
  return 0;
}
