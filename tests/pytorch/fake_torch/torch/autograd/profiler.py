import threading

from torch._C import log

_tls = threading.local()
_is_profiler_enabled = False


class ProfilerState:
    NVTX = "NVTX"
    KINETO = "KINETO"


class _ExperimentalConfig:
    pass


class ProfilerConfig:
    def __init__(self, state, *flags):
        self.state = state
        self.flags = flags


def _enable_profiler(config, activities):
    # As PyTorch: one profiler per thread.
    if getattr(_tls, "on", None) is not None:
        raise RuntimeError("Profiler is already enabled on this thread")
    _tls.on = config.state
    log.append(("enable", config.state))


def _disable_profiler():
    if getattr(_tls, "on", None) is None:
        raise RuntimeError("Can't disable profiler when it's not running")
    log.append(("disable", _tls.on))
    _tls.on = None


def _run_on_profiler_start():
    global _is_profiler_enabled
    _is_profiler_enabled = True


def _run_on_profiler_stop():
    global _is_profiler_enabled
    _is_profiler_enabled = False


def state():
    return getattr(_tls, "on", None)


class emit_nvtx:
    def __enter__(self):
        _run_on_profiler_start()
        _enable_profiler(ProfilerConfig(ProfilerState.NVTX, False), set())
        return self

    def __exit__(self, *exc):
        _disable_profiler()
        _run_on_profiler_stop()
        return False
