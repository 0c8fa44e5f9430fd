"""CPU tests of scripts/counters_report.py's comparison with Nsight Compute, on a real pair:
tests/fixtures/ncu/nanogpt_softmax (scripts/zoo_ncu.sh on an H200: kprof's replay of the first
launch of nanoGPT's softmax, and `ncu --clock-control none` of the same launch). ncu writes the
kernel's name shortened (`void unnamed>::cunn_SoftMaxForward<8, BFloat16, ...>`), kprof in full
(`void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, ...>`).

    python3 tests/unit/scripts/counters_report_test.py
"""
import contextlib
import io
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import counters_report  # noqa: E402

PAIR = os.path.join(ROOT, "tests", "fixtures", "ncu", "nanogpt_softmax")


class CountersReportTest(unittest.TestCase):
    def test_base_name(self):
        b = counters_report.base_name
        self.assertEqual(b("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, "
                           "c10::BFloat16, float>(c10::BFloat16*, int)"), "cunn_SoftMaxForward")
        self.assertEqual(b("void unnamed>::cunn_SoftMaxForward<8, BFloat16, float, BFloat16, "
                           "unnamed>::LogSoftMaxForwardEpilogue>(T4 *, const T2 *, int)"),
                         "cunn_SoftMaxForward")
        self.assertEqual(b("matmul_kernel"), "matmul_kernel")
        self.assertEqual(b("zoo_axpby_clip(float const*, float*, int)"), "zoo_axpby_clip")

    def test_softmax_row_against_ncu(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            counters_report.ncu_table(os.path.join(PAIR, "cc-replay.json"),
                                      os.path.join(PAIR, "ncu.csv"), counters_report.NCU_COLUMNS)
        rows = [l for l in out.getvalue().splitlines() if l.startswith("| `")]
        self.assertEqual(len(rows), 1, out.getvalue())
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        self.assertEqual(cells[1], "memory")
        self.assertEqual(cells[2], "54.3 / 54.5")  # SM %
        self.assertEqual(cells[4], "66.5 / 65.8")  # DRAM %
        self.assertEqual(cells[-1], "0.64")  # the largest gap, points


if __name__ == "__main__":
    unittest.main()
