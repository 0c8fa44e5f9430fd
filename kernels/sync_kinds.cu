// sync_kinds: each kind of explicit synchronization, a known number of times, each after a
// kernel that runs ~200 us so that every wait really blocks.
// Exact: cudaDeviceSynchronize 3, cudaStreamSynchronize 4 + 1, cudaEventSynchronize 5,
// cudaStreamWaitEvent 2; kernels 14 (plus one final cudaStreamSynchronize: 5 stream syncs).
#include "common.h"

__global__ void busy(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int main() {
  const long long cycles = 300000;  // ~200 us at 1.5+ GHz
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CHECK(cudaEventCreate(&ev));
  for (int i = 0; i < 3; ++i) {
    busy<<<1, 1, 0, a>>>(cycles);
    CHECK_LAUNCH();
    CHECK(cudaDeviceSynchronize());
  }
  for (int i = 0; i < 4; ++i) {
    busy<<<1, 1, 0, a>>>(cycles);
    CHECK_LAUNCH();
    CHECK(cudaStreamSynchronize(a));
  }
  for (int i = 0; i < 5; ++i) {
    busy<<<1, 1, 0, a>>>(cycles);
    CHECK_LAUNCH();
    CHECK(cudaEventRecord(ev, a));
    CHECK(cudaEventSynchronize(ev));
  }
  for (int i = 0; i < 2; ++i) {
    busy<<<1, 1, 0, a>>>(cycles);
    CHECK_LAUNCH();
    CHECK(cudaEventRecord(ev, a));
    CHECK(cudaStreamWaitEvent(b, ev, 0));
  }
  CHECK(cudaStreamSynchronize(b));  // not counted above: the 5th stream sync, see tests
  CHECK(cudaEventDestroy(ev));
  CHECK(cudaStreamDestroy(a));
  CHECK(cudaStreamDestroy(b));
  std::printf(
      "sync_kinds: device_sync=3 stream_sync=5 event_sync=5 stream_wait_event=2 kernels=14\n");
  return 0;
}
