# The replay of kprof's PyTorch memory layer (kprof_memory.py, docs/memory.md "PyTorch's
# categories"): pure functions of what the layer noted and the caching allocator's history read
# back. summarize_device() replays one window of one device into the payload the report reads;
# merge_windows() makes one payload of several windows. tests/pytorch/test_memory.py checks them.
import heapq
import os
import time
from bisect import bisect_left, bisect_right, insort

MARK_PREFIX = "kprof.pytorch.memory:"
VERSION = 1
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "other")
NEAR_PEAK = 0.9  # segment moments kept: reserved at least this share of its highest
MAX_MOMENTS = 16
MAX_STEPS = 1024
LARGEST = 5
MAX_SEGMENTS = 8192  # the allocator's segments listed (the latest): the report's owner of each
STEP_END_BLOCKS = 256  # blocks listed live after the last optimizer step; the rest summed
# The history's entries that change the reserved bytes (segment_map/unmap: expandable segments).
SEGMENT_GROWS = ("segment_alloc", "segment_map")
SEGMENT_SHRINKS = ("segment_free", "segment_unmap")


def _now_us():
    return time.time_ns() // 1000


MAX_HOOKS = 512  # optimizer steps whose owners are kept (the latest)
MAX_BACKWARDS = 4096  # backward starts kept (the latest)


def _trim(lst, cap):
    """Keeps the last `cap` entries of `lst` (in place, amortised: once it doubles)."""
    if len(lst) > 2 * cap:
        del lst[:len(lst) - cap]


class Notes:
    """What the hooks noted while the program ran (per process), bounded: a run of a million
    steps keeps the owners of its last MAX_HOOKS steps and its last MAX_BACKWARDS backward
    starts (a block is categorized by the first step hook after it was made: for a block of
    the run's start still live, one of the latest does)."""

    def __init__(self):
        self.hook_times = []  # optimizer post-hook times (µs), ascending
        self.hook_maps = []  # per hook time: its {(device, addr): category} (shared when equal)
        self.backward_starts = []  # µs, ascending
        self.steps = {}  # device -> [bytes allocated after each optimizer step]
        self.steps_total = {}
        self.optimizer_steps = 0
        # The latest categorized step's storages: {device: {category: {dtype: bytes}}}.
        self.dtypes = {}

    def note_backward(self, t_us):
        self.backward_starts.append(t_us)
        _trim(self.backward_starts, MAX_BACKWARDS)

    def note_step(self, t_us, owners, allocated, dtypes=None):
        """owners: None when the history is paused (nothing to categorize then). dtypes: the
        bytes of the owners' storages by device, category and dtype (replaces the last)."""
        self.optimizer_steps += 1
        if owners is not None:
            if dtypes is not None:
                self.dtypes = dtypes
            if self.hook_maps and self.hook_maps[-1] == owners:
                owners = self.hook_maps[-1]  # one dict for a run of equal steps
            self.hook_times.append(t_us)
            self.hook_maps.append(owners)
            if len(self.hook_times) > 2 * MAX_HOOKS:
                del self.hook_times[:MAX_HOOKS]
                del self.hook_maps[:MAX_HOOKS]
        for dev, b in allocated.items():
            s = self.steps.setdefault(dev, [])
            s.append(b)
            if len(s) > 2 * MAX_STEPS:
                del s[:MAX_STEPS]
            self.steps_total[dev] = self.steps_total.get(dev, 0) + 1


class _Instance:
    __slots__ = ("addr", "size", "t0", "t1")

    def __init__(self, addr, size, t0, t1):
        self.addr, self.size, self.t0, self.t1 = addr, size, t0, t1


_INF = float("inf")


def _block_size(requested):
    """The caching allocator's block for a request: at least 512 bytes, in 512-byte steps (the
    history gives the size asked for; PyTorch's allocated bytes count blocks)."""
    return max(512, (requested + 511) // 512 * 512)


def _end_blocks(segments_end):
    """The blocks live at the end, {address: size}, and the reserved bytes: a segment's blocks
    follow each other from its address."""
    live, reserved = {}, 0
    for seg in segments_end:
        reserved += seg.get("total_size", 0)
        addr = seg.get("address", 0)
        for b in seg.get("blocks", ()):
            if b.get("state") == "active_allocated":
                live[addr] = b.get("size", 0)
            addr += b.get("size", 0)
    return live, reserved


def _replay(trace, segments_end):
    """Walks one device's trace: the block instances (address, size, from, to), the instance
    each alloc and free entry concerns, and the allocated and reserved bytes before the first
    entry. Entries lost to the ring buffer's wrap are accounted from the state at the end (the
    snapshot's segments): a block freed in the trace but never allocated in it, or live at the
    end and untouched by it, was made before the history began. A block live at the end takes
    its size from there."""
    live = {}
    instances = []
    of_entry = [None] * len(trace)
    reserved_net = 0
    for i, e in enumerate(trace):
        a, addr, t = e.get("action"), e.get("addr", 0), e.get("time_us", 0)
        if a == "alloc":
            inst = _Instance(addr, _block_size(e.get("size", 0)), t, _INF)
            live[addr] = inst
            instances.append(inst)
            of_entry[i] = inst
        elif a == "free_requested":
            inst = live.pop(addr, None)
            if inst is None:
                inst = _Instance(addr, _block_size(e.get("size", 0)), -_INF, t)
                instances.append(inst)
            else:
                inst.t1 = t
            of_entry[i] = inst
        elif a in SEGMENT_GROWS:
            reserved_net += e.get("size", 0)
        elif a in SEGMENT_SHRINKS:
            reserved_net -= e.get("size", 0)
    end_live, end_reserved = _end_blocks(segments_end)
    for addr, size in end_live.items():
        inst = live.get(addr)
        if inst is None:
            instances.append(_Instance(addr, size, -_INF, _INF))
        else:
            inst.size = size
    alloc_net = sum(x.size for x in instances if x.t0 != -_INF and x.t1 == _INF) - sum(
        x.size for x in instances if x.t0 == -_INF and x.t1 != _INF)
    return instances, of_entry, sum(end_live.values()) - alloc_net, end_reserved - reserved_net


class _Categorizer:
    """A block's category. Live across an optimizer step (its post hook): what the step found in
    it (parameters, gradients, optimizer state), else what the end found in it, else "other"
    (kept from one step to the next: inputs, caches, a leak). Else what the end found in it when
    it lived to the end; else an activation when a backward pass started while it was live
    (made in the forward pass, kept for the backward); else other."""

    def __init__(self, notes, device, end_owners, t_start=-_INF):
        self.notes, self.device, self.end = notes, device, end_owners
        self.t_start = t_start  # a block made before the window began: made then, for this

    def category(self, inst):
        n = self.notes
        key = (self.device, inst.addr)
        end = self.end.get(key) if inst.t1 == _INF else None
        t0 = max(inst.t0, self.t_start)
        i = bisect_left(n.hook_times, t0)
        if i < len(n.hook_times) and n.hook_times[i] < inst.t1:
            # Kept across a step: what the step named it, else what the end named it (frozen
            # parameters, buffers, a second optimizer's state), else other.
            return n.hook_maps[i].get(key) or end or "other"
        if end:
            return end
        j = bisect_left(n.backward_starts, t0)
        if j < len(n.backward_starts) and n.backward_starts[j] < inst.t1:
            return "activations"
        return "other"

    def kept(self, inst, t):
        """Whether the block, live at `t`, was made in the step before: it outlived one optimizer
        step (before `t`) and was freed before the next (a step's outputs or loss referenced
        until the next step replaces them). A block that outlives two steps (a batch made once
        and read each step, a cache) or lives past the history is not counted, nor one made
        before the window (how many steps it outlived is not known)."""
        if inst.t0 == -_INF or inst.t0 < self.t_start:
            return False
        h = self.notes.hook_times
        i = bisect_left(h, inst.t0)
        return i + 1 < len(h) and h[i] < t and inst.t1 <= h[i + 1]


def _moment(kind, t, allocated, reserved, live, cat):
    by = dict.fromkeys(CATEGORIES, 0)
    largest = []
    kept = []  # other tensors made in the step before (held-across-steps prices these)
    for inst in live:
        c = cat.category(inst)
        by[c] += inst.size
        largest.append((inst.size, c))
        if c == "other" and cat.kept(inst, t):
            kept.append(inst)
    largest.sort(key=lambda x: -x[0])
    out = {"kind": kind, "t_us": t, "allocated": allocated, "reserved": reserved,
           "categories": by, "kept": sum(x.size for x in kept),
           "largest": [list(x) for x in largest[:LARGEST]]}
    if kept:  # the largest, with when each was made (the report names the op)
        top = heapq.nsmallest(LARGEST, kept, key=lambda x: (-x.size, x.t0))
        out["kept_blocks"] = [[None if x.t0 == -_INF else int(x.t0), x.size] for x in top]
    return out


def _sums(trace, of_entry, alloc0, reserved0):
    """The entries at which the allocated and the reserved bytes were highest (-1: before the
    first), and every segment entry with the reserved bytes after it."""
    allocated, reserved = alloc0, reserved0
    peak_a, peak_a_i, peak_r, peak_r_i = allocated, -1, reserved, -1
    seg_points = []
    for i, e in enumerate(trace):
        a, size = e.get("action"), e.get("size", 0)
        if a == "alloc":
            allocated += of_entry[i].size
            if allocated > peak_a:
                peak_a, peak_a_i = allocated, i
        elif a == "free_requested":
            allocated -= of_entry[i].size
        elif a in SEGMENT_GROWS:
            reserved += size
            seg_points.append((i, reserved))
            if reserved > peak_r:
                peak_r, peak_r_i = reserved, i
        elif a in SEGMENT_SHRINKS:
            reserved -= size
            seg_points.append((i, reserved))
    return peak_a, peak_a_i, peak_r, peak_r_i, seg_points


def _step_end(instances, cat, hook_times, t_start, t_end):
    """The blocks live just after the window's last categorized optimizer step (its hook at T,
    t_start <= T <= t_end; None without one): the largest STEP_END_BLOCKS as [t0_us, size,
    category] (t0_us None: made before the window), by size descending then made first, and
    the others summed."""
    i = bisect_right(hook_times, t_end) - 1
    if i < 0 or hook_times[i] < t_start:
        return None
    t = hook_times[i]
    live = [x for x in instances if x.t0 <= t < x.t1]
    top = heapq.nsmallest(STEP_END_BLOCKS, live, key=lambda x: (-x.size, x.t0, x.addr))
    return {"t_us": t,
            "blocks": [[None if x.t0 == -_INF else int(x.t0), x.size, cat.category(x)]
                       for x in top],
            "rest_bytes": sum(x.size for x in live) - sum(x.size for x in top),
            "rest_blocks": len(live) - len(top)}


def _segment_list(segs):
    """The payload's segments: (address, size) keys of `segs` in their order, the latest
    MAX_SEGMENTS."""
    return [list(x) for x in list(segs)[-MAX_SEGMENTS:]]


def summarize_device(device, trace, segments_end, notes, end_owners, stats, max_entries,
                     when="exit", requested=0, now_us=None, t_start=-_INF):
    """One device's payload: the peaks PyTorch counted, the replayed history's moments (the
    allocated peak, the reserved peak, the segment changes near it, the end or the failure),
    each with the live blocks by category, and the bytes allocated after each optimizer step;
    the blocks live at the window's last optimizer step (step_end) and the dtypes of the
    storages the latest step named. t_start: when the window of `trace` began (-inf: at CUDA's
    start); a later window with no entries has only its end moment. now_us: its end."""
    instances, of_entry, alloc0, reserved0 = _replay(trace, segments_end)
    cat = _Categorizer(notes, device, end_owners, t_start)
    peak_a, peak_a_i, peak_r, peak_r_i, seg_points = _sums(trace, of_entry, alloc0, reserved0)
    keep = {}
    if not trace and t_start != -_INF:
        peak_a_i = peak_r_i = None
    near = [p for p in seg_points if p[1] >= NEAR_PEAK * peak_r]
    for i, _r in sorted(near, key=lambda p: (-p[1], -p[0]))[:MAX_MOMENTS]:
        keep[i] = "segment"
    if peak_a_i is not None:
        keep[peak_r_i] = "reserved_peak"
        keep[peak_a_i] = ("allocated_peak,reserved_peak" if peak_a_i == peak_r_i else
                          "allocated_peak")
    moments = []
    live = {id(x): x for x in instances if x.t0 == -_INF}
    if -1 in keep:
        moments.append(_moment(keep[-1], trace[0].get("time_us", 0) if trace else 0, alloc0,
                               reserved0, live.values(), cat))
    allocated, reserved = alloc0, reserved0
    for i, e in enumerate(trace):
        a, size, inst = e.get("action"), e.get("size", 0), of_entry[i]
        if a == "alloc":
            live[id(inst)] = inst
            allocated += inst.size
        elif a == "free_requested":
            live.pop(id(inst), None)
            allocated -= inst.size
        elif a in SEGMENT_GROWS:
            reserved += size
        elif a in SEGMENT_SHRINKS:
            reserved -= size
        if i in keep:
            moments.append(_moment(keep[i], e.get("time_us", 0), allocated, reserved,
                                   live.values(), cat))
    now = _now_us() if now_us is None else now_us
    moments.append(_moment(when, now, allocated, reserved, live.values(), cat))
    out = {
        "v": VERSION, "device": device, "when": when, "now_us": now,
        "alloc_conf": (os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or
                       os.environ.get("PYTORCH_ALLOC_CONF") or "")[:256],
        "max_allocated": stats.get("allocated_bytes.all.peak", 0),
        "max_reserved": stats.get("reserved_bytes.all.peak", 0),
        "allocated": stats.get("allocated_bytes.all.current", 0),
        "reserved": stats.get("reserved_bytes.all.current", 0),
        "inactive_split": stats.get("inactive_split_bytes.all.current", 0),
        "entries": len(trace), "max_entries": max_entries,
        "complete": len(trace) < max_entries and alloc0 == 0 and reserved0 == 0,
        "replayed_max_allocated": peak_a, "replayed_max_reserved": peak_r,
        "moments": moments,
        "steps": notes.steps.get(device, [])[-MAX_STEPS:],
        "steps_total": notes.steps_total.get(device, 0),
        "optimizer_steps": notes.optimizer_steps,
        "backward_passes": len(notes.backward_starts),
    }
    # The segments the allocator took from the driver (cudaMalloc): made in the window, and live
    # at its end. The report names CUPTI's allocations at them the allocator's.
    segs = {(e.get("addr", 0), e.get("size", 0)): None
            for e in trace if e.get("action") == "segment_alloc"}
    for seg in segments_end:
        if not seg.get("is_expandable"):  # mapped (cuMemMap): no cudaMalloc for CUPTI to see
            segs[(seg.get("address", 0), seg.get("total_size", 0))] = None
    out["segments"] = _segment_list(segs)
    # What expandable segments would have reserved: replayed on a history from CUDA's start.
    conf = out["alloc_conf"].lower().replace(" ", "")
    if (t_start == -_INF and out["complete"] and "expandable_segments:true" not in conf and
            "roundup_power2_divisions" not in conf):  # sizes rounded otherwise: not replayed
        try:
            out["expandable_max_reserved"] = expandable_reserved_peak(trace)
        except Exception:  # a history of another shape: the estimate falls back
            pass
    # The step hook pauses the history: the window's last entry usually comes before it.
    end = _step_end(instances, cat, notes.hook_times, t_start,
                    max(now, trace[-1].get("time_us", 0)) if trace else now)
    if end is not None:
        out["step_end"] = end
    if notes.dtypes.get(device):
        out["dtypes"] = notes.dtypes[device]
    if requested:
        out["requested"] = requested
    return out


# ----- what expandable segments would have reserved ------------------------------------------
# PyTorch's caching allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, replayed on
# the same requests (docs/memory.md "Expandable segments, replayed"): one segment per stream and
# pool that grows in pages (2 MiB for blocks of 1 MiB or less, 20 MiB above); a request takes the
# smallest free block that fits, the free block at the segment's end only when no other fits
# (PyTorch counts it as what it could grow to), split when 512 bytes or more remain, else the
# segment maps pages at its end, joining a free block there; a freed block returns when its free
# completed and joins its free neighbours. Nothing is unmapped (empty_cache is not replayed).
SMALL_SIZE = 1 << 20
PAGES = {True: 2 << 20, False: 20 << 20}  # by pool: small, large


class _Grown:
    __slots__ = ("page", "mapped", "free", "size", "free_end")

    def __init__(self, small):
        self.page, self.mapped = PAGES[small], 0
        self.free = []  # sorted (size, address) of the free blocks
        self.size = {}  # address -> size of every block; free ones are in free_end too
        self.free_end = {}  # end address -> address of each free block

    def _take(self, size, addr):
        del self.free[bisect_left(self.free, (size, addr))]
        del self.free_end[addr + size]

    def _put(self, size, addr):
        insort(self.free, (size, addr))
        self.free_end[addr + size] = addr
        self.size[addr] = size

    def alloc(self, size):
        """The address of a block of `size` (rounded); the bytes mapped grow when none fits. The
        free block at the end counts as what it could grow to: taken only when no other fits."""
        i = bisect_left(self.free, (size, -1))
        if i < len(self.free) and sum(self.free[i]) == self.mapped and i + 1 < len(self.free):
            i += 1  # the smallest that fits is the end's: the next larger one is taken
        if i < len(self.free):
            have, addr = self.free[i]
            self._take(have, addr)
        else:
            addr = self.free_end.get(self.mapped, self.mapped)  # a free block at the end
            have = self.mapped - addr
            if have:
                self._take(have, addr)
            grow = -(-(size - have) // self.page) * self.page
            self.mapped += grow
            have += grow
        rest = have - size
        if rest >= 512:  # with expandable segments both pools split down to 512 bytes
            self._put(rest, addr + size)
            have = size
        self.size[addr] = have
        return addr

    def release(self, addr):
        size = self.size.pop(addr)
        nxt = addr + size
        if nxt in self.size and self.free_end.get(nxt + self.size[nxt]) == nxt:
            n = self.size.pop(nxt)
            self._take(n, nxt)
            size += n
        prev = self.free_end.get(addr)
        if prev is not None:
            p = self.size[prev]
            self._take(p, prev)
            addr, size = prev, p + size
        self._put(size, addr)


def expandable_reserved_peak(trace):
    """The highest bytes expandable segments would have mapped for the requests of `trace` (a
    history from CUDA's start). A block returns to its pool when its free completed (a block
    used on other streams waits for them), else, for a history without completions, when it
    was freed."""
    grown, where = {}, {}
    reserved = peak = 0
    release = "free_completed" if any(
        e.get("action") == "free_completed" for e in trace) else "free_requested"
    for e in trace:
        a = e.get("action")
        if a == "alloc":
            size = _block_size(e.get("size", 0))
            small = size <= SMALL_SIZE
            g = grown.get((e.get("stream", 0), small))
            if g is None:
                g = grown[(e.get("stream", 0), small)] = _Grown(small)
            before = g.mapped
            where[e.get("addr", 0)] = (g, g.alloc(size))
            reserved += g.mapped - before
            peak = max(peak, reserved)
        elif a == release:
            w = where.pop(e.get("addr", 0), None)
            if w is not None:
                w[0].release(w[1])
    return peak


PEAK_KINDS = ("allocated_peak", "reserved_peak")
PEAK_SLACK = 0.01  # the share of PyTorch's allocated peak a complete replay may fall short by


def _demote(moment, kind):
    """`moment` with its `kind` renamed "window_" + kind: a window's peak that was not the
    run's (kept: the report joins CUPTI's allocations with any moment)."""
    parts = moment["kind"].split(",")
    if kind not in parts:
        return moment
    return dict(moment, kind=",".join("window_" + k if k == kind else k for k in parts))


def merge_windows(past, cur, windows, unrecorded_steps):
    """One payload from the earlier windows' (`past`, already merged; None: there were none)
    and the last one's (`cur`: PyTorch's counts, the steps and the end or failure moment are
    its). The run's peaks are the highest of any window's, the other windows' peaks become
    window_allocated_peak / window_reserved_peak, and the moments that closed a paused window
    are dropped; step_end and dtypes are the last window's, else the latest earlier one's.
    complete: the first window held every entry since CUDA started and the windows saw both of
    PyTorch's peaks."""
    if past is None:
        return dict(cur, windows=windows, unrecorded_steps=unrecorded_steps,
                    from_start=bool(cur["complete"]))
    pm = [m for m in past["moments"] if m["kind"] != "pause"]
    cm = list(cur["moments"])
    for key, kind in (("replayed_max_allocated", "allocated_peak"),
                      ("replayed_max_reserved", "reserved_peak")):
        if cur[key] > past[key]:
            pm = [_demote(m, kind) for m in pm]
        else:
            cm = [_demote(m, kind) for m in cm]
    keep = pm + cm
    if len(keep) > 4 * MAX_MOMENTS:  # the run's peaks, the end, and the latest of the rest
        def main(m):
            return any(k in PEAK_KINDS or k in ("exit", "oom") for k in m["kind"].split(","))

        rest = [m for m in keep if not main(m)]
        keep = sorted([m for m in keep if main(m)] + rest[-(4 * MAX_MOMENTS - len(keep) +
                                                            len(rest)):],
                      key=lambda m: m["t_us"])
    out = dict(cur, moments=keep, windows=windows, unrecorded_steps=unrecorded_steps)
    for key in ("step_end", "dtypes"):  # the last window's, else the last an earlier one had
        if key not in cur and key in past:
            out[key] = past[key]
    segs = dict.fromkeys(map(tuple, past.get("segments", [])))
    segs.update(dict.fromkeys(map(tuple, cur.get("segments", []))))
    out["segments"] = _segment_list(segs)
    out["entries"] = past["entries"] + cur["entries"]
    out["replayed_max_allocated"] = max(past["replayed_max_allocated"],
                                        cur["replayed_max_allocated"])
    out["replayed_max_reserved"] = max(past["replayed_max_reserved"],
                                       cur["replayed_max_reserved"])
    # The replay of expandable segments covers the first window: kept while no later window
    # reserved more.
    out.pop("expandable_max_reserved", None)
    if ("expandable_max_reserved" in past and
            cur["replayed_max_reserved"] <= past["replayed_max_reserved"] and
            cur["replayed_max_allocated"] <= past["replayed_max_allocated"]):
        out["expandable_max_reserved"] = past["expandable_max_reserved"]
    out["from_start"] = bool(past.get("from_start", past["complete"]))
    # The replayed allocated peak falls short of PyTorch's by the rounding of large blocks (a
    # block can be up to 1 MiB longer than its request): within 1%, the resume threshold.
    out["complete"] = out["from_start"] and (
        out["replayed_max_allocated"] >= (1 - PEAK_SLACK) * out["max_allocated"] and
        out["replayed_max_reserved"] >= out["max_reserved"])
    return out
