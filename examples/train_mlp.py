"""The bundled default workload (examples/default-run was recorded from it on an H100):
a small MLP classifier trained for 100 steps with the habits that cost GPU time in real
training loops: the loss is read back with .item() every step (a host wait), the batch is
uploaded from pageable memory each step, and the model runs eagerly in FP32. Each step sits
inside a user range "train_step". The script itself names no op: `kprof run` adds a range per
aten op and per module (--pytorch auto, docs/pytorch.md).

    build/kprof run -- python3 examples/train_mlp.py

Options, for comparisons (docs/benchmarks.md, "PyTorch"):
    --emit-nvtx   wrap the loop in torch.autograd.profiler.emit_nvtx() (the manual way)
    --profiler    wrap the loop in torch.profiler.profile (CPU and CUDA activities)
    --compile     train torch.compile(model) (default mode)
    --steps N     steps (default 100); --warmup W steps run before the timed loop (default 0)
    --width W     width of the hidden layers (default 2048)
    --batch B     rows per batch (default 512)
    --act A       activation: gelu (torch.nn.GELU, default) or quickgelu (x * sigmoid(1.702 x),
                  a module of this script: three element-wise kernels eager, one compiled)
    --fixed       the all-fixed twin (docs/hints.md, "Estimates against fixes"): every fix kprof's
                  hints give for this script at once. Batches in pinned memory, uploaded one step
                  ahead on a side stream (pageable-memcpy, no-copy-compute-overlap); the whole
                  step (forward in BF16 autocast, backward, a capturable AdamW step) captured once
                  in a CUDA graph and replayed (launch-bound, fp32-gemm); the losses kept on the
                  GPU and read once after the loop (excessive-sync). Three warm-up steps and the
                  capture run before the timed loop.
Small widths, large batches and quickgelu leave the time to the element-wise kernels that
torch.compile fuses (docs/pytorch.md, "Eager against compiled").
It prints the loss, and the loop's wall time as "loop_s=".
"""
import argparse
import contextlib
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--emit-nvtx", action="store_true")
ap.add_argument("--profiler", action="store_true")
ap.add_argument("--compile", action="store_true")
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--warmup", type=int, default=0)
ap.add_argument("--width", type=int, default=2048)
ap.add_argument("--batch", type=int, default=512)
ap.add_argument("--act", choices=("gelu", "quickgelu"), default="gelu")
ap.add_argument("--fixed", action="store_true")
opt_args = ap.parse_args()

torch.manual_seed(0)
dev = "cuda"


class QuickGELU(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


W = opt_args.width
Act = QuickGELU if opt_args.act == "quickgelu" else torch.nn.GELU
model = torch.nn.Sequential(
    torch.nn.Linear(1024, W), Act(), torch.nn.LayerNorm(W),
    torch.nn.Linear(W, W), Act(), torch.nn.LayerNorm(W),
    torch.nn.Linear(W, 10),
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=opt_args.fixed)
net = torch.compile(model) if opt_args.compile else model
B = opt_args.batch
batches = [(torch.randn(B, 1024), torch.randint(0, 10, (B,))) for _ in range(4)]
STEPS = opt_args.steps
losses = []


def step(i):
    torch.cuda.nvtx.range_push("train_step")
    x, y = batches[i % len(batches)]
    x, y = x.to(dev), y.to(dev)  # pageable host memory, synchronous copies
    loss = torch.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())  # host waits for the GPU every step
    torch.cuda.nvtx.range_pop()


if opt_args.fixed:
    F = torch.nn.functional
    pinned = [(x.pin_memory(), y.pin_memory()) for x, y in batches]
    static_x = torch.empty(B, 1024, device=dev)
    static_y = torch.empty(B, dtype=torch.long, device=dev)
    staged = [(torch.empty_like(static_x), torch.empty_like(static_y)) for _ in range(2)]
    ready = [torch.cuda.Event(), torch.cuda.Event()]
    consumed = [torch.cuda.Event(), torch.cuda.Event()]
    copy_stream = torch.cuda.Stream()
    loss_log = torch.zeros(opt_args.warmup + STEPS, device=dev)

    def prefetch(i):
        """Uploads batch i into staging buffer i % 2 on the side stream, once the step that
        read that buffer before has taken its copy."""
        k = i % 2
        with torch.cuda.stream(copy_stream):
            copy_stream.wait_event(consumed[k])
            x, y = pinned[i % len(pinned)]
            staged[k][0].copy_(x, non_blocking=True)
            staged[k][1].copy_(y, non_blocking=True)
            ready[k].record(copy_stream)

    def take(i):
        k = i % 2
        torch.cuda.current_stream().wait_event(ready[k])
        static_x.copy_(staged[k][0])
        static_y.copy_(staged[k][1])
        consumed[k].record()

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = F.cross_entropy(net(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    # Warm-up on a side stream, as CUDA graph capture requires, then the capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            prefetch(i)
            take(i)
            opt.zero_grad(set_to_none=True)
            train_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = train_step()
    prefetch(0)

    def step(i):  # noqa: F811 (the fixed step replaces the planted one)
        torch.cuda.nvtx.range_push("train_step")
        take(i)
        prefetch(i + 1)
        graph.replay()
        loss_log[i].copy_(static_loss)
        torch.cuda.nvtx.range_pop()

for i in range(opt_args.warmup):
    step(i)
if opt_args.emit_nvtx:
    around = torch.autograd.profiler.emit_nvtx()
elif opt_args.profiler:
    around = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA])
else:
    around = contextlib.nullcontext()
t0 = time.perf_counter()
with around:
    for i in range(STEPS):
        step(opt_args.warmup + i)
torch.cuda.synchronize()
loop_s = time.perf_counter() - t0
if opt_args.fixed:
    losses = loss_log.tolist()[opt_args.warmup:]
print(f"train_mlp: steps={STEPS} first_loss={losses[0]:.4f} last_loss={losses[-1]:.4f} "
      f"loop_s={loop_s:.4f}")
