# A million allocator events: N allocations and frees of a small CUDA tensor (issue 37: what the
# memory layer adds to `kprof report` of such a run).
#   python3 alloc_events.py [N=500000]
import sys, time
import torch
n = int(sys.argv[1]) if len(sys.argv) > 1 else 500000
torch.cuda.init()
t0 = time.perf_counter()
for _ in range(n):
    torch.empty(1024, device="cuda")
torch.cuda.synchronize()
print(f"loop_s={time.perf_counter() - t0:.3f} allocations={n}", flush=True)
