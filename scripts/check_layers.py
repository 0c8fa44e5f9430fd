#!/usr/bin/env python3
"""Layering (docs/architecture.md): which folder of src/ may include which header.

Usage: scripts/check_layers.py [ROOT]
Each public header (include/kprof/*.h) belongs to one layer; each layer may include its own
headers and those of the layers below it, never those above:

    agent -> format <- analysis <- output <- cli

Internal headers (src/LAYER/...) may be included by their own folder only. Prints each include
that breaks the rule (file:line, what, why) and exits 1 if any, 0 if none.
"""
import os
import re
import sys

LAYER_OF_HEADER = {
    "record.h": "format", "trace.h": "format", "agent_config.h": "format", "self_cost.h": "format", "metrics.h": "format",
    "progress.h": "format", "utf8.h": "format", "on_demand.h": "format", "op_abi.h": "format",
    "analysis.h": "analysis", "timeline.h": "analysis", "hints.h": "analysis",
    "compare.h": "analysis", "counters.h": "analysis", "distributed.h": "analysis", "memory.h": "analysis",
    "output.h": "output", "output_file.h": "output", "html.h": "output",
    "sqlite_export.h": "output", "summary_json.h": "output",
    "cli.h": "cli",
}
# What each folder of src/ may include, besides its own internal headers.
MAY_INCLUDE = {
    "agent": {"format"},
    "format": {"format"},
    "analysis": {"format", "analysis"},
    "output": {"format", "analysis", "output"},
    "cli": {"format", "analysis", "output", "cli"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    headers = set(os.listdir(os.path.join(root, "include", "kprof")))
    bad = []
    unknown = sorted(h for h in headers if h.endswith(".h") and h not in LAYER_OF_HEADER)
    for h in unknown:
        bad.append(f"include/kprof/{h}: no layer (add it to scripts/check_layers.py)")
    for layer in sorted(MAY_INCLUDE):
        for dirpath, _, files in os.walk(os.path.join(src, layer)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc.startswith("kprof/"):
                        owner = LAYER_OF_HEADER.get(inc[len("kprof/"):])
                        if owner is not None and owner not in MAY_INCLUDE[layer]:
                            bad.append(f"{rel}:{n}: {inc} is the {owner} layer's; {layer} may "
                                       f"include {', '.join(sorted(MAY_INCLUDE[layer]))}")
                    elif "/" in inc:
                        folder = inc.split("/")[0]
                        if folder in MAY_INCLUDE and folder != layer:
                            bad.append(f"{rel}:{n}: {inc} is internal to src/{folder}/")
    for b in bad:
        print(b)
    if not bad:
        print("layers: every include of src/ follows agent -> format <- analysis <- output <- cli")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
