#!/usr/bin/env python3
"""The summary of scripts/zoo_cost.sh's runs (runs.tsv: config, round, rc, wall_s, loop_s): per
configuration the medians of the whole command's wall time and of the measured loop, and their
ratios to plain and to default; with torch.profiler among the configurations, what each adds
over plain as a share of what torch.profiler adds, of the medians and paired within each round
(the machine's speed moves between rounds; issue 34's measure).

    scripts/zoo_cost_summary.py RUNS.TSV NAME
"""
import statistics
import sys


def main(path, name):
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    by, rounds = {}, {}
    for c, r, rc, wall, loop in rows:
        if rc != "0":
            by.setdefault(c, {}).setdefault("failed", []).append(r)
            continue
        d = by.setdefault(c, {})
        d.setdefault("wall", []).append(float(wall))
        if loop:
            d.setdefault("loop", []).append(float(loop))
            rounds.setdefault(r, {})[c] = float(loop)
    med = {c: {k: statistics.median(v) for k, v in d.items() if k != "failed" and v}
           for c, d in by.items()}
    print(f"{name}: medians of {max(len(d.get('wall', [])) for d in by.values())} rounds")
    print(f"{'config':10} {'wall_s':>8} {'loop_s':>8} {'wall/plain':>10} {'loop/plain':>10} "
          f"{'wall/default':>12} {'loop/default':>12}  failed")
    for c, m in med.items():
        def ratio(k, base):
            b = med.get(base, {}).get(k)
            return f"{m[k] / b:.2f}x" if k in m and b else "-"
        print(f"{c:10} {m.get('wall', float('nan')):8.2f} {m.get('loop', float('nan')):8.3f} "
              f"{ratio('wall', 'plain'):>10} {ratio('loop', 'plain'):>10} "
              f"{ratio('wall', 'default'):>12} {ratio('loop', 'default'):>12}  "
              f"{','.join(by[c].get('failed', [])) or '-'}")
    plain = med.get("plain", {}).get("loop")
    prof = med.get("profiler", {}).get("loop")
    if plain is None or prof is None or prof <= plain:
        return 0
    print(f"what each adds to plain's loop, as a share of what torch.profiler adds "
          f"({(prof - plain) * 1e3:.1f} ms):")
    for c, m in med.items():
        if c in ("plain", "profiler") or "loop" not in m:
            continue
        paired = [(x[c] - x["plain"]) / (x["profiler"] - x["plain"]) for x in rounds.values()
                  if c in x and "plain" in x and "profiler" in x and x["profiler"] > x["plain"]]
        line = (f"  {c:10} {(m['loop'] - plain) * 1e3:+8.1f} ms  "
                f"{(m['loop'] - plain) / (prof - plain):.2f}")
        if paired:
            line += (f"  per round {' '.join(f'{v:.2f}' for v in paired)}; "
                     f"median {statistics.median(paired):.2f}")
        print(line)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
