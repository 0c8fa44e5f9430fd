"""A program that runs torch.profiler itself: its CUPTI client displaces kprof's agent.
kprof must detect this and say so instead of showing an empty or partial table silently."""
import torch
from torch.profiler import ProfilerActivity, profile

x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(10):
        x = torch.relu(x @ x.T / 1024)
    torch.cuda.synchronize()
print("torch_profiler_inside: kernels seen by torch.profiler:",
      sum(1 for e in prof.events() if e.device_type.name == "CUDA"))
