#!/usr/bin/env python3
"""Every writer, on names hostile to its format, checked by a real parser of that format.

  hostile_outputs.py BUILD_DIR FORMAT   FORMAT: csv json md table junit chrome html sqlite

kprof_gen_hostile writes a run whose kernel and NVTX range names hold quotes, backslashes,
newlines, control characters, invalid UTF-8, `</script>`, `]]>`, pipes, commas, SQL and a 1 MB
name. The output of kprof in FORMAT is parsed by Python's csv / json / xml.etree / html.parser /
sqlite3, or by GitHub's Markdown parser (cmark-gfm, tables extension), and each name must come
back as the writer's documented form of it: exactly (after invalid bytes become U+FFFD) where the
format can hold any text, byte for byte in SQLite, as kprof's display text (one line, control
characters as escapes) in the table and Markdown. Exit 0 ok, 1 failure, 77 skip (no cmark-gfm
for md, no sqlite3 module for sqlite)."""
import csv
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from pycheck import Failure, check  # noqa: E402


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
            start = next(i for i, l in enumerate(lines)
                         if l.startswith("GPU time by kernel (Share: of GPU busy time")) + 2
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
        elif fmt == "html":
            check_html(build, tmp, names, exact)
        elif fmt == "sqlite":
            try:
                import sqlite3
            except ImportError:
                print("skip: python3 has no sqlite3 module")
                return 77
            check_sqlite(sqlite3, build, run, out + ".sqlite", names)
        else:
            raise Failure("unknown format " + fmt)
        return 0
    except (Failure, subprocess.CalledProcessError, ValueError, KeyError, IndexError,
            ET.ParseError) as e:
        print("FAIL %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# kprof's documented form of the generator's invalid UTF-8 name: one U+FFFD per invalid byte
# (include/kprof/utf8.h), written out here rather than trusting Python's decoder alone.
BAD_UTF8 = "bad \ufffd\ufffd utf8 \ufffd( overlong \ufffd\ufffd end"

# A run file name that is itself hostile: it becomes the page's <title> and <h1> (HtmlEscape).
HOSTILE_FILE = "run <img src=x onerror=alert(1)> \"q\" 'a' &amp; <title>.kprof"


def check_html(build, tmp, names, exact):
    """The page parsed by html.parser: the template's elements and nothing else, the data script
    read by json, every name in it exactly; the title HTML-escaped."""
    run = os.path.join(tmp, HOSTILE_FILE)
    shutil.copyfile(os.path.join(tmp, "hostile.kprof"), run)
    page_path = os.path.join(tmp, "out.html")
    kprof(build, "report", run, "--html", page_path)
    with open(page_path, encoding="utf-8") as f:  # strict UTF-8
        page = f.read()
    got = Page()
    got.feed(page)
    got.close()
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src",
                       "output", "html", "report.html")
    with open(src, encoding="utf-8") as f:
        template = Page()
        template.feed(f.read())
        template.close()
    check(got.tags == template.tags,
          "html: the page has exactly the template's %d elements and attributes" %
          len(template.tags))
    check(not any(t == "img" or any(a[0].startswith("on") for a in attrs)
                  for t, attrs in got.tags), "html: no <img>, no on* attribute")
    data_attrs = [("type", "application/json"), ("id", "kprof-data")]
    check(len(got.scripts) == 4 and [a for a, _ in got.scripts].count(data_attrs) == 1 and
          got.scripts[1][0] == data_attrs, "html: four <script> elements, the second the data")
    check([a for a, _ in got.scripts] == [a for a, _ in template.scripts],
          "html: the scripts are the template's")
    data = got.scripts[1][1]
    check(not any(c in data for c in "<>&\u2028\u2029"),
          "html: no < > & U+2028 U+2029 in the data script (\\u escapes)")
    doc = json.loads(data)
    tables = {t["id"]: t for t in doc["tables"]}
    check(sorted(r[0] for r in tables["kernel"]["rows"]) == exact,
          "html: the kernel table's names come back exactly (the 1 MB one whole)")
    check(sorted(r[0] for r in tables["nvtx"]["rows"]) == exact,
          "html: the NVTX range table's names come back exactly")
    check(set(exact) <= set(doc["timeline"]["names"]),
          "html: the timeline's names hold every name exactly")
    check(BAD_UTF8 in exact and BAD_UTF8 in doc["timeline"]["names"],
          "html: invalid UTF-8 as one U+FFFD per invalid byte")
    want_title = "kprof report: " + run
    check(got.text("title") == [want_title] and got.text("h1") == [want_title],
          "html: the hostile file name is the <title> and <h1> text, escaped")
    check(doc["title"] == want_title, "html: and the data's title, exactly")


class Page(html.parser.HTMLParser):
    """Every start tag with its attributes in order, every script's attributes and text, and the
    text of each element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.scripts, self.open, self.texts = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "script":
            self.scripts.append((attrs, ""))
        if tag not in ("meta", "link", "br", "img", "input", "hr"):  # void: no end tag
            self.open.append(tag)
            self.texts.append((tag, []))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag + "/", attrs))

    def handle_endtag(self, tag):
        if self.open and self.open[-1] == tag:
            self.open.pop()

    def handle_data(self, data):
        if self.open and self.open[-1] == "script":
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        if self.open:
            for t, parts in reversed(self.texts):
                if t == self.open[-1]:
                    parts.append(data)
                    break

    def text(self, tag):
        return ["".join(parts) for t, parts in self.texts if t == tag]


def check_sqlite(sqlite3, build, run, path, names):
    """The database opened by sqlite3: intact, every table there, each name stored as its exact
    bytes (invalid UTF-8 included: docs/sqlite.md) wherever names are stored, none run as SQL."""
    kprof(build, "export", run, "--sqlite", path)
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    db.text_factory = bytes  # the stored bytes, not Python's decoding of them
    raw = sorted(names)

    def q(sql, *args):
        return db.execute(sql, args).fetchall()

    def column(sql):
        return sorted(v for (v,) in q(sql))

    # A bytes parameter binds as a BLOB, which never equals TEXT: CAST(? AS TEXT) keeps its bytes.
    def string_ids(name):
        return q("SELECT COUNT(*) FROM StringIds WHERE value = CAST(? AS TEXT)", name)[0][0]

    check(q("PRAGMA integrity_check") == [(b"ok",)], "sqlite: PRAGMA integrity_check is ok")
    tables = {v.decode() for v in column("SELECT name FROM sqlite_master WHERE type = 'table'")}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                           "src", "output", "sqlite_schema.cpp"), encoding="utf-8") as f:
        schema = set(re.findall(r"CREATE TABLE (\w+)", f.read()))
    check(len(schema) > 20 and tables == schema,
          "sqlite: exactly the schema's %d tables, StringIds included" % len(schema))
    check(all(string_ids(n) == 1 for n in names),
          "sqlite: StringIds holds each name's exact bytes once (found by a bound parameter)")
    check(q("SELECT COUNT(*) FROM StringIds WHERE typeof(value) <> 'text'") == [(0,)],
          "sqlite: every StringIds value is TEXT")
    kernel = "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k."
    check(column(kernel + "demangledName") == raw,
          "sqlite: CUPTI_ACTIVITY_KIND_KERNEL.demangledName, exact")
    check(column(kernel + "mangledName") == raw,
          "sqlite: CUPTI_ACTIVITY_KIND_KERNEL.mangledName, exact")
    check(column("SELECT text FROM NVTX_EVENTS WHERE eventType = 59") == raw,
          "sqlite: NVTX_EVENTS.text, exact")
    check(column("SELECT name FROM KPROF_KERNELS") == raw, "sqlite: KPROF_KERNELS.name, exact")
    check(q("SELECT COUNT(*) FROM KPROF_KERNELS k JOIN StringIds s ON s.id = k.nameId "
            "WHERE s.value = k.name") == [(len(names),)],
          "sqlite: KPROF_KERNELS.nameId is the StringIds id of its name")
    check(column("SELECT name FROM KPROF_RANGES") == raw, "sqlite: KPROF_RANGES.name, exact")
    sql = [n for n in names if b"DROP TABLE" in n]
    check(len(sql) == 1 and string_ids(sql[0]) == 1 and "StringIds" in tables,
          "sqlite: the SQL name is text and StringIds still exists")
    db.close()


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
