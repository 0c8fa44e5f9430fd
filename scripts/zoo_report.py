#!/usr/bin/env python3
"""The workload zoo's pass/fail table, from what scripts/zoo_matrix.sh left in its folder.

    scripts/zoo_report.py OUTDIR [--md FILE] [--strict]

Prints Markdown (and writes it to FILE with --md, a fragment for docs/zoo.md): one row per
workload (DIR/NAME/), one column per cell, each "pass", "n/a" (not run, or CELL.na: the cell
does not apply, such as --pytorch stack for a cpp workload) or "FAIL: REASON", the reason found
mechanically, the first of these that applies:

- every step of the cell (the kprof run, then its reports): `timeout (hang, limit N s)` when
  STEP.timeout exists; `rc N` for a nonzero exit (`rc 139 (SIGSEGV)` above 128, and the crash
  signature when stderr holds one); `crash in stderr: SIG` when stderr holds "Segmentation
  fault", "Aborted", "core dumped" or "terminate called" (a worker's crash under a parent that
  exited 0). A report step's reason is prefixed `report CELL.json:`. For `diff`, exit 1 is a
  regression verdict, not a failure: the cell passes as `pass (verdict: regression)`, the
  verdict read from diff.json's `result`; an exit status that disagrees with that verdict fails.
- empty output: no JSON summary, or one with no kernel (`summary.kernels` 0 and an empty
  `kernels` array); html.html or sqlite.sqlite missing or of 0 bytes; an SQLite file without a
  row in CUPTI_ACTIVITY_KIND_KERNEL.
- counters cells, from CELL.kernels.json (`kprof report --by kernel --format json --top 0`;
  CELL.json when it is missing): its `kernels` array (every kernel, by total GPU time) gives
  each kernel's `total_ns` and `median_ns` (the lower median of its durations; `mean_ns` where
  a summary has no median), and a kernel's share of GPU time is its `total_ns` over
  `summary.kernel_ns` (the sum of kernel durations, so that copies do not count).
  replay: each of the 10 kernels with most GPU time that has >= 1% of it must be in
  `counters.kernels` (measured) or `counters.unmeasured` (`name`, `gpu_ns`, `reason`, `why`),
  else `silently unmeasured: NAME`. sampled: each kernel with >= 1% of GPU time and a median of
  >= 5 us must be in `counters.kernels` with a non-empty `bound`, else `not classified: NAME`.
  A missing `counters` section fails both (`no counters section`).

`plain` (the workload alone) and `default` need every round to pass (the first failing round is
named). Further columns: the overhead of default tracing, median default wall / median plain
wall over the rounds that exited 0 (each round's whole command), and the same of the loop_s the
workload printed; and the top hint of default.json (the report of default.r1): its id and the
first 100 characters of its summary. A second table: per workload, for replay and sampled,
"measured k of n" of the kernels each check covers, and each one not covered with its reason.

Standard library only. Missing or malformed files never raise: a cell not run reads "n/a", a
file that cannot be read is a FAIL naming it. Exit status 0; with --strict, 1 when any cell
FAILs; 2 when OUTDIR is not a folder.
"""
import argparse
import json
import os
import signal
import sqlite3
import statistics
import sys

CELLS = ["plain", "default", "sampled", "replay", "node", "stack", "capture", "html", "sqlite",
         "diff"]
RUN_CELLS = ["sampled", "replay", "node", "stack", "capture"]  # one kprof run + its reports
REPORTS = ["json", "txt", "kernels.json"]  # the reports zoo_matrix.sh writes of each run
CRASH_SIGNATURES = ["Segmentation fault", "Aborted", "core dumped", "terminate called"]
REPLAY_TOP = 10         # replay: the kernels with most GPU time that must be covered
MIN_SHARE = 0.01        # ... and their least share of GPU time
SAMPLED_MIN_NS = 5000   # sampled: the least median duration of a kernel that must be classified
NAME_CHARS = 80         # kernel names in reasons are cut to this
HINT_CHARS = 100


class Fail(Exception):
    """A cell's failure; its text is the reason."""


def read_text(path, limit=None):
    try:
        with open(path, "rb") as f:
            data = f.read() if limit is None else f.read(limit)
        return data.decode("utf-8", "replace")
    except OSError:
        return None


def read_number(path, kind=float):
    text = read_text(path)
    try:
        return kind(text.strip()) if text is not None else None
    except ValueError:
        return None


def as_list(x):
    return x if isinstance(x, list) else []


def as_dict(x):
    return x if isinstance(x, dict) else {}


def as_num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else 0


def short(name, limit=NAME_CHARS):
    name = str(name)
    return name if len(name) <= limit else name[:limit - 3] + "..."


def signal_name(rc):
    try:
        return signal.Signals(rc - 128).name
    except ValueError:
        return None


def crash_in(text):
    return next((s for s in CRASH_SIGNATURES if text and s in text), None)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return short(line.strip(), 120)
    return ""


def step_problem(d, step, ok_codes=(0,)):
    """None when STEP ran and is fine, "" when it did not run (no STEP.rc), else the reason."""
    rc = read_number(os.path.join(d, step + ".rc"), int)
    if rc is None:
        return ""
    if os.path.exists(os.path.join(d, step + ".timeout")):
        limit = first_line(read_text(os.path.join(d, step + ".timeout")))
        return f"timeout (hang, limit {limit} s)" if limit else "timeout (hang)"
    err = read_text(os.path.join(d, step + ".err"), 1 << 22)
    crash = crash_in(err)
    if rc not in ok_codes:
        reason = f"rc {rc}"
        sig = signal_name(rc) if rc > 128 else None
        if sig:
            reason += f" ({sig})"
        if crash:
            reason += f", stderr: {crash}"
        elif first_line(err):
            reason += f": {first_line(err)}"
        return reason
    if crash:
        return f"crash in stderr: {crash}"
    return None


def require_step(d, step, prefix=""):
    """Raises Fail for a step that failed or did not run."""
    problem = step_problem(d, step)
    if problem == "":
        raise Fail(f"{prefix}not run")
    if problem:
        raise Fail(prefix + problem)


def load_json(path):
    text = read_text(path)
    if text is None:
        raise Fail(f"empty output (no {os.path.basename(path)})")
    if not text.strip():
        raise Fail(f"empty output ({os.path.basename(path)} is empty)")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise Fail(f"unreadable JSON {os.path.basename(path)}: {short(e, 60)}")
    if not isinstance(doc, dict):
        raise Fail(f"unreadable JSON {os.path.basename(path)}: not an object")
    return doc


def load_summary(d, cell):
    """The cell's JSON summary, after its report steps; Fail when one failed or it is empty."""
    for rep in REPORTS:
        step = f"{cell}.{rep}"
        problem = step_problem(d, step)
        if problem:
            raise Fail(f"report {step}: {problem}")
    doc = load_json(os.path.join(d, cell + ".json"))
    summary = as_dict(doc.get("summary"))
    # Graph mode (kprof's default) records a graph's launches, not its kernels: a program whose
    # kernels all run inside CUDA graphs has no kernel but graph launches.
    graphs = as_num(as_dict(summary.get("graphs")).get("launches"))
    if as_num(summary.get("kernels")) == 0 and not as_list(doc.get("kernels")) and not graphs:
        raise Fail("empty output (no kernels or graph launches in the JSON summary)")
    return doc


def kernel_table(d, cell, doc):
    """(name, total_ns, share, median_ns) of every kernel, most GPU time first."""
    try:
        src = load_json(os.path.join(d, cell + ".kernels.json"))
    except Fail:
        src = doc
    kernels = [k for k in as_list(src.get("kernels")) if isinstance(k, dict)]
    total = as_num(as_dict(src.get("summary")).get("kernel_ns"))
    if total <= 0:
        total = sum(as_num(k.get("total_ns")) for k in kernels)
    rows = []
    for k in kernels:
        t = as_num(k.get("total_ns"))
        median = k.get("median_ns", k.get("mean_ns"))
        if not isinstance(median, (int, float)):
            median = t / max(as_num(k.get("calls")), 1)
        rows.append((str(k.get("name", "")), t, t / total if total > 0 else 0.0, median))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def coverage(d, cell, doc):
    """(checked, missing, problem) for replay and sampled: the kernels the check covers, and
    of them those it fails as [(name, why)]."""
    counters = doc.get("counters")
    if not isinstance(counters, dict):
        raise Fail("no counters section")
    measured = {str(k.get("name")): k for k in as_list(counters.get("kernels"))
                if isinstance(k, dict)}
    unmeasured = {str(k.get("name")): k for k in as_list(counters.get("unmeasured"))
                  if isinstance(k, dict)}
    kernels = kernel_table(d, cell, doc)
    missing = []
    if cell == "replay":
        checked = [k for k in kernels[:REPLAY_TOP] if k[2] >= MIN_SHARE]
        for name, *_ in checked:
            if name in measured:
                continue
            u = unmeasured.get(name)
            why = (f"{u.get('reason', '')}: {u.get('why', '')}" if u else None)
            missing.append((name, why))
    else:
        checked = [k for k in kernels if k[2] >= MIN_SHARE and k[3] >= SAMPLED_MIN_NS]
        for name, *_ in checked:
            m = measured.get(name)
            if m is not None and m.get("bound"):
                continue
            u = unmeasured.get(name)
            if u:
                why = f"unmeasured, {u.get('reason', '')}: {u.get('why', '')}"
            else:
                why = "measured, no class" if m is not None else "not measured"
            missing.append((name, why))
    return checked, missing, str(counters.get("problem") or "")


def coverage_fail(cell, missing):
    if cell == "replay":
        silent = [n for n, why in missing if why is None]
        if silent:
            more = f" (+{len(silent) - 1} more)" if len(silent) > 1 else ""
            raise Fail(f"silently unmeasured: {short(silent[0])}{more}")
    elif missing:
        more = f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
        raise Fail(f"not classified: {short(missing[0][0])}{more}")


def rounds(d, cell):
    """The round numbers of plain/default that ran (CELL.rN.rc), in order."""
    found = []
    try:
        names = os.listdir(d)
    except OSError:
        return found
    for n in names:
        if n.startswith(cell + ".r") and n.endswith(".rc"):
            r = n[len(cell) + 2:-3]
            if r.isdigit():
                found.append(int(r))
    return sorted(found)


def judge_rounds(d, cell):
    rs = rounds(d, cell)
    if not rs:
        return "n/a"
    for r in rs:
        problem = step_problem(d, f"{cell}.r{r}")
        if problem:
            raise Fail(f"r{r}: {problem}")
    return "pass"


def judge_file(d, cell, path, sqlite=False):
    require_step(d, cell)
    try:
        size = os.path.getsize(path)
    except OSError:
        raise Fail(f"empty output (no {os.path.basename(path)})")
    if size == 0:
        raise Fail(f"empty output ({os.path.basename(path)} is 0 bytes)")
    if sqlite:
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                # Kernels, or (graph mode) the graph launches that hold them.
                tables = [r[0] for r in con.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")]
                n = sum(con.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
                        for t in tables if t == "CUPTI_ACTIVITY_KIND_KERNEL" or "GRAPH" in t.upper())
            finally:
                con.close()
        except sqlite3.Error as e:
            raise Fail(f"unreadable SQLite: {short(e, 60)}")
        if n == 0:
            raise Fail("empty output (no rows in CUPTI_ACTIVITY_KIND_KERNEL or a graph table)")
    return "pass"


def judge_diff(d):
    problem = step_problem(d, "diff", ok_codes=(0, 1))
    if problem == "":
        return "n/a"
    if problem:
        raise Fail(problem)
    rc = read_number(os.path.join(d, "diff.rc"), int)
    problem = step_problem(d, "diff.json", ok_codes=(0, 1))
    if problem:
        raise Fail(f"diff --format json: {problem or 'not run'}")
    result = load_json(os.path.join(d, "diff.json")).get("result")
    if result not in ("pass", "improvement", "regression"):
        raise Fail(f"diff.json: no verdict (result {result!r})")
    if (rc == 1) != (result == "regression"):
        raise Fail(f"rc {rc} but verdict {result}")
    return f"pass (verdict: {result})"


def judge(d, cell, kind):
    """The cell's text, and for counters cells the coverage (checked, missing, problem)."""
    cov = None
    if os.path.exists(os.path.join(d, cell + ".na")):
        return "n/a", None
    if cell == "stack" and kind == "cpp" and not os.path.exists(os.path.join(d, "stack.rc")):
        return "n/a", None
    try:
        if cell in ("plain", "default"):
            verdict = judge_rounds(d, cell)
            if cell == "default" and verdict == "pass":
                load_summary(d, "default")
            return verdict, None
        if cell == "html":
            if step_problem(d, "html") == "":
                return "n/a", None
            return judge_file(d, "html", os.path.join(d, "html.html")), None
        if cell == "sqlite":
            if step_problem(d, "sqlite") == "":
                return "n/a", None
            return judge_file(d, "sqlite", os.path.join(d, "sqlite.sqlite"), sqlite=True), None
        if cell == "diff":
            return judge_diff(d), None
        problem = step_problem(d, cell)
        if problem == "":
            return "n/a", None
        if problem:
            raise Fail(problem)
        doc = load_summary(d, cell)
        if cell in ("replay", "sampled"):
            cov = coverage(d, cell, doc)
            coverage_fail(cell, cov[1])
        return "pass", cov
    except Fail as e:
        return f"FAIL: {e}", cov
    except Exception as e:  # malformed data of a shape not foreseen: a failure of the output
        return f"FAIL: unreadable output ({type(e).__name__}: {short(e, 60)})", cov


def medians(d, cell):
    """Median wall seconds and loop_s of the rounds of CELL that exited 0 (None when none)."""
    walls, loops = [], []
    for r in rounds(d, cell):
        step = os.path.join(d, f"{cell}.r{r}")
        if read_number(step + ".rc", int) != 0:
            continue
        wall = read_number(step + ".wall")
        if wall is not None:
            walls.append(wall)
        out = read_text(step + ".out", 1 << 24) or ""
        loop = [line.rsplit("loop_s=", 1)[1].split()[0] for line in out.splitlines()
                if "loop_s=" in line]
        try:
            if loop:
                loops.append(float(loop[-1]))
        except ValueError:
            pass
    return (statistics.median(walls) if walls else None,
            statistics.median(loops) if loops else None)


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def top_hint(d):
    try:
        doc = json.loads(read_text(os.path.join(d, "default.json")) or "")
        hint = as_dict(as_list(as_dict(doc).get("hints"))[0])
    except (ValueError, IndexError):
        return "n/a"
    text = " ".join(str(hint.get("summary", "")).split())
    if len(text) > HINT_CHARS:
        text = text[:HINT_CHARS] + "..."
    return f"`{hint.get('id', '?')}`: {text}" if hint else "n/a"


def md(text):
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def workloads(outdir):
    """Workload folders: in matrix.tsv's order, then any other with zoo_matrix.sh's files."""
    names = []
    tsv = read_text(os.path.join(outdir, "matrix.tsv")) or ""
    for line in tsv.splitlines()[1:]:
        name = line.split("\t", 1)[0]
        if name and name not in names and os.path.isdir(os.path.join(outdir, name)):
            names.append(name)
    for name in sorted(os.listdir(outdir)):
        d = os.path.join(outdir, name)
        if name in names or name.startswith(".") or not os.path.isdir(d):
            continue
        if os.path.exists(os.path.join(d, "kind")) or rounds(d, "plain") or rounds(d, "default"):
            names.append(name)
    return names


def coverage_row(name, cell, verdict, cov):
    if cov is None:
        return f"| {md(name)} | {cell} | n/a | {md(verdict)} |"
    checked, missing, problem = cov
    if cell == "replay":
        measured = (f"measured {len(checked) - len(missing)} of {len(checked)} top kernels"
                    " (top 10, >= 1% of GPU time)")
    else:
        measured = (f"classified {len(checked) - len(missing)} of {len(checked)} kernels"
                    " (>= 1% of GPU time, median >= 5 us)")
    items = [f"{short(n, 60)} ({why or 'silently unmeasured'})" for n, why in missing]
    if problem:
        items.append(f"counters.problem: {short(problem, 120)}")
    return f"| {md(name)} | {cell} | {measured} | {md('; '.join(items) or '-')} |"


def report(outdir):
    lines = ["| workload | kind | " + " | ".join(CELLS) +
             " | overhead wall | overhead loop_s | top hint |",
             "|---" * (len(CELLS) + 5) + "|"]
    cov_lines = ["| workload | cell | coverage | not covered |", "|---|---|---|---|"]
    failed = 0
    for name in workloads(outdir):
        d = os.path.join(outdir, name)
        kind = first_line(read_text(os.path.join(d, "kind"))) or "?"
        cells = []
        for cell in CELLS:
            verdict, cov = judge(d, cell, kind)
            failed += verdict.startswith("FAIL")
            cells.append(md(verdict))
            if cell in ("replay", "sampled"):
                cov_lines.append(coverage_row(name, cell, verdict, cov))
        plain, default = medians(d, "plain"), medians(d, "default")
        lines.append(f"| {md(name)} | {md(kind)} | " + " | ".join(cells) +
                     f" | {ratio(default[0], plain[0])} | {ratio(default[1], plain[1])}"
                     f" | {md(top_hint(d))} |")
    text = "\n".join(lines) + "\n\nHardware counters: the kernels each check covers\n\n" + \
        "\n".join(cov_lines) + "\n"
    return text, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", help="the OUT folder of scripts/zoo_matrix.sh")
    ap.add_argument("--md", metavar="FILE", help="also write the Markdown to FILE")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a cell FAILs")
    args = ap.parse_args()
    if not os.path.isdir(args.outdir):
        print(f"zoo_report: {args.outdir}: not a folder", file=sys.stderr)
        return 2
    text, failed = report(args.outdir)
    sys.stdout.write(text)
    if args.md:
        try:
            with open(args.md, "w") as f:
                f.write(text)
        except OSError as e:
            print(f"zoo_report: {args.md}: {e.strerror}", file=sys.stderr)
            return 2
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
