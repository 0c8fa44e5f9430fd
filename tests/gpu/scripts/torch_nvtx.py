"""PyTorch workload for the GPU tests: a small MLP, 3 training steps, each inside a user NVTX
range "step" (torch.cuda.nvtx), with emit_nvtx() so that every aten op opens an NVTX range.
Prints the number of steps; the test checks kernels and ranges in kprof's recording."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 512, device="cuda")
target = torch.randint(0, 10, (256,), device="cuda")
with torch.autograd.profiler.emit_nvtx():
    for step in range(3):
        torch.cuda.nvtx.range_push("step")
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"torch_nvtx: steps=3 loss={loss.item():.4f}")
