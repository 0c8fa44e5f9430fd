"""CPU tests of kprof's PyTorch layer (src/pytorch/sitecustomize.py) against a stand-in for
PyTorch (fake_torch/): what it adds once torch is imported, what it leaves alone otherwise, and
how it steps aside for the program's own profiler. Each case runs a program in a fresh Python
the way `kprof run --pytorch MODE` starts it (PYTHONPATH and KPROF_PYTORCH).

    python3 tests/pytorch/test_sitecustomize.py BUILD/python
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_torch")
LAYER = None  # the folder kprof run puts on PYTHONPATH (argv[1])

# The program of most cases: a model named by the program, called twice, a failing module, and
# a dump of what the stand-in logged.
MODEL = textwrap.dedent("""
    import json, sys
    import torch
    model = torch.nn.Sequential(torch.nn.Linear(), torch.nn.GELU(), torch.nn.Linear())
    model(1)
    model(2)
    try:
        torch.nn.Fail()(3)
    except ValueError:
        pass
    print("RESULT " + json.dumps(torch.log))
""")


def run(code, mode="auto", layer=True, extra_path=(), env_add=None):
    env = dict(os.environ)
    paths = ([LAYER] if layer else []) + list(extra_path) + [FAKE]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["KPROF_PYTORCH"] = mode
    # The stand-in has no headers to build kprof's op observer against: these cases take the
    # NVTX path, and test_observer_* the observer's own.
    env["KPROF_PYTORCH_OPS"] = "nvtx"
    env.update(env_add or {})
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    return p


def result(p):
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return [tuple(e) for e in json.loads(line[7:])]
    raise AssertionError("no RESULT line: stdout=%r stderr=%r" % (p.stdout, p.stderr))


def pushes(log, prefix):
    return [e[1] for e in log if e[0] == "push" and e[1].startswith(prefix)]


class Layer(unittest.TestCase):
    def test_auto_adds_op_and_module_ranges(self):
        p = run(MODEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        log = result(p)
        # The op profiler is on, in NVTX mode, once.
        self.assertEqual([e for e in log if e[0] == "enable"], [("enable", "NVTX")])
        # What it added, and what that costs per op and per module call (the stand-in has no
        # tensors to time: 0).
        self.assertEqual(pushes(log, "kprof.pytorch:"),
                         ["kprof.pytorch:auto:ops,modules;op_ns=0;module_ns=0"])
        mods = pushes(log, "kprof.module:")
        self.assertEqual(mods, [
            "kprof.module:model|Sequential", "kprof.module:model.0|Linear",
            "kprof.module:model.1|GELU", "kprof.module:model.2|Linear"] * 2 +
            ["kprof.module:Fail|Fail"])
        # Every push is popped, the failing module's too, and pops close ranges in order.
        depth = 0
        for e in log:
            if e[0] in ("push", "pop"):
                depth += 1 if e[0] == "push" else -1
                self.assertGreaterEqual(depth, 0)
        self.assertEqual(depth, 0)
        self.assertEqual(log.count(("op", "linear")), 4)

    def test_observer_that_cannot_be_built_leaves_ops_to_nvtx_in_one_line(self):
        with tempfile.TemporaryDirectory() as cache:
            p = run(MODEL, env_add={"KPROF_PYTORCH_OPS": "observer", "KPROF_CACHE_DIR": cache})
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("kprof: --pytorch auto: the op observer: torch's headers are not installed",
                      lines[0])
        self.assertTrue(lines[0].endswith("(ops named through NVTX instead)"), lines[0])
        log = result(p)
        self.assertEqual([e for e in log if e[0] == "enable"], [("enable", "NVTX")])
        self.assertEqual(len(pushes(log, "kprof.module:")), 9)

    def test_modes(self):
        ops = result(run(MODEL, "ops"))
        self.assertEqual(pushes(ops, "kprof.module:"), [])
        self.assertEqual(pushes(ops, "kprof.pytorch:"), ["kprof.pytorch:ops:ops;op_ns=0;module_ns=0"])
        self.assertIn(("enable", "NVTX"), ops)
        mods = result(run(MODEL, "modules"))
        self.assertEqual(len(pushes(mods, "kprof.module:")), 9)
        self.assertNotIn(("enable", "NVTX"), mods)
        off = result(run(MODEL, "off"))
        self.assertEqual([e for e in off if e[0] != "op"], [])

    def test_program_without_torch_is_untouched(self):
        code = "import sys; print(sorted(m for m in sys.modules if 'torch' in m)); sys.exit(7)"
        with_layer, without = run(code), run(code, layer=False)
        self.assertEqual(with_layer.returncode, 7)
        self.assertEqual((with_layer.stdout, with_layer.stderr), (without.stdout, without.stderr))
        self.assertEqual(with_layer.stdout.strip(), "[]")

    def test_existing_sitecustomize_still_runs(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("import os\nos.environ['THEIRS'] = 'ran'\n")
            p = run("import os, torch; print('RESULT ' + __import__('json').dumps("
                    "[['theirs', os.environ.get('THEIRS', '')]] + torch.log))",
                    extra_path=[d])
            log = result(p)
            self.assertEqual(log[0], ("theirs", "ran"))
            self.assertIn(("enable", "NVTX"), log)

    def test_program_profiler_takes_over_and_gives_back(self):
        code = textwrap.dedent("""
            import json, torch
            from torch.autograd import profiler as tap
            states = [tap.state()]
            with torch.autograd.profiler.emit_nvtx():
                states.append(tap.state())
                states.append(tap._is_profiler_enabled)
            states.append(tap.state())
            states.append(tap._is_profiler_enabled)
            print("RESULT " + json.dumps([states] + torch.log))
        """)
        p = run(code)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        log = result(p)
        # kprof's op ranges on; the program's emit_nvtx replaces them (no RuntimeError, one
        # profiler at a time: nothing counted twice); afterwards kprof's are on again.
        self.assertEqual(log[0], ("NVTX", "NVTX", True, "NVTX", True))
        self.assertEqual([e for e in log[1:] if e[0] in ("enable", "disable")],
                         [("enable", "NVTX"), ("disable", "NVTX"), ("enable", "NVTX"),
                          ("disable", "NVTX"), ("enable", "NVTX")])

    def test_compiled_module_named_as_original_and_silent_inside(self):
        code = textwrap.dedent("""
            import json, torch
            compiled = torch.nn.OptimizedModule(
                torch.nn.Sequential(torch.nn.Linear(), torch.nn.GELU()))
            net = compiled._orig_mod
            compiled(1)
            print("RESULT " + json.dumps(torch.log))
        """)
        log = result(run(code))
        # Only the wrapper's range, named as the program's variable for the original model (as
        # an eager run names it): hooks met while compiling add nothing.
        self.assertEqual(pushes(log, "kprof.module:"), ["kprof.module:net|Sequential"])

    def test_stack_mode_enters_a_function_mode(self):
        code = ("import json, torch\nfrom torch.overrides import TorchFunctionMode as T\n"
                "print('RESULT ' + json.dumps([[len(T.active)]]))")
        self.assertEqual(result(run(code, "stack")), [(1,)])
        self.assertEqual(result(run(code, "auto")), [(0,)])


if __name__ == "__main__":
    LAYER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
