// nvtx_threads [ITERS]: two threads, each with its own stream and its own name. Per thread T (0,1)
// and per iteration:
//   push "thread<T>/outer" -> kernel k_outer<T> -> push "thread<T>/inner" -> 2 x kernel k_inner<T>
//   -> pop -> pop
// plus, once per thread, a start/end range "thread<T>/startend" around one k_startend kernel,
// and a mark "thread<T>/mark".
// Exact with ITERS=3: per thread 3 outer + 3 inner push/pop ranges, 1 start/end range;
// kernels: k_outer<T> 3, k_inner<T> 6, k_startend 1 per thread (2 in total).
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "common.h"

template <int T>
__global__ void k_outer(int* p) {
  p[T] += 1;
}
template <int T>
__global__ void k_inner(int* p) {
  p[2 + T] += 1;
}
__global__ void k_startend(int* p, int t) { p[4 + t] += 1; }

template <int T>
void Work(int iters, int* dev) {
  const std::string name = "worker" + std::to_string(T);
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), name.c_str());
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::string outer = "thread" + std::to_string(T) + "/outer";
  const std::string inner = "thread" + std::to_string(T) + "/inner";
  for (int i = 0; i < iters; ++i) {
    nvtxRangePushA(outer.c_str());
    k_outer<T><<<1, 1, 0, s>>>(dev);
    CHECK_LAUNCH();
    nvtxRangePushA(inner.c_str());
    k_inner<T><<<1, 1, 0, s>>>(dev);
    k_inner<T><<<1, 1, 0, s>>>(dev);
    CHECK_LAUNCH();
    nvtxRangePop();
    nvtxRangePop();
  }
  nvtxRangeId_t id = nvtxRangeStartA(("thread" + std::to_string(T) + "/startend").c_str());
  k_startend<<<1, 1, 0, s>>>(dev, T);
  CHECK_LAUNCH();
  nvtxRangeEnd(id);
  nvtxMarkA(("thread" + std::to_string(T) + "/mark").c_str());
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamDestroy(s));
}

int main(int argc, char** argv) {
  const int iters = static_cast<int>(ArgOr(argc, argv, 1, 3));
  int* dev;
  CHECK(cudaMalloc(&dev, 8 * sizeof(int)));
  CHECK(cudaMemset(dev, 0, 8 * sizeof(int)));
  CHECK(cudaDeviceSynchronize());
  std::thread t0(Work<0>, iters, dev);
  std::thread t1(Work<1>, iters, dev);
  t0.join();
  t1.join();
  int host[8];
  CHECK(cudaMemcpy(host, dev, sizeof(host), cudaMemcpyDeviceToHost));
  if (host[0] != iters || host[1] != iters || host[2] != 2 * iters || host[3] != 2 * iters) {
    std::fprintf(stderr, "wrong kernel counts\n");
    return 1;
  }
  CHECK(cudaFree(dev));
  std::printf("nvtx_threads: iters=%d threads=2 ok\n", iters);
  return 0;
}
