"""Open an export's canonical tables: its store entry, or built by the loader (nsysql/loader/) into a new entry
or in memory. What it returns (`Opened`) is what the engine needs; the facade is built above (nsysql._load).

This module imports neither polars, pyarrow nor the analyses: on a cold load the canonical tables are built
on a background thread (so that Ctrl-C leaves at once), then the caller's `meanwhile()` imports the facade on
this one; the reader threads start before DuckDB is imported (nsysql.tuning's `early_readers`). Errors still
surface from `open_tables`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .. import store, tuning
from ..errors import NsysqlError
from ..loader import at_first
from ..loader.source import open_source
from . import tables as _tables
from .settings import default_memory_limit, duckdb_config  # noqa: F401 (also this module's API)

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Opened:
    """An export's canonical tables, as the engine takes them: the connection (None until a question needs it, for
    an entry opened warm), the export's path as the user named it (absolute; a link not resolved), the store entry (None: in memory), the function that opens or builds
    the connection, and DuckDB's settings."""

    con: duckdb.DuckDBPyConnection | None
    path: Path
    entry: Path | None
    opener: Callable[[], duckdb.DuckDBPyConnection] | None
    settings: Callable[[], dict]


def open_tables(
    path,
    cache,
    cache_dir,
    memory_limit,
    threads,
    progress,
    limit=None,
    keyed_by=None,
    meanwhile=None,
    whole=False,
    question=None,
) -> Opened:
    """The canonical tables of the export `path`: its store entry opened (warm: DuckDB opens only when a question
    needs it), or built by the loader (cold), into the entry (`cache`) or in memory. `keyed_by`: the file whose
    identity keys the entry (default `path`; a report's, for the export made of it: store.stem). `limit`: the
    store's cap (store.cap), kept once a new entry is stored. `meanwhile()`: called on this thread once a cold
    build has read the export (the caller imports the facade then). `whole`: build every table now, for an
    export removed once loaded (later questions could not read it to add theirs). `question`: see `_first`."""
    src = open_source(path)
    shown = named(path)
    # the settings checked now, warm or cold: a typo in one is said on every run, not only when DuckDB opens
    memory_limit, threads = _checked(memory_limit, threads)
    settings = _settings(memory_limit, threads, src)
    readers = []  # the cold load's reader threads, started before DuckDB is imported
    building = _Building()  # what is being built (stopped if the user presses Ctrl-C meanwhile)

    first = _first(src, whole)
    lazy = first == []  # (the lazy build's list, filled once the load is known to be cold: _early)
    hint = question if lazy else None  # what the caller asks first: read in the first pass, once cold
    complete = [first is None]  # whether the connection holds every table: nothing for `extend` to do
    held: set[str] = set()  # the canonical files this load built: known, not asked of the catalog (_extender)
    question = None if first is None else _Question()  # what the first question reads, built with BASE

    def build(con, tables=first):
        from ..loader import build as build_tables
        from ..loader import plan

        building.cons.append(con)
        more = question.tables if question and question.active and tables is not None else None
        got = build_tables(src, con, progress, readers.pop() if readers else None, tables, more, building.stop)
        complete[0] = got is None
        held.update(() if got is None else (f.name for f in plan(got)[0]))  # each file planned ran (or raised)
        return con

    entry = None
    if cache and os.environ.get("NSYSQL_NO_CACHE", "") in ("", "0"):
        entry = _tables.entry(store.directory(cache_dir), Path(keyed_by or src.path))

        def opener():
            cfg = settings()
            con = _open_entry(entry, cfg, first is None, complete, opener.extend)
            if con is None and not entry.exists():
                # the copy to disk takes what is built: everything, then; a lazy build builds less instead
                bg = not lazy and _in_memory_first(src, cfg, threads or os.cpu_count())
                con = _tables.build_entry(entry, (lambda c: build(c, None)) if bg else build, cfg, background=bg)
            if con is None:  # the cache cannot be written: in memory, as with cache=False
                con = build(_tables.connect(":memory:", cfg))
            return con

        opener.extend = _extender(src, entry, build, settings, progress, complete, limit, held)
        if entry.exists():
            # warm: answers may come from the stored results; DuckDB opens only when a question needs it
            return Opened(None, shown, entry, opener, settings)
    else:

        def opener():
            return build(_tables.connect(":memory:", settings()))

        opener.extend = _extender(src, entry, build, settings, progress, complete, limit, held)

    _early(src, first, hint, readers)
    settings()  # here, on this thread, once reading has begun (it imports tempfile, for the spill directory)
    try:
        # a new entry (or one on its way): the directory kept within its cap
        kept = (lambda: _tables.trim(entry.parent, limit)) if entry is not None else (lambda: None)
        return replace(_cold(src, entry, opener, settings, building, meanwhile, question, kept), path=shown)
    finally:
        for r in readers:  # started but not used: the entry was written by another process meanwhile
            r.close()


def named(path) -> Path:
    """The export's path as the user named it, made absolute, a link kept as the link (as discover.remember keeps
    it): what Profile.path and the answers that name the file say. The entry is keyed by the file it resolves to
    (open_source), which every link to it shares."""
    return Path(os.path.expanduser(str(path))).absolute()


def _settings(memory_limit, threads, src=None):
    """DuckDB's settings, made on the first call: once reading has begun (cold) or when DuckDB opens (warm). With
    no thread count set (`threads` None) and an export whose every table fits in one row group (`_one_row_group`),
    one thread."""
    config: dict = {}

    def settings() -> dict:
        if not config:
            config.update(duckdb_config(memory_limit, threads))
            if threads is None and src is not None and _one_row_group(src):
                config["threads"] = 1
        return config

    return settings


# DuckDB splits a scan among its threads by row group (122,880 rows), so a table of one row group is read by one
# thread whatever their number, and so is every join, aggregate and window fed by it. Where every table of the
# export is that small, more threads only wake and wait, taking CPU from whatever runs beside the load (another
# load, the caller): BENCHMARKS.md has the figures.
ROW_GROUP = 122_880


def _one_row_group(src) -> bool:
    """Whether every nsys table a build reads from the export `src` holds at most ROW_GROUP rows (by rowid)."""
    from ..loader.raw import would_read

    read = {t for tables in would_read(src).values() for t in tables.split(",")}
    return max(src.approx_rows_of(read).values(), default=0) <= ROW_GROUP


def _early(src, first, hint, readers: list) -> None:
    """A cold load's first steps: what the caller asks first (`hint`) added to `first`, the list `build` was
    given (here, not before: a warm command never imports the engine for it), and the readers started: they open
    their SQLite streams (and read the first batch of each) while DuckDB is imported."""
    for name, params in [hint] if isinstance(hint, tuple) else hint or ():  # one question, or several (`stats`)
        first.extend(t for t in _hinted(name, params) if t not in first)
    if tuning.on("early_readers"):
        from ..loader import plan, raw

        readers.append(raw.Readers(src, names=None if first is None else plan(first)[1]).start())


def _first(src, whole: bool) -> list[str] | None:
    """The tables a cold load builds in its first pass (None: every one). nsysql.tuning's `lazy_build`: the
    loader's BASE tables with what the first question reads (`_Question`; known before the load for a caller that
    says it, `question`: `_hinted`, added to this list once the load is known to be cold), each later question
    adding what it reads (`extend`, which the engine calls); off: all but what a whole build leaves to the
    questions that read it (loader.at_first). `whole`: every one."""
    if whole:
        return None
    if tuning.on("lazy_build") and _large(src.path):
        return []
    return at_first(src)


def _hinted(name: str, params: dict) -> list[str]:
    """The tables a lazy cold load builds in its first pass for a caller that will first ask `name` with
    `params` (nsysql.engine.first: known before the analyses are imported), with the base tables: their rows are
    read by the readers that start before DuckDB is imported, in one pass, rather than in a second once the
    question has said what it reads (a cold `summary` read the CUDA API calls alone, on one reader, after the
    rest). [] where they are not known then: the base tables first, the question's once it says them."""
    from ..engine.first import first_reads
    from ..loader import plan

    tables = first_reads(name, params) or []
    try:
        plan(tables)
    except ValueError:  # a name no canonical file defines (a stale first_reads.json): no hint
        return []
    return tables


def _cold(src, entry, opener, settings, building, meanwhile, question, kept) -> Opened:
    if question is not None:  # the lazy build: the entry is kept within the cap once written
        return _deferred(src, entry, opener, settings, building, meanwhile, question, kept)
    # everything the build thread imports is imported here first (no two threads importing one module)
    from concurrent.futures import ThreadPoolExecutor

    import duckdb  # noqa: F401

    pool = ThreadPoolExecutor(1, thread_name_prefix="nsysql-load")
    from concurrent.futures import wait

    built = pool.submit(opener)
    try:
        con = built.result()
        if meanwhile is not None:
            meanwhile()  # the caller's imports: the facade, polars and the analyses
    except BaseException:
        # Ctrl-C (or an error here) while the build runs: leave now, not once the build is done. Its temporary
        # entry goes (the build, if it goes on, finds it gone and stores nothing) and its DuckDB work is
        # interrupted; the process may end at once (the CLI leaves through os._exit).
        _interrupted(entry, building, ended=lambda s: wait([built], timeout=s))
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    kept()
    return Opened(con, src.path, entry, opener, settings)


class _Question:
    """What the first question of a lazy cold load reads: the engine says it (`want`, before it first needs the
    connection) while the export is read, and the build, once it has read the base tables' rows, waits for it
    (`tables`) and builds those tables with the base ones in one pass. A load whose connection is asked for
    before any question says what it reads builds the base tables only (`want(())`); later questions add theirs
    (`extend`)."""

    def __init__(self):
        import threading

        self._told = threading.Event()
        self.read = threading.Event()  # the base tables' rows are read (or the build failed first)
        self._tables: tuple | None = ()
        self.active = False  # a build on its own thread asks (`_deferred`); one the engine runs itself does not

    def want(self, tables) -> None:
        """The canonical tables the first question reads (None: every one); said once, later calls ignored."""
        if not self._told.is_set():
            self._tables = None if tables is None else tuple(tables)
            self._told.set()

    def tables(self):
        """Called by the build once the base tables' rows are read: the tables to build with them."""
        self.read.set()
        self._told.wait()
        return self._tables


def _deferred(src, entry, opener, settings, building, meanwhile, question: _Question, kept) -> Opened:
    """A lazy cold load: the export is read on a thread of its own (the caller's `meanwhile()` imports run once
    it is read), and the canonical files run once the first question has said what it reads
    (`_Question`), so that a cold `summary` builds its tables in the one pass that reads the export, not in a
    second. Returns once the base tables' rows are read (an unreadable export is said here, by load); the
    connection comes with the engine's first use of it (`Opened.opener`)."""
    import threading
    from concurrent.futures import Future

    import duckdb  # noqa: F401 (imported here, not on the build thread: no two threads importing one module)

    future: Future = Future()

    def run():
        try:
            con = opener()
            kept()
        except BaseException as e:  # noqa: BLE001 - raised where the connection is asked for
            future.set_exception(e)
        else:
            future.set_result(con)
        finally:
            question.read.set()

    # a daemon thread: a process that leaves without asking anything does not wait for it at exit (the entry is
    # then not written; `store.tables.wait`, which the CLI calls as it leaves, lets it finish first)
    thread = threading.Thread(target=run, name="nsysql-load", daemon=True)

    def settle():  # `store.tables.wait`: build what there is to build (the base tables), and wait for it
        question.want(())
        thread.join()

    try:
        question.active = True
        thread.start()
        question.read.wait()
        if meanwhile is not None:
            meanwhile()
        if future.done():
            future.result()  # the build's error, said by load
    except BaseException:
        _interrupted(entry, building, question, thread.join)
        raise
    _tables.SETTLE[entry if entry is not None else question] = settle
    if entry is not None:  # a script that leaves right after load still gets its entry (the base tables)
        import atexit

        atexit.register(_tables.wait, entry)

    def connection():
        question.want(())  # asked for before any question said what it reads: the base tables
        try:
            return future.result()
        except BaseException:
            _interrupted(entry, building, question, thread.join)
            raise

    connection.want = question.want
    connection.extend = opener.extend
    return Opened(None, src.path, entry, connection, settings)


class _Building:
    """A cold load's build as Ctrl-C reaches it: the connections being built (`cons`, interrupted) and `stop`,
    which the loader reads before each canonical file it runs: each file runs on a cursor, a connection of its
    own that interrupting `cons` does not reach, so without it the files went on into the entry's log after the
    temporary entry was removed (a `.wal` and a marker left without their entry)."""

    def __init__(self):
        import threading

        self.cons: list = []
        self.stop = threading.Event()


def _interrupted(entry, building: _Building, question=None, ended=None) -> None:
    """Ctrl-C (or an error) while a build runs on another thread: its temporary entry goes (the build, if it goes
    on, finds it gone and stores nothing) and its DuckDB work is interrupted. `ended(seconds)` waits that long at
    most for the build's thread to end: DuckDB may write the temporary entry's log again until its work stops, and
    the process may leave at once after this (os._exit), so the temporary files and the marker are removed once
    more after it (else a marker alone could be left, with nothing of its entry)."""
    building.stop.set()  # first: a file not yet started is not started
    if question is not None:
        question.want(())  # a build waiting to hear what to build goes on, to its interruption
    if entry is not None:
        store.remove_temps_of(entry)
    for con in building.cons:
        try:
            con.interrupt()
        except Exception:  # noqa: BLE001 - closed meanwhile
            pass
    if ended is not None:
        ended(2.0)
    if entry is not None:
        store.remove_temps_of(entry)
        store.release(entry.with_suffix(""))


def _open_entry(entry, cfg: dict, whole: bool, complete: list, extend):
    """The cache entry opened to read (`complete[0]`: whether it holds every table). One that a lazy load built in
    part stays so: each question adds what it reads (`extend`, into a new file renamed over it: store.tables.grow),
    unless this load builds every table at once (`whole`: the lazy build off, or an export removed once loaded).
    None where it cannot be opened (held by another process, or unusable): the caller builds in memory."""
    from ..loader import lacks

    con = _tables.open_entry(entry, cfg)
    if con is None:
        return None
    complete[0] = not lacks(con, None, whole_files=True)  # an entry in place holds whole files only
    if whole and not complete[0]:
        con = extend(con, None) or con
    return con


def _extender(src, entry, build, settings, progress, complete, limit=None, held=None):
    """The engine's `opener.extend(con, tables)`: adds what `tables` need to the connection (`con`, a cursor of
    it), returning None, or the connection to use from now on where the entry could not take them (a full
    disk): every table built in memory, with the store's one warning. A connection in memory gets them in place;
    one on a cache entry gets a new entry that holds them, in place of the old (store.tables.grow: an entry in
    place is never written). Nothing to do where the connection holds every table (`complete`): nor is the
    catalog asked then (a background copy may be failing on it meanwhile). An entry that grew is kept within the
    store's cap (`limit`), as a new one is. `held`: the canonical files this load has built into the
    connection (kept up to date here): tables made of those alone need no look at the catalog, whose function
    list (`loader.lacks` reads it) holds every built-in function too."""
    from ..loader import lacks, plan

    asked: set[str] = set()  # every table this load was asked for: a new entry (a copy of the file in place,
    # perhaps another process's) gets them all, not only the last question's
    held = set() if held is None else held

    def extend(con, tables):
        if complete[0] or {f.name for f in plan(tables)[0]} <= held or not lacks(con, tables):
            return None
        if tables is not None:
            asked.update(tables)
        want = None if tables is None else sorted(asked)
        try:
            if _tables.file_of(con) is None:  # in memory: nothing another process could read
                _extend(src, con, want, progress)
                held.update(f.name for f in plan(want)[0])
                return None
            _tables.grow(con, entry, lambda cur: _extend(src, cur, want, progress))
        except _tables.NotWritten as e:
            store.failed(e.__cause__, entry.parent)
            return build(_tables.connect(":memory:", settings()), None)
        complete[0] = not lacks(con, None)
        held.update(f.name for f in plan(want)[0])  # what this load asked for so far, all of it now held
        _tables.trim(entry.parent, limit)
        return None

    return extend


def _extend(src, con, tables, progress) -> None:
    """Add to `con` the canonical tables `tables` need (nsysql.loader.extend), written into the entry's file
    (store.tables.NotWritten where the file cannot take them)."""
    from ..loader import extend

    with _tables.writing(con):
        extend(src, con, tables, progress)


# The lazy build reads and builds what the first question reads, with the base tables, in the load's one pass
# (`_Question`): a cold `kernels` skips NVTX and the iterations' tables, a cold `summary` pays what a whole build
# does (BENCHMARKS.md has both). A later question adds its tables in a new entry renamed over the old
# (store.tables.grow), so a process reading the old one meanwhile reads a whole file. Each such addition copies
# the entry and plans its files again, which on a small export costs more than building every table at once
# (the whole build of one takes well under a second), so it applies to exports from $NSYSQL_LAZY_MIN_MB MiB
# (LAZY_MIN_MB unset; 0: every export); nsysql.tuning's `lazy_build` turns it off.
LAZY_MIN_MB = 32


def _large(path: Path) -> bool:
    """Whether the lazy build applies to the export `path` (from $NSYSQL_LAZY_MIN_MB MiB, else LAZY_MIN_MB)."""
    text = os.environ.get("NSYSQL_LAZY_MIN_MB", "").strip() or str(LAZY_MIN_MB)
    if not text.isdigit():
        raise NsysqlError(f"NSYSQL_LAZY_MIN_MB must be a whole number of MiB, not {text[:40]!r}")
    try:
        return path.stat().st_size >= int(text) * 2**20
    except OSError:
        return False


def _in_memory_first(src, config: dict, threads: int | None = None) -> bool:
    """Build a cache entry in memory and copy it to disk in the background (see store.tables.build_entry;
    nsysql.tuning's `background_persist`) when there are cores to spare for the copy (4 or more) and the
    canonical tables (about 4x the export's size in memory) fit well within DuckDB's memory limit. On 2 cores the
    copy only competes with the answers for the cores, for a second copy's memory; where the in-memory tables
    would spill, the copy makes the first command slower (BENCHMARKS.md has the figures). Not for a lazy build
    (the caller's test): the copy would take every table, where a lazy build builds what its question reads (on
    16 cores a cold `kernels` builds in half the time without the copy, `summary` and `stats` the same)."""
    threads = int(threads or config.get("threads") or os.cpu_count() or 1)  # `threads`: the caller's count
    return (
        tuning.on("background_persist")
        and threads >= 4
        and src.path.stat().st_size * 6 <= _bytes(config["memory_limit"])
    )


def _bytes(size: str) -> int:
    """'2048MB' -> bytes (the memory limits nsysql writes, and DuckDB's units)."""
    import re

    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]i?B?|B)?\s*", size, re.IGNORECASE)
    if not m:
        return 0
    unit = (m.group(2) or "B").upper().rstrip("B").rstrip("I")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(unit or " ")) if unit in ("", "K", "M", "G", "T") else 0


def _checked(memory_limit: str | None, threads: int | None) -> tuple[str | None, int | None]:
    """load()'s memory_limit and threads, else $NSYSQL_MEMORY_LIMIT and $NSYSQL_THREADS, checked (NsysqlError
    naming the setting); $NSYSQL_READERS is checked too."""
    from ..loader.raw import default_workers

    tuning.check()
    threads = _threads(threads if threads is not None else os.environ.get("NSYSQL_THREADS", "").strip() or None)
    memory_limit = memory_limit or os.environ.get("NSYSQL_MEMORY_LIMIT", "").strip() or None
    if memory_limit is not None and not _MEMORY.fullmatch(str(memory_limit)):
        raise NsysqlError(
            f"NSYSQL_MEMORY_LIMIT (memory_limit) must be a size such as 4GB or 512MB, not {str(memory_limit)[:40]!r}"
        )
    default_workers()
    return memory_limit, threads


# the memory limits DuckDB reads (4GB, 1.5 GiB, 512 megabytes, 80%, -1 or none for no limit), checked here so that
# a typo is said as the setting's problem, not as a failed query
_MEMORY = re.compile(
    r"\s*(?:-1|none|(?:\d+(?:\.\d*)?|\.\d+)\s*(?:%|b|bytes|[kmgt]i?b|"
    r"(?:kilo|mega|giga|tera|kibi|mebi|gibi|tebi)bytes))\s*",
    re.IGNORECASE,
)
MAX_THREADS_PER_CPU = 4  # DuckDB threads beyond the CPUs only wait; thousands would take minutes to start


def _threads(value) -> int | None:
    """$NSYSQL_THREADS (or load(threads=)) checked: a whole number from 1 up, at most MAX_THREADS_PER_CPU per CPU
    (more is said on stderr and cut down); None: DuckDB's default (one per CPU)."""
    if value is None or value == 0:  # 0: DuckDB's default, as before
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise NsysqlError(f"NSYSQL_THREADS (threads) must be a whole number of threads, 1 or more, not {text[:40]!r}")
    n, most = int(text), MAX_THREADS_PER_CPU * (os.cpu_count() or 1)
    if n > most:
        import warnings

        warnings.warn(
            f"NSYSQL_THREADS={n} is more than {MAX_THREADS_PER_CPU} per CPU of this machine: using {most}", stacklevel=2
        )
        n = most
    return n
