"""A 2-rank DDP job for on-demand capture (docs/capture.md, "On demand").

Two processes (torch.multiprocessing). By default the gloo backend, both ranks on cuda:0: DDP's
all-reduce keeps them in step as on two GPUs. DDP_BACKEND=nccl: the NCCL backend, rank R on
cuda:R (two GPUs). Each step is an NVTX range "step" holding "idx N" (N = the step's number from
0): a forward and backward pass of a 4-layer MLP (one all-reduce bucket), the optimizer step and a
synchronization. Usage: ddp_steps.py [STEPS=400]
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, steps):
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world)
    nccl = os.environ.get("DDP_BACKEND") == "nccl"
    dev = torch.device(f"cuda:{rank}" if nccl else "cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if nccl else "gloo", rank=rank, world_size=world,
                            device_id=dev if nccl else None)
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).to(dev))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device=dev)
    for step in range(steps):
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push(f"idx {step}")
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
    dist.destroy_process_group()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    mp.spawn(rank_main, args=(2, n), nprocs=2, join=True)
