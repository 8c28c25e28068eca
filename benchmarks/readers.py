#!/usr/bin/env python3
"""What each way of reading SQLite costs: the same columns of the same tables, read by each reader at hand.

`bound.py` says what a cold question costs on nsysql's own reader (ADBC's SQLite driver, scanned by DuckDB).
This says how much of that is the reader's: it reads the columns `floor.py` names for each table given, in this
process, once per reader and round, and prints the best round's CPU and wall seconds per reader (imports
excluded: every reader's modules are imported before the first round):

    python benchmarks/readers.py FILE                     # the summary's tables (kernels, runtime, nvtx, copies)
    python benchmarks/readers.py FILE --tables kernels --rounds 5

Readers:
  sqlite-scan    Python's sqlite3, `total()` of each column: SQLite reads every value, nothing is kept (the floor's
                 work, without the process around it)
  sqlite-rows    Python's sqlite3, every row fetched as Python objects
  adbc-arrow     ADBC's SQLite driver, every row into an Arrow table
  adbc-duckdb    ADBC's SQLite driver's Arrow stream scanned by DuckDB into a table (nsysql's reader)
  duckdb-sqlite  DuckDB's own sqlite extension into a table, where it is already installed for the running DuckDB
                 (it is never downloaded here: autoinstall is off); otherwise the line says why it was not run

The export is opened read-only by every reader. Not used by the tests but for a smoke test of its row counts.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from floor import SUMMARY, TABLES  # noqa: E402


def _columns(con: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> list[str]:
    have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
    return [c for c in columns if c in have]


def _select(table: str, cols: list[str]) -> str:
    return f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}"'


def sqlite_scan(uri: str, table: str, cols: list[str]) -> int:
    exprs = [f'total(length("{c}"))' if c == "text" else f'total("{c}")' for c in cols]
    with sqlite3.connect(uri, uri=True) as con:
        return int(con.execute(f'SELECT count(*), {", ".join(exprs)} FROM "{table}"').fetchone()[0])


def sqlite_rows(uri: str, table: str, cols: list[str]) -> int:
    with sqlite3.connect(uri, uri=True) as con:
        return len(con.execute(_select(table, cols)).fetchall())


def adbc_arrow(uri: str, table: str, cols: list[str]) -> int:
    import adbc_driver_sqlite.dbapi

    with adbc_driver_sqlite.dbapi.connect(uri) as con, con.cursor() as cur:
        cur.execute(_select(table, cols))
        return cur.fetch_arrow_table().num_rows


def adbc_duckdb(uri: str, table: str, cols: list[str]) -> int:
    import adbc_driver_sqlite.dbapi
    import duckdb

    with adbc_driver_sqlite.dbapi.connect(uri) as con, con.cursor() as cur, duckdb.connect() as db:
        cur.execute(_select(table, cols))
        db.register("_reader", cur.fetch_record_batch())
        db.execute("CREATE TABLE t AS SELECT * FROM _reader")
        return db.execute("SELECT count(*) FROM t").fetchone()[0]


def _scanner(db) -> str | None:
    """Why DuckDB's sqlite extension cannot be loaded here without a download, or None once it is loaded."""
    db.execute("SET autoinstall_known_extensions = false")
    db.execute("SET autoload_known_extensions = false")
    try:
        db.execute("LOAD sqlite_scanner")
    except Exception as e:  # noqa: BLE001 - the reason is printed
        return str(e).splitlines()[0][:120]
    return None


def duckdb_sqlite(path: str, table: str, cols: list[str], _db: list = []) -> int:  # noqa: B006 - one database
    """The extension is loaded once, into one database kept across rounds, as the driver's library is for ADBC:
    a process pays loading it once, which no reader's figure includes."""
    import duckdb

    if not _db:
        _db.append(duckdb.connect())
        _scanner(_db[0])
        _db[0].execute(f"ATTACH '{path.replace(chr(39), chr(39) * 2)}' AS s (TYPE sqlite, READ_ONLY)")
    db = _db[0]
    db.execute(f"CREATE OR REPLACE TABLE t AS {_select(table, cols).replace('FROM ' + chr(34), 'FROM s.' + chr(34))}")
    return db.execute("SELECT count(*) FROM t").fetchone()[0]


READERS = {
    "sqlite-scan": sqlite_scan,
    "sqlite-rows": sqlite_rows,
    "adbc-arrow": adbc_arrow,
    "adbc-duckdb": adbc_duckdb,
    "duckdb-sqlite": duckdb_sqlite,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--tables", nargs="+", choices=sorted(TABLES), default=list(SUMMARY))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import duckdb

    try:  # imported before the first round, as every reader's modules
        import adbc_driver_sqlite.dbapi  # noqa: F401
    except ImportError as e:
        missing = str(e)
    else:
        missing = None

    uri = f"file:{quote(str(args.file.resolve()))}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as con:
        jobs = [(TABLES[t][0], _columns(con, *TABLES[t])) for t in args.tables]
    jobs = [(t, c) for t, c in jobs if c]
    with duckdb.connect() as db:
        why_not = _scanner(db)
    print(
        f"{'reader':14} {'cpu s':>7} {'wall s':>7} {'rows':>12}   (best of {args.rounds}; DuckDB {duckdb.__version__})"
    )
    for name, read in READERS.items():
        if name == "duckdb-sqlite" and why_not:
            print(
                f"{name:14} not run: DuckDB's sqlite extension is not installed for DuckDB {duckdb.__version__} "
                f"({why_not})"
            )
            continue
        if name.startswith("adbc") and missing:
            print(f"{name:14} not run: {missing}")
            continue
        best = None
        for _ in range(args.rounds):
            w, c = time.perf_counter(), time.process_time()
            rows = sum(read(str(args.file.resolve()) if name == "duckdb-sqlite" else uri, t, cols) for t, cols in jobs)
            took = (time.process_time() - c, time.perf_counter() - w)
            best = min(best or took, took)
        print(f"{name:14} {best[0]:7.3f} {best[1]:7.3f} {rows:12,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
