#!/usr/bin/env python3
"""Every writer, on names hostile to its format, checked by a real parser of that format.

  hostile_outputs.py BUILD_DIR FORMAT      FORMAT: csv json md table junit chrome

kprof_gen_hostile writes a run whose kernel and NVTX range names hold quotes, backslashes,
newlines, control characters, invalid UTF-8, `</script>`, `]]>`, pipes, commas and a 1 MB name.
The output of kprof in FORMAT is parsed by Python's csv / json / xml.etree, or by GitHub's
Markdown parser (cmark-gfm, tables extension), and each name must come back as the writer's
documented form of it: exactly (after invalid bytes become U+FFFD) where the format can hold any
text, as kprof's display text (one line, control characters as escapes) in the table and
Markdown. Exit 0 ok, 1 failure, 77 skip (no cmark-gfm for md)."""
import csv
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def valid(b):
    """kprof's ValidUtf8: every invalid byte becomes one U+FFFD (Python's 'replace' agrees)."""
    return b.decode("utf-8", errors="replace")


def display(b):
    """kprof's DisplayText."""
    out = []
    for ch in valid(b):
        cp = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif cp < 0x20 or 0x7F <= cp <= 0x9F:
            out.append("\\x%02x" % cp)
        elif cp in (0x2028, 0x2029):
            out.append("\\u%04x" % cp)
        else:
            out.append(ch)
    return "".join(out)


def fit(s, width):
    return s if len(s) <= width else s[: width - 1] + "\u2026"


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print("ok   " + what)


def kprof(build, *args):
    r = subprocess.run([os.path.join(build, "kprof"), *args], capture_output=True)
    if r.returncode != 0:
        raise Failure("kprof %s: exit %d: %s" % (" ".join(args)[:200], r.returncode,
                                                  r.stderr[:500]))
    return r.stdout


def main():
    build, fmt = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="kprof-hostile-")
    try:
        run = os.path.join(tmp, "hostile.kprof")
        gen = subprocess.run([os.path.join(build, "tests", "kprof_gen_hostile"), run],
                             capture_output=True, check=True, text=True)
        names = [s.encode("latin-1") for s in json.loads(gen.stdout)]
        exact = sorted(valid(n) for n in names)
        out = os.path.join(tmp, "out")
        if fmt == "csv":
            csv.field_size_limit(1 << 30)  # the 1 MB name is one field
            for by in ("kernel", "op"):
                kprof(build, "report", run, "--format", "csv", "--by", by, "-o", out, "--force")
                with open(out, encoding="utf-8", newline="") as f:  # strict UTF-8
                    rows = list(csv.reader(f, strict=True))
                check(all(len(r) == len(rows[0]) for r in rows),
                      "csv --by %s: every row has the header's %d fields" % (by, len(rows[0])))
                check(sorted(r[0] for r in rows[1:]) == exact,
                      "csv --by %s: the %d names come back exactly" % (by, len(names)))
        elif fmt == "json":
            doc = json.loads(kprof(build, "report", run, "--format", "json", "--by", "kernel"))
            check(sorted(k["name"] for k in doc["kernels"]) == exact,
                  "json: the kernel names come back exactly")
            check(sorted(r["name"] for r in doc["ranges"]) == exact,
                  "json: the range names come back exactly")
        elif fmt == "md":
            cmark = shutil.which("cmark-gfm")
            if not cmark:
                print("skip: cmark-gfm is not installed")
                return 77
            kprof(build, "report", run, "--format", "md", "--by", "kernel", "-o", out)
            page = subprocess.run([cmark, "-e", "table", out], capture_output=True, check=True,
                                  text=True).stdout
            tables = Tables()
            tables.feed(page)
            kt = [t for t in tables.tables if t and t[0] and t[0][0] == "kernel"]
            check(len(kt) == 1, "md: one kernel table after GitHub's parser")
            body = kt[0][1:]
            check(all(len(r) == len(kt[0][0]) for r in body),
                  "md: every row has the header's %d cells" % len(kt[0][0]))
            check(sorted(r[0] for r in body) == sorted(fit(display(n), 80) for n in names),
                  "md: each cell reads as the name's display text")
        elif fmt == "table":
            text = kprof(build, "report", run, "--by", "kernel").decode("utf-8")  # strict
            lines = text.split("\n")
            start = lines.index("GPU time by kernel") + 2
            rows = lines[start:start + len(names)]
            check(all(r.startswith("  ") and r.rstrip().endswith("%") for r in rows),
                  "table: one line per kernel, each ending in its share")
            check(not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029"
                          for c in text if c != "\n"),
                  "table: no control character reaches the terminal")
            want = sorted(fit(display(n), 60) for n in names)
            check(sorted(r[2:].split("  ")[0].rstrip() for r in rows) ==
                  sorted(w.rstrip() for w in want), "table: each name as its display text")
        elif fmt == "junit":
            kprof(build, "diff", run, run, "--format", "junit", "-o", out)
            root = ET.parse(out).getroot()  # a real XML parser: fails on invalid characters
            names_in = {tc.get("name") for tc in root.iter("testcase")}
            text = ET.tostring(root, encoding="unicode")
            check(len(names_in) > 0, "junit: parsed, %d test cases" % len(names_in))
            check("</script>" in text or "&lt;/script&gt;" in text or "</script>" in str(names_in),
                  "junit: the hostile names are kept as text")
        elif fmt == "chrome":
            kprof(build, "report", run, "--trace", out + ".json", "--by", "kernel")
            with open(out + ".json", encoding="utf-8") as f:
                doc = json.load(f)
            ev = doc["traceEvents"] if isinstance(doc, dict) else doc
            kernels = sorted(e["name"] for e in ev if e.get("ph") == "X" and
                             e.get("cat") == "kernel")
            check(kernels == exact, "chrome: the kernel names come back exactly")
        else:
            raise Failure("unknown format " + fmt)
        return 0
    except (Failure, subprocess.CalledProcessError, ValueError, KeyError, ET.ParseError) as e:
        print("FAIL %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Tables(html.parser.HTMLParser):
    """The cells of each <table> (header and body rows), as text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


if __name__ == "__main__":
    sys.exit(main())
