#!/usr/bin/env python3
"""When each part of one cold command ran: every reader's stream, the staging, each canonical SQL file and each
analysis query, with its start, end and thread, printed to stderr in start order.

    python benchmarks/timeline.py [nsysql options] COMMAND FILE [command options] > /dev/null
    e.g. python benchmarks/timeline.py --cache-dir /tmp/c stats -r kernels,iterations /tmp/bench/big_500k.sqlite

Seconds count from this script's start (after the interpreter's). Where phases.py sums a command into phases,
this shows which chain of files and queries sets its wall time on a machine of many cores (the GPU machine):
what waits for what. Runs the CLI in this process, wrapping the loader's cursors, the analyses' queries and the
readers' streams. Unlike a plain run it imports the analyses' query module (and polars) before the load, to
wrap it: time whole commands with bench.py or ab.py.
"""

import contextlib
import sys
import threading
import time

T0, C0 = time.perf_counter(), time.process_time()
events = []


def add(start: float, tag: str) -> None:
    events.append((start - T0, time.perf_counter() - T0, threading.current_thread().name[:14], tag))


import nsysql.analyses._sql as asql  # noqa: E402
import nsysql.cli as cli  # noqa: E402
import nsysql.loader as loader  # noqa: E402
from nsysql.loader import raw, source  # noqa: E402

IMPORTED = time.perf_counter() - T0


class Cursor:
    """A canonical file's cursor: its one long statement (the file) timed, named by the file (`_made_empty`)."""

    def __init__(self, cur):
        self.cur, self.tag = cur, "?"

    def execute(self, sql, *args, **kwargs):
        if len(sql) < 400:  # the cursor's own set-up (USE, SET search_path), not a file
            return self.cur.execute(sql, *args, **kwargs)
        start = time.perf_counter()
        try:
            return self.cur.execute(sql, *args, **kwargs)
        finally:
            add(start, "FILE " + self.tag)

    def __getattr__(self, name):
        return getattr(self.cur, name)


def wrap(owner, name, make):
    setattr(owner, name, make(getattr(owner, name)))


def cursor(original):
    return lambda con, where=None: Cursor(original(con, where))


def made_empty(original):
    """Names the file's cursor; a file not run, its tables made empty (nsysql.tuning's `empty_inputs`), is a line
    of its own."""

    def inner(cur, f):
        if isinstance(cur, Cursor):
            cur.tag = f.stem
        start = time.perf_counter()
        empty = original(cur.cur if isinstance(cur, Cursor) else cur, f)
        if empty:
            add(start, f"FILE {f.stem} (made empty)")
        return empty

    return inner


def frame(original):
    def inner(con, sql, params=None):
        start = time.perf_counter()
        try:
            return original(con, sql, params)
        finally:
            add(start, "QUERY " + " ".join(sql.splitlines()[:3])[:70])

    return inner


def stream(original):
    @contextlib.contextmanager
    def inner(self, sql):
        start = time.perf_counter()
        with original(self, sql) as handle:
            yield handle
        add(start, "READ " + sql.split(" FROM ")[-1][:60])

    return inner


def whole(label):
    def make(original):
        def inner(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                add(start, label)

        return inner

    return make


wrap(loader, "cursor", cursor)
wrap(loader, "_made_empty", made_empty)
wrap(asql, "frame", frame)
wrap(source.Source, "stream", stream)
wrap(raw, "stage", whole("STAGE (every table read)"))
wrap(loader, "run_files", whole("CANONICAL (every file)"))
try:
    cli.main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
end = time.perf_counter() - T0
print(f"imports {IMPORTED:.3f} s, end {end:.3f} s, CPU {time.process_time() - C0:.3f} s", file=sys.stderr)
print(" start    end   took  thread          what", file=sys.stderr)
for a, b, thread, tag in sorted(events):
    print(f"{a:6.3f} {b:6.3f} {b - a:6.3f}  {thread:14s}  {tag}", file=sys.stderr)
