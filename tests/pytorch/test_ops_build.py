"""CPU tests of the op observer's build (src/pytorch/kprof_ops_build.py, as the build copies it):
one build per torch, Python and source, shared by processes that start together, cached, and a
failed build said in one line and not tried again. The compiler is a stand-in script that logs
each call and writes its output file; torch is a folder with the one header the build checks
for. (The observer itself is built and run against a real torch on the GPU machine:
Gpu.PyTorchOpObserverNamesTheOpsOfNvtxMode.)

    python3 tests/pytorch/test_ops_build.py BUILD/python
"""
import os
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import types
import unittest

LAYER = None  # BUILD/python (argv[1])


def fake_torch(root, version="2.11.0"):
    """A module object standing for torch, its headers and lib folder under `root`."""
    os.makedirs(os.path.join(root, "include", "ATen"), exist_ok=True)
    open(os.path.join(root, "include", "ATen", "record_function.h"), "w").close()
    os.makedirs(os.path.join(root, "lib"), exist_ok=True)
    t = types.SimpleNamespace(__version__=version, __file__=os.path.join(root, "__init__.py"))
    t._C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True)
    return t


COMPILER = textwrap.dedent("""\
    #!/bin/sh
    # A stand-in compiler: logs its call, fails when FAKE_CXX_FAIL is set, else writes -o FILE.
    echo "$$ $*" >> "$FAKE_CXX_LOG"
    sleep "${FAKE_CXX_SLEEP:-0}"
    if [ -n "$FAKE_CXX_FAIL" ]; then echo "kprof_ops.cpp:1:1: error: $FAKE_CXX_FAIL" >&2; exit 1; fi
    while [ $# -gt 0 ]; do
      if [ "$1" = -o ]; then echo built > "$2"; fi
      shift
    done
    """)


class Build(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.cxx = os.path.join(d, "fake-c++")
        with open(self.cxx, "w") as f:
            f.write(COMPILER)
        os.chmod(self.cxx, 0o755)
        self.log = os.path.join(d, "calls.log")
        self.cache = os.path.join(d, "cache")
        self.torch_root = os.path.join(d, "torch")
        self.env = dict(os.environ, KPROF_CXX=self.cxx, FAKE_CXX_LOG=self.log,
                        KPROF_CACHE_DIR=self.cache)

    def tearDown(self):
        self.dir.cleanup()

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().splitlines()

    def library(self, env_add=None, version="2.11.0"):
        """kprof_ops_build.library(torch) in a fresh Python: (exit code, stdout, stderr)."""
        code = textwrap.dedent("""
            import sys, types
            sys.path.insert(0, %r)
            import kprof_ops_build
            sys.path.insert(0, %r)
            import test_ops_build
            torch = test_ops_build.fake_torch(%r, %r)
            try:
                print(kprof_ops_build.library(torch))
            except kprof_ops_build.BuildError as e:
                print("BuildError: %%s" %% e)
        """) % (LAYER, os.path.dirname(os.path.abspath(__file__)), self.torch_root, version)
        env = dict(self.env, **(env_add or {}))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=60)
        return p.returncode, p.stdout.strip(), p.stderr

    @unittest.skipUnless(os.path.isfile(os.path.join(sysconfig.get_paths()["include"],
                                                     "Python.h")), "no Python headers here")
    def test_built_once_then_cached(self):
        rc, path, err = self.library()
        self.assertEqual(rc, 0, err)
        self.assertTrue(path.startswith(os.path.join(self.cache, "pytorch-ops")), path)
        self.assertTrue(path.endswith("/_kprof_ops.so"), path)
        with open(path) as f:
            self.assertEqual(f.read(), "built\n")
        self.assertEqual(len(self.calls()), 1)
        self.assertIn("-std=c++20", self.calls()[0])
        self.assertIn("-D_GLIBCXX_USE_CXX11_ABI=1", self.calls()[0])
        self.assertIn("kprof: building the PyTorch op observer for torch 2.11.0", err)
        # Cached: no compiler call, nothing said.
        rc, again, err = self.library()
        self.assertEqual((rc, again, err), (0, path, ""))
        self.assertEqual(len(self.calls()), 1)
        # Another torch: another build.
        rc, other, _ = self.library(version="2.12.0")
        self.assertNotEqual(other, path)
        self.assertEqual(len(self.calls()), 2)

    @unittest.skipUnless(os.path.isfile(os.path.join(sysconfig.get_paths()["include"],
                                                     "Python.h")), "no Python headers here")
    def test_processes_starting_together_build_once(self):
        # Four processes (the ranks of a job) while the first one's compiler takes a second.
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            self.library({"FAKE_CXX_SLEEP": "1"}))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len({r[1] for r in results}), 1, results)
        self.assertTrue(all(r[0] == 0 and not r[1].startswith("BuildError") for r in results))
        self.assertEqual(len(self.calls()), 1, self.calls())

    @unittest.skipUnless(os.path.isfile(os.path.join(sysconfig.get_paths()["include"],
                                                     "Python.h")), "no Python headers here")
    def test_a_failed_build_is_said_once_and_not_tried_again(self):
        rc, out, err = self.library({"FAKE_CXX_FAIL": "no member named 'seqNr'"})
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("BuildError: compiling "), out)
        self.assertIn("no member named 'seqNr'", out)
        self.assertEqual(len(self.calls()), 2)  # C++20, then C++17
        rc, out, err = self.library()
        self.assertTrue(out.startswith("BuildError: an earlier build failed"), out)
        self.assertIn("no member named 'seqNr'", out)
        self.assertEqual(len(self.calls()), 2)  # not tried again

    def test_missing_headers_or_compiler_say_what(self):
        # No torch headers.
        os.makedirs(self.torch_root)
        code = textwrap.dedent("""
            import sys, types
            sys.path.insert(0, %r)
            import kprof_ops_build
            torch = types.SimpleNamespace(__version__="2.11.0", __file__=%r)
            try:
                kprof_ops_build.library(torch)
            except kprof_ops_build.BuildError as e:
                print("BuildError: %%s" %% e)
        """) % (LAYER, os.path.join(self.torch_root, "__init__.py"))
        p = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True,
                           text=True, timeout=60)
        self.assertIn("BuildError: torch's headers are not installed", p.stdout)
        p = subprocess.run([sys.executable, "-c", code],
                           env=dict(self.env, KPROF_CXX="", CXX="", PATH="/nonexistent"),
                           capture_output=True, text=True, timeout=60)
        self.assertIn("BuildError: no C++ compiler", p.stdout)
        self.assertEqual(self.calls(), [])


if __name__ == "__main__":
    LAYER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
