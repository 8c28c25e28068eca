#!/usr/bin/env python3
"""How reading an export scales with reader threads: which layer stops scaling (SQLite, the ADBC driver, DuckDB).

    python benchmarks/read_scaling.py FILE [--threads 1,2,4,8,16] [--table CUPTI_ACTIVITY_KIND_RUNTIME]

For one large table, split into N rowid ranges read side by side by N threads, it times (wall seconds, best of
three):
  sqlite   SQLite alone: each thread sums the columns in SQL (one sqlite3 step per thread; no rows reach Python)
  adbc     SQLite + the ADBC driver: each thread drains its Arrow stream (nanoarrow builders, no DuckDB)
  duckdb   what nsysql does: DuckDB scans each thread's ADBC stream and appends to one in-memory table
and then nsysql's whole staging step (`raw.stage`) with N readers. Not used by the tests; BENCHMARKS.md quotes it.
"""

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from nsysql.loader import raw  # noqa: E402
from nsysql.loader.source import open_source  # noqa: E402

COLS = ["start", "end", "globalTid", "correlationId", "nameId"]


def drain(handle):
    """Read an Arrow C stream to its end without DuckDB: through pyarrow, or polars where pyarrow is missing."""
    try:
        import pyarrow as pa
    except ImportError:
        import polars as pl

        pl.DataFrame(handle)
        return
    for _ in pa.RecordBatchReader.from_stream(handle):
        pass


def timed(fn, parts):
    best = None
    for _ in range(3):
        threads = [threading.Thread(target=fn, args=p) for p in parts]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--table", default="CUPTI_ACTIVITY_KIND_RUNTIME")
    a = ap.parse_args()
    src = open_source(a.file)
    cols = [c for c in COLS if src.has(a.table, c)]
    sel = ", ".join(raw.q(c) for c in cols)
    rows = src.approx_rows(a.table)
    print(f"{a.file}: {a.table}, {rows} rows, columns {cols}; {os.cpu_count()} CPUs")
    print(f"{'threads':>7} {'sqlite':>8} {'adbc':>8} {'duckdb':>8} {'stage':>8}   (wall s, best of 3)")
    try:  # imported before the timed runs
        import pyarrow  # noqa: F401
    except ImportError:
        import polars  # noqa: F401
    for n in [int(x) for x in a.threads.split(",")]:
        parts = raw.rowid_ranges(src.scalar(f'SELECT min(rowid) FROM "{a.table}"'), rows, n)

        def lite(lo, hi):
            con = src.sqlite()
            con.execute(
                f"SELECT {' + '.join(f'total({raw.q(c)})' for c in cols)} "
                f'FROM "{a.table}" WHERE rowid BETWEEN {lo} AND {hi}'
            ).fetchall()
            con.close()

        def adbc(lo, hi):
            with src.stream(f'SELECT {sel} FROM "{a.table}" WHERE rowid BETWEEN {lo} AND {hi}') as h:
                drain(h)

        con = duckdb.connect()
        con.execute(f"CREATE TABLE t ({', '.join(f'{raw.q(c)} BIGINT' for c in cols)})")

        def duck(lo, hi):
            cur = con.cursor()
            with src.stream(f'SELECT {sel} FROM "{a.table}" WHERE rowid BETWEEN {lo} AND {hi}') as h:
                cur.register("_r", h)
                cur.execute("INSERT INTO t SELECT * FROM _r")
                cur.unregister("_r")
            cur.close()

        t_lite = timed(lite, parts)
        t_adbc = timed(adbc, parts)
        t_duck = timed(duck, parts)
        con.close()
        best = None
        for _ in range(3):
            c = duckdb.connect()
            t0 = time.perf_counter()
            raw.stage(src, c, workers=n)
            dt = time.perf_counter() - t0
            c.close()
            best = dt if best is None else min(best, dt)
        print(f"{n:7d} {t_lite:8.3f} {t_adbc:8.3f} {t_duck:8.3f} {best:8.3f}", flush=True)


if __name__ == "__main__":
    main()
