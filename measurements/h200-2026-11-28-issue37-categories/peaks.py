# Runs a Python script as __main__ (its folder on sys.path) and prints PyTorch's peaks after it.
import os, runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
import torch
print(f"PEAKS max_allocated={torch.cuda.max_memory_allocated()} max_reserved={torch.cuda.max_memory_reserved()}")
