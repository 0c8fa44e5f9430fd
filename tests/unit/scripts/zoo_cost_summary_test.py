"""scripts/zoo_cost_summary.py and scripts/pytorch_ops_parity_kineto.py on made-up runs whose
figures are known: the ratios, what each configuration adds as a share of torch.profiler's (of
the medians and per round), failed runs; the op parity's agreement and its exit code."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
SUMMARY = os.path.join(ROOT, "scripts", "zoo_cost_summary.py")
PARITY = os.path.join(ROOT, "scripts", "pytorch_ops_parity_kineto.py")


class Summary(unittest.TestCase):
    def test_shares_of_what_the_profiler_adds(self):
        rows = [("plain", 1, 0, 5.0, 1.0), ("profiler", 1, 0, 6.0, 2.0), ("default", 1, 0, 6.0, 1.8),
                ("off", 1, 0, 5.5, 1.4),
                ("plain", 2, 0, 5.0, 2.0), ("profiler", 2, 0, 6.0, 4.0), ("default", 2, 0, 6.0, 3.0),
                ("off", 2, 1, 5.5, ""),
                ("plain", 3, 0, 5.0, 1.0), ("profiler", 3, 0, 6.0, 3.0), ("default", 3, 0, 6.0, 2.0),
                ("off", 3, 0, 5.5, 1.6)]
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            f.write("config\tround\trc\twall_s\tloop_s\n")
            for r in rows:
                f.write("\t".join(str(v) for v in r) + "\n")
        try:
            out = subprocess.run([sys.executable, SUMMARY, f.name, "w"], capture_output=True,
                                 text=True, check=True).stdout
        finally:
            os.unlink(f.name)
        lines = out.splitlines()
        self.assertEqual(lines[0], "w: medians of 3 rounds")
        # plain's loop median 1.0, torch.profiler's 3.0 (adds 2 s), default's 2.0 (adds 1 s).
        self.assertIn("what each adds to plain's loop, as a share of what torch.profiler adds "
                      "(2000.0 ms):", lines)
        default = [l for l in lines if l.strip().startswith("default ")][-1]
        self.assertIn("+1000.0 ms  0.50", default)
        # Per round: 0.8/1.0, 1.0/2.0, 1.0/2.0.
        self.assertIn("per round 0.80 0.50 0.50; median 0.50", default)
        off = [l for l in lines if l.strip().startswith("off ")]
        self.assertTrue(off[0].rstrip().endswith("2"), off[0])  # round 2 failed
        self.assertIn("per round 0.40 0.30; median 0.35", off[-1])


class Parity(unittest.TestCase):
    def run_parity(self, kprof_gpu_ns, torch_us, calls=(10, 10)):
        with tempfile.TemporaryDirectory() as d:
            for r in (1, 2):
                with open(os.path.join(d, "window.r%d.json" % r), "w") as f:
                    json.dump({"ops": [{"key": "aten::mm", "calls": calls[0], "gpu_ns": kprof_gpu_ns},
                                       {"key": "aten::view", "calls": 3, "gpu_ns": 0}]}, f)
                with open(os.path.join(d, "profiler.r%d.ops.json" % r), "w") as f:
                    json.dump([{"key": "aten::mm", "count": calls[1], "self_device_us": torch_us,
                                "device_us": torch_us, "cpu_us": 5, "device_type": "DeviceType.CPU"},
                               {"key": "sgemm_kernel", "count": 10, "self_device_us": torch_us,
                                "device_us": torch_us, "cpu_us": 0,
                                "device_type": "DeviceType.CUDA"}], f)
            return subprocess.run([sys.executable, PARITY, d], capture_output=True, text=True)

    def test_agreeing_ops_pass_and_apart_ones_are_named(self):
        ok = self.run_parity(1_000_000, 1010.0)  # 1000 us against 1010: within 2%
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertIn("1 of 1 ops agree", ok.stdout)  # kernels and ops without GPU time left out
        far = self.run_parity(1_000_000, 1100.0)
        self.assertEqual(far.returncode, 1)
        self.assertIn("APART aten::mm: calls 10 / 10, GPU ratio 0.9091", far.stdout)
        calls = self.run_parity(1_000_000, 1000.0, calls=(10, 11))
        self.assertEqual(calls.returncode, 1)
        self.assertIn("APART aten::mm: calls 10 / 11", calls.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
