from . import profiler  # noqa: F401
