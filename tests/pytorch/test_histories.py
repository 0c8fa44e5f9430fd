"""Real caching allocator histories (tests/fixtures/pytorch_histories, recorded on an H200)
replayed by kprof's PyTorch memory layer (src/pytorch/kprof_memory_replay.py): the replayed
peaks against PyTorch's own max_memory_allocated / max_memory_reserved of the same run, and the
replay with expandable segments against what PyTorch reserved when the same program ran with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.

    python3 tests/pytorch/test_histories.py BUILD/python FIXTURE_DIR
"""
import os
import pickle
import sys
import tarfile
import unittest

R = None
FIXTURES = None
MiB = 1 << 20


def peaks():
    """{name: {"plain": (allocated, reserved), "expandable": (allocated, reserved)}}."""
    out = {}
    with open(os.path.join(FIXTURES, "peaks.txt")) as f:
        for line in f:
            name, _, rest = line.partition(" PEAKS ")
            kv = dict(x.split("=", 1) for x in rest.split())
            mode = "expandable" if kv.get("alloc_conf") else "plain"
            out.setdefault(name, {})[mode] = (int(kv["max_allocated"]), int(kv["max_reserved"]))
    return out


def histories():
    with tarfile.open(os.path.join(FIXTURES, "histories.txz")) as tar:
        for m in tar.getmembers():
            if m.name.endswith(".pkl"):
                yield os.path.basename(m.name)[:-4], pickle.load(tar.extractfile(m))


class Histories(unittest.TestCase):
    def setUp(self):
        self.peaks = peaks()
        self.runs = dict(histories())
        self.assertEqual(sorted(self.runs), ["fragment", "leak", "llama", "memtrain", "nanogpt"])

    def test_the_replayed_peaks_are_pytorchs(self):
        for name, d in self.runs.items():
            snap = d["snapshot"]
            stats = {"allocated_bytes.all.peak": d["max_allocated"],
                     "reserved_bytes.all.peak": d["max_reserved"]}
            p = R.summarize_device(0, snap["device_traces"][0], snap["segments"], R.Notes(), {},
                                   stats, 2000000)
            self.assertTrue(p["complete"], name)
            self.assertEqual(p["replayed_max_reserved"], d["max_reserved"], name)
            # A large block can be up to 1 MiB longer than its request (docs/memory.md).
            self.assertLessEqual(p["replayed_max_allocated"], d["max_allocated"], name)
            self.assertGreaterEqual(p["replayed_max_allocated"], 0.99 * d["max_allocated"], name)
            self.assertEqual(p["expandable_max_reserved"],
                             R.expandable_reserved_peak(snap["device_traces"][0]), name)

    def test_the_replay_with_expandable_segments_reserves_what_pytorch_reserved(self):
        for name, d in self.runs.items():
            got = R.expandable_reserved_peak(d["snapshot"]["device_traces"][0])
            want = self.peaks[name]["expandable"][1]
            self.assertEqual(got, want, f"{name}: {got / MiB:.1f} MiB, PyTorch {want / MiB:.1f}")


if __name__ == "__main__":
    sys.path.insert(0, sys.argv.pop(1))
    FIXTURES = sys.argv.pop(1)
    import kprof_memory_replay as R  # noqa: E402

    unittest.main()
