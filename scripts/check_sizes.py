#!/usr/bin/env python3
"""Source sizes (issue 31): no file in src/ over 600 lines, no function over 150.

Usage: scripts/check_sizes.py [--max-file N] [--max-function N] [--list] DIR...
Prints each file and function over its limit (path:line, lines, name) and exits 1 if any, 0 if
none; --list prints the 15 longest functions whatever their length.

A function is a top-level brace block (not inside another function) whose opening brace follows
a closing parenthesis, as C++ function bodies do (lambdas and control blocks inside it count as
its lines). Comments, string and character literals are blanked first, so braces inside them do
not count; class, namespace, struct and enum bodies are not functions, their member functions
are.
"""
import argparse
import os
import re
import sys

SOURCE = (".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh")


def blank(text):
    """Comments and literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i)
                j = n if end < 0 else end + len(m.group(1)) + 2
                out.append(re.sub(r"[^\n]", " ", text[i:j]))
                i = j
            else:
                out.append(c)
                i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


QUALIFIERS = re.compile(r"\)((\s|const|noexcept|override|final|mutable|volatile|&)*)"
                        r"(->\s*[\w:<>,\s\*&]+)?\s*$")
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype"}


def opening(text, close):
    """The index of the '(' that matches the ')' at `close`, or -1."""
    depth = 0
    for j in range(close, -1, -1):
        if text[j] == ")":
            depth += 1
        elif text[j] == "(":
            depth -= 1
            if depth == 0:
                return j
    return -1


def function_name(text, brace):
    """The name of the function whose body opens at `brace`, or None when it opens no function
    (a control block, a lambda, a class, an initializer)."""
    head = text[max(0, brace - 2000):brace]
    # A constructor's initializer list: ") : a_(x), b_{y} {" -> ")".
    while True:
        m = re.search(r"[,:]\s*[\w:]+\s*(\([^()]*\)|\{[^{}]*\})\s*$", head)
        if not m or not re.search(r"\)\s*:\s*[\w:]+\s*(\([^()]*\)|\{[^{}]*\})", head[:m.end()]):
            break
        head = head[:m.start()]
        if head.rstrip().endswith(")"):
            break
    m = QUALIFIERS.search(head)
    if not m:
        return None
    close = m.start()
    start = opening(head, close)
    if start < 0:
        return None
    before = head[:start].rstrip()
    if before.endswith("]"):
        return None  # a lambda
    w = re.search(r"([~\w:]+)\s*$", before)
    if not w or w.group(1) in KEYWORDS:
        return None
    return w.group(1)


def functions(path):
    """(first line, lines, name) of each function body."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # (line, is function, name)
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            inside = any(st[1] for st in stack)
            name = None if inside else function_name(text, i)
            stack.append((line, name is not None, name or ""))
        elif c == "}" and stack:
            start, is_fn, name = stack.pop()
            if is_fn:
                found.append((start, line - start + 1, name))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("--max-function", type=int, default=150)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    bad, everything = [], []
    for d in a.dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith(SOURCE):
                    continue
                p = os.path.join(root, f)
                n = sum(1 for _ in open(p, encoding="utf-8", errors="replace"))
                if n > a.max_file:
                    bad.append(f"{p}: {n} lines (file limit {a.max_file})")
                for start, length, name in functions(p):
                    everything.append((length, f"{p}:{start}", name))
                    if length > a.max_function:
                        bad.append(f"{p}:{start}: {name}: {length} lines (function limit "
                                   f"{a.max_function})")
    if a.list:
        for length, where, name in sorted(everything, reverse=True)[:15]:
            print(f"{length:5d} {where} {name}")
    for b in bad:
        print(b)
    if not bad:
        print(f"source sizes: no file over {a.max_file} lines, no function over "
              f"{a.max_function} ({len(everything)} functions)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
