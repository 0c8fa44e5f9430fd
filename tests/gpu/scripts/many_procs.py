"""many_procs.py N PROGRAM ARGS...: starts N copies of a CUDA program at once and waits for all
of them (the fault matrix's "8 processes at once"). Exits with the worst status."""
import subprocess
import sys

n = int(sys.argv[1])
procs = [subprocess.Popen(sys.argv[2:]) for _ in range(n)]
sys.exit(max(p.wait() for p in procs))
