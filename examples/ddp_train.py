"""A small data-parallel training job for kprof's multi-GPU analysis (docs/distributed.md) and its
GPU tests (tests/gpu/distributed_test.cpp): an MLP of --layers x (Linear(H, H) + GELU), FP32
weights with TF32 matmuls, trained with DistributedDataParallel (NCCL, default buckets) and Adam,
one GPU per process. Each step is GPU-bound (about 10 ms of GPU work on an H100 at the defaults).

Optionally one rank is a planted straggler: --straggler-rank R sleeps --straggler-ms on rank R in
each measured step, before it makes its batch, while its GPU is idle (every step ends with
loss.item(), as logging does). The other ranks then wait that long in the gradient all-reduce:
kprof's hint "rank-imbalance" should name rank R and price about steps x straggler-ms.

NVTX ranges: the --warmup steps each inside "warmup"; each measured step inside "step", holding
"load_batch" (the planted sleep, then the batch made on the GPU), "forward", "backward" and
"optimizer" (then loss.item()). `kprof run --capture nvtx:step` thus sees steady-state steps only.

    torchrun --nproc_per_node=2 examples/ddp_train.py --steps 50
    python3 -m torch.distributed.run --nproc_per_node=2 examples/ddp_train.py
    mpirun -np 2 python3 examples/ddp_train.py          # Open MPI (or MPICH, srun): ranks from
                                                        # its variables, MASTER_PORT 29511
    build/kprof run -- torchrun --nproc_per_node=2 examples/ddp_train.py --straggler-rank 1
    build/kprof run --capture nvtx:step --capture-count 3 -- torchrun --nproc_per_node=2 \\
        examples/ddp_train.py

Without a launcher it runs as one rank (world size 1). Each rank prints
"rank R: N steps, median step X ms" (host time per measured step).
"""
import argparse
import os
import statistics
import sys
import time

# The machines require NVLink multicast off (NCCL, PyTorch's symmetric memory, NVSHMEM); set
# before torch is imported, and inherited by anything this process starts.
for _key, _value in (
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
):
    os.environ.setdefault(_key, _value)

# (rank, world size, local rank) variables of the launchers that do not set torch's own.
LAUNCHER_VARS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),  # Open MPI
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),  # MPICH (Hydra)
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),  # srun
)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50, help="measured steps (default 50)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps first (default 3)")
    ap.add_argument("--straggler-rank", type=int, default=-1,
                    help="the rank that sleeps in each measured step (default -1: none)")
    ap.add_argument("--straggler-ms", type=float, default=20.0,
                    help="how long it sleeps, in ms (default 20)")
    # Wide enough to be GPU-bound, with few gradient bytes (201 MB at the defaults): under a
    # straggler the other ranks' all-reduce transfers no longer hide behind their backward pass,
    # and kprof counts them as exposed communication, not waiting (docs/distributed.md).
    ap.add_argument("--hidden", type=int, default=2048, help="width H (default 2048)")
    ap.add_argument("--layers", type=int, default=12, help="Linear+GELU layers (default 12)")
    ap.add_argument("--batch", type=int, default=8192, help="rows per batch (default 8192)")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def set_rank_env():
    """torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; mpirun and srun
    set their own variables: copy those. Without any, one rank."""
    for rank, size, local in LAUNCHER_VARS:
        if rank in os.environ:
            os.environ.setdefault("RANK", os.environ[rank])
            os.environ.setdefault("WORLD_SIZE", os.environ.get(size, "1"))
            os.environ.setdefault("LOCAL_RANK", os.environ.get(local, os.environ[rank]))
            break
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")


def main():
    args = parse_args()
    set_rank_env()
    import torch  # after argparse: --help works without torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.cuda import nvtx
    from torch.nn.parallel import DistributedDataParallel

    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank = dist.get_rank()
    torch.backends.cuda.matmul.allow_tf32 = True

    torch.manual_seed(args.seed)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden, args.hidden), torch.nn.GELU()]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).to(device),
                                    device_ids=[local_rank])
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    gen = torch.Generator(device=device)
    sleep_s = args.straggler_ms / 1000 if rank == args.straggler_rank else 0.0

    def train_step(i, name):
        with nvtx.range(name):
            with nvtx.range("load_batch"):
                if name == "step" and sleep_s > 0:
                    time.sleep(sleep_s)  # the planted host work
                gen.manual_seed((args.seed * 1000 + rank) * 1_000_000 + i)
                x = torch.randn(args.batch, args.hidden, device=device, generator=gen)
                y = torch.randn(args.batch, args.hidden, device=device, generator=gen)
            with nvtx.range("forward"):
                loss = F.mse_loss(model(x), y)
            with nvtx.range("backward"):
                loss.backward()
            with nvtx.range("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            return loss.item()  # a per-step sync, as logging does

    for i in range(args.warmup):
        train_step(i, "warmup")
    times = []
    for i in range(args.warmup, args.warmup + args.steps):
        t0 = time.perf_counter()
        train_step(i, "step")
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    median_ms = statistics.median(times) * 1000 if times else 0.0
    print(f"rank {rank}: {len(times)} steps, median step {median_ms:.2f} ms", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
