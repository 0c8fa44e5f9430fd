"""A planted fragmentation of PyTorch's caching allocator (docs/memory.md, docs/hints.md
#allocator-fragmentation): a buffer whose size grows a little each step, made and freed once a
step, as a batch that grows would be. Each size is larger than every segment cached before it,
so the allocator reserves a new segment for each and keeps the old ones cached and unused;
segments that grow in place (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) would reserve
about the largest. Prints max_allocated= and max_reserved= (torch.cuda.max_memory_*).

    python3 fragment_torch.py [--steps N]
"""
import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10)
args = ap.parse_args()

w = torch.randn(1024, 1024, device="cuda")
for step in range(args.steps):
    mib = 100 + 4 * step
    buf = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
    buf.fill_(1)
    y = w @ w  # some work between the allocations
    del buf, y
torch.cuda.synchronize()
print(f"max_allocated={torch.cuda.max_memory_allocated()} "
      f"max_reserved={torch.cuda.max_memory_reserved()}", flush=True)
