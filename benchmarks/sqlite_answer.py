#!/usr/bin/env python3
"""A cold `kernels` answered by SQLite itself: the design that reads no row out of the export.

`bound.py --question kernels` is the least a design on nsysql's readers costs (the rows read into DuckDB, then
one query). This is the other design issue 35 points at, "answer a cold question from SQLite aggregates, as the
floor does": the same answer (name, count, total, mean, min, max and median of the durations per kernel name)
computed inside SQLite by Python's sqlite3, as a process, nothing else imported:

    python benchmarks/sqlite_answer.py FILE              # with the median (SQLite has none: a window sorts)
    python benchmarks/sqlite_answer.py FILE --no-median  # count, total, mean, min, max: one GROUP BY
    python benchmarks/sqlite_answer.py FILE --rows       # and the answer, a row a line

It prints one line like floor.py's: the seconds since the interpreter started and the rows of the answer. Run it
in the same `ab.py` run as floor.py and bound.py. Not used by the tests but for a smoke test of its answer.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from floor import _since_start  # noqa: E402

_DURATION = '"end" - "start"'
_NAME = 'coalesce("demangledName", "shortName")'
AGGREGATES = (
    f"SELECT {_NAME} AS name, count(*) AS n, sum({_DURATION}) AS total_ns, avg({_DURATION}) AS mean_ns, "
    f"min({_DURATION}) AS min_ns, max({_DURATION}) AS max_ns FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1"
)
# the median as nsys stats takes it: the middle duration, or the mean of the two middle ones
WITH_MEDIAN = f"""
WITH ranked AS (
  SELECT {_NAME} AS name, {_DURATION} AS d,
         row_number() OVER (PARTITION BY {_NAME} ORDER BY {_DURATION}) AS r,
         count(*) OVER (PARTITION BY {_NAME}) AS n
  FROM CUPTI_ACTIVITY_KIND_KERNEL
)
SELECT name, n, sum(d) AS total_ns, avg(d) AS mean_ns, min(d) AS min_ns, max(d) AS max_ns,
       avg(CASE WHEN r IN ((n + 1) / 2, (n + 2) / 2) THEN d END) AS median_ns
FROM ranked GROUP BY name, n
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--no-median", action="store_true", help="aggregates only: count, total, mean, min, max")
    ap.add_argument("--rows", action="store_true", help="also print the answer, one tab-separated row a line")
    args = ap.parse_args(argv)
    uri = f"file:{quote(str(args.file.resolve()))}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as con:
        rows = con.execute(AGGREGATES if args.no_median else WITH_MEDIAN).fetchall()
        # the names: ids into StringIds since nsys 2021 (the text itself before), looked up for the answer's rows
        ids = [r[0] for r in rows if isinstance(r[0], int)]
        names = dict(con.execute(f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(ids))})", ids))
    rows = [(names.get(r[0], r[0]), *r[1:]) for r in rows]
    rows.sort(key=lambda r: -r[2])
    print(f"sqlite_answer {_since_start():.3f} s  answer rows {len(rows):,}")
    for r in rows if args.rows else ():
        print("\t".join(str(v) for v in r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
