"""The bundled default workload (examples/default-run was recorded from it on an H100):
a small MLP classifier trained for 100 steps with the habits that cost GPU time in real
training loops: the loss is read back with .item() every step (a host wait), the batch is
uploaded from pageable memory each step, and the model runs eagerly in FP32. Every aten op
opens an NVTX range (emit_nvtx) and each step sits inside a user range "train_step".

    build/kprof run -- python3 examples/train_mlp.py
"""
import torch

torch.manual_seed(0)
dev = "cuda"
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.LayerNorm(2048),
    torch.nn.Linear(2048, 2048), torch.nn.GELU(), torch.nn.LayerNorm(2048),
    torch.nn.Linear(2048, 10),
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = [(torch.randn(512, 1024), torch.randint(0, 10, (512,))) for _ in range(4)]
STEPS = 100
losses = []
with torch.autograd.profiler.emit_nvtx():
    for step in range(STEPS):
        torch.cuda.nvtx.range_push("train_step")
        x, y = batches[step % len(batches)]
        x, y = x.to(dev), y.to(dev)  # pageable host memory, synchronous copies
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # host waits for the GPU every step
        torch.cuda.nvtx.range_pop()
print(f"train_mlp: steps={STEPS} first_loss={losses[0]:.4f} last_loss={losses[-1]:.4f}")
