# What the caching allocator's history costs an allocation, per mode, and what kprof's step hook
# costs on a nanoGPT-sized AdamW (issue 37's cost):
#   python3 history_cost.py none|hist|skip|small
# hist: the history as kprof's layer asked for it before (no stacks, 500k entries); skip: the same
# without free_completed entries (the layer now); small: a 1000-entry ring.
import os, sys, time
import torch
mode = sys.argv[1]
torch.cuda.init()
kw = dict(enabled="all", context=None, stacks="python", max_entries=500000)
if mode == "hist":
    torch.cuda.memory._record_memory_history(**kw)
elif mode == "skip":
    torch.cuda.memory._record_memory_history(skip_actions=["free_completed"], **kw)
elif mode == "small":
    kw["max_entries"] = 1000
    torch.cuda.memory._record_memory_history(**kw)


def best(fn, n, rounds=7):
    b = None
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        t = (time.perf_counter_ns() - t0) / n
        b = t if b is None else min(b, t)
    return b


alloc = best(lambda: torch.empty(4096, device="cuda"), 50000)
xs = [torch.zeros(4096, device="cuda") for _ in range(64)]
foreach = best(lambda: torch._foreach_add(xs, 1.0), 5000) / 64  # 64 allocations a call
print(f"HISTCOST mode={mode} alloc_free_ns={alloc:.0f} foreach_per_tensor_ns={foreach:.0f}")
if mode == "none":
    # kprof's optimizer-step walk on a nanoGPT-sized AdamW (75 tensors and their state)
    sys.path.insert(0, os.path.join(os.environ.get("KPROF_SRC", "src"), "pytorch"))
    import kprof_memory as M
    ps = [torch.nn.Parameter(torch.randn(64, 64, device="cuda")) for _ in range(75)]
    opt = torch.optim.AdamW(ps)
    for p in ps:
        p.grad = torch.randn_like(p)
    opt.step()
    walk = best(lambda: M._owners_of(ps, [opt]), 200)
    print(f"HISTCOST walk_us={walk / 1000:.1f} tensors={len(M._owners_of(ps, [opt]))}")
