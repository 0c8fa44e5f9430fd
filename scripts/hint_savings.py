#!/usr/bin/env python3
"""Estimates against fixes (issue 15), the CPU half: reads what scripts/hint_savings.sh measured
on the GPU (savings.tsv and the recordings under rec/) and sets each rule's estimate, computed
now by `kprof report` from the planted recordings, against the saving its fixed twin measured.

    scripts/hint_savings.py DIR [--kprof build/kprof] [--markdown] [--update docs/hints.md]

measured saving = median planted wall - median fixed wall (the workloads' timed parts, without a
profiler, interleaved rounds); estimate = median over the recorded planted runs of the rule's
est_saving_ns (joint rows: the joint figure, joint_saving). ratio = estimate / measured: an
estimate is right when it is an upper bound (ratio >= 0.9, allowing noise) and tight
(ratio <= 1.5). A saving smaller than twice the spread of either side's middle runs (with five
runs: the second largest less the second smallest) is noise, not a measurement: such a row says
so and is not judged. --update rewrites the table between the markers in the given Markdown
file. Exit status 1 when a measured ratio is outside [0.9, 1.5]."""
import argparse
import collections
import csv
import json
import os
import statistics
import subprocess
import sys

LOW, HIGH = 0.9, 1.5
BEGIN = "<!-- hint_savings.py: begin -->"
END = "<!-- hint_savings.py: end -->"


def report(kprof, run_dir):
    out = subprocess.run([kprof, "report", run_dir, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def estimate(doc, rule):
    if rule.startswith("joint:"):
        return doc.get("joint_saving", {}).get("est_saving_ns", 0)
    rule = rule.split("@")[0]  # RULE@LABEL: another workload of the same rule
    return sum(h["est_saving_ns"] for h in doc["hints"] if h["id"] == rule)


def est_spread(ests):
    """(largest - smallest) / median of the estimates of the recordings of one program."""
    m = statistics.median(ests)
    return (max(ests) - min(ests)) / m if m > 0 else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--kprof", default="build/kprof")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--update")
    a = ap.parse_args()
    walls = collections.defaultdict(list)
    order = []
    with open(os.path.join(a.dir, "savings.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["rule"] not in order:
                order.append(row["rule"])
            if row["rc"] == "0" and row["wall_s"]:
                walls[(row["rule"], row["variant"], row["mode"])].append(float(row["wall_s"]))
    def spread(v):  # of the middle runs: robust to one outlier on either end
        v = sorted(v)
        return v[-2] - v[1] if len(v) >= 4 else v[-1] - v[0]

    rows, bad, noise = [], [], []
    for rule in order:
        planted, fixed = walls[(rule, "planted", "plain")], walls[(rule, "fixed", "plain")]
        rec = os.path.join(a.dir, "rec", rule.replace(":", "_"))
        runs = sorted(d for d in os.listdir(rec) if d.startswith("planted-") and os.path.isdir(os.path.join(rec, d))) if os.path.isdir(
            rec) else []
        ests = [estimate(report(a.kprof, os.path.join(rec, d)), rule) for d in runs]
        if not planted or not fixed or not ests:
            continue
        saved = (statistics.median(planted) - statistics.median(fixed)) * 1e9
        est = statistics.median(ests)
        ratio = est / saved if saved > 0 else float("inf")
        measured = saved >= 2 * max(spread(planted), spread(fixed)) * 1e9
        if not measured:
            noise.append(rule)
        elif not LOW <= ratio <= HIGH:
            bad.append(rule)
        rows.append((rule, len(planted), statistics.median(planted) * 1e3,
                     spread(planted) * 1e3, statistics.median(fixed) * 1e3, spread(fixed) * 1e3,
                     saved / 1e6, est / 1e6, len(ests), min(ests) / 1e6, max(ests) / 1e6,
                     100 * est_spread(ests),
                     "%.2f" % ratio if measured else "noise (%.2f)" % ratio))
    if a.markdown or a.update:
        lines = ["| rule | runs | planted (spread) | fixed (spread) | measured saving "
                 "| estimate (recordings, range, spread) | estimate / measured |",
                 "|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append("| `%s` | %d | %.2f ms (%.2f) | %.2f ms (%.2f) | %.2f ms "
                         "| %.2f ms (%d, %.2f–%.2f, %.0f%%) | %s |" % r)
        text = "\n".join(lines) + "\n"
        if a.update:
            with open(a.update) as f:
                doc = f.read()
            i, j = doc.find(BEGIN), doc.find(END)
            if i < 0 or j < i:
                sys.exit("%s: no %s ... %s markers" % (a.update, BEGIN, END))
            with open(a.update, "w") as f:
                f.write(doc[:i + len(BEGIN)] + "\n" + text + doc[j:])
        else:
            sys.stdout.write(text)
    else:
        print("%-28s %4s %10s %10s %10s %10s %7s %s" % ("rule", "runs", "planted", "fixed",
                                                        "saved ms", "est ms", "spread", "ratio"))
        for r in rows:
            print("%-28s %4d %10.2f %10.2f %10.2f %10.2f %6.0f%% %s" % (
                r[0], r[1], r[2], r[4], r[6], r[7], r[11], r[12]))
    if noise:
        print("noise, not judged (the saving is within twice the runs' spread): %s" %
              ", ".join(noise), file=sys.stderr)
    if bad:
        print("outside [%.1f, %.1f]: %s" % (LOW, HIGH, ", ".join(bad)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
