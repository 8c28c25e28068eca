#!/usr/bin/env python3
"""Where one nsysql command spends its time: wall and CPU seconds per phase, printed to stderr.

    python benchmarks/phases.py [nsysql options] COMMAND FILE [command options]
    e.g. python benchmarks/phases.py --cache-dir /tmp/c summary /tmp/bench/big_500k.sqlite > /dev/null

Runs the CLI in this process with timing marks around the loader's stages (imports, reading the export, the
canonical SQL files as one phase (they run side by side), writing and reopening the cache entry) and the
analyses that summary, iterations and gaps share. A phase's figures run from the previous mark to its own, so
`open_entry` (first) includes importing DuckDB. CPU is this process's CPU time (all threads). Not used by
the tests; BENCHMARKS.md quotes it. PHASES_STREAMS=1 also lists each reader's stream: when it was opened,
how long opening took (SQLite reads the first batch then) and how long it took to read to its end.
PHASES_RUNNABLE=1 also gives each phase the share of 5 ms samples in which 0, 1, or 2 and more of this process's
threads were runnable (Linux's /proc): what a phase would keep busy on an idle machine, however loaded this one
is (a phase with one runnable thread leaves a core of two idle there; CPU and wall say it only on an idle machine).
Unlike the CLI, it imports polars and the analyses before the load (to wrap them), not once the export is
read as a plain `nsysql` run does: time whole commands with bench.py.
"""

import os
import sys
import time

T0, C0 = time.perf_counter(), time.process_time()
marks = []
runnable = []  # (seconds since T0, how many of this process's threads were runnable): PHASES_RUNNABLE


def sample_runnable():
    import threading

    me = str(threading.get_native_id())
    while True:
        n = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    n += tid != me and f.read().rsplit(")", 1)[1].split()[0] == "R"
            except OSError:
                pass  # a thread that ended meanwhile
        runnable.append((time.perf_counter() - T0, n))
        time.sleep(0.005)


if os.environ.get("PHASES_RUNNABLE") and os.path.isdir("/proc/self/task"):
    import threading

    threading.Thread(target=sample_runnable, daemon=True).start()


def shares(a: float, b: float) -> str:
    """The runnable threads' counts sampled in [a, b), as shares of 0, 1 and 2+ (PHASES_RUNNABLE)."""
    got = [n for t, n in runnable if a <= t < b]
    if not got:
        return ""
    parts = (sum(n == 0 for n in got), sum(n == 1 for n in got), sum(n >= 2 for n in got))
    return "  runnable 0/1/2+ " + "/".join(f"{k / len(got):.2f}" for k in parts)


def mark(label):
    marks.append((label, time.perf_counter(), time.process_time()))


import nsysql.cli as cli  # noqa: E402

mark("imports")
import nsysql.loader as loader  # noqa: E402
import nsysql.profile as profile  # noqa: E402
from nsysql.loader import raw  # noqa: E402
from nsysql.store import tables as cache  # noqa: E402


def wrap(owner, name, label, before=None):
    original = getattr(owner, name)

    def inner(*args, **kwargs):
        if before:
            mark(before)
        result = original(*args, **kwargs)
        mark(label)
        return result

    setattr(owner, name, inner)


wrap(raw, "stage", "stage (read the export)", before="connect")
wrap(cache, "build_entry", "checkpoint + close")
wrap(cache, "open_entry", "open_entry")
for method in ("iterations", "iteration_stats", "gaps"):
    wrap(profile.Profile, method, "   " + method)
wrap(loader, "run_files", "canonical SQL (all files)")
streams = []
if os.environ.get("PHASES_STREAMS"):  # each reader's stream: when it opened, was ready, and was done
    import contextlib

    from nsysql.loader import source

    opened = source.Source.stream

    @contextlib.contextmanager
    def stream(self, sql):
        a = time.perf_counter()
        with opened(self, sql) as handle:
            b = time.perf_counter()
            yield handle
        streams.append((a, b, time.perf_counter(), sql.split(" FROM ")[-1][:60]))

    source.Source.stream = stream
try:
    cli.main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
mark("rest (other answers, printing)")
cache.wait()  # what the interpreter waits for at exit: an entry still being copied to disk in the background
mark("background copy, waited for")
prev = (T0, C0)
for label, t, c in marks:
    print(f"{label:32s} wall {t - prev[0]:7.3f}  cpu {c - prev[1]:7.3f}{shares(prev[0] - T0, t - T0)}", file=sys.stderr)
    prev = (t, c)
for a, b, c, what in sorted(streams):
    print(f"   stream at {a - T0:6.3f}  open {b - a:6.3f}  read {c - b:6.3f}  {what}", file=sys.stderr)
print(f"{'total':32s} wall {time.perf_counter() - T0:7.3f}  cpu {time.process_time() - C0:7.3f}", file=sys.stderr)
