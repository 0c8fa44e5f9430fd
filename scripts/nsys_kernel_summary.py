#!/usr/bin/env python3
"""The kernel summary an Nsight Systems user runs on an nsys SQLite export: total, count and
average GPU time per kernel name (CUPTI_ACTIVITY_KIND_KERNEL joined with StringIds). Runs
unchanged on nsys's own export and on `kprof export --sqlite` (docs/sqlite.md).

usage: nsys_kernel_summary.py DB [--schema]
"""
import sqlite3
import sys

QUERY = """
SELECT s.value AS name, SUM(k."end" - k.start) AS total_ns, COUNT(*) AS calls,
       AVG(k."end" - k.start) AS avg_ns
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.demangledName
GROUP BY name ORDER BY total_ns DESC
"""


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    db = sqlite3.connect(sys.argv[1])
    if "--schema" in sys.argv[2:]:
        for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            print(sql)
        return
    print("total_ns\tcalls\tavg_ns\tname")
    for name, total, calls, avg in db.execute(QUERY):
        print(f"{total}\t{calls}\t{avg:.1f}\t{name}")


if __name__ == "__main__":
    main()
