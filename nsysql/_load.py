"""`nsysql.load(path) -> Profile`, the Python API's entry: a report (`.nsys-rep`) exported through nsysql.nsys,
the export's canonical tables opened or built by the store (nsysql.store.opening), and the Profile facade over them.

This module imports neither polars nor the analyses before the load has begun: on a cold load the facade is
imported once the export is read (see nsysql.store.opening).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import nsys as _nsys
from . import store
from .errors import utf8_path
from .nsys import export as _export
from .store.opening import Opened, open_tables

if TYPE_CHECKING:
    from .profile import Profile


def load(
    path: str | os.PathLike,
    *,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    memory_limit: str | None = None,
    threads: int | None = None,
    progress=None,
    nsys: str | None = None,
    cache_max: str | int | None = None,
) -> Profile:
    """Read an nsys SQLite export (never writing to it) and return a Profile over its canonical tables.

    An Nsight Systems report (`.nsys-rep`) is exported to SQLite once, into its entry of the cache directory, with
    the nsys named by `nsys` (else $NSYS, PATH or the install folders: nsysql.nsys); without one, an NsysqlError
    names the `nsys export` command to run.

    The first load of a file stores the canonical tables in the cache (see nsysql.store); later loads open
    that entry instead. `cache=False` (or $NSYSQL_NO_CACHE=1) builds in memory every time. `cache_max` (else
    $NSYSQL_CACHE_MAX, else 10GB; `none`: no cap): the most the cache directory keeps, least recently used
    profiles removed first once a load has stored a new one.
    `memory_limit` and `threads` (else $NSYSQL_MEMORY_LIMIT, $NSYSQL_THREADS): the process's memory budget and
    DuckDB's threads (default: one per CPU, or one where every table of the export fits in a DuckDB row group).
    `progress(step)` is called with each table or SQL file being loaded.
    """
    return opened(path, facade, cache, cache_dir, memory_limit, threads, progress, nsys, cache_max)


def opened(
    path,
    then,
    cache=True,
    cache_dir=None,
    memory_limit=None,
    threads=None,
    progress=None,
    nsys=None,
    cache_max=None,
    question=None,
):
    """`then(Opened)` for the export (or report) `path`, its tables opened or built as load() says: load() is
    `then=facade`; the CLI's warm path (nsysql.cli.warm) makes the Profile only where a stored answer is not
    enough. `question`: the (analysis, parameters) the caller asks first, or a list of them (`stats`), where it
    knows it (the CLI's command): a cold load reads what they read in its first pass (store.opening.open_tables)."""
    utf8_path(path)  # said here, in one line, rather than by DuckDB or the driver deep in the load
    if cache_dir is not None:
        utf8_path(cache_dir, "cache directory")
    limit = store.cap(cache_max)  # checked now: a typo is said on every run
    if not _nsys.is_report(path):
        return then(
            open_tables(path, cache, cache_dir, memory_limit, threads, progress, limit, None, _imports, False, question)
        )
    keep = cache and os.environ.get("NSYSQL_NO_CACHE", "") in ("", "0")
    report = path
    path = _export.sqlite_for(report, cache_dir, nsys=nsys, keep=keep)
    if not _export.temporary(path):
        keyed = os.path.expanduser(report)
        return then(
            open_tables(
                path, cache, cache_dir, memory_limit, threads, progress, limit, keyed, _imports, False, question
            )
        )
    try:  # an export in a private temporary folder (--no-cache, or an unwritable cache): read whole, then removed
        # (no cache entry either: one keyed on a file that is gone at exit would never be read again)
        tables = open_tables(path, False, cache_dir, memory_limit, threads, progress, None, None, _imports, True)
        return then(tables)
    finally:
        _export.remove_temporary(path)


def _imports() -> None:
    """The facade's imports (polars and the analyses; pyarrow is not needed: see analyses._sql), made while a cold
    load builds its tables on another thread."""
    from . import profile  # noqa: F401


def facade(opened: Opened) -> Profile:
    """The Profile over opened tables."""
    from .profile import Profile

    return Profile(opened.con, opened.path, opened.entry, opened.opener, opened.settings)
