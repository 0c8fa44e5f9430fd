"""CPU tests of kprof's PyTorch memory layer (src/pytorch/kprof_memory.py): the replay of the
caching allocator's history and the category of each block, on histories written here the way
torch.cuda.memory._snapshot() gives them (actions, addresses, sizes, microseconds).

    python3 tests/pytorch/test_memory.py BUILD/python
"""
import gc
import json
import os
import sys
import types
import unittest
from unittest import mock

LAYER = None
M = None  # kprof_memory, imported from the layer folder the build made
R = None  # kprof_memory_replay, beside it

KiB = 1024
SEG = 2 * 1024 * KiB


def alloc(addr, size, t):
    return {"action": "alloc", "addr": addr, "size": size, "time_us": t}


def free(addr, size, t):
    return [{"action": "free_requested", "addr": addr, "size": size, "time_us": t},
            {"action": "free_completed", "addr": addr, "size": size, "time_us": t}]


def segment(addr, size, t):
    return {"action": "segment_alloc", "addr": addr, "size": size, "time_us": t}


# One training step on one device: a parameter P, an activation A made in the forward pass and
# freed in the backward pass (which starts at 30), a gradient G, the optimizer's state S made in
# its first step; the step's hook at 50 sees P, G and S; zero_grad frees G at 60; a temporary T
# lives 62-65. The allocated peak (P+G+S = 24 KiB) is reached when S is made, at 45.
P, A, G, S, T = 0x1000, 0x3000, 0x5000, 0x7000, 0xB000
TRACE = ([segment(0x1000, SEG, 5), alloc(P, 4 * KiB, 10), alloc(A, 8 * KiB, 20),
          alloc(G, 4 * KiB, 35)] + free(A, 8 * KiB, 40) +
         [alloc(S, 16 * KiB, 45)] + free(G, 4 * KiB, 60) + [alloc(T, 2 * KiB, 62)] +
         free(T, 2 * KiB, 65))
def blocks(*spans):
    """A 2 MiB segment at 0x1000 made of (size, state) blocks one after the other, the rest
    inactive (the snapshot gives block sizes, not addresses)."""
    used = sum(z for z, _ in spans)
    return [{"device": 0, "address": 0x1000, "total_size": SEG,
             "blocks": [{"size": z, "state": st} for z, st in spans] +
             [{"size": SEG - used, "state": "inactive"}]}]


ACTIVE = "active_allocated"
# The end: P and S live (0x1000 and 0x7000).
END_SEGMENTS = blocks((4 * KiB, ACTIVE), (20 * KiB, "inactive"), (16 * KiB, ACTIVE))
# The end of the first four entries: P, A and G live (0x1000, 0x3000, 0x5000).
EARLY_SEGMENTS = blocks((4 * KiB, ACTIVE), (4 * KiB, "inactive"), (8 * KiB, ACTIVE),
                        (4 * KiB, ACTIVE))
STATS = {"allocated_bytes.all.peak": 24 * KiB, "reserved_bytes.all.peak": SEG,
         "allocated_bytes.all.current": 20 * KiB, "reserved_bytes.all.current": SEG}


def notes():
    n = R.Notes()
    n.note_backward(30)
    n.note_step(50, {(0, P): "parameters", (0, G): "gradients", (0, S): "optimizer_state"},
                {0: 24 * KiB})
    return n


def moment(payload, kind):
    found = [m for m in payload["moments"] if kind in m["kind"].split(",")]
    assert len(found) == 1, (kind, [m["kind"] for m in payload["moments"]])
    return found[0]


class Replay(unittest.TestCase):
    def summarize(self, trace=TRACE, n=None, end_owners=None, max_entries=1000,
                  segments=END_SEGMENTS, **kw):
        return R.summarize_device(0, trace, segments, n or notes(), end_owners or {}, STATS,
                                  max_entries, "exit", 0, **dict(dict(now_us=100), **kw))

    def test_the_peak_is_held_by_the_blocks_live_then_by_category(self):
        p = self.summarize()
        self.assertTrue(p["complete"])
        self.assertEqual(p["replayed_max_allocated"], 24 * KiB)
        self.assertEqual(p["max_allocated"], 24 * KiB)
        peak = moment(p, "allocated_peak")
        self.assertEqual(peak["t_us"], 45)
        self.assertEqual(peak["allocated"], 24 * KiB)
        self.assertEqual(peak["categories"], {"parameters": 4 * KiB, "gradients": 4 * KiB,
                                              "optimizer_state": 16 * KiB, "activations": 0,
                                              "other": 0})
        self.assertEqual(peak["largest"][0], [16 * KiB, "optimizer_state"])

    def test_a_block_kept_from_the_forward_pass_into_the_backward_is_an_activation(self):
        # Up to G's allocation (35), with no optimizer step and nothing found at the end: A
        # (made at 20, live when the backward pass started at 30) is an activation, and so is P,
        # which nothing named a parameter; G, made after 30, is other.
        n = R.Notes()
        n.note_backward(30)
        end = moment(self.summarize(trace=TRACE[:4], n=n, segments=EARLY_SEGMENTS), "exit")
        self.assertEqual(end["categories"], {"parameters": 0, "gradients": 0,
                                             "optimizer_state": 0, "activations": 12 * KiB,
                                             "other": 4 * KiB})

    def test_blocks_alive_at_the_end_take_the_category_the_end_found(self):
        p = self.summarize(trace=TRACE[:4], n=R.Notes(), end_owners={(0, P): "parameters"},
                           segments=EARLY_SEGMENTS)
        self.assertEqual(moment(p, "exit")["categories"]["parameters"], 4 * KiB)
        self.assertEqual(moment(p, "exit")["categories"]["other"], 12 * KiB)  # no backward

    def test_the_segments_made_and_live_at_the_end_are_listed_but_mapped_ones(self):
        expandable = [dict(END_SEGMENTS[0], address=0x900000, is_expandable=True)]
        p = self.summarize(trace=TRACE + [segment(0x400000, SEG, 70)],
                           segments=END_SEGMENTS + expandable)
        self.assertEqual(p["segments"], [[0x1000, SEG], [0x400000, SEG]])

    def test_the_reserved_peak_and_the_end(self):
        p = self.summarize()
        r = moment(p, "reserved_peak")
        self.assertEqual((r["t_us"], r["reserved"], r["allocated"]), (5, SEG, 0))
        end = moment(p, "exit")
        self.assertEqual((end["t_us"], end["allocated"], end["reserved"]), (100, 20 * KiB, SEG))
        self.assertEqual(end["categories"]["parameters"] + end["categories"]["optimizer_state"],
                         20 * KiB)
        self.assertEqual(p["steps"], [24 * KiB])

    def test_a_history_that_lost_its_start_is_replayed_from_the_end(self):
        # The ring buffer kept the last entries only: from S's allocation on.
        lost = TRACE.index(alloc(S, 16 * KiB, 45))
        p = self.summarize(trace=TRACE[lost:], max_entries=len(TRACE) - lost)
        self.assertFalse(p["complete"])
        # Before the kept entries: P and G were live (8 KiB) in the 2 MiB segment.
        peak = moment(p, "allocated_peak")
        self.assertEqual((peak["t_us"], peak["allocated"]), (45, 24 * KiB))
        self.assertEqual(peak["categories"]["gradients"], 4 * KiB)
        self.assertEqual(peak["categories"]["parameters"], 4 * KiB)
        self.assertEqual(p["replayed_max_reserved"], SEG)

    def test_a_block_kept_across_a_step_that_the_step_did_not_name_is_other(self):
        # K at 0xC000, made in the forward pass (22) and never freed: live when the backward pass starts
        # and still live at the step's hook, which did not name it (a leak, an input, a cache).
        K = 0xC000
        trace = TRACE[:3] + [alloc(K, 2 * KiB, 22)] + TRACE[3:]
        segs = blocks((4 * KiB, ACTIVE), (20 * KiB, "inactive"), (16 * KiB, ACTIVE),
                      (4 * KiB, "inactive"), (2 * KiB, ACTIVE))
        p = self.summarize(trace=trace, segments=segs)
        self.assertTrue(p["complete"])
        peak = moment(p, "allocated_peak")
        self.assertEqual(peak["categories"]["other"], 2 * KiB)
        self.assertEqual(peak["categories"]["activations"], 0)
        self.assertEqual(moment(p, "exit")["categories"]["other"], 2 * KiB)

    def test_blocks_count_as_the_allocator_counts_them(self):
        # The history gives sizes asked for: 4 bytes take a 512-byte block; a block still live
        # at the end takes its size from there (here the allocator did not split off the 1 MiB
        # left over from a 1 MiB + 1 request).
        trace = [segment(0x1000, SEG, 1), alloc(0x1000, 4, 2), alloc(0x1200, KiB * KiB + 1, 3)]
        p = self.summarize(trace=trace, n=R.Notes(),
                           segments=blocks((512, ACTIVE), (SEG - 512, ACTIVE)))
        self.assertTrue(p["complete"])
        self.assertEqual(p["replayed_max_allocated"], SEG)
        self.assertEqual(moment(p, "exit")["largest"], [[SEG - 512, "other"], [512, "other"]])

    def test_a_step_that_keeps_more_each_time_is_in_the_step_series(self):
        n = notes()
        for k in range(1, 4):
            n.note_step(50 + k * 100, {}, {0: (24 + 2 * k) * KiB})
        p = self.summarize(n=n)
        self.assertEqual(p["steps"], [24 * KiB, 26 * KiB, 28 * KiB, 30 * KiB])
        self.assertEqual((p["steps_total"], p["optimizer_steps"]), (4, 4))
        self.assertEqual(len({id(m) for m in n.hook_maps}), 2)  # the three later share one map

    def test_other_tensors_kept_from_an_earlier_step_are_counted_at_the_peak(self):
        # K (a step's output, made at 20) outlives the step at 50, named by nothing; X, a
        # temporary of the next step (55-58), makes the peak: K is kept then, X is not. At S's
        # allocation (45) K is live but no step has passed yet.
        K, G2, S2, X = 0x2000, 0x4000, 0x5000, 0x9000  # one after the other in the segment
        trace = ([segment(0x1000, SEG, 5), alloc(P, 4 * KiB, 10), alloc(K, 8 * KiB, 20),
                  alloc(G2, 4 * KiB, 35), alloc(S2, 16 * KiB, 45), alloc(X, 32 * KiB, 55)] +
                 free(X, 32 * KiB, 58) + free(K, 8 * KiB, 70))
        n = R.Notes()
        n.note_backward(30)
        n.note_step(50, {(0, P): "parameters", (0, G2): "gradients",
                         (0, S2): "optimizer_state"}, {0: 32 * KiB})
        n.note_step(80, {(0, P): "parameters", (0, S2): "optimizer_state"}, {0: 32 * KiB})
        end = blocks((4 * KiB, ACTIVE), (8 * KiB, "inactive"), (4 * KiB, ACTIVE),
                     (16 * KiB, ACTIVE))
        p = self.summarize(trace=trace, n=n, segments=end)
        peak = moment(p, "allocated_peak")
        self.assertEqual((peak["t_us"], peak["allocated"]), (55, 64 * KiB))
        self.assertEqual(peak["categories"], {"parameters": 4 * KiB, "gradients": 4 * KiB,
                                              "optimizer_state": 16 * KiB, "activations": 0,
                                              "other": 40 * KiB})
        self.assertEqual(peak["kept"], 8 * KiB)
        self.assertEqual(peak["kept_blocks"], [[20, 8 * KiB]])
        cat = R._Categorizer(n, 0, {})
        self.assertEqual(R._moment("x", 45, 0, 0, [R._Instance(K, 8 * KiB, 20, 70)],
                                   cat)["kept"], 0)
        # A block read every step (a batch made once) outlives two steps: not counted; nor one
        # whose end the history did not see.
        for t1 in (90, R._INF):
            m = R._moment("x", 55, 0, 0, [R._Instance(K, 8 * KiB, 20, t1)], cat)
            self.assertEqual((m["kept"], "kept_blocks" in m), (0, False))
        # Made before the window (a later one, from 40; or before the history): how many steps
        # it outlived is not known, so it is not counted.
        later = R._Categorizer(n, 0, {}, t_start=40)
        for t0 in (-R._INF, 30):
            m = R._moment("x", 55, 0, 0, [R._Instance(K, 8 * KiB, t0, 70)], later)
            self.assertEqual(m["kept"], 0)

    def test_step_end_lists_the_blocks_live_after_the_windows_last_step(self):
        n = notes()  # a second step at 63, while T (62-65) lives: P, S and T, the largest first
        n.note_step(63, {(0, P): "parameters", (0, S): "optimizer_state"}, {0: 22 * KiB})
        want = [[45, 16 * KiB, "optimizer_state"], [10, 4 * KiB, "parameters"],
                [62, 2 * KiB, "other"]]
        self.assertEqual(self.summarize(n=n)["step_end"],
                         dict(t_us=63, blocks=want, rest_bytes=0, rest_blocks=0))
        with mock.patch.object(R, "STEP_END_BLOCKS", 1):
            self.assertEqual(self.summarize(n=n)["step_end"],
                             dict(t_us=63, blocks=want[:1], rest_bytes=6 * KiB, rest_blocks=2))

    def test_step_end_of_a_later_window_and_of_windows_without_a_step(self):
        lost = TRACE.index(alloc(S, 16 * KiB, 45))  # a window from 40: P and G made before it
        self.assertEqual(self.summarize(TRACE[lost:], t_start=40)["step_end"]["blocks"],
                         [[45, 16 * KiB, "optimizer_state"], [None, 4 * KiB, "parameters"],
                          [None, 4 * KiB, "gradients"]])
        # The step (50) before the window (from 70), after it (it ended at 40), or none.
        for n, kw in ((notes(), dict(t_start=70)), (notes(), dict(now_us=40)), (R.Notes(), {})):
            self.assertNotIn("step_end", self.summarize(TRACE[:4], n, **kw))

    def test_merged_windows_keep_the_latest_step_end_and_dtypes(self):
        n = notes()
        n.dtypes = {0: {"parameters": {"float32": 4 * KiB}}}
        had, none = self.summarize(n=n), self.summarize(n=R.Notes())
        later = dict(had, step_end=dict(had["step_end"], t_us=90), dtypes={"gradients": {}})
        for past, cur, want in ((None, had, had), (had, none, had), (none, had, had),
                                (had, later, later)):
            m = R.merge_windows(past, cur, 2, 0)
            self.assertEqual((m["step_end"], m["dtypes"]), (want["step_end"], want["dtypes"]))
        self.assertNotIn("step_end", R.merge_windows(none, none, 2, 0))


# ----- The layer's hooks, against a stand-in for torch -----------------------------------------


class FakeTensor:
    def __init__(self, ptr, dev=0, dtype=None, nbytes=0):
        self.is_cuda, self.device, self.grad, self._ptr = True, types.SimpleNamespace(index=dev), None, ptr
        self._nbytes = nbytes
        if dtype:  # as torch prints its dtypes: "torch.float32"
            self.dtype = dtype

    def untyped_storage(self):
        return types.SimpleNamespace(data_ptr=lambda: self._ptr, nbytes=lambda: self._nbytes)


class FakeModule:
    def __init__(self, *params):
        self._params = list(params)

    def parameters(self, recurse=True):
        return iter(self._params)

    def buffers(self, recurse=True):
        return iter(())


class BrokenModule(FakeModule):
    def parameters(self, recurse=True):
        raise RuntimeError("a module that fails when asked")


class FakeOptimizer:
    def __init__(self, params, state):
        self.param_groups = [{"params": params}]
        self.state = state


def nested(stats):
    """torch.cuda.memory.memory_stats_as_nested_dict's shape of the peaks in `stats`."""
    return {"allocated_bytes": {"all": {"peak": stats["allocated_bytes.all.peak"]}},
            "reserved_bytes": {"all": {"peak": stats["reserved_bytes.all.peak"]}}}


def fake_torch(recorded, snapshot):
    def record(*args, **kwargs):
        recorded.append((args, kwargs))

    memory = types.SimpleNamespace(_record_memory_history=record, _snapshot=lambda: snapshot,
                                   memory_stats_as_nested_dict=lambda d: nested(STATS))
    return types.SimpleNamespace(
        cuda=types.SimpleNamespace(_lazy_call=lambda fn: fn(), memory=memory,
                                   memory_allocated=lambda d: 24 * KiB,
                                   memory_stats=lambda d: STATS),
        _C=types.SimpleNamespace(_cuda_attach_out_of_memory_observer=recorded.append),
        nn=types.SimpleNamespace(Module=FakeModule),
        optim=types.SimpleNamespace(Optimizer=FakeOptimizer),
        compiler=types.SimpleNamespace(is_compiling=lambda: False))


class LayerHooks(unittest.TestCase):
    def layer(self, recorded, marks):
        snapshot = {"segments": END_SEGMENTS, "device_traces": [TRACE]}
        layer = M.Layer(fake_torch(recorded, snapshot), marks.append, 1000)
        layer._wrap_user_history()
        layer._start()
        return layer

    def test_a_step_is_noted_and_the_exit_writes_one_mark_per_device(self):
        recorded, marks = [], []
        layer = self.layer(recorded, marks)
        self.assertTrue(layer.on)
        self.assertEqual(recorded[0][1]["context"], None)  # no stacks: kprof's own history
        self.assertNotIn("clear_history", recorded[0][1])
        self.assertEqual(recorded[1], layer._on_oom)  # the out-of-memory observer
        p, g, st = FakeTensor(P), FakeTensor(G), FakeTensor(S)
        p.grad = g
        keep = FakeModule(p), BrokenModule()  # alive for the walk at exit; one that fails
        layer._after_step(FakeOptimizer([p], {p: {"exp_avg": st}}), (), {})
        self.assertEqual(layer.notes.hook_maps[0], {(0, P): "parameters", (0, G): "gradients",
                                                    (0, S): "optimizer_state"})
        self.assertEqual(layer.notes.steps[0], [24 * KiB])
        layer._at_exit()
        layer._at_exit()  # once
        self.assertEqual(len(marks), 1)
        self.assertTrue(marks[0].startswith(M.MARK_PREFIX))
        payload = json.loads(marks[0][len(M.MARK_PREFIX):])
        self.assertEqual((payload["device"], payload["when"], payload["optimizer_steps"]),
                         (0, "exit", 1))
        self.assertIn("alloc_conf", payload)
        del keep

    def test_the_latest_categorized_step_gives_the_storages_bytes_by_dtype(self):
        layer, f32 = self.layer([], []), "torch.float32"
        w, b = FakeTensor(P, 0, f32, 4 * KiB), FakeTensor(0x2000, 0, "torch.bfloat16", 2 * KiB)
        tied = [FakeTensor(0x9000, 0, f32, 8 * KiB) for _ in "ab"]  # one storage: counted once
        w.grad = FakeTensor(G, 0, f32, 4 * KiB)
        state = {w: {"step": FakeTensor(0xA000, 0, f32, 4),  # AdamW's, capturable: 0-dim on CUDA
                     "exp_avg": FakeTensor(S, 0, f32, 16 * KiB),
                     "exp_avg_sq": FakeTensor(0x8000, 0, f32, 16 * KiB),
                     "x": FakeTensor(0xD000), "y": FakeTensor(0xE000, 0, f32, None)}}  # unread
        layer._after_step(FakeOptimizer([w, b] + tied, state), (), {})
        self.assertEqual(layer.notes.dtypes[0], {
            "parameters": {"float32": 12 * KiB, "bfloat16": 2 * KiB},
            "gradients": {"float32": 4 * KiB}, "optimizer_state": {"float32": 32 * KiB + 4}})
        # A second optimizer alive beside the first (a GAN): both counted, each from its latest.
        first = FakeOptimizer([w], state)
        layer._after_step(first, (), {})
        second = FakeOptimizer([b], {})
        layer._after_step(second, (), {})
        self.assertEqual(layer.notes.dtypes[0], {
            "parameters": {"float32": 4 * KiB, "bfloat16": 2 * KiB},
            "gradients": {"float32": 4 * KiB}, "optimizer_state": {"float32": 32 * KiB + 4}})
        del first  # an optimizer gone: its storages no longer counted at the next step
        gc.collect()
        layer._after_step(second, (), {})
        bf = {"parameters": {"bfloat16": 2 * KiB}, "gradients": {}, "optimizer_state": {}}
        self.assertEqual(layer._summarize("exit")[0]["dtypes"], bf)
        layer.recording = False  # a step while paused names nothing: the last one's kept
        layer._after_step(FakeOptimizer([w], state), (), {})
        self.assertEqual(layer.notes.dtypes, {0: bf})

    def test_a_pytorch_without_clear_history_resumes_without_it(self):
        recorded = []
        torch = fake_torch(recorded, {})

        def record(*args, **kwargs):  # an older signature: no clear_history
            if "clear_history" in kwargs:
                raise TypeError("unexpected keyword argument 'clear_history'")
            recorded.append((args, kwargs))

        torch.cuda.memory._record_memory_history = record
        layer = M.Layer(torch, [].append, 1000)
        layer._wrap_user_history()
        layer._start()
        layer._record(clear=True)
        self.assertTrue(layer.on)
        self.assertEqual(recorded[-1][1]["max_entries"], 1000)
        self.assertNotIn("clear_history", recorded[-1][1])

    def test_the_programs_own_history_wins_and_the_layer_writes_nothing(self):
        recorded, marks = [], []
        layer = self.layer(recorded, marks)
        layer.torch.cuda.memory._record_memory_history(enabled="all", context="all")
        self.assertEqual(recorded[-1][1], {"enabled": "all", "context": "all"})
        self.assertFalse(layer.on)
        layer._after_step(FakeOptimizer([], {}), (), {})
        layer._at_exit()
        self.assertEqual((marks, layer.notes.hook_times), ([], []))
        # Asked before CUDA started: kprof's never turns on.
        later = M.Layer(fake_torch([], {}), marks.append, 1000)
        later._wrap_user_history()
        later.torch.cuda.memory._record_memory_history(enabled="all")
        later._start()
        self.assertFalse(later.on)

    def test_a_backward_pass_is_noted_once(self):
        recorded, marks = [], []
        layer = self.layer(recorded, marks)
        torch = layer.torch
        calls = []
        # Tensor.backward calls torch.autograd.backward, as PyTorch's does.
        torch.autograd = types.SimpleNamespace(backward=lambda *a, **k: calls.append("autograd"))
        torch.Tensor = types.SimpleNamespace(backward=lambda *a, **k: torch.autograd.backward())
        layer._wrap_backward()
        torch.Tensor.backward()
        torch.autograd.backward()
        self.assertEqual(calls, ["autograd", "autograd"])
        self.assertEqual(len(layer.notes.backward_starts), 2)
        torch.compiler.is_compiling = lambda: True  # inside compiled code: nothing noted
        torch.Tensor.backward()
        self.assertEqual(len(layer.notes.backward_starts), 2)

    def test_a_forked_child_writes_nothing(self):
        recorded, marks = [], []
        layer = self.layer(recorded, marks)
        layer.pid = os.getpid() + 1  # as in a child forked after the layer was set up
        layer._at_exit()
        layer._on_oom(0, 1 << 30, 0, 0)
        self.assertEqual(marks, [])

    def test_what_the_hooks_keep_is_bounded(self):
        n = R.Notes()
        for k in range(3 * R.MAX_HOOKS):
            n.note_step(k, {(0, k): "gradients"}, {0: k})
            n.note_backward(k)
        self.assertLessEqual(len(n.hook_times), 2 * R.MAX_HOOKS)
        self.assertEqual(len(n.hook_times), len(n.hook_maps))
        self.assertEqual(n.hook_times[-1], 3 * R.MAX_HOOKS - 1)
        self.assertLessEqual(len(n.steps[0]), 2 * R.MAX_STEPS)
        self.assertEqual(n.steps_total[0], 3 * R.MAX_HOOKS)
        for k in range(3 * R.MAX_BACKWARDS):
            n.note_backward(k)
        self.assertLessEqual(len(n.backward_starts), 2 * R.MAX_BACKWARDS)


MiB = 1024 * KiB


class Expandable(unittest.TestCase):
    """What expandable segments would have reserved, on the requests of a history."""

    def test_a_buffer_that_grows_each_step_reuses_one_growing_segment(self):
        # tests/gpu/scripts/fragment_torch.py's pattern: a 4 MiB weight, then per step a buffer
        # of 100 + 4 * step MiB and a 4 MiB product, both freed. By hand (20 MiB pages): the
        # weight maps 20; step 0 maps 100 more (the 16 free at the end joined); steps 1-3 fit in
        # the 116 free; step 4's product maps 20 (140); step 9's product 20 more: 160 MiB.
        t, trace = 0, [alloc(0x10, 4 * MiB, 0)]
        for step in range(10):
            buf = (100 + 4 * step) * MiB
            trace += [alloc(0x1000, buf, t + 1), alloc(0x2000, 4 * MiB, t + 2)]
            trace += free(0x1000, buf, t + 3) + free(0x2000, 4 * MiB, t + 4)
            t += 10
        self.assertEqual(R.expandable_reserved_peak(trace), 160 * MiB)

    def test_small_blocks_map_two_mib_pages_and_freed_neighbours_join(self):
        trace = [alloc(1, 512, 0), alloc(2, 700 * KiB, 1), alloc(3, 700 * KiB, 2)]
        self.assertEqual(R.expandable_reserved_peak(trace), 2 * MiB)  # 1400.5 KiB in one page
        # Freed, the two 700 KiB blocks join the free rest: a 1 MiB request then fits.
        trace += free(2, 700 * KiB, 3) + free(3, 700 * KiB, 4) + [alloc(4, 1 * MiB, 5)]
        self.assertEqual(R.expandable_reserved_peak(trace), 2 * MiB)
        # Not freed, it needs a second page.
        self.assertEqual(R.expandable_reserved_peak(trace[:3] + [alloc(4, 1 * MiB, 5)]), 4 * MiB)

    def test_each_stream_grows_its_own_segment(self):
        a = dict(alloc(1, 30 * MiB, 0), stream=1)
        b = dict(alloc(2, 30 * MiB, 1), stream=2)
        self.assertEqual(R.expandable_reserved_peak([a, b]), 80 * MiB)

    def test_the_free_block_at_the_end_is_taken_last_and_large_blocks_split_to_512(self):
        # A 20, B 10 (a 10 free at the end), A freed, C 8: PyTorch counts the end's free block
        # as what it could grow to, so C takes A's 20 (12 left), and D 20 maps more: 60 MiB.
        trace = ([alloc(1, 20 * MiB, 0), alloc(2, 10 * MiB, 1)] + free(1, 20 * MiB, 2) +
                 [alloc(3, 8 * MiB, 3), alloc(4, 20 * MiB, 4)])
        self.assertEqual(R.expandable_reserved_peak(trace), 60 * MiB)
        # 19.5 MiB leaves 0.5 MiB split off at the end; 20.5 MiB joins it: 40 MiB, not 60.
        trace = [alloc(1, 39 * MiB // 2, 0), alloc(2, 41 * MiB // 2, 1)]
        self.assertEqual(R.expandable_reserved_peak(trace), 40 * MiB)

    def test_a_block_returns_when_its_free_completed(self):
        # B freed (requested) at 2 but completed at 5, after C asked at 3: C cannot reuse it.
        b_free = free(2, 20 * MiB, 2)
        b_free[1]["time_us"] = 5
        trace = [alloc(1, 20 * MiB, 0), alloc(2, 20 * MiB, 1), b_free[0],
                 alloc(3, 20 * MiB, 3), b_free[1]]
        self.assertEqual(R.expandable_reserved_peak(trace), 60 * MiB)
        # Without completions in the history, a free returns at once.
        self.assertEqual(R.expandable_reserved_peak(trace[:4]), 40 * MiB)

    def test_the_payload_has_it_from_a_complete_first_window_only(self):
        p = R.summarize_device(0, TRACE, END_SEGMENTS, notes(), {}, STATS, 1000, now_us=100)
        self.assertEqual(p["expandable_max_reserved"], 2 * MiB)
        later = R.summarize_device(0, TRACE, END_SEGMENTS, notes(), {}, STATS, 1000,
                                   now_us=100, t_start=1)
        self.assertNotIn("expandable_max_reserved", later)
        wrapped = R.summarize_device(0, TRACE, END_SEGMENTS, notes(), {}, STATS, len(TRACE),
                                     now_us=100)
        self.assertNotIn("expandable_max_reserved", wrapped)  # the ring wrapped: not complete
        # Kept by the merge while no later window reserved more.
        kept = R.merge_windows(p, dict(later, replayed_max_reserved=SEG), 2, 0)
        self.assertEqual(kept["expandable_max_reserved"], 2 * MiB)
        gone = R.merge_windows(p, dict(later, replayed_max_reserved=2 * SEG), 2, 0)
        self.assertNotIn("expandable_max_reserved", gone)


class Allocator:
    """A caching allocator's history as PyTorch keeps it for the layer: on or off (off empties
    it), entries appended while on, PyTorch's peaks set by the test."""

    def __init__(self):
        self.on, self.trace, self.calls = False, [], []
        self.stats = dict(STATS)
        self.segments = END_SEGMENTS

    def record(self, *args, **kwargs):
        self.calls.append(kwargs)
        self.on = kwargs.get("enabled") is not None
        if not self.on or kwargs.get("clear_history"):
            self.trace = []

    def add(self, *entries):
        if self.on:
            self.trace.extend(entries)

    def torch(self):
        t = fake_torch([], None)
        t.cuda.memory = types.SimpleNamespace(
            _record_memory_history=self.record,
            _snapshot=lambda: {"segments": self.segments,
                               "device_traces": [list(self.trace)]},
            memory_stats_as_nested_dict=lambda d: nested(self.stats))
        t.cuda.memory_stats = lambda d: dict(self.stats)
        return t


class Windows(unittest.TestCase):
    """The history pauses once PyTorch's peaks held for STEADY_STEPS optimizer steps, resumes
    when one rises, and the exit's payload is every window's."""

    def setUp(self):
        self.a = Allocator()
        self.marks = []
        self.layer = M.Layer(self.a.torch(), self.marks.append, 1000)
        self.layer._wrap_user_history()
        self.layer._start()
        self.p = FakeTensor(P)
        self.opt = FakeOptimizer([self.p], {})

    def step(self, n=1):
        for _ in range(n):
            self.layer._after_step(self.opt, (), {})

    def test_a_steady_loop_pauses_the_history_and_a_new_peak_resumes_it(self):
        a, layer = self.a, self.layer
        self.assertNotIn("skip_actions", a.calls[0])  # completions kept: the replay reads them
        a.add(*TRACE)
        self.step()  # the first step sets the peaks; STEADY_STEPS more unchanged pause it
        self.step(M.STEADY_STEPS - 1)
        self.assertTrue(layer.recording)
        self.step()
        self.assertFalse(layer.recording)
        self.assertEqual(a.calls[-1], {"enabled": None})
        self.assertEqual((len(layer.stash), layer.windows), (1, 1))
        walked = len(layer.notes.hook_times)
        self.step(5)  # paused: no walk, the steps still counted
        self.assertEqual(len(layer.notes.hook_times), walked)
        self.assertEqual(layer.unrecorded_steps, 5)
        self.assertEqual(layer.notes.optimizer_steps, M.STEADY_STEPS + 6)
        # A rise within RESUME_RISE stays paused; beyond it resumes, with an empty history.
        a.stats["allocated_bytes.all.peak"] = 24 * KiB + 100
        self.step()
        self.assertFalse(layer.recording)
        a.stats["allocated_bytes.all.peak"] = 36 * KiB
        self.step()
        self.assertTrue(layer.recording)
        self.assertTrue(a.calls[-1]["clear_history"])
        self.assertEqual(layer.windows, 2)
        # The second window: a 16 KiB temporary beside P and S (live from before it) makes the
        # run's allocated peak, 36 KiB.
        a.add(alloc(0x20000, 16 * KiB, 1000), *free(0x20000, 16 * KiB, 1001))
        layer._at_exit()
        self.assertEqual(len(self.marks), 1)
        pay = json.loads(self.marks[0][len(M.MARK_PREFIX):])
        self.assertEqual((pay["windows"], pay["unrecorded_steps"]), (2, 7))
        self.assertEqual(pay["entries"], len(TRACE) + 3)
        self.assertEqual(pay["replayed_max_allocated"], 36 * KiB)
        self.assertTrue(pay["complete"])  # the first window from the start; both peaks seen
        self.assertEqual(moment(pay, "allocated_peak")["t_us"], 1000)
        peak = moment(pay, "allocated_peak")
        self.assertEqual(peak["allocated"], 36 * KiB)
        # P and S made before the window, categorized by the first step after it began: a
        # step walked after the resume (none here) or what the end found.
        self.assertEqual(sum(peak["categories"].values()), 36 * KiB)
        self.assertEqual(moment(pay, "window_allocated_peak")["t_us"], 45)  # the first's
        self.assertEqual(moment(pay, "reserved_peak")["t_us"], 5)  # the first window's
        self.assertNotIn("pause", [m["kind"] for m in pay["moments"]])
        self.assertEqual(pay["segments"], [[0x1000, SEG]])  # made in the first, live at the end
        # No step in the second window: the blocks live at the first one's last step.
        self.assertEqual(pay["step_end"]["blocks"], [[45, 16 * KiB, "other"],
                                                     [10, 4 * KiB, "parameters"]])

    def test_an_exit_while_paused_writes_the_recorded_windows_and_the_state_at_exit(self):
        a, layer = self.a, self.layer
        a.add(*TRACE)
        self.step(M.STEADY_STEPS + 1)
        self.assertFalse(layer.recording)
        a.trace = [alloc(0x30000, 4 * KiB, 500)]  # a PyTorch that kept entries: ignored
        layer._at_exit()
        pay = json.loads(self.marks[0][len(M.MARK_PREFIX):])
        self.assertEqual((pay["windows"], pay["entries"]), (1, len(TRACE)))
        self.assertEqual(moment(pay, "allocated_peak")["t_us"], 45)
        end = moment(pay, "exit")
        self.assertEqual((end["allocated"], end["reserved"]), (20 * KiB, SEG))
        self.assertTrue(pay["complete"])

    def test_a_peak_not_recorded_leaves_the_payload_incomplete(self):
        a, layer = self.a, self.layer
        a.add(*TRACE)
        self.step(M.STEADY_STEPS + 1)
        a.stats["reserved_bytes.all.peak"] = SEG + 100  # a rise below RESUME_RISE
        layer._at_exit()
        pay = json.loads(self.marks[0][len(M.MARK_PREFIX):])
        self.assertFalse(pay["complete"])
        self.assertEqual(pay["replayed_max_allocated"], 24 * KiB)
        # An allocated peak 0.5% above the replayed one: the rounding of blocks, complete.
        self.marks.clear()
        layer.done = False
        a.stats["reserved_bytes.all.peak"] = SEG
        a.stats["allocated_bytes.all.peak"] = 24 * KiB * 1005 // 1000
        layer._at_exit()
        self.assertTrue(json.loads(self.marks[0][len(M.MARK_PREFIX):])["complete"])

    def test_an_optimizer_without_gpu_tensors_never_pauses(self):
        self.opt = FakeOptimizer([], {})
        self.step(M.STEADY_STEPS + 3)
        self.assertTrue(self.layer.recording)


if __name__ == "__main__":
    LAYER = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join("build", "python")
    sys.path.insert(0, LAYER)
    import kprof_memory as M  # noqa: E402
    import kprof_memory_replay as R  # noqa: E402

    unittest.main()
