"""Starts two child processes of a CUDA workload with RANK=0 and RANK=1 (as torchrun would):
kprof must write one file per process, named by rank."""
import os
import subprocess
import sys

workload = sys.argv[1]
procs = []
for rank in range(2):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    procs.append(subprocess.Popen([workload, "4096"], env=env))
sys.exit(max(p.wait() for p in procs))
