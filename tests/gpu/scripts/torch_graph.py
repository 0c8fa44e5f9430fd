"""PyTorch CUDA-graph workload (issue 10): 24 blocks of fp16 Linear + GELU + LayerNorm, captured
once with torch.cuda.graph inside emit_nvtx() (so every aten op that launches a kernel during
capture is an NVTX range), then replayed REPLAYS times inside the range "replay". Each replay is
timed with CUDA events; prints the median replay time.
Usage: torch_graph.py [REPLAYS=200] [--compile]
  --compile: the same model through torch.compile(mode="reduce-overhead") instead (CUDA graphs
  made by Inductor), if it compiles here; prints compile=ok or compile=failed."""
import statistics
import sys

import torch

replays = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 200
use_compile = "--compile" in sys.argv
torch.manual_seed(0)
layers = []
for _ in range(24):
    layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024)]
model = torch.nn.Sequential(*layers).cuda().half().eval()
x = torch.randn(64, 1024, device="cuda", dtype=torch.half)


def timed(step):
    times = []
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.nvtx.range_push("replay")
    for _ in range(replays):
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    torch.cuda.nvtx.range_pop()
    return statistics.median(times)


with torch.no_grad():
    if use_compile:
        try:
            fn = torch.compile(model, mode="reduce-overhead")
            for _ in range(3):
                fn(x)
            torch.cuda.synchronize()
            status = "ok"
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"torch_graph: compile=failed {type(e).__name__}: {e}")
            sys.exit(3)
        us = timed(lambda: fn(x))
        print(f"torch_graph: compile={status} replays={replays} replay_us={us:.1f}")
    else:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(x)  # warm-up: cuBLAS handles and workspaces before capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.autograd.profiler.emit_nvtx():
            torch.cuda.nvtx.range_push("capture")
            with torch.cuda.graph(g):
                y = model(x)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        us = timed(g.replay)
        print(f"torch_graph: replays={replays} replay_us={us:.1f} out={y.float().abs().mean().item():.4f}")
