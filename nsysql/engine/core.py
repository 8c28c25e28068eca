"""The engine: one profile's DuckDB connection, its cursors, and the answers of the declared analyses.

`Engine.run(name, **params)` binds the parameters against the declaration (nsysql.engine.declare), then serves
the answer from memory or the answers store (nsysql.store.answers.Answers: `ask` for frames, `once` for what is kept in
memory only), computing it otherwise by calling the declaration's function with a Context. A Context gives the
function the connection of the thread it runs on and the answers of the analyses it declares it needs, nothing
else: an analysis never sees the Profile above it. `Context.gather` runs independent needs side by side, each on
a worker engine (the same answers, a DuckDB cursor of its own: one connection runs one query at a time).
"""

from __future__ import annotations

import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import sandbox as _sandbox
from ..errors import NsysqlError
from ..loader import cursor as _cursor
from ..loader.raw import size_bytes
from ..store import tables as _tables
from ..store.answers import Answers
from .declare import PATH_KEY, REGISTRY, Analysis, keyed_by_path, plan

if TYPE_CHECKING:
    import duckdb


class Engine:
    """One profile's connection (opened on first use), cursors per thread, sql() sandbox and answers."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection | None,
        path: Path,
        cache_entry: Path | None = None,
        opener: Callable[[], duckdb.DuckDBPyConnection] | None = None,
        settings: Callable[[], dict] | None = None,
        parent: Engine | None = None,
    ):
        """`parent`: the engine this one is a worker of (see worker()): its answers, lock and sandbox are
        shared, and the thread that first asks this one owns its connection."""
        self._con = con
        self._opener = opener
        # builds canonical tables into the connection (nsysql._load's `opener.extend(con, tables)`); None where
        # every table is there from the start
        self._extend = getattr(opener, "extend", None)
        self._root = parent._root if parent else self  # the engine that owns the connection and builds
        self._built = parent._built if parent else _Built()
        self._lock = parent._lock if parent else threading.RLock()
        self._retired: list = []  # connections replaced (`_swap`), closed with the engine
        self._generation = 0  # of the root's connection; a worker's cursor is of the one it was made from
        self._made = 0
        self.answers = parent.answers if parent else Answers(cache_entry)  # shared with its workers
        self.path = path
        self.cache_entry = cache_entry
        # the thread that uses _con itself; others get cursors of it (a worker's: the first to ask it)
        self._owner = None if parent else threading.get_ident()
        # each other thread's cursor, by thread id. Not a threading.local: an engine refers to itself (`_root`), so
        # the cyclic collector frees it, and CPython 3.11 deadlocks freeing a threading.local there when the
        # collection runs inside sys._current_frames(), as Dask's profiler calls it (tests/test_hostile_threads.py)
        self._thread_cursors: dict[int, duckdb.DuckDBPyConnection] = {}
        self._cursors: list = []
        self._where: tuple[str, str] | None = None
        self.closed = False
        # where sql() runs: a database of its own that reads the canonical tables only (see nsysql.sandbox)
        self._sandbox_own = parent is None
        self._sandbox = (
            parent._sandbox
            if parent
            else _sandbox.Sandbox(cache_entry, self.base, lambda: self._where, settings or _default_settings)
        )

    @property
    def sandbox(self) -> _sandbox.Sandbox:
        """Where sql() runs; a user's query may read any canonical table: each is built first (`everything`)."""
        self.everything()
        return self._sandbox

    def everything(self) -> None:
        """Build every canonical table the connection (or its cache entry) lacks: for what reads tables no SQL
        header names (a user's SQL, `p.con`, a query that met a missing table)."""
        self.need(None)

    def need(self, tables) -> None:
        """Have the connection hold the canonical definitions `tables` (None: every one) and what they are made
        from, building what it lacks (nsysql.loader.extend) on a cursor of its own: the same connection, so
        queries running on other threads meanwhile are untouched."""
        root = self._root
        key = None if tables is None else frozenset(tables)
        if root._extend is None or root._built.has(key):
            return
        with self._lock:
            if root._built.has(key):
                return
            want = getattr(root._opener, "want", None)
            if want is not None and root._con is None:
                # a cold load still reading the export: these are built in its one pass (store.opening._Question)
                want(None if key is None else sorted(key))
            base = root.base()
            cur = _cursor(base, root._where)
            try:
                other = root._extend(cur, None if key is None else sorted(key))
            finally:
                cur.close()
            if other is not None:  # every table, in a connection of its own: the old one stays open for the
                root._swap(other)  # queries running on it, its cursors are remade at their next use
                key = None
            root._built.add(key)

    def _swap(self, con) -> None:
        self._retired.append(self._con)
        self._con, self._where, self._thread_cursors = con, None, {}
        self._generation += 1
        self._made = self._generation

    def entry(self) -> Path | None:
        """The cache entry, once in place: a cold load writes it with its first question's tables, or, asked
        for before any question, with the base tables now (store.tables.wait)."""
        if self.cache_entry is not None:
            _tables.wait(self.cache_entry)
        return self.cache_entry

    @property
    def opened(self) -> bool:
        """Whether the connection has been opened (a warm answer from the store opens none)."""
        return self._con is not None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection for the calling thread, every canonical table built (`everything`): the connection
        itself for its owner, else a cursor of the thread's own (made on its first use)."""
        self.everything()
        return self.connection()

    def connection(self) -> duckdb.DuckDBPyConnection:
        """`con` without building anything: what Context.con gives an analysis, whose SQL files build what
        their headers read as they run (`reading`)."""
        base = self.base()
        if self._owner is None:  # a worker belongs to the thread that first asks it
            with self._lock:
                if self._owner is None:
                    self._owner = threading.get_ident()
        if threading.get_ident() == self._owner:
            return base
        me = threading.get_ident()
        cur = self._thread_cursors.get(me)
        if cur is None:
            with self._lock:
                cur = self._thread_cursors[me] = _cursor(base, self._where)
                self._cursors.append(cur)
        return cur

    def check_open(self) -> None:
        if self.closed:
            raise NsysqlError(f"{self.path}: this Profile is closed; load the export again")

    def base(self) -> duckdb.DuckDBPyConnection:
        """The connection itself, opened on first use, with the database and search path its cursors need
        (read now, before any query can keep the connection busy)."""
        self.check_open()
        if self._where is None or self._made != self._root._generation:
            with self._lock:
                if self._con is not None and self._made != self._root._generation:  # a worker's old cursor
                    self._retired.append(self._con)
                    self._con = self._where = None
                if self._con is None:
                    self._con = self._opener()
                    self._made = self._root._generation
                if self._where is None:
                    self._where = self._con.execute(
                        "SELECT current_database(), current_setting('search_path')"
                    ).fetchall()[0]
        return self._con

    def close(self) -> None:
        """Close the connection, once the cache entry being written from it (cold load) is in place."""
        _tables.wait()
        with self._lock:
            for cur in self._cursors:
                cur.close()
            self._cursors.clear()
            self._thread_cursors.clear()
            if self._sandbox_own:
                self._sandbox.close()
            for con in [*self._retired, self._con]:
                if con is not None:
                    con.close()
            self._retired.clear()
            self._con = None
            self.closed = True

    def worker(self) -> Engine:
        """This engine for another thread: the same answers, on a DuckDB cursor of its own."""
        return Engine(None, self.path, self.cache_entry, lambda: _cursor(self.base(), self._where), parent=self)

    def parallel(self, *calls: Callable[[Engine], object], reads=None) -> list:
        """`call(worker)` for each call on its own thread and worker engine; the results in order (the first
        error is raised). DuckDB runs the queries side by side, and the Python between them overlaps. `reads`:
        the canonical tables the calls read, where known: as many run at once as their rows leave memory for
        (`at_once`), the others as those finish."""
        if len(calls) <= 1:
            return [c(self) for c in calls]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.at_once(len(calls), reads), thread_name_prefix="nsysql-ask") as pool:
            futures = [pool.submit(c, self.worker()) for c in calls]
            return [f.result() for f in futures]

    def at_once(self, n: int, reads) -> int:
        """How many of `n` queries over the canonical tables `reads` to run side by side: each holds sorts and
        hash tables of the rows it reads (ROW_BYTES a row of the largest table), and DuckDB's memory is shared
        by those that run at once. Where they would not all fit, those that do run at once, at least one: queries
        side by side beyond DuckDB's memory spill, and cost more than one after another (BENCHMARKS.md, 10M
        kernels). `n` where the tables are not known or the connection is not open (a warm request's answers are
        stored: nothing to share)."""
        if not reads or self._root._con is None:
            return n
        rows, limit = (
            self.connection()
            .execute(
                "SELECT (SELECT coalesce(max(estimated_size), 0) FROM duckdb_tables() WHERE database_name = "
                "current_database() AND table_name IN (SELECT unnest(?))), current_setting('memory_limit')",
                [sorted(reads)],
            )
            .fetchall()[0]
        )
        return max(1, min(n, size_bytes(limit) // max(1, rows * ROW_BYTES)))

    def declaration(self, name: str) -> Analysis:
        try:
            return REGISTRY[name]
        except KeyError:
            raise NsysqlError(f"no analysis named {name!r}") from None

    def plan(self, name: str) -> list[str]:
        """The analyses a request for `name` resolves, each after what it needs (nsysql.engine.declare.plan)."""
        return plan(name)

    def plan_request(self, *names: str) -> None:
        """Build at once what the analyses `names` and all they need may read (`tables_of`): one pass over the
        export for a request of several answers (summary, `stats`), where each would otherwise add its own."""
        self._plan(frozenset().union(*(tables_of(n) for n in names)))

    def _plan(self, tables: frozenset[str]) -> None:
        """`need(tables)` where the connection is open or a cold load is reading the export."""
        root = self._root
        if root._con is None and getattr(root._opener, "want", None) is None:
            # DuckDB not opened and no cold load reading the export (a warm entry, or one built whole): the
            # answers may all be stored, and one that is not builds what it reads as it runs (`_answer`), so
            # opening the entry only to plan would cost a warm request the whole open (and a lazy entry's
            # completion)
            return
        self.need(tables)

    def each(self, *asked: tuple[str, dict], **shared) -> list:
        """The answer of each `(name, params)` of `asked`, side by side after one pass builds what they all read
        (`plan_request`), each also given those of `shared` that its declaration takes (`stats`' --attribution);
        where one does not apply, its NsysqlError is its answer, for the caller to say (the others stand)."""

        def given(name: str, params: dict) -> dict:
            takes = {p.name for p in self.declaration(name).params}
            return {**params, **{k: v for k, v in shared.items() if k in takes}}

        reads = frozenset().union(*(_reads_given(n, given(n, params)) for n, params in asked))
        self._plan(reads)

        def one(name: str, params: dict):
            given_ = given(name, params)

            def call(e: Engine):
                try:
                    return e.run(name, **given_)
                except NsysqlError as err:
                    return err

            return call

        return self.parallel(*(one(name, params) for name, params in asked), reads=reads)

    def run(self, name: str, /, **params):
        """The answer of analysis `name` for `params` (defaults filled in): remembered, stored or computed."""
        decl = self.declaration(name)
        self.check_open()  # no answers from a closed Profile, remembered or not
        bound = decl.bind(params)
        ctx = Context(self, decl)
        if decl.keep == "store":
            key = {**bound, PATH_KEY: str(self.path)} if keyed_by_path(name) else bound
            return self.answers.ask(name, key, lambda: self._answer(decl, ctx, bound))
        if decl.keep == "memory":
            return self.answers.once((name, tuple(bound.items())), lambda: self._answer(decl, ctx, bound))
        return self._answer(decl, ctx, bound)

    def shown(self, name: str, /, **params):
        """The answer of `name` as its command shows it: an empty frame of an analysis that does not apply to
        this export is no answer, but NsysqlError saying why (the analysis WHY_NOT, in `info`'s words). A view
        (a dict of frames) refuses in its own declaration, where it knows which of its frames is the table."""
        got = self.run(name, **params)
        if getattr(got, "height", None) == 0 and (why := self.run(WHY_NOT, analysis=name)):
            raise NsysqlError(why)
        return got

    def _answer(self, decl: Analysis, ctx: Context, bound: dict):
        """`decl.fn`'s answer, its SQL files building what they read as they run (`reading`). A query that reads
        a definition no header named, and that the connection lacks, fails with DuckDB's catalog error: then
        every table is built and the answer is asked once more (time, never an answer, is what a header that
        says too little costs)."""
        if decl.view and getattr(_CURRENT, "engine", None) is None:
            # a view shows its needs' answers asked with its own values: what those values choose (`reads`), in one
            # pass (`metrics` per device reads no NVTX nesting, as gpu_metrics asked alike reads none)
            self._plan(reads(decl.name, bound))
        elif decl.needs and not decl.sql and getattr(_CURRENT, "engine", None) is None:
            # a request for a composition (summary, the report's data): what its pieces may read is built in one
            # pass before any runs, not pass after pass as each piece meets its own SQL header (`plan_request`)
            self.plan_request(decl.name)
        elif decl.sql and self._root._con is None and getattr(self._root._opener, "want", None) is not None:
            # the first question of a cold load still reading the export: what it reads with these parameters
            # (`reads`) is built in the load's one pass, not added pass after pass as its files and needs run
            self.need(reads(decl.name, bound))
        try:
            return self._call(decl, ctx, bound)
        except Exception as e:
            duckdb = sys.modules.get("duckdb")
            if duckdb is None or not isinstance(e, duckdb.CatalogException) or self._root._extend is None:
                raise
            if self._root._built.has(None):
                raise
        self.everything()
        return self._call(decl, ctx, bound)

    def _call(self, decl: Analysis, ctx: Context, bound: dict):
        before = getattr(_CURRENT, "engine", None)
        _CURRENT.engine = self
        try:
            return decl.fn(ctx, **bound)
        finally:
            _CURRENT.engine = before


# the declared analysis (nsysql.analyses.catalog) that says in one line why another does not apply to an export
WHY_NOT = "why_not"


class Context:
    """What a declaration's function sees: the calling thread's connection, and the answers of what it needs."""

    def __init__(self, engine: Engine, decl: Analysis):
        self._engine = engine
        self._decl = decl

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection; its SQL files build what they read (`reading`). A declaration that names no table, SQL
        file or need may read any table (export): every one is built first."""
        d = self._decl
        if not (d.tables or d.sql or d.needs):
            self._engine.everything()
        return self._engine.connection()

    @property
    def path(self) -> Path:
        return self._engine.path

    def ask(self, name: str, /, **params):
        """The answer of `name`, which this analysis must declare among its needs (or be itself)."""
        self._check(name)
        return self._engine.run(name, **params)

    def gather(self, **requests) -> dict:
        """Independent needs side by side: `key=(name, params)`, or a list of such asked in turn on one worker
        (their answers as a list). Each key's value is its answer, or the NsysqlError that says why there is
        none: the caller decides what a missing piece means."""
        names = [name for req in requests.values() for name, _ in (req if isinstance(req, list) else [req])]
        for name in names:
            self._check(name)
        # what they may read, built at once before they run (the files side by side), not file by file as each
        # meets its own need while the others wait
        reads = frozenset().union(*(tables_of(n) for n in names))
        self._engine.need(reads)

        def one(req):
            def call(e: Engine):
                try:
                    if isinstance(req, list):
                        return [e.run(n, **p) for n, p in req]
                    return e.run(req[0], **req[1])
                except NsysqlError as err:
                    return err

            return call

        got = self._engine.parallel(*(one(r) for r in requests.values()), reads=reads)
        return dict(zip(requests, got))

    def _check(self, name: str) -> None:
        if name != self._decl.name and name not in self._decl.needs:
            raise RuntimeError(f"analysis {self._decl.name!r} asks {name!r}, which it does not declare it needs")


# What a query holds per row of the largest table it reads, in sorts and hash tables: a few 8-byte columns with
# DuckDB's row layout and hash entries (Engine.at_once)
ROW_BYTES = 64

_CURRENT = threading.local()  # the engine whose analysis this thread computes (`reading`)


def reading(sql: str) -> None:
    """Called before an analysis runs its SQL file `analyses/<sql>.sql`: the engine computing it on this thread
    builds the canonical tables and macros the file's header declares (`@tables`, `@macros`), if the connection
    lacks them. Outside an engine's analysis, nothing."""
    engine = getattr(_CURRENT, "engine", None)
    if engine is not None:
        engine.need(_header(sql))


@lru_cache(maxsize=None)
def _header(sql: str) -> frozenset[str]:
    from ..queries import declarations, read

    d = declarations(read(f"analyses/{sql}.sql"), sql)
    return frozenset(d.tables + d.macros)


@lru_cache(maxsize=None)
def tables_of(name: str) -> frozenset[str]:
    """The canonical definitions a request for `name` may read: those its declaration and every one it needs
    name (`tables`), and those the headers of their SQL files declare (`@tables`, `@macros`)."""
    from ..loader import definitions

    out = set()
    for n in plan(name):
        out.update(REGISTRY[n].tables)
        for sql in REGISTRY[n].sql:
            out.update(_header(sql))
    return frozenset(out & definitions())


def reads(name: str, bound: dict) -> frozenset[str]:
    """The canonical definitions a request for `name` with the parameters `bound` reads: all it may read
    (`tables_of`) but the parts of its declaration that these values do not choose (Analysis.only). What it
    needs is counted whole: the parameters it asks a need with are the analysis' own business."""
    from ..loader import definitions

    decl = REGISTRY[name]
    skipped = {"needs": set(), "tables": set(), "sql": set()}
    chosen = {"needs": set(), "tables": set(), "sql": set()}
    for o in decl.only:
        for kind in skipped:
            (chosen if o.holds(bound) else skipped)[kind].update(getattr(o, kind))
    left = {kind: skipped[kind] - chosen[kind] for kind in skipped}
    out = set(decl.tables) - left["tables"]
    for sql in decl.sql:
        if sql not in left["sql"]:
            out.update(_header(sql))
    for n in decl.needs:
        if n != name and n not in left["needs"]:
            out.update(_view_need(n, bound) if decl.view else tables_of(n))
    return frozenset(out & definitions())


def _view_need(need: str, bound: dict) -> frozenset[str]:
    """What a view's need reads: a view shows its needs' answers asked with its own values, so a need that takes
    only parameters of the view (kernels_shown's `kernels`) reads what those values choose; else all it may."""
    takes = {p.name for p in REGISTRY[need].params}
    if not REGISTRY[need].only or not takes <= set(bound):
        return tables_of(need)
    return _reads_given(need, {k: bound[k] for k in takes})


def _reads_given(name: str, given: dict) -> frozenset[str]:
    """`reads` of `name` asked with `given`; all it may read where the declaration refuses them (its run says why)."""
    try:
        bound = REGISTRY[name].bind(given)
    except Exception:  # noqa: BLE001 - refused as it runs, not as it is planned
        return tables_of(name)
    return reads(name, bound)


class _Built:
    """The sets of canonical definitions an engine has had built (None: every one)."""

    def __init__(self):
        self._names: set[str] = set()
        self._all = False

    def has(self, key) -> bool:
        return self._all or (key is not None and key <= self._names)

    def add(self, key) -> None:
        if key is None:
            self._all = True
        else:
            self._names.update(key)


def _default_settings() -> dict:
    from ..store.settings import duckdb_config

    return duckdb_config(None, None)
