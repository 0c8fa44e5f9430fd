"""Data-parallel training with gradient accumulation (workload zoo, examples/zoo/README.md): a
residual MLP of transformer FFN blocks (x + W2 gelu(W1 LayerNorm(x)), width 4096, inner 8192,
4 blocks and a LayerNorm + Linear head: about 285M FP32 parameters, 1.1 GB of gradients)
wrapped in DistributedDataParallel over NCCL, one GPU per rank (cuda:LOCAL_RANK), BF16
autocast, fused AdamW. What sets it apart from examples/ddp_train.py:
  - gradient accumulation over 2 micro-batches: the first runs under model.no_sync() (gradients
    accumulate locally, no communication); the second's backward all-reduces the sum;
  - the all-reduce is bucketed (--bucket-mb, default 25) and overlaps the second backward: each
    bucket's all-reduce starts as soon as its gradients are ready; gradient_as_bucket_view=True
    (the .grad tensors are views into the buckets, zeroed in place: zero_grad(set_to_none=False));
  - no per-step host sync: the losses stay on the GPU (summed into a device tensor);
  - --bf16-grads: DDP's bf16_compress_hook (buckets all-reduced in BF16, half the bytes).

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/zoo/ddp_train.py
    python3 examples/zoo/ddp_train.py      # one process: a world of 1 over an in-memory store

Without WORLD_SIZE in the environment (no launcher), the script runs as a single rank: the NCCL
process group is made from a torch.distributed.HashStore (in memory: no port, no network), and
DDP still buckets and issues its (one-rank) all-reduces.

One step = one optimizer step (2 micro-batches). NVTX on every rank: each measured step inside
"step", all of them inside "measured" (after the warm-up steps, a barrier and a synchronize).
Rank 0 alone prints loop_s=<seconds of its measured loop>.
"""
import contextlib
import os
import sys

# The machines require NVLink multicast off (NCCL, PyTorch's symmetric memory, NVSHMEM); set
# before torch is imported (as examples/ddp_train.py does).
for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import zoo_harness  # noqa: E402 (this folder's shared measured loop)

WIDTH, INNER, BLOCKS, ROWS, ACCUM = 4096, 8192, 4, 4096, 2


class FFNBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, INNER)
        self.down = nn.Linear(INNER, WIDTH)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def main():
    ap = zoo_harness.parser(steps=20)
    ap.add_argument("--bucket-mb", type=int, default=25, help="DDP bucket size in MB (default 25)")
    ap.add_argument("--bf16-grads", action="store_true", help="all-reduce gradients in BF16")
    args = ap.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    if "WORLD_SIZE" in os.environ:  # torchrun (or another launcher): env:// rendezvous
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                                device_id=device)
    rank = dist.get_rank()

    torch.manual_seed(0)
    with torch.device(device):  # parameters made and initialised on the GPU
        net = nn.Sequential(*[FFNBlock() for _ in range(BLOCKS)], nn.LayerNorm(WIDTH),
                            nn.Linear(WIDTH, WIDTH))
    model = DistributedDataParallel(net, device_ids=[local_rank], bucket_cap_mb=args.bucket_mb,
                                    gradient_as_bucket_view=True)
    if args.bf16_grads:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)  # each rank its own data
    inputs = [torch.randn(ROWS, WIDTH, device=device, generator=gen) for _ in range(ACCUM)]
    targets = [torch.randn(ROWS, WIDTH, device=device, generator=gen) for _ in range(ACCUM)]
    loss_sum = torch.zeros((), device=device)

    def step():
        for micro in range(ACCUM):
            last = micro == ACCUM - 1
            with contextlib.nullcontext() if last else model.no_sync():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.mse_loss(model(inputs[micro]), targets[micro]) / ACCUM
                loss.backward()  # the last one all-reduces the buckets as they fill
            loss_sum.add_(loss.detach())
        opt.step()
        opt.zero_grad(set_to_none=False)

    zoo_harness.warm_up(step, args.warmup)
    dist.barrier()
    loop_s = zoo_harness.measure(step, args.steps)  # synchronizes first
    if rank == 0:
        zoo_harness.report(loop_s, flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
