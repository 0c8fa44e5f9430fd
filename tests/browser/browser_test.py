#!/usr/bin/env python3
"""Browser tests of kprof's HTML report (docs/html.md): each section of the page in a real
headless Chromium driven over W3C WebDriver. One ctest test per section:

  browser_test.py --build BUILD --source SRC SECTION

SECTION: pages (writes the pages: the ctest fixture of the others), hints, timeline, tables,
charts, hostile, diff, large. Every test also fails on a console error or a JavaScript
exception, and writes screenshots to BUILD/browser-artifacts/. Exit 77 (skip) without chromium
or chromedriver."""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import webdriver  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from pycheck import Failure, check  # noqa: E402

HOSTILE_KERNEL = "</script><img src=x onerror=alert(1)>"
HOSTILE_RANGE = "</script><script>window.__pwned=1</script> & \"q\" \\ '"


class Ctx:
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.source = os.path.abspath(args.source)
        self.kprof = os.path.join(self.build, "kprof")
        self.pages = os.path.join(self.build, "browser-pages")
        self.art = os.path.join(self.build, "browser-artifacts")
        os.makedirs(self.pages, exist_ok=True)
        os.makedirs(self.art, exist_ok=True)
        self.browser = None

    def page(self, name):
        return os.path.join(self.pages, name + ".html")

    def src(self, *p):
        return os.path.join(self.source, *p)

    def kprof_json(self, *inputs):
        out = subprocess.run([self.kprof, "report", *inputs, "--format", "json"], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)

    def load(self, name):
        b = self.browser
        t0 = time.time()
        b.open(self.page(name))
        ready = b.js("return document.body && document.body.getAttribute('data-kprof-ready')")
        wall = time.time() - t0
        check(ready == "1", "%s: page ready" % name)
        self.no_errors(name)
        return wall

    def no_errors(self, name):
        b = self.browser
        errors = b.js("return document.documentElement.getAttribute('data-kprof-errors')")
        check(errors is None, "%s: no JavaScript exception (%s)" % (name, errors))
        bad = [e for e in b.logs() if e.get("level") in ("SEVERE", "ERROR")]
        check(not bad, "%s: no console error %s" % (name, bad[:3]))

    def shot(self, name, section=None):
        if section:
            self.browser.js("document.getElementById(arguments[0]).scrollIntoView();"
                            "window.scrollBy(0, -48);", section)
        self.browser.js("const t = document.getElementById('tl-tooltip');"
                        "if (t) t.style.display = 'none';")
        path = os.path.join(self.art, name + ".png")
        self.browser.screenshot(path)
        print("     screenshot " + path)


# ---- The pages --------------------------------------------------------------------------------

def hostile_trace(path):
    """A Chrome trace whose kernel and range names are hostile to an HTML page."""
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
           "ts": 10.0 + i * 20, "dur": 2.0, "args": {"correlation": i + 1}} for i in range(4)]
    names = [HOSTILE_KERNEL, "quote\" back\\slash\nnew\tline\u2028", "\x01\x02ctl", "ok"]
    ev += [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 15.0 + i * 20,
            "dur": 8.0, "args": {"device": 0, "stream": 7, "correlation": i + 1}}
           for i, n in enumerate(names)]
    ev.append({"ph": "X", "cat": "user_annotation", "name": HOSTILE_RANGE, "pid": 1, "tid": 1,
               "ts": 5.0, "dur": 90.0})
    with open(path, "w") as f:
        json.dump({"traceEvents": ev}, f)


def make_pages(c):
    def report(name, *inputs, extra=()):
        subprocess.run([c.kprof, "report", *inputs, "--html", c.page(name), "--force", *extra],
                       check=True, stdout=subprocess.DEVNULL)
    report("default-run", c.src("examples", "default-run"))
    report("torch_nvtx", c.src("tests", "fixtures", "gpu", "torch_nvtx"))
    trace = os.path.join(c.pages, "hostile.json")
    hostile_trace(trace)
    report("hostile", trace)
    run1m = os.path.join(c.pages, "gen1m.kprof")
    if not os.path.exists(run1m):
        subprocess.run([os.path.join(c.build, "tests", "kprof_gen_run"), run1m, "1000000"],
                       check=True, stdout=subprocess.DEVNULL)
    t0 = time.time()
    report("gen1m", run1m)
    print("     1M-kernel page written in %.1f s, %.1f MB" %
          (time.time() - t0, os.path.getsize(c.page("gen1m")) / 1e6))
    diff = c.src("tests", "fixtures", "gpu", "diff")
    subprocess.run([c.kprof, "diff", os.path.join(diff, "base"), os.path.join(diff, "slow10"),
                    "--html", c.page("diff"), "--force"], stdout=subprocess.DEVNULL)
    report("counters-sampled", c.src("tests", "fixtures", "gpu", "counter_characters_sampled"))
    report("counters-replay", c.src("tests", "fixtures", "gpu", "counter_characters_replay"))
    report("counters-unmeasured",
           c.src("tests", "fixtures", "gpu", "launch_patterns_names_replay"))
    report("memory_torch_train", c.src("tests", "fixtures", "gpu", "memory_torch_train"))
    for n in ("default-run", "torch_nvtx", "hostile", "gen1m", "diff", "counters-sampled",
              "counters-replay", "counters-unmeasured", "memory_torch_train"):
        check(os.path.getsize(c.page(n)) > 0, "page %s written" % n)


# ---- Sections ---------------------------------------------------------------------------------

def test_hints(c):
    for name, run in (("default-run", c.src("examples", "default-run")),
                      ("torch_nvtx", c.src("tests", "fixtures", "gpu", "torch_nvtx"))):
        c.load(name)
        want = [h["id"] for h in c.kprof_json(run)["hints"]]
        got = c.browser.js("return Array.from(document.querySelectorAll('#hints [data-hint-id]'))"
                           ".map(e => e.getAttribute('data-hint-id'))")
        check(got == want, "%s: hints %s shown in kprof's order" % (name, want))
        top = c.browser.js("return document.getElementById('hints').getBoundingClientRect().top")
        check(top < 200, "%s: the hints come first (top %.0f px)" % (name, top))
        c.shot(name + "-hints", "hints")
        c.no_errors(name)


CANVAS_INK = """
const c = document.getElementById(arguments[0]), g = c.getContext('2d');
const d = g.getImageData(0, 0, c.width, c.height).data;
let ink = 0;
for (let i = 0; i < d.length; i += 4) if (d[i] < 200 || d[i+1] < 200 || d[i+2] < 200) ink++;
return ink;"""

TIMED_ZOOM = """
const times = [];
for (let i = 0; i < arguments[0]; i++) {
  const t0 = performance.now();
  document.getElementById(i % 2 ? 'tl-zoom-out' : 'tl-zoom-in').click();
  times.push(performance.now() - t0);
}
return times;"""


def view(c):
    v = c.browser.js("return document.getElementById('timeline-canvas').getAttribute('data-view')")
    return [float(x) for x in v.split(",")]


def timeline_checks(c, name):
    b = c.browser
    ink = b.js(CANVAS_INK, "timeline-canvas")
    check(ink > 5000, "%s: timeline drawn (%d non-blank pixels)" % (name, ink))
    full = view(c)
    t0 = b.js("const t = performance.now(); document.getElementById('tl-zoom-in').click();"
              "return performance.now() - t;")
    zoomed = view(c)
    check(zoomed[1] - zoomed[0] < 0.6 * (full[1] - full[0]),
          "%s: zoom in narrows the view %s -> %s (%.1f ms)" % (name, full, zoomed, t0))
    # Mouse wheel (zoom around the cursor) and drag (pan).
    b.js("const c = document.getElementById('timeline-canvas'), r = c.getBoundingClientRect();"
         "c.dispatchEvent(new WheelEvent('wheel', {deltaY: -300, clientX: r.left + 700,"
         " clientY: r.top + 60, bubbles: true, cancelable: true}));")
    wheeled = view(c)
    check(wheeled[1] - wheeled[0] < zoomed[1] - zoomed[0], "%s: wheel zooms in" % name)
    b.js("const c = document.getElementById('timeline-canvas'), r = c.getBoundingClientRect();"
         "c.dispatchEvent(new MouseEvent('mousedown', {clientX: r.left + 800, clientY: r.top + 60,"
         " bubbles: true}));"
         "window.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 600,"
         " clientY: r.top + 60}));"
         "window.dispatchEvent(new MouseEvent('mouseup', {}));")
    panned = view(c)
    check(panned[0] > wheeled[0] and abs((panned[1] - panned[0]) - (wheeled[1] - wheeled[0])) < 2,
          "%s: drag pans the view %s -> %s" % (name, wheeled, panned))
    b.click("#tl-reset")
    check(view(c) == full, "%s: reset shows the whole run again" % name)
    times = sorted(b.js(TIMED_ZOOM, 20))
    med, worst = times[len(times) // 2], times[-1]
    print("     %s: redraw on zoom: median %.1f ms, max %.1f ms (20 zooms)" % (name, med, worst))
    # Responsive: the median redraw well inside a frame budget's reach; one slow redraw (a
    # garbage collection, a CI machine running other tests at -j2) is tolerated up to 250 ms.
    check(med < 50 and worst < 250, "%s: zoom redraw median under 50 ms, max under 250 ms "
          "(median %.1f ms, max %.1f ms)" % (name, med, worst))
    b.click("#tl-reset")
    # Hover: a tooltip with the name, somewhere along the first GPU track.
    shown = b.js("""
      const c = document.getElementById('timeline-canvas'), tip = document.getElementById('tl-tooltip');
      const tl = window.kprofTimeline, t = tl.gpu[0];
      for (let x = 240; x < tl.W; x += 3) {
        c.dispatchEvent(new MouseEvent('mousemove', {clientX: c.getBoundingClientRect().left + x,
            clientY: c.getBoundingClientRect().top + t.y + 8}));
        if (tip.style.display === 'block') return tip.textContent;
      }
      return null;""")
    check(bool(shown), "%s: hovering a GPU slice shows a tooltip (%r)" % (name, (shown or "")[:80]))
    return med, worst


def test_timeline(c):
    for name in ("default-run", "torch_nvtx"):
        c.load(name)
        timeline_checks(c, name)
        c.shot(name + "-timeline", "timeline")
        c.no_errors(name)


def test_tables(c):
    for name in ("default-run", "torch_nvtx"):
        c.load(name)
        b = c.browser
        data = b.js("return JSON.parse(document.getElementById('kprof-data').textContent).tables")
        for t in data:
            if t.get("unavailable"):
                b.click("#tab-" + t["id"])
                text = b.js("return document.querySelector('#tables .empty').textContent")
                check("not record" in text, "%s: the %s view is marked as not recorded" % (name, t["id"]))
                continue
            b.click("#tab-" + t["id"])
            rows = b.js("return document.querySelectorAll('#table-%s tbody tr').length" % t["id"])
            check(rows == t["shown"] == len(t["rows"]), "%s: %s table has its %d rows" % (name, t["id"], rows))
            if rows < 2:
                continue
            col = next((i for i, x in enumerate(t["columns"]) if x["type"] == "dur"), 1)
            cells = "return Array.from(document.querySelectorAll('#table-%s tbody tr'))" \
                    ".map(r => r.children[0].textContent)" % t["id"]
            b.click("#table-%s th:nth-child(%d)" % (t["id"], col + 1))
            first = b.js(cells)
            b.click("#table-%s th:nth-child(%d)" % (t["id"], col + 1))
            second = b.js(cells)
            keys = [r[col] for r in t["rows"]]
            if len(set(keys)) == len(keys):
                check(second == first[::-1], "%s: %s sorted by %s, a second click reverses it"
                      % (name, t["id"], t["columns"][col]["label"]))
            # Filter by a part of the first row's name.
            word = first[0][:6].lower()
            b.type("input[data-table='%s']" % t["id"], word)
            left = b.js(cells)
            want = [r[0] for r in t["rows"] if word in r[0].lower()]
            check(sorted(left) == sorted(want) and len(left) >= 1,
                  "%s: %s filtered by %r: %d of %d rows" % (name, t["id"], word, len(left), rows))
        b.click("#tab-op")
        c.shot(name + "-tables", "tables")
        c.no_errors(name)


def test_charts(c):
    for name in ("default-run", "torch_nvtx", "memory_torch_train"):
        c.load(name)
        b = c.browser
        # Memory: stacked by owner where the run has the owners' series, else a line per device.
        by_owner = b.js("return JSON.parse(document.getElementById('kprof-data').textContent)"
                        ".memory_by_owner")
        mem = ["memory-owner-%d" % i for i in range(len(by_owner))] or ["memory-canvas"]
        for cid in ["util-canvas"] + mem:
            series = b.js("return document.getElementById(arguments[0]).getAttribute('data-series')", cid)
            ink = b.js(CANVAS_INK, cid)
            check(int(series) >= 1 and ink > 1000,
                  "%s: %s drawn (%s series, %d pixels of ink)" % (name, cid, series, ink))
        check(by_owner or b.js("return !document.getElementById('memory-owner-0')"),
              "%s: no stacked chart without the owners' series" % name)
        c.shot(name + "-charts", "charts")
        c.no_errors(name)
    memory_by_owner(c)


def memory_by_owner(c):
    """The stacked chart of a PyTorch training run (H200 recording): the owners kprof report
    --by memory gives as its legend, the peak marked, a click shows what was live then."""
    c.load("memory_torch_train")
    b = c.browser
    run = c.src("tests", "fixtures", "gpu", "memory_torch_train")
    out = subprocess.run([c.kprof, "report", run, "--by", "memory", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    peak = json.loads(out)["memory"]["peaks"][0]
    owners = [o["owner"] for o in peak["by_library"]]  # 6 owners: "other owners" holds nothing
    check(b.js("return document.querySelector('canvas.clickable') !== null && "
               "!document.getElementById('memory-canvas')"),
          "memory_torch_train: the stacked chart in place of the line chart")
    legend = b.js("return Array.from(document.getElementById('memory-owner-0').parentNode"
                  ".querySelectorAll('.legend span')).map(e => e.textContent)")
    check(legend == owners, "memory_torch_train: legend %s is kprof's owners %s" % (legend, owners))
    colors = b.js("return Array.from(document.getElementById('memory-owner-0').parentNode"
                  ".querySelectorAll('.legend span')).map(e => e.style.getPropertyValue('--c'))")
    check(len(set(colors)) == len(colors), "memory_torch_train: a color per owner %s" % colors)
    label = b.js("return document.getElementById('memory-owner-0').getAttribute('data-peak')")
    check(label == "peak 1.29 GiB at 8.725 s", "memory_torch_train: the peak marked (%r)" % label)
    check(peak["live_bytes"] == 1380473160, "memory_torch_train: kprof's peak")
    rows = b.js("return document.querySelectorAll('#memory-owner-0-peak tr').length")
    check(rows == 0, "memory_torch_train: no table before a click")
    b.click("#memory-owner-0")
    cells = b.js("return Array.from(document.querySelectorAll('#memory-owner-0-peak tbody tr'))"
                 ".map(r => Array.from(r.children).map(d => d.textContent))")
    want = [[o["owner"]] for o in peak["by_owner"][:5]]
    check([r[:1] for r in cells[:5]] == want and cells[0][1:] == ["582.0 MiB", "44.2%"],
          "memory_torch_train: a click shows the owners at the peak (%s)" % cells[:6])
    check(any(r[0] == "132.0 MiB" and r[2] == "aten::sum" for r in cells),
          "memory_torch_train: and the largest live allocations")
    c.shot("memory_torch_train-memory", "memory-owner-0")
    b.click("#memory-owner-0")
    check(b.js("return document.querySelectorAll('#memory-owner-0-peak tr').length") == 0,
          "memory_torch_train: a second click hides it")
    c.no_errors("memory_torch_train")


def test_counters(c):
    # PM sampling's tracks (5 metrics of device 0) and the replayed kernels' roofline
    # (docs/counters.md); a run without counters draws neither.
    for name, cid, want in (("counters-sampled", "counters-canvas", 5),
                            ("counters-replay", "roofline-canvas", 6)):
        c.load(name)
        b = c.browser
        series = b.js("var e = document.getElementById(arguments[0]);"
                      "return e ? e.getAttribute('data-series') : null", cid)
        ink = b.js(CANVAS_INK, cid) if series is not None else 0
        check(series is not None and int(series) >= want and ink > 1000,
              "%s: %s drawn (%s series or points, %d pixels of ink)" % (name, cid, series, ink))
        c.shot(name + "-charts", "charts")
        c.no_errors(name)
    c.load("default-run")
    none = c.browser.js("return !document.getElementById('counters-canvas') && "
                        "!document.getElementById('roofline-canvas') && "
                        "!document.getElementById('counters-unmeasured')")
    check(none, "default-run: no counter chart without counters")
    # A top kernel replay did not measure is listed with why (launch_patterns names: the last
    # of 24 queued names).
    c.load("counters-unmeasured")
    items = c.browser.js("var e = document.getElementById('counters-unmeasured');"
                         "return e ? Array.from(e.querySelectorAll('li')).map("
                         "function (li) { return li.textContent; }) : []")
    check(len(items) == 1 and "named_stream<23>" in items[0] and "--metrics-from RUN" in items[0],
          "counters-unmeasured: the kernel and why (%s)" % items)
    c.no_errors("counters-unmeasured")


def test_hostile(c):
    c.load("hostile")
    b = c.browser
    check(b.js("return document.querySelectorAll('img').length") == 0, "hostile: no <img> element")
    check(not b.alert_open(), "hostile: no alert")
    check(b.js("return window.__pwned === undefined"), "hostile: no injected script ran")
    check(b.js("return document.querySelectorAll('script').length") == 4,
              "hostile: only the page's own 4 scripts")
    b.click("#tab-kernel")
    names = b.js("return Array.from(document.querySelectorAll('#table-kernel tbody td.text'))"
                 ".map(e => e.textContent)")
    check(HOSTILE_KERNEL in names, "hostile: the kernel name shown as text")
    b.click("#tab-nvtx")
    text = b.js("return document.getElementById('table-nvtx').textContent")
    check(HOSTILE_RANGE in text, "hostile: the range name shown as text")
    timeline_checks(c, "hostile")
    c.shot("hostile-tables", "tables")
    c.no_errors("hostile")


def test_diff(c):
    c.load("diff")
    b = c.browser
    diff = c.src("tests", "fixtures", "gpu", "diff")
    r = subprocess.run([c.kprof, "diff", os.path.join(diff, "base"), os.path.join(diff, "slow10"),
                        "--format", "json"], capture_output=True, text=True)
    want = json.loads(r.stdout)
    got = b.js("return document.getElementById('diff-result').textContent")
    check(got.lower() == ("regression" if want["result"] == "regression" else "pass"),
          "diff: verdict %s" % got)
    for tid, key in (("run", "run"), ("ops", "ops"), ("kernels", "kernels")):
        rows = b.js("return Array.from(document.querySelectorAll('#table-%s tbody tr'))"
                    ".map(r => [r.children[0].textContent, r.querySelector('[class^=v-]').textContent])" % tid)
        exp = [[i["name"], i["verdict"]] for i in want[key]]
        check(sorted(rows) == sorted(exp), "diff: %s rows and verdicts match kprof diff --format json (%d)"
              % (tid, len(rows)))
    c.shot("diff", "verdict")
    c.no_errors("diff")


def test_large(c):
    size = os.path.getsize(c.page("gen1m"))
    check(size < 20e6, "1M kernels: page of %.1f MB (< 20 MB)" % (size / 1e6))
    walls, readys = [], []
    for _ in range(3):
        walls.append(c.load("gen1m"))
        readys.append(float(c.browser.js("return document.body.getAttribute('data-ready-ms')")))
    print("     1M kernels: load (navigation to page ready) %s ms; WebDriver open %s s" %
          (sorted(readys), ["%.2f" % w for w in sorted(walls)]))
    check(sorted(readys)[1] < 5000, "1M kernels: loads in under 5 s (median %.0f ms)" % sorted(readys)[1])
    note = c.browser.js("return document.getElementById('timeline-limits').textContent")
    check("of 1,000,000 kernels" in note and "density" in note, "1M kernels: the page says %r" % note[:90])
    timeline_checks(c, "gen1m")
    c.shot("gen1m-timeline", "timeline")
    c.shot("gen1m-hints", "hints")
    c.no_errors("gen1m")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("section")
    args = ap.parse_args()
    found = webdriver.find_browser()
    if not found:
        print("SKIP: chromium or chromedriver is not installed (apt-get install chromium "
              "chromium-driver)")
        return webdriver.SKIP
    c = Ctx(args)
    try:
        if args.section == "pages":
            make_pages(c)
            return 0
        c.browser = webdriver.Browser(*found)
        globals()["test_" + args.section](c)
    except Failure as e:
        print("FAIL " + str(e))
        if c.browser:
            try:
                c.shot("failed-" + args.section)
            except webdriver.WebDriverError:
                pass
        return 1
    finally:
        if c.browser:
            c.browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
