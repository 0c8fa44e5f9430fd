"""A planted PyTorch out-of-memory error (tests/gpu/memory_test.cpp, docs/memory.md).

A small model trains two steps (parameters, gradients, AdamW state, activations), then one
tensor asks for more than the GPU has left. Prints "asked=BYTES"; the OutOfMemoryError is not
caught: the interpreter exits 1 with its traceback.
"""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(4)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(512, 4096, device="cuda")
for _ in range(2):
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
free, _total = torch.cuda.mem_get_info()
asked = free + (1 << 30)
print(f"asked={asked}", flush=True)
big = torch.empty(asked, dtype=torch.uint8, device="cuda")
print("unreachable", big.numel())
