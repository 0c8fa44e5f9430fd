"""Builds kprof's PyTorch op observer (kprof_ops.cpp, next to this file) against the torch the
program imported, once per torch, Python and source, into kprof's cache; later runs load the
cached library at once. docs/pytorch.md "Op ranges without NVTX".

    load(torch) -> module     the observer's Python module (_kprof_ops), loaded RTLD_GLOBAL so
                              that kprof's agent finds it (kprof_op_observer_v1)

Raises BuildError with one line saying why when it cannot (no compiler, no headers, a failed
compile); the layer then names ops through NVTX instead. Several processes starting together
(the ranks of a job) build it once: the first takes a lock, the others wait for its result.
"""
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "kprof_ops.cpp")
HEADER = os.path.join(HERE, "kprof_op_abi.h")
MODULE = "_kprof_ops"
BUILD_TIMEOUT_S = 300


class BuildError(Exception):
    pass


def cache_dir():
    # The same folder kprof run keeps its calibration in (src/cli/calibrate.cpp).
    d = os.environ.get("KPROF_CACHE_DIR")
    if d:
        return d
    x = os.environ.get("XDG_CACHE_HOME")
    if x:
        return os.path.join(x, "kprof")
    return os.path.join(os.path.expanduser("~"), ".cache", "kprof")


def _compiler():
    for c in (os.environ.get("KPROF_CXX"), os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c and shutil.which(c):
            return shutil.which(c)
    raise BuildError("no C++ compiler (c++, g++ or clang++; KPROF_CXX names one)")


def _nvtx_include(torch_include):
    """A folder holding nvtx3/nvToolsExt.h: CUDA's, NVIDIA's pip package's, or torch's own."""
    candidates = [torch_include]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "include"))
    candidates.append("/usr/local/cuda/include")
    try:
        import nvidia  # the pip packages of CUDA's libraries (nvidia-nvtx among them)

        for p in getattr(nvidia, "__path__", []):
            candidates.append(os.path.join(p, "nvtx", "include"))
            candidates.append(os.path.join(p, "cu13", "include"))
    except Exception:
        pass
    for c in candidates:
        if os.path.isfile(os.path.join(c, "nvtx3", "nvToolsExt.h")):
            return c
    return None


def _key(torch, cxx, flags):
    h = hashlib.sha256()
    for path in (SOURCE, HEADER):
        with open(path, "rb") as f:
            h.update(f.read())
    for part in (torch.__version__, os.path.dirname(torch.__file__), sys.version, cxx,
                 " ".join(flags)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def _flags(torch):
    torch_dir = os.path.dirname(torch.__file__)
    include = os.path.join(torch_dir, "include")
    lib = os.path.join(torch_dir, "lib")
    if not os.path.isfile(os.path.join(include, "ATen", "record_function.h")):
        raise BuildError("torch's headers are not installed (%s)" % include)
    py_include = sysconfig.get_paths().get("include", "")
    if not os.path.isfile(os.path.join(py_include, "Python.h")):
        raise BuildError("Python's headers are not installed (no Python.h in %s)" % py_include)
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    flags = ["-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-w",
             "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-I" + include, "-I" + py_include, "-I" + HERE]
    nvtx = _nvtx_include(include)
    if nvtx is not None:
        flags += ["-DKPROF_HAVE_NVTX", "-isystem", nvtx]
    links = ["-L" + lib, "-lc10", "-ltorch_cpu", "-Wl,-rpath," + lib, "-ldl", "-lpthread"]
    return flags, links


def _build(cxx, flags, links, out):
    tmp = "%s.%d.tmp" % (out, os.getpid())
    errors = []
    # torch's headers want C++17 or later; the newest first.
    for std in ("-std=c++20", "-std=c++17"):
        cmd = [cxx, std] + flags + [SOURCE, "-o", tmp] + links
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BuildError("compiling %s took over %d s" % (SOURCE, BUILD_TIMEOUT_S))
        if p.returncode == 0:
            os.replace(tmp, out)
            return
        lines = [l for l in p.stderr.splitlines() if "error" in l]
        errors.append("%s: %s" % (std, lines[0].strip() if lines else "exit %d" % p.returncode))
    try:
        os.remove(tmp)
    except OSError:
        pass
    with open(out + ".failed", "w") as f:
        f.write("\n".join(errors) + "\n")
    raise BuildError("compiling %s failed (%s)" % (SOURCE, "; ".join(errors)))


def library(torch):
    """The path of the observer's library for this torch: built now if not cached."""
    cxx = _compiler()
    flags, links = _flags(torch)
    folder = os.path.join(cache_dir(), "pytorch-ops", _key(torch, cxx, flags + links))
    out = os.path.join(folder, MODULE + ".so")
    if os.path.isfile(out):
        return out
    if os.path.isfile(out + ".failed"):
        with open(out + ".failed") as f:
            raise BuildError("an earlier build failed (%s; remove %s to try again)"
                             % (f.read().strip().replace("\n", "; "), folder))
    try:
        os.makedirs(folder, exist_ok=True)
        lock = open(os.path.join(folder, "lock"), "w")
    except OSError as e:
        raise BuildError("cannot use the cache %s: %s" % (folder, e))
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank builds: wait for its result
        if not os.path.isfile(out):
            if os.path.isfile(out + ".failed"):
                raise BuildError("the build failed in another process (%s)" % out)
            t0 = time.monotonic()
            sys.stderr.write("kprof: building the PyTorch op observer for torch %s (once; cached "
                             "in %s)\n" % (torch.__version__, folder))
            _build(cxx, flags, links, out)
            sys.stderr.write("kprof: built in %.1f s\n" % (time.monotonic() - t0))
    return out


def load(torch):
    """The observer's module, built if needed and loaded so that the agent can find it."""
    import ctypes
    import importlib.machinery
    import importlib.util

    path = library(torch)
    # RTLD_GLOBAL: the agent looks for kprof_op_observer_v1 in the process's global scope when
    # CUDA starts after this; Python's own import would load it RTLD_LOCAL.
    ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
