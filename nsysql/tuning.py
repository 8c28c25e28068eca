"""nsysql's speed tricks, named in one place, each behind one switch.

Each trick changes when or where work happens, never what is computed: with any of them off, every answer is
the same (the tests run commands with each one off and compare). Everything else in nsysql is plain.

`NSYSQL_NO_TUNING=1` (or `all`) turns every trick off; `NSYSQL_NO_TUNING=fast_exit,parallel_sql` turns off
those named (a name that is no trick is an error, said in one line). Unset, empty or `0`: all on.
Their gains, measured with `benchmarks/ab.py` on and off, are in BENCHMARKS.md.
"""

from __future__ import annotations

import os

from .errors import NsysqlError

TRICKS = {
    "fast_exit": "the `nsysql` executable leaves through os._exit once its output and cache entry are written, "
    "skipping the interpreter's teardown, which frees DuckDB's and polars' objects one by one for memory the "
    "operating system takes back anyway (nsysql/_process.py); off: sys.exit",
    "early_readers": "a cold load starts its reader threads, which open the export's SQLite streams and read "
    "their first batch without the GIL, before DuckDB is imported (nsysql/store/opening.py, loader/raw.py Readers); "
    "off: the readers start once DuckDB is imported, inside the build",
    "background_persist": "with 4 or more threads and memory to spare, a first load that builds every table "
    "(not a lazy one: lazy_build) builds them in memory, "
    "answers from them, and copies them into the cache entry on background threads (cache.build_entry); off: "
    "built straight into the cache file",
    "lazy_build": "a cold load builds the loader's base tables (profile_facts, data_quality and what they are made "
    "from) with those its first question reads, in one pass (store.opening._Question, Engine.plan_request), and "
    "later questions add theirs to the cache entry, in a new file renamed over it (loader.plan, loader.extend, "
    "engine.Engine.need, store.tables.grow), for exports from $NSYSQL_LAZY_MIN_MB MiB (unset: 32; 0: every one); off: "
    "every canonical table at the first load",
    "printed_answers": "a command that prints a stored answer keeps the text it printed beside it, keyed by every "
    "switch that shapes the text (format, width, unit, ...), and a later command with the same switches prints "
    "that text without importing polars or rendering again (nsysql/cli/warm.py); off: the answer is read and "
    "rendered each time",
    "empty_inputs": "a canonical file whose header names inputs that are empty in this export "
    "(`@empty_without`) is not run: the tables it defines are created empty, of the shapes a run on empty inputs "
    "gives them (queries/v1/canonical/empty_shapes.json), and only its views, macros and types are defined "
    "(loader.shapes); off: every file runs",
    "parallel_sql": "the canonical SQL files run side by side on cursors of their own as soon as the files they "
    "read are done (loader.run_files); off: one after another, in file order",
}


def disabled() -> frozenset[str]:
    """The tricks NSYSQL_NO_TUNING turns off (names that are no trick are left out here: check() says them)."""
    value = os.environ.get("NSYSQL_NO_TUNING", "").strip()
    if value in ("", "0"):
        return frozenset()
    if value.lower() in ("1", "all"):
        return frozenset(TRICKS)
    return frozenset(n.strip() for n in value.split(",") if n.strip() in TRICKS)


def check() -> None:
    """NsysqlError naming the first word of NSYSQL_NO_TUNING that is no trick (a typo would leave it on)."""
    value = os.environ.get("NSYSQL_NO_TUNING", "").strip()
    if value in ("", "0") or value.lower() in ("1", "all"):
        return
    unknown = [n.strip() for n in value.split(",") if n.strip() and n.strip() not in TRICKS]
    if unknown:
        raise NsysqlError(
            f"NSYSQL_NO_TUNING names no trick {unknown[0][:40]!r}: 1 or all turns every one off, or name some of "
            f"{', '.join(TRICKS)}"
        )


def on(name: str) -> bool:
    """Whether the trick `name` (a key of TRICKS) is on."""
    if name not in TRICKS:
        raise KeyError(name)
    return name not in disabled()
