from torch._C import log

from .modules.module import Module


class Linear(Module):
    def forward(self, x):
        log.append(("op", "linear"))
        return x + 1


class GELU(Module):
    def forward(self, x):
        log.append(("op", "gelu"))
        return x


class Fail(Module):
    def forward(self, x):
        raise ValueError("planted")


class Sequential(Module):
    def __init__(self, *mods):
        super().__init__()
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._children.values():
            x = m(x)
        return x


class OptimizedModule(Module):
    """torch.compile's wrapper: the original module as _orig_mod."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod

    def forward(self, x):
        import torch.compiler as c

        c.compiling[0] = True  # the traced code runs the module's hooks while compiling
        try:
            return self._orig_mod(x)
        finally:
            c.compiling[0] = False
