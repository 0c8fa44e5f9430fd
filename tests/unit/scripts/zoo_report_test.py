"""CPU tests of scripts/zoo_report.py (and of scripts/zoo_matrix.sh's bookkeeping): a made-up
OUT folder as zoo_matrix.sh leaves it, with JSON summaries shaped as docs/json-schema.md says,
holding a pass of every cell and a FAIL of every kind; the script's table is read back and each
cell checked. Then zoo_matrix.sh itself against a stand-in kprof (a shell script: no GPU, no
build), with a workload that passes, one that crashes and one that hangs.

    python3 tests/unit/scripts/zoo_report_test.py
"""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
REPORT = os.path.join(ROOT, "scripts", "zoo_report.py")
MATRIX = os.path.join(ROOT, "scripts", "zoo_matrix.sh")
US = 1000


def kernel(name, total_ns, calls=10, median_ns=None):
    median = total_ns // calls if median_ns is None else median_ns
    return {"name": name, "calls": calls, "total_ns": total_ns, "mean_ns": total_ns // calls,
            "min_ns": median, "median_ns": median, "p95_ns": median, "max_ns": median,
            "share": 0.0, "grid": [1, 1, 1], "block": [128, 1, 1], "registers": 32,
            "shared_mem": 0, "max_blocks": 1}


def summary_doc(kernels, view="op", counters=None, hints=()):
    total = sum(k["total_ns"] for k in kernels)
    for k in kernels:
        k["share"] = k["total_ns"] / total if total else 0.0
    doc = {"schema": "kprof.summary", "schema_version": 1, "kprof_version": "0.1.0",
           "view": view, "inputs": [],
           "summary": {"wall_ns": 10 * total + 1, "gpu_busy_ns": total, "kernel_ns": total,
                       "kernels": sum(k["calls"] for k in kernels)},
           "rows": [], "ops": [], "kernels": kernels, "ranges": [], "processes": [],
           "hints": list(hints)}
    if view == "kernel":
        doc["rows"] = [{"key": k["name"], "calls": k["calls"], "gpu_ns": k["total_ns"]}
                       for k in kernels]
    if counters is not None:
        doc["counters"] = counters
    return doc


def counters(mode, measured, unmeasured=None):
    c = {"mode": mode, "problem": "", "replayed_launches": len(measured), "replay_ns": 0,
         "max_passes": 10, "samples": 0, "sample_interval_ns": 0, "roofline": "",
         "kernels": [{"name": n, "source": mode, "launches": 1, "gpu_ns": 1000, "sm_pct": 50.0,
                      "mem_pct": 20.0, "bound": bound} for n, bound in measured]}
    if unmeasured is not None:
        c["unmeasured"] = [{"name": n, "gpu_ns": 1000, "reason": r, "why": w}
                           for n, r, w in unmeasured]
    return c


HINT = {"id": "launch-bound", "severity": "critical",
        "summary": "Kernel launches dominate: 5000 launches of 2.1 us kernels " + "x" * 200,
        "evidence": [], "est_saving_ns": 1, "est_saving_pct": 1.0, "base_ns": 1,
        "assumption": "", "fix": {"cuda": "", "pytorch": ""}}

# Kernels of the counters cells: big ones, a small one under 1%, one at 2% but a 2 us median
# (sampled leaves it alone), and an 11th kernel at 1.5% (replay's top 10 leave it out).
BIG = [kernel(f"gemm_{i}", 100000 * US - i * 1000 * US) for i in range(9)]
SHORT = kernel("tiny_elementwise", 20000 * US, calls=10000, median_ns=2 * US)
ELEVENTH = kernel("eleventh_kernel", 14000 * US)
SMALL = kernel("under_one_percent", 500 * US)
ALL = BIG + [SHORT, ELEVENTH, SMALL]


class Out:
    """Writes a made-up zoo_matrix.sh folder."""

    def __init__(self, root):
        self.root = root

    def w(self, workload, name, text="", mode="w"):
        d = os.path.join(self.root, workload)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), mode) as f:
            f.write(text)
        return os.path.join(d, name)

    def step(self, workload, step, rc=0, wall=1.0, out="", err="", timeout=None):
        self.w(workload, step + ".rc", f"{rc}\n")
        self.w(workload, step + ".wall", f"{wall:.3f}\n")
        self.w(workload, step + ".err", err)
        if out is not None:
            self.w(workload, step + ".out", out)
        if timeout:
            self.w(workload, step + ".timeout", f"{timeout}\n")

    def run_cell(self, workload, cell, doc, kernels_doc=None, **kw):
        self.step(workload, cell, **kw)
        for rep in ("json", "txt", "kernels.json"):
            self.step(workload, f"{cell}.{rep}", out=None)
        self.w(workload, cell + ".json", json.dumps(doc, indent=1))
        self.w(workload, cell + ".txt", "table\n")
        self.w(workload, cell + ".kernels.json",
               json.dumps(kernels_doc or dict(doc, view="kernel"), indent=1))

    def rounds(self, workload, plain, default, plain_loop, default_loop, rcs=None):
        for r, (p, d, pl, dl) in enumerate(zip(plain, default, plain_loop, default_loop), 1):
            self.step(workload, f"plain.r{r}", wall=p, out=f"warming up\nloop_s={pl}\n")
            rc = rcs[r - 1] if rcs else 0
            self.step(workload, f"default.r{r}", rc=rc, wall=d, out=f"loop_s={dl}\n")

    def sqlite(self, workload, rows):
        path = os.path.join(self.root, workload, "sqlite.sqlite")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT)")
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?)",
                        [(i, i + 1) for i in range(rows)])
        con.commit()
        con.close()


def make_outdir(root):
    o = Out(root)
    # ok: every cell passes; diff found a regression (exit 1), which is a verdict, not a crash.
    o.w("ok", "kind", "python\n")
    o.rounds("ok", [1.0, 1.2, 1.1], [1.5, 1.65, 1.4], [0.5, 0.5, 0.5], [0.6, 0.6, 0.6])
    o.run_cell("ok", "default", summary_doc(ALL, hints=[HINT]))
    o.run_cell("ok", "sampled", summary_doc(ALL, counters=counters(
        "sampled", [(k["name"], "compute") for k in BIG + [ELEVENTH]])))
    o.run_cell("ok", "replay", summary_doc(ALL, counters=counters(
        "replay", [(k["name"], "memory") for k in BIG[:8]],
        [(BIG[8]["name"], "short", "ran 2 us: below the replay floor"),
         (SHORT["name"], "late", "entered the top 10 after the replay")])))
    for cell in ("node", "stack", "capture"):
        o.run_cell("ok", cell, summary_doc(ALL))
    o.step("ok", "html")
    o.w("ok", "html.html", "<html></html>")
    o.step("ok", "sqlite")
    o.sqlite("ok", 3)
    o.step("ok", "diff", rc=1, out="kprof diff: REGRESSION\n")
    o.step("ok", "diff.json", rc=1, out=None)
    o.w("ok", "diff.json", json.dumps({"schema": "kprof.diff", "result": "regression"}))

    # bad: a FAIL of each kind.
    o.w("bad", "kind", "ddp\n")
    o.rounds("bad", [1, 1, 1], [2, 2, 2], [1, 1, 1], [1, 1, 1], rcs=[0, 1, 0])
    o.run_cell("bad", "default", summary_doc(ALL))
    o.run_cell("bad", "sampled", summary_doc(ALL, counters=counters(
        "sampled", [(k["name"], "compute") for k in BIG[:5]] + [(BIG[5]["name"], "")],
        [(BIG[6]["name"], "short", "fewer than 2 samples")])))
    o.run_cell("bad", "replay", summary_doc(ALL, counters=counters(
        "replay", [(k["name"], "memory") for k in BIG[:7]],
        [(BIG[7]["name"], "refused", "ERR_NVGPUCTRPERM")])))
    o.run_cell("bad", "node", summary_doc(ALL), rc=124, wall=300.0, timeout=300)
    o.run_cell("bad", "stack", summary_doc(ALL), rc=139,
               err="Fatal Python error: Segmentation fault\n")
    o.run_cell("bad", "capture", summary_doc([]))
    o.step("bad", "html")
    o.w("bad", "html.html", "")
    o.step("bad", "sqlite", rc=2, err="kprof export: x.sqlite: sqlite: disk I/O error\n")
    o.step("bad", "diff", rc=2, err="kprof diff: default.r2: no such file or directory\n")

    # odd: failures found in other places, and cells not run.
    o.w("odd", "kind", "cpp\n")
    o.rounds("odd", [1, 1], [1, 1], [1, 1], [1, 1])
    o.run_cell("odd", "default", summary_doc(ALL))
    o.step("odd", "default.r2", rc=0, err="terminate called after throwing an instance\n")
    o.run_cell("odd", "sampled", summary_doc(ALL, counters=counters("sampled", [])))
    o.step("odd", "sampled.json", rc=2, out=None, err="kprof report: x: truncated\n")
    o.run_cell("odd", "replay", summary_doc(ALL))  # no counters section
    o.run_cell("odd", "node", summary_doc(ALL))
    o.w("odd", "node.json", '{"schema": "kprof.summary", "kern')
    o.w("odd", "stack.na", "cpp workload\n")
    o.run_cell("odd", "capture", summary_doc(ALL), rc=134, err="Aborted (core dumped)\n")
    o.step("odd", "html")  # rc 0 but no file
    o.step("odd", "sqlite")
    o.sqlite("odd", 0)
    o.step("odd", "diff", rc=0)
    o.step("odd", "diff.json", rc=0, out=None)
    o.w("odd", "diff.json", json.dumps({"schema": "kprof.diff", "result": "regression"}))

    # bare: a workload folder with nothing run; junk: files of the wrong shape.
    o.w("bare", "kind", "python\n")
    o.w("junk", "kind", "python\n")
    o.step("junk", "plain.r1", wall=1.0, out="loop_s=abc\n")
    o.step("junk", "default.r1", wall=1.0, out="")
    for rep in ("json", "txt", "kernels.json"):
        o.step("junk", f"default.{rep}", out=None)
    o.w("junk", "default.json", json.dumps({"summary": [], "kernels": 5, "hints": [3]}))
    o.step("junk", "replay")
    for rep in ("json", "txt", "kernels.json"):
        o.step("junk", f"replay.{rep}", out=None)
    o.w("junk", "replay.json", json.dumps(dict(summary_doc(ALL), counters={"kernels": 7})))
    o.w("junk", "replay.kernels.json", "[1, 2]")

    # matrix.tsv gives the order; "bare" and "junk" are found as folders.
    o.w("", "matrix.tsv", "workload\tcell\tstep\nok\tplain\tplain.r1\nbad\tplain\tplain.r1\n"
        "odd\tplain\tplain.r1\n")


def read_tables(text):
    """{workload: {column: cell}} of the first table, and the rows of the second."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            current.append([c.strip() for c in line.strip().strip("|").split(" | ")])
        else:
            current = None
    head, rows = tables[0][0], tables[0][2:]
    first = {r[0]: dict(zip(head, r)) for r in rows}
    second = {(r[0], r[1]): r for r in tables[1][2:]}
    return first, second


class ZooReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "zoo")
        make_outdir(cls.out)
        cls.md = os.path.join(cls.tmp.name, "zoo.md")
        p = subprocess.run([sys.executable, REPORT, cls.out, "--md", cls.md],
                           capture_output=True, text=True, timeout=60)
        cls.rc, cls.text, cls.err = p.returncode, p.stdout, p.stderr
        cls.cells, cls.cov = read_tables(p.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def cell(self, workload, column):
        return self.cells[workload][column]

    def test_runs_cleanly(self):
        self.assertEqual(self.rc, 0, self.err)
        self.assertNotIn("Traceback", self.err)
        self.assertEqual(list(self.cells), ["ok", "bad", "odd", "bare", "junk"])
        with open(self.md) as f:
            self.assertEqual(f.read(), self.text)

    def test_all_pass(self):
        for column in ("plain", "default", "sampled", "replay", "node", "stack", "capture",
                       "html", "sqlite"):
            self.assertEqual(self.cell("ok", column), "pass", column)
        self.assertEqual(self.cell("ok", "diff"), "pass (verdict: regression)")

    def test_overhead_and_hint(self):
        self.assertEqual(self.cell("ok", "overhead wall"), "1.36x")  # 1.5 / 1.1
        self.assertEqual(self.cell("ok", "overhead loop_s"), "1.20x")
        hint = self.cell("ok", "top hint")
        self.assertTrue(hint.startswith("`launch-bound`: Kernel launches dominate"), hint)
        self.assertTrue(hint.endswith("..."), hint)
        self.assertLess(len(hint), 140)
        self.assertEqual(self.cell("bad", "top hint"), "n/a")

    def test_nonzero_rc_timeout_crash(self):
        self.assertEqual(self.cell("bad", "plain"), "pass")
        self.assertEqual(self.cell("bad", "default"), "FAIL: r2: rc 1")
        self.assertEqual(self.cell("bad", "node"), "FAIL: timeout (hang, limit 300 s)")
        self.assertEqual(self.cell("bad", "stack"),
                         "FAIL: rc 139 (SIGSEGV), stderr: Segmentation fault")
        self.assertEqual(self.cell("bad", "sqlite"),
                         "FAIL: rc 2: kprof export: x.sqlite: sqlite: disk I/O error")
        self.assertTrue(self.cell("bad", "diff").startswith("FAIL: rc 2: kprof diff:"))
        self.assertEqual(self.cell("odd", "default"),
                         "FAIL: r2: crash in stderr: terminate called")
        self.assertEqual(self.cell("odd", "capture"), "FAIL: rc 134 (SIGABRT), stderr: Aborted")

    def test_empty_outputs(self):
        self.assertEqual(self.cell("bad", "capture"),
                         "FAIL: empty output (no kernels or graph launches in the JSON summary)")
        self.assertEqual(self.cell("bad", "html"), "FAIL: empty output (html.html is 0 bytes)")
        self.assertEqual(self.cell("odd", "html"), "FAIL: empty output (no html.html)")
        self.assertEqual(self.cell("odd", "sqlite"),
                         "FAIL: empty output (no rows in CUPTI_ACTIVITY_KIND_KERNEL or a graph table)")

    def test_coverage(self):
        # sampled: gemm_5 measured without a class, gemm_6 unmeasured, gemm_7, gemm_8 and
        # eleventh_kernel missing (tiny_elementwise: 2 us median, under_one_percent: 0.06%).
        self.assertEqual(self.cell("bad", "sampled"), "FAIL: not classified: gemm_5 (+4 more)")
        # replay: gemm_7 unmeasured with a reason is fine; gemm_8 and tiny_elementwise (10th)
        # are in neither list; eleventh_kernel is not in the top 10.
        self.assertEqual(self.cell("bad", "replay"),
                         "FAIL: silently unmeasured: gemm_8 (+1 more)")
        self.assertEqual(self.cell("odd", "replay"), "FAIL: no counters section")
        cov = self.cov[("ok", "replay")]
        self.assertTrue(cov[2].startswith("measured 8 of 10 top kernels"), cov)
        self.assertIn("gemm_8 (short: ran 2 us: below the replay floor)", cov[3])
        self.assertIn("tiny_elementwise (late: entered the top 10 after the replay)", cov[3])
        self.assertNotIn("eleventh_kernel", cov[3])
        cov = self.cov[("ok", "sampled")]
        self.assertTrue(cov[2].startswith("classified 10 of 10 kernels"), cov)  # not the 2 us one
        cov = self.cov[("bad", "sampled")]
        self.assertTrue(cov[2].startswith("classified 5 of 10"), cov)
        self.assertIn("gemm_5 (measured, no class)", cov[3])
        self.assertIn("gemm_6 (unmeasured, short: fewer than 2 samples)", cov[3])
        self.assertIn("gemm_7 (not measured)", cov[3])
        cov = self.cov[("bad", "replay")]
        self.assertIn("gemm_8 (silently unmeasured)", cov[3])
        self.assertIn("gemm_7 (refused: ERR_NVGPUCTRPERM)", cov[3])
        self.assertEqual(self.cov[("odd", "replay")][2], "n/a")

    def test_report_and_json_failures(self):
        self.assertEqual(self.cell("odd", "sampled"),
                         "FAIL: report sampled.json: rc 2: kprof report: x: truncated")
        self.assertTrue(self.cell("odd", "node").startswith("FAIL: unreadable JSON node.json"))
        self.assertEqual(self.cell("odd", "diff"), "FAIL: rc 0 but verdict regression")

    def test_not_run(self):
        self.assertEqual(self.cell("odd", "stack"), "n/a")
        for column in ("plain", "default", "sampled", "replay", "node", "stack", "capture",
                       "html", "sqlite", "diff", "overhead wall", "overhead loop_s",
                       "top hint"):
            self.assertEqual(self.cell("bare", column), "n/a", column)

    def test_malformed_shapes(self):
        self.assertEqual(self.cell("junk", "plain"), "pass")
        self.assertEqual(self.cell("junk", "default"),
                         "FAIL: empty output (no kernels or graph launches in the JSON summary)")
        self.assertEqual(self.cell("junk", "overhead loop_s"), "n/a")
        self.assertEqual(self.cell("junk", "top hint"), "n/a")
        self.assertTrue(self.cell("junk", "replay").startswith("FAIL"), self.cells["junk"])

    def test_strict_and_missing_dir(self):
        p = subprocess.run([sys.executable, REPORT, self.out, "--strict"], capture_output=True)
        self.assertEqual(p.returncode, 1)
        ok_only = os.path.join(self.tmp.name, "ok_only")
        os.makedirs(ok_only)
        os.symlink(os.path.join(self.out, "ok"), os.path.join(ok_only, "ok"))
        p = subprocess.run([sys.executable, REPORT, ok_only, "--strict"], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        p = subprocess.run([sys.executable, REPORT, os.path.join(self.tmp.name, "none")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertNotIn("Traceback", p.stderr)


# A stand-in for kprof: run runs the program (its status is kprof's) and writes a .kprof file;
# report prints a summary with one kernel (counters under --metrics); export writes a file;
# diff exits 1 with a regression.
FAKE_KPROF = textwrap.dedent(r"""
    #!/usr/bin/env bash
    cmd=$1; shift
    case $cmd in
      run)
        out="" metrics=""
        while [ $# -gt 0 ]; do case $1 in
          -o) out=$2; shift 2 ;;
          --metrics) metrics=$2; shift 2 ;;
          --graph-trace|--pytorch|--capture) shift 2 ;;
          -q|--force) shift ;;
          --) shift; break ;;
          *) break ;;
        esac; done
        mkdir -p "$out" && echo run > "$out/kprof.1.kprof" && echo "$metrics" > "$out.metrics"
        "$@"; exit $? ;;
      report)
        dir=$1; shift
        [ -f "$dir/kprof.1.kprof" ] || { echo "kprof report: $dir: no run" >&2; exit 2; }
        case " $* " in
          *" --html "*) set -- "$@"; while [ "$1" != --html ]; do shift; done
                        echo '<html>' > "$2"; echo table; exit 0 ;;
          *" json "*) m=$(cat "$dir.metrics" 2> /dev/null)
             c=""; [ -n "$m" ] && c=", \"counters\": {\"mode\": \"$m\", \"kernels\": [{\"name\": \"k\", \"bound\": \"compute\"}]}"
             echo "{\"schema\": \"kprof.summary\", \"summary\": {\"kernels\": 3, \"kernel_ns\": 30000}, \"kernels\": [{\"name\": \"k\", \"calls\": 3, \"total_ns\": 30000, \"median_ns\": 10000}], \"hints\": [{\"id\": \"fake-hint\", \"summary\": \"a fake hint\"}]$c}" ;;
          *) echo table ;;
        esac ;;
      export) while [ "$1" != --sqlite ]; do shift; done
        "$PYTHON" -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (x)'); c.execute('INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1)'); c.commit()" "$2" ;;
      diff) case " $* " in *" json "*) echo '{"schema": "kprof.diff", "result": "regression"}' ;;
            *) echo "kprof diff: REGRESSION" ;; esac; exit 1 ;;
    esac
""").lstrip()

WORKLOAD = textwrap.dedent("""
    import sys, time
    if sys.argv[1] == "crash":
        sys.stderr.write("Segmentation fault\\n"); sys.exit(139)
    if sys.argv[1] == "hang":
        time.sleep(60)
    print("loop_s=0.25 steps=" + sys.argv[sys.argv.index("--steps") + 1])
""")


class ZooMatrix(unittest.TestCase):
    """zoo_matrix.sh against the stand-in kprof: the steps, their files, matrix.tsv."""

    def test_matrix(self):
        with tempfile.TemporaryDirectory() as tmp:
            kprof = os.path.join(tmp, "kprof")
            with open(kprof, "w") as f:
                f.write(FAKE_KPROF)
            os.chmod(kprof, 0o755)
            work = os.path.join(tmp, "w.py")
            with open(work, "w") as f:
                f.write(WORKLOAD)
            zoo = os.path.join(tmp, "workloads.txt")
            py = sys.executable
            with open(zoo, "w") as f:
                f.write(f"# comment\ngood\tpython\t{py} {work} ok\n"
                        f"crashy\tddp\t{py} {work} crash\nhangy\tcpp\t{py} {work} hang\n"
                        f"skipped\tcpp\t{py} {work} ok\n")
            out = os.path.join(tmp, "out")
            env = dict(os.environ, OUT=out, ZOO=zoo, TIMEOUT="2", STEPS="7", PYTHON=py)
            p = subprocess.run(["bash", MATRIX, kprof, "2", "good|crashy|hangy"], env=env,
                               capture_output=True, text=True, timeout=240)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("[zoo", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "skipped")))
            with open(os.path.join(out, "good", "plain.r2.out")) as f:
                self.assertIn("steps=7", f.read())
            with open(os.path.join(out, "matrix.tsv")) as f:
                rows = [line.rstrip("\n").split("\t") for line in f]
            self.assertEqual(rows[0][:5], ["workload", "cell", "step", "rc", "wall_s"])
            good = [r[2] for r in rows if r[0] == "good"]
            self.assertEqual(good[:4], ["plain.r1", "default.r1", "plain.r2", "default.r2"])
            for step in ("sampled", "replay.kernels.json", "stack", "capture.json", "html",
                         "sqlite", "diff", "diff.json"):
                self.assertIn(step, good)
            by_step = {(r[0], r[2]): r for r in rows[1:]}
            self.assertEqual(by_step[("good", "diff")][3], "1")
            self.assertEqual(by_step[("good", "plain.r1")][5], "0.25")
            self.assertEqual(by_step[("hangy", "plain.r1")][6], "hang")
            self.assertTrue(os.path.exists(os.path.join(out, "hangy", "stack.na")))

            p = subprocess.run([sys.executable, REPORT, out], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            cells, _ = read_tables(p.stdout)
            self.assertEqual(list(cells), ["good", "crashy", "hangy"])
            for column in ("plain", "default", "sampled", "replay", "node", "stack", "capture",
                           "html", "sqlite"):
                self.assertEqual(cells["good"][column], "pass", column)
            self.assertEqual(cells["good"]["diff"], "pass (verdict: regression)")
            self.assertEqual(cells["good"]["top hint"], "`fake-hint`: a fake hint")
            self.assertEqual(cells["crashy"]["node"],
                             "FAIL: rc 139 (SIGSEGV), stderr: Segmentation fault")
            self.assertEqual(cells["hangy"]["default"], "FAIL: r1: timeout (hang, limit 2 s)")
            self.assertEqual(cells["hangy"]["stack"], "n/a")



class GraphOnly(unittest.TestCase):
    """A program whose kernels all run inside CUDA graphs has, in graph mode, graph launches and
    no kernel: not an empty output (kernels/zoo_graphs_streams on an H200)."""

    def test_graph_launches_are_output(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import zoo_report  # noqa: E402
        with tempfile.TemporaryDirectory() as d:
            doc = summary_doc([])
            doc["summary"]["graphs"] = {"launches": 203, "gpu_ns": 396902873}
            for rep in zoo_report.REPORTS:
                with open(os.path.join(d, "default." + rep), "w") as f:
                    json.dump(doc, f)
            self.assertEqual(zoo_report.load_summary(d, "default")["summary"]["graphs"]["launches"],
                             203)
            doc["summary"]["graphs"]["launches"] = 0
            with open(os.path.join(d, "default.json"), "w") as f:
                json.dump(doc, f)
            with self.assertRaises(zoo_report.Fail):
                zoo_report.load_summary(d, "default")


if __name__ == "__main__":
    unittest.main()
