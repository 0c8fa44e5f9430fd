"""A decode loop whose attention sees a new key/value length every few steps (issue 15: one-time
set-up on new shapes inside a library op). Each step runs a projection and
scaled_dot_product_attention of one query token against LENGTH cached keys and values (BF16,
batch 8, 16 heads, head size 128) on cuDNN's attention backend, which builds an execution plan
for each new shape; LENGTH grows by 512 every STEPS // LENGTHS steps, as a sequence does.
Prints, per length, the first call's time and the median of the others (host clock, after a
synchronize).

    python3 decode_shapes.py [STEPS=64] [LENGTHS=4] [--backend cudnn|flash|efficient|math]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser()
ap.add_argument("steps", type=int, nargs="?", default=64)
ap.add_argument("lengths", type=int, nargs="?", default=4)
ap.add_argument("--backend", default="cudnn", choices=("cudnn", "flash", "efficient", "math"))
args = ap.parse_args()
backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
           "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[args.backend]

dev, dt = "cuda", torch.bfloat16
B, H, D = 8, 16, 128
torch.manual_seed(0)
proj = torch.nn.Linear(H * D, H * D, device=dev, dtype=dt)
x = torch.randn(B, 1, H * D, device=dev, dtype=dt)
lengths = [512 * (1 + k) for k in range(args.lengths)]
cache = {n: (torch.randn(B, H, n, D, device=dev, dtype=dt), torch.randn(B, H, n, D, device=dev,
                                                                         dtype=dt))
         for n in lengths}
per_length = max(1, args.steps // args.lengths)
times = {n: [] for n in lengths}
torch.cuda.synchronize()
t_all = time.perf_counter()
with sdpa_kernel(backend):
    for i in range(args.steps):
        n = lengths[min(len(lengths) - 1, i // per_length)]
        k, v = cache[n]
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("decode_step")
        q = proj(x).view(B, 1, H, D).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v)
        x = o.transpose(1, 2).reshape(B, 1, H * D)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        times[n].append(time.perf_counter() - t0)
total = time.perf_counter() - t_all
for n in lengths:
    t = times[n]
    print("decode_shapes: backend=%s length=%d first_ms=%.3f steady_ms=%.3f" %
          (args.backend, n, t[0] * 1e3, statistics.median(t[1:]) * 1e3 if len(t) > 1 else 0.0))
print("decode_shapes: steps=%d wall_s=%.6f" % (args.steps, total))
