# Per-range cost of NVTX push/pop from Python (torch._C._nvtx, what kprof's PyTorch layer calls),
# with one name for all ranges and with a different name per range (as PyTorch's NVTX mode makes:
# the op's name and its sequence number).
import sys, time, torch
torch.zeros(1, device="cuda")  # CUDA starts: the agent is on, if injected
push, pop = torch._C._nvtx.rangePushA, torch._C._nvtx.rangePop
N = 200000
def nothing(_=None):
    pass
for mode in ("loop", "same", "unique"):
    names = [f"aten::add, seq = {i}" for i in range(N)] if mode == "unique" else ["aten::add"] * N
    p, q = (nothing, nothing) if mode == "loop" else (push, pop)
    t = time.perf_counter()
    for n in names:
        p(n)
        q()
    dt = time.perf_counter() - t
    print(f"micro {mode} {dt / N * 1e9:.0f}")
