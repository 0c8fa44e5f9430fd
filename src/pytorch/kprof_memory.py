# kprof's PyTorch memory layer (docs/memory.md "PyTorch's categories"): what the caching
# allocator's blocks held, by category, at the moments the report needs. Installed by
# sitecustomize.py once torch is imported (unless KPROF_PYTORCH_MEMORY=0 or memory is not
# recorded). It
#   - turns on the allocator's own event history at CUDA's start (torch.cuda._lazy_call), with
#     no stacks (context=None): one entry per block allocated or freed and per segment;
#   - notes, after each optimizer step (a global step post hook), which blocks hold parameters,
#     gradients and optimizer state, and the bytes allocated then (the leak and step-end view);
#   - notes when each backward pass starts: a block made before it and freed after it is an
#     activation kept for the backward pass;
#   - at the program's exit, and at an out-of-memory error (PyTorch's OOM observer, before the
#     error is raised), reads the history back (torch.cuda.memory._snapshot), replays it, and
#     writes what it found as one NVTX mark per device, "kprof.pytorch.memory:" + JSON, which
#     the agent records like any mark and the report joins with CUPTI's allocations.
# summarize() is a pure function of what was noted: tests/pytorch/test_memory.py checks it.
import json
import os
import sys
import time
from bisect import bisect_left

MARK_PREFIX = "kprof.pytorch.memory:"
VERSION = 1
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "other")
NEAR_PEAK = 0.9  # segment moments kept: reserved at least this share of its highest
MAX_MOMENTS = 16
MAX_STEPS = 1024
LARGEST = 5
# The history's entries that change the reserved bytes (segment_map/unmap: expandable segments).
SEGMENT_GROWS = ("segment_alloc", "segment_map")
SEGMENT_SHRINKS = ("segment_free", "segment_unmap")
MAX_OOM_MARKS = 3


def _now_us():
    return time.time_ns() // 1000


MAX_HOOKS = 512  # optimizer steps whose owners are kept (the latest)
MAX_BACKWARDS = 4096  # backward starts kept (the latest)


def _trim(lst, cap):
    """Keeps the last `cap` entries of `lst` (in place, amortised: once it doubles)."""
    if len(lst) > 2 * cap:
        del lst[:len(lst) - cap]


class Notes:
    """What the hooks noted while the program ran (per process), bounded: a run of a million
    steps keeps the owners of its last MAX_HOOKS steps and its last MAX_BACKWARDS backward
    starts (a block is categorized by the first step hook after it was made: for a block of
    the run's start still live, one of the latest does)."""

    def __init__(self):
        self.hook_times = []  # optimizer post-hook times (µs), ascending
        self.hook_maps = []  # per hook time: its {(device, addr): category} (shared when equal)
        self.backward_starts = []  # µs, ascending
        self.steps = {}  # device -> [bytes allocated after each optimizer step]
        self.steps_total = {}

    def note_backward(self, t_us):
        self.backward_starts.append(t_us)
        _trim(self.backward_starts, MAX_BACKWARDS)

    def note_step(self, t_us, owners, allocated):
        if self.hook_maps and self.hook_maps[-1] == owners:
            owners = self.hook_maps[-1]  # one dict for a run of equal steps
        self.hook_times.append(t_us)
        self.hook_maps.append(owners)
        if len(self.hook_times) > 2 * MAX_HOOKS:
            del self.hook_times[:MAX_HOOKS]
            del self.hook_maps[:MAX_HOOKS]
        for dev, b in allocated.items():
            s = self.steps.setdefault(dev, [])
            s.append(b)
            if len(s) > 2 * MAX_STEPS:
                del s[:MAX_STEPS]
            self.steps_total[dev] = self.steps_total.get(dev, 0) + 1


class _Instance:
    __slots__ = ("addr", "size", "t0", "t1")

    def __init__(self, addr, size, t0, t1):
        self.addr, self.size, self.t0, self.t1 = addr, size, t0, t1


_INF = float("inf")


def _block_size(requested):
    """The caching allocator's block for a request: at least 512 bytes, in 512-byte steps (the
    history gives the size asked for; PyTorch's allocated bytes count blocks)."""
    return max(512, (requested + 511) // 512 * 512)


def _end_blocks(segments_end):
    """The blocks live at the end, {address: size}, and the reserved bytes: a segment's blocks
    follow each other from its address."""
    live, reserved = {}, 0
    for seg in segments_end:
        reserved += seg.get("total_size", 0)
        addr = seg.get("address", 0)
        for b in seg.get("blocks", ()):
            if b.get("state") == "active_allocated":
                live[addr] = b.get("size", 0)
            addr += b.get("size", 0)
    return live, reserved


def _replay(trace, segments_end):
    """Walks one device's trace: the block instances (address, size, from, to), the instance
    each alloc and free entry concerns, and the allocated and reserved bytes before the first
    entry. Entries lost to the ring buffer's wrap are accounted from the state at the end (the
    snapshot's segments): a block freed in the trace but never allocated in it, or live at the
    end and untouched by it, was made before the history began. A block live at the end takes
    its size from there."""
    live = {}
    instances = []
    of_entry = [None] * len(trace)
    reserved_net = 0
    for i, e in enumerate(trace):
        a, addr, t = e.get("action"), e.get("addr", 0), e.get("time_us", 0)
        if a == "alloc":
            inst = _Instance(addr, _block_size(e.get("size", 0)), t, _INF)
            live[addr] = inst
            instances.append(inst)
            of_entry[i] = inst
        elif a == "free_requested":
            inst = live.pop(addr, None)
            if inst is None:
                inst = _Instance(addr, _block_size(e.get("size", 0)), -_INF, t)
                instances.append(inst)
            else:
                inst.t1 = t
            of_entry[i] = inst
        elif a in SEGMENT_GROWS:
            reserved_net += e.get("size", 0)
        elif a in SEGMENT_SHRINKS:
            reserved_net -= e.get("size", 0)
    end_live, end_reserved = _end_blocks(segments_end)
    for addr, size in end_live.items():
        inst = live.get(addr)
        if inst is None:
            instances.append(_Instance(addr, size, -_INF, _INF))
        else:
            inst.size = size
    alloc_net = sum(x.size for x in instances if x.t0 != -_INF and x.t1 == _INF) - sum(
        x.size for x in instances if x.t0 == -_INF and x.t1 != _INF)
    return instances, of_entry, sum(end_live.values()) - alloc_net, end_reserved - reserved_net


class _Categorizer:
    """A block's category. Live across an optimizer step (its post hook): what the step found in
    it (parameters, gradients, optimizer state), else what the end found in it, else "other"
    (kept from one step to the next: inputs, caches, a leak). Else what the end found in it when
    it lived to the end; else an activation when a backward pass started while it was live
    (made in the forward pass, kept for the backward); else other."""

    def __init__(self, notes, device, end_owners):
        self.notes, self.device, self.end = notes, device, end_owners

    def category(self, inst):
        n = self.notes
        key = (self.device, inst.addr)
        end = self.end.get(key) if inst.t1 == _INF else None
        i = bisect_left(n.hook_times, inst.t0)
        if i < len(n.hook_times) and n.hook_times[i] < inst.t1:
            # Kept across a step: what the step named it, else what the end named it (frozen
            # parameters, buffers, a second optimizer's state), else other.
            return n.hook_maps[i].get(key) or end or "other"
        if end:
            return end
        j = bisect_left(n.backward_starts, inst.t0)
        if j < len(n.backward_starts) and n.backward_starts[j] < inst.t1:
            return "activations"
        return "other"


def _moment(kind, t, allocated, reserved, live, cat):
    by = dict.fromkeys(CATEGORIES, 0)
    largest = []
    for inst in live:
        c = cat.category(inst)
        by[c] += inst.size
        largest.append((inst.size, c))
    largest.sort(key=lambda x: -x[0])
    return {"kind": kind, "t_us": t, "allocated": allocated, "reserved": reserved,
            "categories": by, "largest": [list(x) for x in largest[:LARGEST]]}


def _sums(trace, of_entry, alloc0, reserved0):
    """The entries at which the allocated and the reserved bytes were highest (-1: before the
    first), and every segment entry with the reserved bytes after it."""
    allocated, reserved = alloc0, reserved0
    peak_a, peak_a_i, peak_r, peak_r_i = allocated, -1, reserved, -1
    seg_points = []
    for i, e in enumerate(trace):
        a, size = e.get("action"), e.get("size", 0)
        if a == "alloc":
            allocated += of_entry[i].size
            if allocated > peak_a:
                peak_a, peak_a_i = allocated, i
        elif a == "free_requested":
            allocated -= of_entry[i].size
        elif a in SEGMENT_GROWS:
            reserved += size
            seg_points.append((i, reserved))
            if reserved > peak_r:
                peak_r, peak_r_i = reserved, i
        elif a in SEGMENT_SHRINKS:
            reserved -= size
            seg_points.append((i, reserved))
    return peak_a, peak_a_i, peak_r, peak_r_i, seg_points


def summarize_device(device, trace, segments_end, notes, end_owners, stats, max_entries,
                     when="exit", requested=0, now_us=None):
    """One device's payload: the peaks PyTorch counted, the replayed history's moments (the
    allocated peak, the reserved peak, the segment changes near it, the end or the failure),
    each with the live blocks by category, and the bytes allocated after each optimizer step."""
    instances, of_entry, alloc0, reserved0 = _replay(trace, segments_end)
    cat = _Categorizer(notes, device, end_owners)
    peak_a, peak_a_i, peak_r, peak_r_i, seg_points = _sums(trace, of_entry, alloc0, reserved0)
    keep = {}
    near = [p for p in seg_points if p[1] >= NEAR_PEAK * peak_r]
    for i, _r in sorted(near, key=lambda p: (-p[1], -p[0]))[:MAX_MOMENTS]:
        keep[i] = "segment"
    keep[peak_r_i] = "reserved_peak"
    keep[peak_a_i] = ("allocated_peak,reserved_peak" if peak_a_i == peak_r_i else
                      "allocated_peak")
    moments = []
    live = {id(x): x for x in instances if x.t0 == -_INF}
    if -1 in keep:
        moments.append(_moment(keep[-1], trace[0].get("time_us", 0) if trace else 0, alloc0,
                               reserved0, live.values(), cat))
    allocated, reserved = alloc0, reserved0
    for i, e in enumerate(trace):
        a, size, inst = e.get("action"), e.get("size", 0), of_entry[i]
        if a == "alloc":
            live[id(inst)] = inst
            allocated += inst.size
        elif a == "free_requested":
            live.pop(id(inst), None)
            allocated -= inst.size
        elif a in SEGMENT_GROWS:
            reserved += size
        elif a in SEGMENT_SHRINKS:
            reserved -= size
        if i in keep:
            moments.append(_moment(keep[i], e.get("time_us", 0), allocated, reserved,
                                   live.values(), cat))
    now = _now_us() if now_us is None else now_us
    moments.append(_moment(when, now, allocated, reserved, live.values(), cat))
    out = {
        "v": VERSION, "device": device, "when": when, "now_us": now,
        "alloc_conf": (os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or
                       os.environ.get("PYTORCH_ALLOC_CONF") or "")[:256],
        "max_allocated": stats.get("allocated_bytes.all.peak", 0),
        "max_reserved": stats.get("reserved_bytes.all.peak", 0),
        "allocated": stats.get("allocated_bytes.all.current", 0),
        "reserved": stats.get("reserved_bytes.all.current", 0),
        "inactive_split": stats.get("inactive_split_bytes.all.current", 0),
        "entries": len(trace), "max_entries": max_entries,
        "complete": len(trace) < max_entries and alloc0 == 0 and reserved0 == 0,
        "replayed_max_allocated": peak_a, "replayed_max_reserved": peak_r,
        "moments": moments,
        "steps": notes.steps.get(device, [])[-MAX_STEPS:],
        "steps_total": notes.steps_total.get(device, 0),
        "optimizer_steps": len(notes.hook_times), "backward_passes": len(notes.backward_starts),
    }
    if requested:
        out["requested"] = requested
    return out


# ----- the hooks ---------------------------------------------------------------------------


def _storage_key(t):
    try:
        if not t.is_cuda:
            return None
        return (t.device.index, t.untyped_storage().data_ptr())
    except Exception:
        return None


def _owners_of(params, optimizers):
    """{(device, addr): category} for parameters, their gradients and optimizer state."""
    owners = {}

    def put(t, c):
        k = _storage_key(t)
        if k is not None and k not in owners:
            owners[k] = c

    for p in params:
        put(p, "parameters")
    for p in params:
        g = getattr(p, "grad", None)
        if g is not None:
            put(g, "gradients")
    for opt in optimizers:
        try:
            for st in opt.state.values():
                for v in st.values():
                    if hasattr(v, "is_cuda"):
                        put(v, "optimizer_state")
        except Exception:
            pass
    return owners


class Layer:
    def __init__(self, torch, emit, max_entries):
        self.torch, self.emit, self.max_entries = torch, emit, max_entries
        self.notes = Notes()
        self.on = False
        self.oom_marks = 0
        self.done = False
        self.pid = os.getpid()  # a forked child's exit writes nothing
        self.user_history = False  # the program records the history itself: kprof steps aside

    # -- set-up
    def install(self):
        torch = self.torch
        import atexit

        self._wrap_user_history()
        torch.cuda._lazy_call(self._start)
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            register_optimizer_step_post_hook(self._after_step)
        except Exception as e:
            _warn("optimizer step hook", e)
        self._wrap_backward()
        atexit.register(self._at_exit)

    def _wrap_user_history(self):
        """The program's own torch.cuda.memory._record_memory_history (its snapshots, its
        stacks) wins: kprof's history stops being kprof's, and the layer writes nothing."""
        mem = self.torch.cuda.memory
        real = mem._record_memory_history
        layer = self

        def record_memory_history(*args, **kwargs):
            layer.user_history = True
            layer.on = False
            return real(*args, **kwargs)

        record_memory_history.__wrapped__ = real
        record_memory_history.__doc__ = getattr(real, "__doc__", None)
        mem._record_memory_history = record_memory_history
        self.real_record = real

    def _start(self):
        if self.user_history:
            return
        try:
            self.real_record(enabled="all", context=None, stacks="python",
                             max_entries=self.max_entries)
            self.on = True
        except Exception as e:
            _warn("the caching allocator's history", e)
            return
        try:
            self.torch._C._cuda_attach_out_of_memory_observer(self._on_oom)
        except Exception as e:
            _warn("out-of-memory observer", e)

    def _wrap_backward(self):
        import threading

        torch = self.torch
        inside = threading.local()  # Tensor.backward calls torch.autograd.backward: noted once

        layer = self

        def wrap(fn):
            def backward(*args, **kwargs):
                if getattr(inside, "on", False) or not layer.on or _compiling(torch):
                    return fn(*args, **kwargs)
                layer.notes.note_backward(_now_us())
                inside.on = True
                try:
                    return fn(*args, **kwargs)
                finally:
                    inside.on = False

            backward.__wrapped__ = fn
            backward.__name__ = getattr(fn, "__name__", "backward")
            backward.__doc__ = getattr(fn, "__doc__", None)
            return backward

        torch.Tensor.backward = wrap(torch.Tensor.backward)
        torch.autograd.backward = wrap(torch.autograd.backward)

    def _after_step(self, optimizer, args, kwargs):
        if not self.on or _compiling(self.torch):
            return
        try:
            params = [p for g in optimizer.param_groups for p in g["params"]]
            owners = _owners_of(params, [optimizer])
            devices = {k[0] for k in owners}
            allocated = {d: self.torch.cuda.memory_allocated(d) for d in devices}
            self.notes.note_step(_now_us(), owners, allocated)
        except Exception as e:
            self._stop()
            _warn("optimizer step hook", e)

    def _stop(self):
        """Off for good: no more notes, and the history (its cost) off."""
        self.on = False
        try:
            self.real_record(enabled=None)
        except Exception:
            pass

    # -- read back
    def _end_owners(self):
        """Parameters, buffers, gradients and optimizer state alive now (a walk of the objects
        the garbage collector tracks: at the end only)."""
        import gc
        import warnings

        torch = self.torch
        params, optimizers = [], []
        module, optimizer = torch.nn.Module, torch.optim.Optimizer
        with warnings.catch_warnings():  # some lazy modules' objects warn when touched
            warnings.simplefilter("ignore")
            for o in gc.get_objects():
                # type(), not isinstance(): a proxy's __class__ could run the program's code.
                try:
                    kind = type(o)
                    if issubclass(kind, module):
                        params.extend(o.parameters(recurse=False))
                        params.extend(b for b in o.buffers(recurse=False) if b is not None)
                    elif issubclass(kind, optimizer):
                        optimizers.append(o)
                except Exception:
                    continue
        return _owners_of(params, optimizers)

    def _summarize(self, when, requested=0, only_device=None):
        torch = self.torch
        snap = torch.cuda.memory._snapshot()
        traces = snap.get("device_traces", [])
        end_owners = self._end_owners()
        by_device = {}
        for seg in snap.get("segments", []):
            by_device.setdefault(seg.get("device", 0), []).append(seg)
        out = []
        for dev, trace in enumerate(traces):
            if only_device is not None and dev != only_device:
                continue
            if not trace and dev not in by_device:
                continue
            stats = torch.cuda.memory_stats(dev)
            out.append(summarize_device(dev, trace, by_device.get(dev, []), self.notes,
                                        end_owners, stats, self.max_entries, when, requested))
        return out

    def _write(self, when, requested=0, only_device=None):
        for payload in self._summarize(when, requested, only_device):
            self.emit(MARK_PREFIX + json.dumps(payload, separators=(",", ":")))

    def _on_oom(self, device, alloc, device_allocated, device_free):
        if not self.on or self.oom_marks >= MAX_OOM_MARKS or os.getpid() != self.pid:
            return
        self.oom_marks += 1
        try:
            self._write("oom", alloc, device)
        except Exception as e:
            _warn("memory at the out-of-memory error", e)

    def _at_exit(self):
        if not self.on or self.done or os.getpid() != self.pid:
            return
        self.done = True
        try:
            self._write("exit")
        except Exception as e:
            _warn("memory at exit", e)


def _compiling(torch):
    """Inside code torch.compile traces (an optimizer step compiled with its hooks): the hooks
    note nothing there."""
    try:
        return torch.compiler.is_compiling()
    except Exception:
        return False


def _warn(what, err):
    try:
        sys.stderr.write("kprof: PyTorch memory: %s: %s (left off)\n" % (what, err))
    except Exception:
        pass


def install(torch, emit):
    """Sets the layer up; None when it is off, or this torch has no caching allocator history
    (before 2.1, or a build without CUDA)."""
    if os.environ.get("KPROF_PYTORCH_MEMORY", "1") == "0":
        return None
    cuda = getattr(torch, "cuda", None)
    if not hasattr(cuda, "_lazy_call") or not hasattr(getattr(cuda, "memory", None),
                                                      "_record_memory_history"):
        return None
    if os.environ.get("KPROF_CAPTURE"):  # memory is recorded inside the windows only
        return None
    kinds = os.environ.get("KPROF_KINDS", "")
    if kinds and "memory" not in kinds.split(","):
        return None
    try:
        entries = int(os.environ.get("KPROF_PYTORCH_MEMORY_ENTRIES", "500000"))
    except ValueError:
        entries = 500000
    layer = Layer(torch, emit, max(1000, entries))
    try:
        layer.install()
    except Exception as e:
        _warn("set-up", e)
        return None
    return layer
