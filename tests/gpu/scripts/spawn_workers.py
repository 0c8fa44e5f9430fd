"""spawn_workers.py WORKERS ADDS: multiprocessing with the spawn start method, as PyTorch
recommends for CUDA in workers. The parent never touches CUDA; each worker adds 1 to a tensor on
the GPU ADDS times and checks the result."""
import multiprocessing as mp
import sys


def work(adds):
    import torch

    x = torch.zeros(1024, device="cuda")
    for _ in range(adds):
        x.add_(1)
    torch.cuda.synchronize()
    if int(x[0].item()) != adds:
        sys.exit(3)


if __name__ == "__main__":
    workers, adds = int(sys.argv[1]), int(sys.argv[2])
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=work, args=(adds,)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode for p in procs))
