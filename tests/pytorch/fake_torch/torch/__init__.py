"""A stand-in for PyTorch with just what kprof's PyTorch layer touches (src/pytorch), so that
its logic is tested on machines without PyTorch (tests/pytorch/test_sitecustomize.py). It
keeps a log of NVTX calls and profiler switches; the real thing is tested on the GPU."""
from . import _C, autograd, compiler, nn, overrides  # noqa: F401

log = _C.log
