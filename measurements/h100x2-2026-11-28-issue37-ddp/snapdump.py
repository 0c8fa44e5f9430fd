# Runs a Python script as __main__ with the caching allocator's history on (as kprof's layer
# records it) and pickles the snapshot and PyTorch's peaks at its end; or, with MODE peaks, only
# prints the peaks (for PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True runs).
#   python3 snapdump.py hist OUT.pkl SCRIPT ARGS... | python3 snapdump.py peaks - SCRIPT ARGS...
import os, pickle, runpy, sys
mode, out, script = sys.argv[1], sys.argv[2], sys.argv[3]
sys.argv = sys.argv[3:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
import torch
if mode == "hist":
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=2000000,
                                             skip_actions=["free_completed"])
runpy.run_path(script, run_name="__main__")
torch.cuda.synchronize()
peaks = dict(max_allocated=torch.cuda.max_memory_allocated(),
             max_reserved=torch.cuda.max_memory_reserved(),
             alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
print("PEAKS", " ".join(f"{k}={v}" for k, v in peaks.items()), flush=True)
if mode == "hist":
    snap = torch.cuda.memory._snapshot()
    with open(out, "wb") as f:
        pickle.dump({"snapshot": snap, **peaks}, f)
