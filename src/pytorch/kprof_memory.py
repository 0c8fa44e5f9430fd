# kprof's PyTorch memory layer (docs/memory.md "PyTorch's categories"): what the caching
# allocator's blocks held, by category, at the moments the report needs. Installed by
# sitecustomize.py once torch is imported (unless KPROF_PYTORCH_MEMORY=0 or memory is not
# recorded). It
#   - turns on the allocator's own event history at CUDA's start (torch.cuda._lazy_call), with
#     no stacks (context=None): one entry per block allocated or freed and per segment;
#   - notes, after each optimizer step (a global step post hook), which blocks hold parameters,
#     gradients and optimizer state, their bytes by dtype, and the bytes allocated then (the
#     leak and step-end view);
#   - notes when each backward pass starts: a block made before it and freed after it is an
#     activation kept for the backward pass;
#   - pauses the history once PyTorch's peaks have held for STEADY_STEPS optimizer steps (the
#     history costs every allocation; a steady loop repeats what was recorded), keeping what it
#     recorded, and resumes it when a peak rises again: each stretch recorded is a window;
#   - at the program's exit, and at an out-of-memory error (PyTorch's OOM observer, before the
#     error is raised), reads the history back (torch.cuda.memory._snapshot), replays each
#     window, and writes what it found as one NVTX mark per device, "kprof.pytorch.memory:" +
#     JSON, which the agent records like any mark and the report joins with CUPTI's allocations.
# The replay (pure functions of what was noted) is kprof_memory_replay.py, next to this file;
# tests/pytorch/test_memory.py checks both.
import json
import os
import sys
import weakref

from kprof_memory_replay import _INF, MARK_PREFIX, Notes, _now_us, merge_windows, summarize_device

MAX_OOM_MARKS = 3
STEADY_STEPS = 3  # optimizer steps with PyTorch's peaks unchanged: the history pauses
RESUME_RISE = 0.01  # a peak this share above where it paused: the history resumes
MAX_WINDOWS = 4  # windows kept as recorded until the end; older ones are replayed at once

# ----- the hooks ---------------------------------------------------------------------------


OWNED = ("parameters", "gradients", "optimizer_state")


def _storage_of(t):
    """A CUDA tensor's storage and its key (device, address); None otherwise or unreadable."""
    try:
        if not t.is_cuda:
            return None
        s = t.untyped_storage()
        return (t.device.index, s.data_ptr()), s
    except Exception:
        return None


def _count(sizes, device, category, t, storage):
    """Adds the storage's bytes to sizes[device][category][t's dtype]; nothing when either is
    unreadable (the step hook runs inside the program's optimizer.step: never raises)."""
    try:
        name = str(t.dtype)
        n = int(storage.nbytes())
    except Exception:
        return
    if name.startswith("torch."):
        name = name[len("torch."):]
    by = sizes.setdefault(device, {c: {} for c in OWNED})[category]
    by[name] = by.get(name, 0) + n


def _owners_of(params, optimizers, sizes=None):
    """{(device, addr): category} for parameters, their gradients and optimizer state (0-dim
    ones too: AdamW's step on CUDA). sizes: a dict the same walk fills with the bytes of those
    storages, {device: {category: {dtype: bytes}}}, each storage once."""
    owners = {}

    def put(t, c):
        found = _storage_of(t)
        if found is None or found[0] in owners:
            return
        owners[found[0]] = c
        if sizes is not None:
            _count(sizes, found[0][0], c, t, found[1])

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
        # Windows of the history (the module's comment): recording now or paused; the windows
        # paused, as read back (raw) or, beyond MAX_WINDOWS, replayed and merged per device.
        self.recording = False
        self.t_start = -_INF  # when the window being recorded began
        self.devices = set()  # devices the optimizer steps' tensors are on
        self.last_peaks, self.steady, self.paused_peaks = None, 0, {}
        self.stash = []  # [(snapshot, t_start, end owners, t_end)] of paused windows
        self.past = {}  # device -> merged payload of windows replayed early
        self.windows = 0  # windows recorded (paused, and the one recording)
        self.sizes_by_optimizer = weakref.WeakKeyDictionary()  # optimizer -> its latest dtypes
        self.unrecorded_steps = 0

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
            self._record()
            self.on = True
        except Exception as e:
            _warn("the caching allocator's history", e)
            return
        try:
            self.torch._C._cuda_attach_out_of_memory_observer(self._on_oom)
        except Exception as e:
            _warn("out-of-memory observer", e)

    def _record(self, clear=False):
        """The history on (a new window): no stacks. clear: a resumed window starts empty
        (turning the history off emptied it already; the argument makes sure)."""
        kw = dict(enabled="all", context=None, stacks="python", max_entries=self.max_entries)
        try:
            self.real_record(**kw, **(dict(clear_history=True) if clear else {}))
        except TypeError:  # a PyTorch without clear_history
            self.real_record(**kw)
        self.recording = True
        self.windows += 1
        self.t_start = -_INF if self.windows == 1 else _now_us()
        self.last_peaks, self.steady = None, 0

    def _peaks(self):
        """{device: (PyTorch's allocated peak, its reserved peak)} for the steps' devices."""
        mem = self.torch.cuda.memory
        out = {}
        for d in self.devices:
            st = mem.memory_stats_as_nested_dict(d)
            out[d] = (st["allocated_bytes"]["all"]["peak"], st["reserved_bytes"]["all"]["peak"])
        return out

    def _pace(self):
        """After a step: pauses the history once the peaks held for STEADY_STEPS steps, and
        resumes it when one rose more than RESUME_RISE above where it paused."""
        peaks = self._peaks()
        if not peaks:  # no step's tensor on a GPU yet
            return
        if self.recording:
            if peaks == self.last_peaks:
                self.steady += 1
            else:
                self.last_peaks, self.steady = peaks, 0
            if self.steady >= STEADY_STEPS:
                self._pause(peaks)
            return
        for d, (a, r) in peaks.items():
            pa, pr = self.paused_peaks.get(d, (0, 0))
            if a > pa * (1 + RESUME_RISE) or r > pr * (1 + RESUME_RISE):
                self._record(clear=True)
                return

    def _pause(self, peaks):
        """Keeps the window's history as read back (replayed at the end: nothing costs the
        loop but the read) and turns the history off, which empties it."""
        t_end = _now_us()  # the window's end: a later window's steps are not its
        snap = self.torch.cuda.memory._snapshot()
        owners = self.notes.hook_maps[-1] if self.notes.hook_maps else {}
        self.stash.append((snap, self.t_start, owners, t_end))
        if len(self.stash) > MAX_WINDOWS:
            try:
                self._merge(*self.stash.pop(0), when="pause")
            except Exception as e:  # that window is lost, not the others
                _warn("a paused window", e)
        self.real_record(enabled=None)
        self.recording, self.paused_peaks = False, peaks

    def _merge(self, snap, t_start, end_owners, t_end, when):
        for p in self._replay_snapshot(snap, t_start, end_owners, when, now_us=t_end):
            self.past[p["device"]] = merge_windows(self.past.get(p["device"]), p, self.windows,
                                                   self.unrecorded_steps)

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
            owners = sizes = None
            if self.recording:  # paused: nothing made now is categorized
                params = [p for g in optimizer.param_groups for p in g["params"]]
                mine = {}
                owners = _owners_of(params, [optimizer], mine)
                sizes = self._sizes_of_all(optimizer, mine)
                self.devices.update(k[0] for k in owners)
            else:
                self.unrecorded_steps += 1
            allocated = {d: self.torch.cuda.memory_allocated(d) for d in self.devices}
            self.notes.note_step(_now_us(), owners, allocated, sizes)
            self._pace()
        except Exception as e:
            self._stop()
            _warn("optimizer step hook", e)

    def _sizes_of_all(self, optimizer, mine):
        """The dtypes of every optimizer's storages: this step's for `optimizer`, each other
        live optimizer's from its own latest step (a GAN steps two; a storage two optimizers
        share is counted by each)."""
        try:
            self.sizes_by_optimizer[optimizer] = mine
            parts = list(self.sizes_by_optimizer.values())
        except TypeError:  # an optimizer that cannot be weakly referenced: its own only
            parts = [mine]
        if len(parts) == 1:
            return mine
        out = {}
        for part in parts:
            for dev, cats in part.items():
                for c, by in cats.items():
                    into = out.setdefault(dev, {k: {} for k in OWNED})[c]
                    for name, n in by.items():
                        into[name] = into.get(name, 0) + n
        return out

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

    def _replay_snapshot(self, snap, t_start, end_owners, when, requested=0, only_device=None,
                         now_us=None):
        traces = snap.get("device_traces", []) if snap is not None else []
        by_device = {}
        for seg in (snap or {}).get("segments", []):
            by_device.setdefault(seg.get("device", 0), []).append(seg)
        out = []
        for dev in sorted(set(range(len(traces))) | set(by_device)):
            trace = traces[dev] if dev < len(traces) else []
            if only_device is not None and dev != only_device:
                continue
            if not trace and dev not in by_device:
                continue
            stats = self.torch.cuda.memory_stats(dev)
            out.append(summarize_device(dev, trace, by_device.get(dev, []), self.notes,
                                        end_owners, stats, self.max_entries, when, requested,
                                        now_us=now_us, t_start=t_start))
        return out

    def _summarize(self, when, requested=0, only_device=None):
        """Every window replayed and merged, per device: the paused ones, then the state now
        (the window being recorded, or, paused, the blocks live now)."""
        snap = self.torch.cuda.memory._snapshot()
        if not self.recording:  # no entries since the pause (a PyTorch that kept some: ignored)
            snap = dict(snap, device_traces=[])
        for st in self.stash:
            self._merge(*st, when="pause")
        self.stash = []
        t_start = self.t_start if self.recording else _now_us()
        # self.past stays as it is: an OOM's payload leaves the windows for the exit's.
        return [merge_windows(self.past.get(p["device"]), p, self.windows, self.unrecorded_steps)
                for p in self._replay_snapshot(snap, t_start, self._end_owners(), when,
                                               requested, only_device)]

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
