#!/usr/bin/env python3
"""The floor: what reading a question's rows from the export costs, one Python `sqlite3` scan per table.

Issue 35 measures every cold command against this: one scan of the columns a `summary` uses (kernels, runtime
calls, NVTX, copies, with `total()` of each column, so SQLite reads every value and Python gets one row per
table), run as a process of its own on the same export and machine, in the same run as the command it is
compared with (the machine's speed moves from day to day). Standard library only; the export is opened
read-only (`mode=ro&immutable=1`).

    python benchmarks/floor.py FILE                  # the summary floor: kernels, runtime, nvtx, copies
    python benchmarks/floor.py FILE --tables kernels # the `kernels` floor
    python benchmarks/floor.py FILE --tables metrics # one scan of the GPU metric samples

It prints one line: the seconds it took (from the interpreter's start), the rows and the tables read. As an
`ab.py` variant (`"floor=python benchmarks/floor.py FILE"`), ab.py's wall time of it is the floor.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path
from urllib.parse import quote

# nsys table -> the columns nsysql's loader reads from it for a summary (nsysql/loader/raw.py names them; the
# ones a table lacks are left out, as the loader reads them as NULL)
TABLES = {
    "kernels": (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName"),
    ),
    "runtime": ("CUPTI_ACTIVITY_KIND_RUNTIME", ("start", "end", "globalTid", "correlationId", "nameId")),
    "nvtx": (
        "NVTX_EVENTS",
        ("start", "end", "eventType", "text", "textId", "globalTid", "endGlobalTid", "domainId"),
    ),
    "copies": (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind"),
    ),
    "memset": (
        "CUPTI_ACTIVITY_KIND_MEMSET",
        ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes"),
    ),
    "metrics": ("GPU_METRICS", ("timestamp", "typeId", "metricId", "value")),
}
SUMMARY = ("kernels", "runtime", "nvtx", "copies")


def scan(con: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> int:
    """Rows of `table`, reading every value of the `columns` it has (total() of each; length() of text)."""
    have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
    if not have:
        return 0
    exprs = [f'total(length("{c}"))' if c == "text" else f'total("{c}")' for c in columns if c in have]
    return int(con.execute(f'SELECT count(*), {", ".join(exprs)} FROM "{table}"').fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--tables", default=",".join(SUMMARY), help=f"comma-separated, of {', '.join(TABLES)}")
    args = ap.parse_args(argv)
    names = [t.strip() for t in args.tables.split(",") if t.strip()]
    unknown = [t for t in names if t not in TABLES]
    if unknown:
        ap.error(f"unknown table {unknown[0]!r}: one of {', '.join(TABLES)}")
    con = sqlite3.connect(f"file:{quote(str(args.file.resolve()))}?mode=ro&immutable=1", uri=True)
    rows = {t: scan(con, *TABLES[t]) for t in names}
    con.close()
    # the interpreter's start-up counts too: the floor is a process, as the commands compared with it are
    elapsed = _since_start()
    print(f"floor {elapsed:.3f} s  rows {sum(rows.values()):,}  " + " ".join(f"{t}={n:,}" for t, n in rows.items()))
    return 0


def _since_start() -> float:
    """Seconds since this process started, where Linux says (/proc, 10 ms ticks), else since this module's import."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


_IMPORTED = time.perf_counter()

if __name__ == "__main__":
    sys.exit(main())
