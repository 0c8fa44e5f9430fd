# What the allocator's history costs: op dispatch on CPU and GPU, and allocation, per mode.
import sys, time, inspect
import torch
mode = sys.argv[1]
torch.cuda.init()
if mode == "new":
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=500000)
elif mode == "legacy":
    torch.cuda.memory._record_memory_history_legacy(True, record_context=False, trace_alloc_max_entries=500000, trace_alloc_record_context=False)
def best(fn, n, rounds=5):
    b = None
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n): fn()
        torch.cuda.synchronize()
        t = (time.perf_counter_ns() - t0) / n
        b = t if b is None else min(b, t)
    return b
x = torch.zeros(1); y = torch.zeros(1, device="cuda")
cpu = best(lambda: x.add_(1), 100000)
gpu = best(lambda: y.add_(1), 50000)
alloc = best(lambda: torch.empty(4096, device="cuda"), 50000)
print(f"HISTCOST mode={mode} cpu_op_ns={cpu:.0f} gpu_op_ns={gpu:.0f} alloc_free_ns={alloc:.0f}")
if mode == "src":
    print(inspect.getsource(torch.cuda.memory._record_memory_history_impl)[:3000])
