#!/usr/bin/env python3
"""The bound: the least any design built on nsysql's readers can cost, as a process, for one cold question.

It imports DuckDB and ADBC's SQLite driver (what nsysql reads with), reads the same columns as `floor.py` (one
ADBC Arrow stream per table, each on a thread of its own, scanned by DuckDB into an in-memory table: nsysql's
fast reader without its staging types, canonical tables, cache entry or rendering), then answers the question
in one query and fetches its rows:

    python benchmarks/bound.py FILE                      # read the summary's tables, nothing more
    python benchmarks/bound.py FILE --question kernels   # read the kernels, answer `kernels` (name, count,
                                                         # total, mean, min, max, median per name)

It prints one line like floor.py's: the seconds since the interpreter started, the rows read, and the seconds
the imports took within them. Issue 35 states its cold targets as multiples of the floor (`floor.py`); run this
in the same `ab.py` run to see how much of a target is left once a process has imported its libraries and read
the rows (`"bound=python benchmarks/bound.py FILE --question kernels"`). `readers.py` says how much of the read is
the reader's. Not used by the tests.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from floor import SUMMARY, TABLES, _since_start  # noqa: E402

# the tables each question reads, and the query that answers it from them
QUESTIONS = {
    "scan": (SUMMARY, None),
    "kernels": (
        ("kernels",),
        'SELECT coalesce("demangledName", "shortName") AS name, count(*) AS n, sum("end" - "start") AS total_ns, '
        'avg("end" - "start") AS mean_ns, min("end" - "start") AS min_ns, max("end" - "start") AS max_ns, '
        'median("end" - "start") AS median_ns FROM kernels GROUP BY ALL ORDER BY total_ns DESC',
    ),
}


def read(con, uri: str, name: str, table: str, columns: tuple[str, ...], errors: list) -> None:
    """`table`'s `columns` (those it has) into DuckDB table `name`, through one ADBC Arrow stream."""
    import adbc_driver_manager
    import adbc_driver_sqlite

    cur = con.cursor()
    try:
        db = adbc_driver_sqlite.connect(uri)
        acon = adbc_driver_manager.AdbcConnection(db)
        stmt = adbc_driver_manager.AdbcStatement(acon)
        try:
            stmt.set_sql_query(f'SELECT * FROM pragma_table_info("{table}")')
            handle, _ = stmt.execute_query()
            cur.register("_info", handle)
            have = {r[0] for r in cur.execute("SELECT name FROM _info").fetchall()}
            cur.unregister("_info")
            cols = [c for c in columns if c in have]
            if not cols:
                return
            stmt.set_sql_query(f'SELECT {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}"')
            handle, _ = stmt.execute_query()
            cur.register("_reader", handle)
            cur.execute(f"CREATE TABLE {name} AS SELECT * FROM _reader")
            cur.unregister("_reader")
        finally:
            stmt.close()
            acon.close()
            db.close()
    except Exception as e:  # noqa: BLE001 - said by main, on its own thread
        errors.append(e)
    finally:
        cur.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--question", choices=sorted(QUESTIONS), default="scan")
    args = ap.parse_args(argv)
    import adbc_driver_manager  # noqa: F401 - imported here, not in each reader thread at once
    import adbc_driver_sqlite  # noqa: F401
    import duckdb

    imported = _since_start()
    tables, sql = QUESTIONS[args.question]
    uri = f"file:{quote(str(args.file.resolve()))}?mode=ro&immutable=1"
    con = duckdb.connect(":memory:")
    errors: list = []
    threads = [threading.Thread(target=read, args=(con, uri, t, *TABLES[t], errors)) for t in tables]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    have = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    rows = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables if t in have)
    answer = len(con.execute(sql).fetchall()) if sql and tables[0] in have else 0
    con.close()
    print(f"bound {_since_start():.3f} s  rows {rows:,}  answer rows {answer:,}  imports {imported:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
