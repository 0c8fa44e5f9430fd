"""A small MLP training step, eager or torch.compile'd, with its steady steps inside one NVTX
range "measured" (after warm-up steps that compile and fill the caching allocator outside it):
the pair behind issue 36's diff of an eager and a compiled run, both recorded with
`kprof run --capture nvtx:measured`.

    python3 measured_train.py [--compile] [--steps N] [--warmup W] [--batch B]

At the default batch (32768) a step keeps the GPU busy longer than its launches take under
kprof, so the window's wall time follows the GPU time that torch.compile's fusion saves.
"""
import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--compile", action="store_true")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--batch", type=int, default=32768)
args = ap.parse_args()

torch.manual_seed(0)
W = 1024


class QuickGELU(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


model = torch.nn.Sequential(
    torch.nn.Linear(512, W), QuickGELU(), torch.nn.LayerNorm(W),
    torch.nn.Linear(W, W), QuickGELU(), torch.nn.LayerNorm(W),
    torch.nn.Linear(W, 10),
).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
net = torch.compile(model) if args.compile else model
x = torch.randn(args.batch, 512, device="cuda")
y = torch.randint(0, 10, (args.batch,), device="cuda")


def step():
    loss = torch.nn.functional.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


for _ in range(args.warmup):
    step()
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("measured")
for _ in range(args.steps):
    loss = step()
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print(f"measured_train: compile={args.compile} loss={loss.item():.4f}")
