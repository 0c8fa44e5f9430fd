#!/usr/bin/env python3
"""Checks PyTorch's memory categories on recorded runs (issue 37's acceptance, docs/memory.md):
for each run directory, from `kprof report --format json`:
  - per process and device the PyTorch layer wrote at exit: PyTorch's own max_memory_allocated
    and max_memory_reserved, the replayed history's peaks, and the categories at the allocated
    peak (their sum against max_memory_allocated);
  - at each driver-level peak: the share of its bytes with an owner (PyTorch's allocator split
    by category, the other libraries as themselves; "not matched" and "(library not recorded)"
    are no owner).
Prints one line per finding and exits 1 when a ratio falls outside 1% (or owners below 99%).

    python3 scripts/memory_check.py KPROF RUN_DIR...
"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    kprof, dirs = sys.argv[1], sys.argv[2:]
    bad = 0
    for d in dirs:
        out = subprocess.run([kprof, "report", "--by", "memory", "--format", "json", d],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{d}: kprof report failed ({out.returncode}): {out.stderr.strip()}")
            bad += 1
            continue
        mem = json.loads(out.stdout).get("memory", {})
        torch = [t for t in mem.get("pytorch", []) if t["when"] == "exit"]
        if not torch:
            print(f"{d}: no PyTorch memory findings")
            bad += 1
        for t in torch:
            peak = next((m for m in t["moments"] if "allocated_peak" in m["kind"].split(",")),
                        None)
            cats = sum(peak["categories"].values()) if peak else 0
            ra = t["replayed_max_allocated"] / max(1, t["max_allocated"])
            rr = t["replayed_max_reserved"] / max(1, t["max_reserved"])
            rc = cats / max(1, t["max_allocated"])
            ok = all(abs(x - 1) <= 0.01 for x in (ra, rr, rc))
            bad += 0 if ok else 1
            detail = ", ".join(f"{k} {v / 2**20:.1f} MiB"
                               for k, v in (peak["categories"] if peak else {}).items() if v)
            print(f"{d}: pid {t['pid']} GPU {t['device']}: max_allocated "
                  f"{t['max_allocated'] / 2**20:.1f} MiB (replayed {ra:.4f}, categories {rc:.4f}), "
                  f"max_reserved {t['max_reserved'] / 2**20:.1f} MiB (replayed {rr:.4f}), "
                  f"complete {t['complete']}; at the allocated peak: {detail} "
                  f"[{'ok' if ok else 'OUTSIDE 1%'}]")
        for s in mem.get("peaks", []):
            owners = s.get("by_owner")
            if owners is None:
                continue
            # An owner is a named library or one of PyTorch's categories: "not matched" and
            # "(library not recorded)" (CUPTI named no library) are not.
            owned = sum(o["live_bytes"] for o in owners
                        if "not matched" not in o["owner"] and "not recorded" not in o["owner"])
            share = owned / max(1, s["live_bytes"])
            bad += 0 if share >= 0.99 else 1
            top = ", ".join(f"{o['owner']} {o['live_bytes'] / 2**20:.1f} MiB" for o in owners[:6])
            print(f"{d}: driver-level peak {s['live_bytes'] / 2**20:.1f} MiB on GPU "
                  f"{s.get('device', '?')}, pid {s['pid']}: {share:.2%} owned "
                  f"(moment {s.get('pytorch_moment')}, matched {s.get('pytorch_matched')}): "
                  f"{top} [{'ok' if share >= 0.99 else 'BELOW 99%'}]")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
