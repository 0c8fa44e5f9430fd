_pre, _post = {}, {}


class _Handle:
    def __init__(self, hooks, key):
        self.hooks, self.key = hooks, key

    def remove(self):
        self.hooks.pop(self.key, None)


def register_module_forward_pre_hook(hook):
    key = object()
    _pre[key] = hook
    return _Handle(_pre, key)


def register_module_forward_hook(hook, *, always_call=False):
    key = object()
    _post[key] = (hook, always_call)
    return _Handle(_post, key)


class Module:
    def __init__(self):
        self._children = {}

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self.__dict__.setdefault("_children", {})[name] = value
        object.__setattr__(self, name, value)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._children.items():
            yield from child.named_modules(prefix + "." + name if prefix else name)

    def __call__(self, *args):
        # As nn.Module._call_impl: global pre hooks, forward, global hooks (always_call ones
        # also when forward raises).
        for hook in list(_pre.values()):
            hook(self, args)
        try:
            out = self.forward(*args)
        except BaseException:
            for hook, always in list(_post.values()):
                if always:
                    hook(self, args, None)
            raise
        for hook, _ in list(_post.values()):
            hook(self, args, out)
        return out
