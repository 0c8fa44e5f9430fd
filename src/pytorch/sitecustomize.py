# kprof's PyTorch layer: `kprof run --pytorch MODE` puts this folder first on PYTHONPATH, so
# Python imports this file at start-up (the `site` module imports `sitecustomize`). It does
# nothing until the program imports torch; then, by KPROF_PYTORCH:
#   ops      every aten op, autograd node and record_function opens an NVTX range (what
#            torch.autograd.profiler.emit_nvtx() does, with autograd's sequence numbers);
#   modules  every nn.Module forward opens a range "kprof.module:QUALIFIED.NAME|Class";
#   auto     ops and modules;
#   stack    ops, modules, and around each torch call made from the program's own code a range
#            "kprof.src:FILE:LINE" (the first frame outside torch);
#   off      nothing (kprof run then does not set this up at all).
# Op and module ranges come from kprof's RecordFunction observer (kprof_ops.cpp, built once
# against the imported torch by kprof_ops_build.py) straight into the agent, with no NVTX string;
# where it cannot be built, or with KPROF_PYTORCH_OPS=nvtx, from PyTorch's NVTX mode as above.
# Then it imports the next `sitecustomize` on the path, so one the environment already had
# keeps working. It never prints, raises or changes what the program computes: any failure
# turns its part off, with one line on stderr. docs/pytorch.md describes it.
import os
import sys

_MODE = os.environ.get("KPROF_PYTORCH", "auto")
_OPS = _MODE in ("auto", "ops", "stack")
_MODULES = _MODE in ("auto", "modules", "stack")
_STACK = _MODE == "stack"
_VIA = os.environ.get("KPROF_PYTORCH_OPS", "observer")  # observer | nvtx
_HERE = os.path.dirname(os.path.abspath(__file__))


def _warn(what, err, then="left off"):
    try:
        sys.stderr.write("kprof: --pytorch %s: %s: %s (%s)\n" % (_MODE, what, err, then))
    except Exception:
        pass


class _State:
    """What kprof turned on, per thread where PyTorch keeps it per thread."""

    nvtx_push = None
    nvtx_pop = None
    enabled_on = None  # the thread id where kprof's op ranges are on (None: off)
    suspended = False  # the program turned its own profiler on over kprof's
    announced = False
    memory = None  # kprof_memory.Layer, when on
    observer = None  # the op observer's module (_kprof_ops), when it serves
    op_ns = 0  # what this layer adds to one aten op call, to one nn.Module call (_Probe)
    module_ns = 0


class _Probe:
    """Times a cheap op and a cheap module call on the CPU (the best of a few rounds): before
    and after the layer is installed, the difference is its cost per op and per module call.
    Taken at import, before CUDA starts, so that the ranges it makes are not recorded (and not
    at all when CUDA has started already)."""

    ROUNDS, CALLS = 3, 1000

    def __init__(self, torch):
        import time

        # Once CUDA has started (another library started it before torch was imported), the
        # agent is loaded and would record the probe's ranges as the program's: no probe then.
        agent = os.path.basename(os.environ.get("CUDA_INJECTION64_PATH", "")) or "libkprof_agent"
        with open("/proc/self/maps") as maps:
            if agent in maps.read():
                raise RuntimeError("CUDA already started")

        self.clock = time.perf_counter_ns
        self.x = torch.zeros(1)
        self.add = torch.add
        self.module = torch.nn.Identity()

    def _best(self, fn):
        best = None
        for _ in range(self.ROUNDS):
            t0 = self.clock()
            for _ in range(self.CALLS):
                fn()
            t = (self.clock() - t0) / self.CALLS
            best = t if best is None else min(best, t)
        return best

    def measure(self):
        x, add, module = self.x, self.add, self.module
        announced, _State.announced = _State.announced, True  # no mark from these calls
        # The observer records only while the agent does (not yet: CUDA has not started): it
        # runs here as it will then, its events kept nowhere.
        observer = _State.observer
        if observer is not None:
            observer.probe(True)
        try:
            return self._best(lambda: add(x, x)), self._best(lambda: module(x))
        finally:
            _State.announced = announced
            if observer is not None:
                observer.probe(False)


def _announce():
    # One empty range that tells the report what was added (docs/pytorch.md).
    if _State.announced:
        return
    _State.announced = True
    parts = [p for p, on in (("ops", _OPS), ("modules", _MODULES), ("stack", _STACK)) if on]
    # What each op and module call costs the program with this layer on (measured at import,
    # _Probe): the report takes it out of the idle time it prices (docs/hints.md).
    cost = ";op_ns=%d;module_ns=%d" % (_State.op_ns, _State.module_ns)
    text = "kprof.pytorch:" + _MODE + ":" + ",".join(parts) + cost
    try:
        if _State.observer is not None:
            _State.observer.mark(_State.observer.name(text))
        else:
            _State.nvtx_push(text)
            _State.nvtx_pop()
    except Exception:
        pass


# ----- op ranges --------------------------------------------------------------------------


def _profiler_config(torch, state):
    from torch.autograd.profiler import ProfilerConfig, ProfilerState

    try:
        from torch.autograd.profiler import _ExperimentalConfig
    except ImportError:  # older layouts
        from torch._C._profiler import _ExperimentalConfig
    # The configuration emit_nvtx() uses (no shapes, no memory, no stack), in `state`.
    return ProfilerConfig(getattr(ProfilerState, state), False, False, False, False, False,
                          _ExperimentalConfig())


def _profiler_state(torch, state):
    """Turns on PyTorch's own profiler in `state` on this thread (and the autograd threads it
    carries the state to), and keeps it on around the program's own profiler."""
    import atexit
    import threading

    import torch.autograd.profiler as tap

    real_enable = tap._enable_profiler
    real_disable = tap._disable_profiler
    # emit_nvtx() also raises PyTorch's "a profiler is on" flag, on which torch.compile's
    # generated code opens a range around each Triton kernel it launches: kprof does the same.
    real_start = getattr(tap, "_run_on_profiler_start", lambda: None)
    real_stop = getattr(tap, "_run_on_profiler_stop", lambda: None)
    config = _profiler_config(torch, state)

    def ours_on():
        return _State.enabled_on == threading.get_ident() and not _State.suspended

    def enable(*args, **kwargs):
        # The program starts its own profiler (emit_nvtx, torch.profiler) on a thread where
        # kprof's state is on: PyTorch allows one per thread, so kprof's steps aside until the
        # program's stops, and no op is counted twice.
        if ours_on():
            real_disable()
            _State.suspended = True
        return real_enable(*args, **kwargs)

    def disable(*args, **kwargs):
        result = real_disable(*args, **kwargs)
        if _State.suspended and _State.enabled_on == threading.get_ident():
            try:
                real_enable(config, set())
                _State.suspended = False
            except Exception as e:  # the program's profiler is still on somewhere
                _warn("op ranges after the program's profiler", e)
        return result

    def stop(*args, **kwargs):
        result = real_stop(*args, **kwargs)
        if ours_on():
            real_start()
        return result

    def at_exit():
        if ours_on():
            try:
                real_disable()
            except Exception:
                pass

    real_enable(config, set())  # (first: a state that cannot be had changes nothing)
    # emit_nvtx and torch.profiler call these through torch.autograd.profiler's namespace.
    tap._enable_profiler = enable
    tap._disable_profiler = disable
    if hasattr(tap, "_run_on_profiler_stop"):
        tap._run_on_profiler_stop = stop
    _State.enabled_on = threading.get_ident()
    real_start()
    atexit.register(at_exit)


def _install_observed_ops(torch):
    # The observer names every op already (installed in _activate). torch.compile's generated
    # code opens its ranges (around each Triton kernel, each compiled graph's call, each compile
    # phase) only while a profiler of PyTorch's is on (its _RecordFunctionFast needs one): at the
    # first torch.compile, kprof turns on the cheapest, ITT's, whose ranges go nowhere with no ITT
    # collector attached, and which the observer sees like any other. Eager programs never pay
    # for it.
    import functools

    real_compile = torch.compile

    def compile(*args, **kwargs):
        if _State.enabled_on is None:
            try:
                if not torch._C._itt.is_available():
                    raise RuntimeError("this torch was built without ITT")
                _profiler_state(torch, "ITT")
            except Exception as e:
                _State.enabled_on = False  # not again
                _warn("compiled code's ranges", e)
        return real_compile(*args, **kwargs)

    torch.compile = functools.wraps(real_compile)(compile)


def _install_ops(torch):
    if _State.observer is not None:
        _install_observed_ops(torch)
    else:
        _profiler_state(torch, "NVTX")


# ----- module ranges ----------------------------------------------------------------------


def _install_modules(torch):
    import threading
    import weakref

    from torch.nn.modules import module as nnm

    names = weakref.WeakKeyDictionary()
    local = threading.local()
    observer = _State.observer
    if observer is not None:  # a label's id, made once, is what a range carries
        push, pop, label_of = observer.push, observer.pop, observer.name
    else:
        push, pop, label_of = _State.nvtx_push, _State.nvtx_pop, lambda text: text
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if compiling is None:
        compiling = lambda: False  # noqa: E731
    torch_dir = os.path.dirname(torch.__file__)

    def root_name(module):
        # The name the program gave the model: a variable of the first calling frame outside
        # torch and this file that holds it; else its class name. For torch.compile's wrapper,
        # the original model's name first, so that eager and compiled runs name modules alike.
        try:
            f = sys._getframe(3)
        except ValueError:
            f = None
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith(torch_dir) and not fn.startswith(_HERE):
                for target in (getattr(module, "_orig_mod", None), module):
                    for scope in (f.f_locals, f.f_globals):
                        for k, v in list(scope.items()):
                            if target is not None and v is target and not k.startswith("_"):
                                return k
                break
            f = f.f_back
        return type(module).__name__

    def name_of(module):
        n = names.get(module)
        if n is None:
            root = root_name(module)
            # torch.compile's wrapper: its children are named as the original module's.
            orig = getattr(module, "_orig_mod", None)
            for sub, child in module.named_modules():
                if orig is not None and sub.startswith("_orig_mod"):
                    sub = sub[len("_orig_mod."):] if sub != "_orig_mod" else ""
                names.setdefault(child, root + "." + sub if sub else root)
            n = names.get(module, root)
        return n

    labels = weakref.WeakKeyDictionary()  # module -> its range name, made once

    def pre(module, args):
        if compiling():  # as in post
            return None
        try:
            stack = getattr(local, "pushed", None)
            if stack is None:
                stack = local.pushed = []
            if not _State.announced:  # (not at the probe's calls: _Probe.measure)
                _announce()
            label = labels.get(module)
            if label is None:
                cls = type(getattr(module, "_orig_mod", module)).__name__
                label = labels[module] = label_of("kprof.module:%s|%s" % (name_of(module), cls))
            push(label)
            stack.append(module)
        except Exception:
            pass
        return None

    def post(module, args, output):
        # First, outside any try: torch.compile traces hooks met inside compiled code, and this
        # test (a constant while tracing) must leave nothing else for it to trace.
        if compiling():
            return None
        try:
            stack = getattr(local, "pushed", None)
            if stack and stack[-1] is module:
                stack.pop()
                pop()
        except Exception:
            pass
        return None

    # torch.compile warns when global module hooks exist: these hooks return at once inside
    # compiled code, and the program's output stays as it was without kprof.
    import warnings

    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there "
                            r"are global hooks on modules")
    nnm.register_module_forward_pre_hook(pre)
    try:
        nnm.register_module_forward_hook(post, always_call=True)
    except TypeError:  # PyTorch before always_call
        nnm.register_module_forward_hook(post)


# ----- source lines -----------------------------------------------------------------------


def _install_stack(torch):
    from torch.overrides import TorchFunctionMode

    observer = _State.observer
    if observer is not None:
        push, pop, label_of = observer.push, observer.pop, observer.name
    else:
        push, pop, label_of = _State.nvtx_push, _State.nvtx_pop, lambda text: text
    skip = (os.path.dirname(torch.__file__), _HERE)
    compiling = torch.compiler.is_compiling
    seen = {}

    class _Source(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if compiling():
                return func(*args, **kwargs)
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename.startswith(skip):
                f = f.f_back
            if f is None:
                return func(*args, **kwargs)
            key = (f.f_code.co_filename, f.f_lineno)
            label = seen.get(key)
            if label is None:
                label = seen[key] = label_of("kprof.src:%s:%d" % key)
            push(label)
            try:
                return func(*args, **kwargs)
            finally:
                pop()

    _Source().__enter__()  # stays on for the life of the thread that imported torch


# ----- start-up ---------------------------------------------------------------------------


def _activate(torch):
    try:
        nvtx = torch._C._nvtx
        _State.nvtx_push, _State.nvtx_pop = nvtx.rangePushA, nvtx.rangePop
    except Exception as e:
        _warn("NVTX from torch", e)
        return
    try:
        probe = _Probe(torch)
        before = probe.measure()
    except Exception:
        probe = None
    if _VIA == "observer" and (_OPS or _MODULES):
        _load_observer(torch)
    for on, what, install in ((_OPS, "op ranges", _install_ops),
                              (_MODULES, "module ranges", _install_modules),
                              (_STACK, "source lines", _install_stack)):
        if install is _install_stack and probe is not None:
            # Measured before the source lines go in: those are ranges of their own, which the
            # report counts at CUPTI's cost per range, not a cost of every op.
            try:
                after = probe.measure()
                _State.op_ns = max(0, int(after[0] - before[0]))
                _State.module_ns = max(0, int(after[1] - before[1]))
            except Exception:
                pass
        if on:
            try:
                install(torch)
            except Exception as e:
                _warn(what, e)
    try:
        # What the caching allocator's blocks hold (kprof_memory.py, next to this file).
        sys.path.insert(0, _HERE)
        try:
            import kprof_memory
        finally:
            sys.path.remove(_HERE)
        _State.memory = kprof_memory.install(torch, lambda text: torch._C._nvtx.markA(text))
    except Exception as e:
        _warn("memory categories", e)
    if not _MODULES:
        # The report learns what was added from a range made once CUDA runs (the agent starts
        # with CUDA): at the first module call, which then unhooks itself.
        try:
            from torch.nn.modules import module as nnm

            handle = []

            def once(module, args):
                _announce()
                handle[0].remove()

            handle.append(nnm.register_module_forward_pre_hook(once))
        except Exception:
            pass


def _load_observer(torch):
    # kprof's RecordFunction observer (kprof_ops.cpp), built once for this torch; NVTX if not.
    try:
        sys.path.insert(0, _HERE)
        try:
            import kprof_ops_build
        finally:
            sys.path.remove(_HERE)
        observer = kprof_ops_build.load(torch)
        observer.install("PyTorch RecordFunction observer, torch %s" % torch.__version__, _OPS)
        _State.observer = observer
    except Exception as e:
        _warn("the op observer", e, "ops named through NVTX instead")


class _TorchWatcher:
    """A finder that lets `import torch` happen as usual and calls _activate once it is done."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        real_exec = loader.exec_module

        def exec_module(module):
            real_exec(module)
            _activate(module)

        # The loader instance is this import's own: shadowing its method changes nothing else.
        loader.exec_module = exec_module
        return spec


def _chain():
    # The sitecustomize the environment would have imported without kprof.
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path
                       if os.path.abspath(p or os.curdir) != _HERE]
        import importlib

        try:
            importlib.import_module("sitecustomize")
        except ImportError as e:
            if getattr(e, "name", None) != "sitecustomize":
                raise
    finally:
        sys.path[:] = saved
        nxt = sys.modules.get("sitecustomize")
        if nxt is None and mine is not None:
            sys.modules["sitecustomize"] = mine


if _MODE != "off" and (_OPS or _MODULES):
    if "torch" in sys.modules:
        _activate(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchWatcher())
_chain()
