#!/usr/bin/env python3
"""What the allocations without an owner are (docs/memory.md "Who made it"): reads a run's SQLite
export (`kprof export RUN --sqlite FILE`) and, per process, lists the device allocations whose
correlation id no recorded API call carries, grouped by size, with the API calls recorded around
each (any thread, within WINDOW_US) and any recorded call that mapped its address.

    python3 scripts/probes/memory_unowned.py FILE.sqlite [WINDOW_US]
"""
import collections
import sqlite3
import sys


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    db = sqlite3.connect(sys.argv[1])
    window = int(sys.argv[2]) * 1000 if len(sys.argv) > 2 else 200_000
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    calls = collections.defaultdict(list)
    by_corr = {}
    for start, end, tid, corr, name_id in db.execute(
            "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
        pid = tid >> 24 if tid else 0
        calls[pid].append((start, end, tid, corr, names.get(name_id, "?")))
        by_corr[(pid, corr)] = names.get(name_id, "?")
    for v in calls.values():
        v.sort()
    rows = db.execute("SELECT start, globalPid, deviceId, address, bytes, memKind, correlationId "
                      "FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 0 "
                      "ORDER BY start").fetchall()
    groups = collections.defaultdict(list)
    for start, gpid, dev, addr, size, kind, corr in rows:
        pid = gpid >> 24 if gpid else 0
        if (pid, corr) in by_corr:
            continue
        groups[(pid, dev, size, kind)].append((start, addr, corr))
    print(f"{len(rows)} allocations; without a recorded call:")
    for (pid, dev, size, kind), allocs in sorted(groups.items(), key=lambda g: -g[0][2] * len(g[1])):
        print(f"pid {pid} device {dev}: {len(allocs)} x {size} bytes (memKind {kind}), "
              f"{len(allocs) * size / 2**20:.1f} MiB; correlation ids "
              f"{sorted({c for _, _, c in allocs})[:8]}")
        for start, addr, corr in allocs[:3]:
            near = [c for c in calls.get(pid, []) if abs(c[0] - start) <= window]
            print(f"  at {start} address {addr:#x} correlation {corr}: {len(near)} calls within "
                  f"{window // 1000} us")
            for c in near[:12]:
                print(f"    {c[4]} tid {c[2] & 0xFFFFFF} correlation {c[3]} "
                      f"at {(c[0] - start) / 1000:+.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
