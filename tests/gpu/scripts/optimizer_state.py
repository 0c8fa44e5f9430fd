"""A training loop whose memory is short and an eighth of it Adam's FP32 moments, for the
fp32-optimizer-state hint (docs/hints.md, tests/gpu/memory_test.cpp): a stack of bias-free
8192x8192 linear layers, their count chosen so that the weights, gradients and moments take about
a quarter of the GPU's memory, and a ballast tensor (made once, never read) that brings the
allocated peak to about 80% of it. Adam runs one parameter at a time (foreach=False), so its
temporaries are one layer's. Prints, after the last step, what PyTorch itself counted: max_allocated=,
max_reserved=, optimizer_state= (the moments' storages' bytes) and layers=.

    python3 optimizer_state.py [--steps N] [--bf16-moments]

--bf16-moments  the same Adam update with both moments kept in bfloat16 (computed against the
                FP32 gradient, stored rounded): the fix the hint names, by hand.
"""
import argparse

import torch
import torch.nn as nn

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--bf16-moments", action="store_true")
args = ap.parse_args()

D = 8192
_, total = torch.cuda.mem_get_info()
layer = D * D * 4  # one layer's FP32 weights
# Weights, gradients and two FP32 moments: 4 layers' worth a layer.
layers = max(1, int(0.24 * total) // (4 * layer))
ballast = torch.empty(int(0.80 * total) - 4 * layer * layers, dtype=torch.uint8, device="cuda")

torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(D, D, bias=False, device="cuda") for _ in range(layers)])
for lin in model:
    nn.init.normal_(lin.weight, std=D ** -0.5)
x = torch.randn(64, D, device="cuda")
params = list(model.parameters())
lr, b1, b2, eps = 1e-4, 0.9, 0.999, 1e-8

if args.bf16_moments:
    moments = [(torch.zeros_like(p, dtype=torch.bfloat16),
                torch.zeros_like(p, dtype=torch.bfloat16)) for p in params]

    @torch.no_grad()
    def adam_step(step):
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        for p, (m, v) in zip(params, moments):
            g = p.grad
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            p.addcdiv_(m, (v.float() / c2).sqrt_().add_(eps), value=-lr / c1)
else:
    opt = torch.optim.Adam(params, lr=lr, betas=(b1, b2), eps=eps, foreach=False)
    moments = None

for step in range(1, args.steps + 1):
    loss = model(x).float().pow(2).mean()
    loss.backward()
    if moments is None:
        opt.step()
    else:
        adam_step(step)
    for p in params:
        p.grad = None
torch.cuda.synchronize()

if moments is None:
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.is_cuda]
else:
    state = [t for pair in moments for t in pair]
print(f"max_allocated={torch.cuda.max_memory_allocated()} "
      f"max_reserved={torch.cuda.max_memory_reserved()} "
      f"optimizer_state={sum(t.untyped_storage().nbytes() for t in state)} layers={layers} "
      f"ballast={ballast.numel()}", flush=True)
