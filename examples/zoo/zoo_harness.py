"""The measured loop every Python workload of the zoo shares (examples/zoo/README.md, "The common
interface"): --steps / --warmup, warm-up steps, then the measured steps each inside an NVTX range
"step", all of them inside one range "measured" pushed after a device synchronize and popped after
the final one, and the one stdout line loop_s=<seconds> (the wall time between the two).

Workloads run as python3 examples/zoo/NAME.py (or under torch.distributed.run) have this folder
on sys.path, so a plain `import zoo_harness` finds it. Nothing here imports torch unless the
synchronize / NVTX functions are left to their PyTorch defaults: a CuPy workload passes its own.
"""
import argparse
import time


def parser(steps):
    """An argument parser with --steps (default `steps`) and --warmup (default 3)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=steps, help=f"measured steps (default {steps})")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps first (default 3)")
    return ap


def warm_up(step, warmup):
    """Runs step() `warmup` times (no synchronize, no ranges)."""
    for _ in range(warmup):
        step()


def measure(step, steps, sync=None, push=None, pop=None):
    """Synchronizes, pushes "measured", runs step() `steps` times each inside "step", synchronizes,
    pops "measured"; returns the seconds from the push to the final synchronize. sync, push and
    pop default to torch.cuda.synchronize, torch.cuda.nvtx.range_push and range_pop."""
    if sync is None or push is None or pop is None:
        import torch  # only here: a CuPy workload passes all three
        if sync is None:
            sync = torch.cuda.synchronize
        if push is None:
            push = torch.cuda.nvtx.range_push
        if pop is None:
            pop = torch.cuda.nvtx.range_pop
    sync()
    push("measured")
    t0 = time.perf_counter()
    for _ in range(steps):
        push("step")
        step()
        pop()
    sync()
    loop_s = time.perf_counter() - t0
    pop()
    return loop_s


def report(loop_s, flush=False):
    """Prints the workload's one stdout line, loop_s=<seconds>."""
    print(f"loop_s={loop_s:.4f}", flush=flush)


def torch_profiled(measured, path):
    """Runs measured() under torch.profiler (CPU and CUDA activities), then writes PyTorch's own
    per-op totals (key_averages) to `path` as JSON: [{key, count, self_device_us, device_us,
    cpu_us, device_type}] (device_type "DeviceType.CPU" for ops, "DeviceType.CUDA" for kernels). For comparing kprof with torch.profiler, in cost and in what each op gets
    (scripts/zoo_cost.sh)."""
    import json

    import torch

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        result = measured()
    rows = []
    for e in prof.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:  # PyTorch before 2.4
            dev = getattr(e, "self_cuda_time_total", 0)
        tot = getattr(e, "device_time_total", None)
        if tot is None:
            tot = getattr(e, "cuda_time_total", 0)
        rows.append({"key": e.key, "count": e.count, "self_device_us": dev, "device_us": tot,
                     "cpu_us": e.cpu_time_total, "device_type": str(e.device_type)})
    with open(path, "w") as f:
        json.dump(rows, f)
    return result


def run(step, args, sync=None, push=None, pop=None):
    """warm_up, measure and report with args.warmup and args.steps; returns the loop's seconds.
    With ZOO_TORCH_PROFILER=PATH in the environment the measured loop runs under torch.profiler,
    which writes its per-op totals to PATH (torch_profiled)."""
    import os

    warm_up(step, args.warmup)
    path = os.environ.get("ZOO_TORCH_PROFILER")
    if path:
        loop_s = torch_profiled(lambda: measure(step, args.steps, sync, push, pop), path)
    else:
        loop_s = measure(step, args.steps, sync, push, pop)
    report(loop_s)
    return loop_s
