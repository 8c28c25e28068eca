"""Loader: nsys SQLite export -> canonical tables in DuckDB.

`build(path, con)` probes the export (`source`), stages only the columns nsysql needs (`raw`), then runs the
versioned SQL files of `queries/v1/canonical/` that define the canonical tables. Nothing above this package
names an nsys table.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

from .. import __version__, tuning
from ..queries import SCHEMA_VERSION, canonical_order
from .source import Source, open_source

CANONICAL_TABLES = (
    "profile_facts",
    "devices",
    "processes",
    "threads",
    "strings",
    "api_calls",
    "os_calls",
    "gpu_ops",
    "op_launch",
    "kernel_rules",
    "kernel_classes",
    "gpu_metric_samples",
    "gpu_metric_names",
    "gpu_metric_values",
    "gpu_metric_periods",
    "gpu_metric_activity",
    "gpu_activity_periods",
    "gpu_activity_names",
    "gpu_memory_events",
    "kernel_tensor_use",
    "nvtx_ranges",
    "nvtx_open",
    "nvtx_marks",
    "nvtx_payloads",
    "nvtx_payload_fields",
    "session_clock",
    "graph_nodes",
    "op_ranges",
    "op_range_links",
    "range_chains",
    "gpu_busy",
    "process_roles",
    "cpu_samples",
    "cpu_stack_frames",
    "thread_states",
    "process_parents",
    "thread_roles",
    "python_samples",
    "python_frames",
    "data_quality",
)

# The tables the loader itself writes into the staging database (raw.STAGE) beside the raw_* tables of raw.py:
# canonical files read them qualified (`nsysql_stage._load_facts`) and declare them (`-- @staging`).
LOADER_TABLES = ("_load_facts", "_load_beyond_int64")  # (their columns: raw.LOADER_COLUMNS)

__all__ = [
    "at_first",
    "build",
    "extend",
    "lacks",
    "plan",
    "built",
    "BASE",
    "open_source",
    "Source",
    "CANONICAL_TABLES",
    "LOADER_TABLES",
    "RAW_TABLES",
]


def build(src: Source, con: duckdb.DuckDBPyConnection, progress=None, readers=None, tables=None, more=None, stop=None):
    """Fill `con` with the canonical tables of the export `src`: those `tables` name (None: every one; `BASE` is
    always built) and what they are made from (`plan`). `readers`: a
    raw.Readers already started on `src` (nsysql._load starts them before importing DuckDB, on `plan`'s staging
    tables). `more()`, called once those staging tables are read, returns more tables to build with them (None:
    every one): a request's tables, known only once the export is being read, built in the same pass (one run
    of the canonical files) rather than in a second. With `tables`, the staging tables stay attached for
    `extend` (in memory, never in the entry). `stop`: a threading.Event set when the load is abandoned (Ctrl-C):
    no canonical file starts after it. Returns the tables built (None: every one)."""
    from .raw import LOADER_COLUMNS, STAGE, stage, unstage, would_read
    from .raw import staged as _staged

    tables = _with_riders(tables)
    files, staging = plan(tables)
    early, ran_early = _while_reading(con, files, stop)
    try:
        stage(src, con, progress, readers=readers, names=staging)
        rest = staging - _staged(con)  # readers started for fewer tables than these
        if rest:
            stage(src, con, progress, names=rest)
    except BaseException:
        try:
            ran_early()  # done before the connection goes; staging's error is the one said
        except BaseException:  # noqa: BLE001, S110
            pass
        raise
    ran_early()
    src.unchanged()  # every row is read: refuse a file written meanwhile (before anything is cached)
    asked: list = [tables]

    def later() -> list[Path]:
        """The files `more()`'s tables add, their staging tables read: asked while `files` run."""
        extra = more()
        asked[0] = None if extra is None else _with_riders([*tables, *extra])
        added, staging = plan(asked[0])
        if set(added) == set(files):
            return []
        # not told: its percentage would start again from 0 while the files above are told as built
        stage(src, con, None, names=staging - _staged(con))
        src.unchanged()
        _write_beyond(src, con)  # with what these tables hold: the files added run after
        return [f for f in added if f not in files]

    used = would_read(src)  # what a whole build reads, whatever is built now: the facts do not depend on it
    facts = [
        ("source_path", str(src.path)),
        ("source_bytes", str(src.path.stat().st_size)),
        ("canonical_schema", SCHEMA_VERSION),
        ("nsysql_version", __version__),
        ("tables_read", ",".join(sorted({t for read in used.values() for t in read.split(",")}))),
        ("tables_in_file", ",".join(sorted(src.tables))),
    ]
    facts += [("missing", msg) for msg in _missing(src, con)]
    # in the staging database, so that every cursor below sees it (a TEMP table is one connection's own);
    # 70_profile_facts.sql reads it
    load_facts = f"{STAGE}.{LOADER_TABLES[0]}"
    con.execute(f"CREATE OR REPLACE TABLE {load_facts}({LOADER_COLUMNS[LOADER_TABLES[0]]})")
    con.execute(
        f"INSERT INTO {load_facts} VALUES " + ", ".join(["(?, ?)"] * len(facts)),
        [x for fact in facts for x in fact],
    )
    _write_beyond(src, con)
    late = [f for f in files if f not in early]
    run_files(con, late, progress, later=later if tables is not None and more is not None else None, stop=stop)
    tables = asked[0]
    unstage(con, detach=tables is None)  # kept attached for `extend`, out of `con`'s search path
    if tables is not None:
        _release(con, {f.name for f in plan(tables)[0]})  # every file planned ran (run_files raises otherwise)
    return tables


def _write_beyond(src: Source, con: duckdb.DuckDBPyConnection) -> None:
    """The loader's table of REALs beyond 64-bit integers read as NULL (source.Source.beyond_int64), per nsys table
    and column, for data_quality (95_data_quality.sql): of every table this process has read from `src`."""
    from .raw import LOADER_COLUMNS, STAGE

    beyond: dict[tuple[str, str], int] = {}
    for table, column, n in src.beyond_int64:
        beyond[table, column] = beyond.get((table, column), 0) + n
    load_beyond = f"{STAGE}.{LOADER_TABLES[1]}"
    con.execute(f"CREATE OR REPLACE TABLE {load_beyond}({LOADER_COLUMNS[LOADER_TABLES[1]]})")
    if beyond:
        con.executemany(f"INSERT INTO {load_beyond} VALUES (?, ?, ?)", [(t, c, n) for (t, c), n in beyond.items()])


# What every build makes, whatever the question: profile_facts (the entry's `complete` fact, the export's
# metadata and what it lacks). It reads the loader's own facts (LOADER_TABLES), which say what the whole reading
# of the export found, so it is made in the load that reads it.
BASE = ("profile_facts",)

# Built with a pass that reads, whatever it builds, every staging table they read: data_quality (its counts are
# one more scan of rows already in memory), which a question that reads it (`info`) builds otherwise. A cold
# `kernels` reads no CUDA API call: data_quality, which counts the calls' flaws, waits for a question that reads it.
RIDERS = ("data_quality",)


def _with_riders(tables):
    """`tables` (None: every one) with the RIDERS whose staging tables building `tables` reads anyway."""
    if tables is None:
        return None
    staging = plan(tables)[1]
    return [*tables, *(r for r in RIDERS if r not in tables and plan([r])[1] <= staging)]


# The canonical files a whole build leaves to the questions that read them, where the export holds the nsys table
# they read (file -> that table), with the files that include them: the GPU metric samples. 7.7M of them cost a
# cold summary four scans of GPU_METRICS, where what it reads (SMs and Tensor Active: 48_gpu_activity.sql) is a
# tenth of the rows; and a question that reads both reads GPU_METRICS once (raw.RawTable.subset_of), not once for
# the first pass and again for the question.
ON_DEMAND = {
    "48_gpu_metrics.sql": "GPU_METRICS",
    "48_gpu_activity.sql": "GPU_METRICS",
    "48_gpu_metric_counts.sql": "GPU_METRICS",
}


def at_first(src: Source) -> list[str] | None:
    """The tables a whole build of `src` makes in its first pass: None (every one), or, where `src` holds the
    rows of ON_DEMAND files, every table but those of these files and of the files that include them (a later
    question that reads them adds them)."""
    later = {f for f, table in ON_DEMAND.items() if src.has(table)}
    if not later:
        return None
    for f, includes in _order().items():  # in order: each after its includes
        if any(g.name in later for g in includes):
            later.add(f.name)
    return sorted({d for f in _order() if f.name not in later for d in _kept(f)})


def plan(tables=None) -> tuple[list[Path], set[str]]:
    """The canonical files that make `tables` (None: every table) and BASE, with the files they `@include`,
    in the order they run; and the staging tables they read (with those `_missing` reads). From the files'
    headers alone (`@defines`, `@include`, `@staging`): a new canonical file is planned as it declares itself."""

    order = _order()
    if tables is None:
        files = list(order)
    else:
        defines = {}
        for f in order:
            for name in _header(f).defines:
                defines.setdefault(name, f)
        unknown = sorted(set(tables) - set(defines))
        if unknown:
            raise ValueError(f"no canonical file defines {', '.join(unknown)}")
        wanted: set[Path] = set()

        def visit(f: Path) -> None:
            if f not in wanted:
                wanted.add(f)
                for g in order[f]:
                    visit(g)

        for t in (*BASE, *tables):
            visit(defines[t])
        files = [f for f in order if f in wanted]
    staging = set(_PAYLOAD_STAGING)  # what _missing_payloads reads, whatever is built (_missing: those it reads)
    for f in files:
        staging.update(s for s in _header(f).staging if "." not in s)
    return files, staging


def built(con: duckdb.DuckDBPyConnection, whole_files: bool = False) -> set[str]:
    """The canonical files whose every declared definition (`@defines`: tables, views, macros, types; not those
    of the staging database) exists in `con`'s current database: what an entry or a connection already holds.

    `whole_files`: `con` holds only files run to their end, so that each file's definitions are all there or none
    are: a cache entry, which is written by a build or a growth that ran every file it planned and renamed into
    place only then (store.tables). The functions are then not listed where other definitions prove them:
    DuckDB's function list holds every built-in function too (the longest part of a warm open). A file is built
    where its tables, views or types are, or, defining functions only, where a file that includes it is (an
    include runs to its end before its includers start: run_files), else where each of its functions answers a
    call (`_called`). Only where none of these proves a file are the functions listed."""
    cheap = (
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
        "UNION ALL SELECT type_name FROM duckdb_types() WHERE database_name = current_database()"
    )
    functions = "SELECT function_name FROM duckdb_functions() WHERE database_name = current_database()"
    if not whole_files:
        names = {r[0] for r in con.execute(f"{cheap} UNION ALL {functions}").fetchall()}
        return {f.name for f in _order() if _kept(f) <= names}
    names = {r[0] for r in con.execute(cheap).fetchall()}
    order = _order()
    done: set[str] = set()
    unproven: list[Path] = []
    for f in reversed(order):  # includers before their includes
        others = _kept(f) - _functions(f)
        if others or not _functions(f):
            if others <= names:
                done.add(f.name)
        elif any(g.name in done and f in includes for g, includes in order.items()):
            done.add(f.name)
        else:
            unproven.append(f)
    found = [_called(con, f) for f in unproven]
    if None in found:  # a call that proves neither way: DuckDB's list says
        names |= {r[0] for r in con.execute(functions).fetchall()}
        found = [_kept(f) <= names for f in unproven]
    return done | {f.name for f, there in zip(unproven, found) if there}


_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:MACRO|FUNCTION)\s+(\w+)\s*\(", re.IGNORECASE)


@lru_cache(maxsize=None)
def _functions(f: Path) -> frozenset[str]:
    """What canonical file `f` keeps that is a function (a macro): DuckDB lists those with its built-in ones."""
    return _kept(f) & {m.group(1) for m in _FUNCTION.finditer(f.read_text(encoding="utf-8"))}


def _called(con: duckdb.DuckDBPyConnection, f: Path) -> bool | None:
    """Whether every function of `f` is in `con`, by calling each as a scalar with no arguments: DuckDB looks a
    function up before it checks its kind and arguments, so a missing one is a CatalogException, and one there (a
    scalar macro that takes arguments, a table macro) a BinderException, or none. None where a call says neither."""
    import duckdb

    for name in sorted(_functions(f)):
        try:
            con.execute(f"SELECT {name}() LIMIT 0")
        except duckdb.CatalogException:
            return False
        except duckdb.BinderException:
            continue
        except duckdb.Error:
            return None
    return True


@lru_cache(maxsize=1)
def definitions() -> frozenset[str]:
    """Every name the canonical files define (`@defines`)."""
    return frozenset(d for f in _order() for d in _header(f).defines)


@lru_cache(maxsize=1)
def _order() -> dict[Path, list[Path]]:
    """The canonical files and their includes, in an order that runs each after its includes (read once)."""
    return canonical_order()


@lru_cache(maxsize=None)
def _header(f: Path):
    from ..queries import declarations

    return declarations(f.read_text(encoding="utf-8"), f.name)


@lru_cache(maxsize=None)
def _kept(f: Path) -> frozenset[str]:
    """What canonical file `f` defines that outlives the load: its `@defines` but those it creates in the staging
    database (`nsysql_stage.name`, gone with it)."""
    from ..queries import declarations
    from .raw import STAGE

    text = f.read_text(encoding="utf-8")
    staged = set(re.findall(rf"\b{STAGE}\.(\w+)", text))
    return frozenset(d for d in declarations(text, f.name).defines if d not in staged)


def _release(con: duckdb.DuckDBPyConnection, done: set[str] | None = None) -> None:
    """Drop the staged raw tables that no file left to build reads (`@staging`): their rows are held in memory
    only as long as a question may still need them (a cold summary of 7.7M GPU metric samples held them
    to its end, 75 MiB more at its peak). `done`: the files `con` holds, where the caller knows them (`built`
    lists them from DuckDB's catalog, whose function list holds every built-in function too)."""
    from .raw import RAW_TABLES, STAGE, staged

    have = staged(con)
    if not have:
        return
    done = built(con) if done is None else done
    needed = {s for f in _order() if f.name not in done for s in _header(f).staging}
    for t in sorted(have & {rt.name for rt in RAW_TABLES} - needed):
        con.execute(f"DROP TABLE IF EXISTS {STAGE}.{t}")


def lacks(con: duckdb.DuckDBPyConnection, tables, whole_files: bool = False) -> bool:
    """Whether `con` lacks a canonical file that `tables` (None: every table) need (`whole_files`: see built)."""
    return not {f.name for f in plan(tables)[0]} <= built(con, whole_files)


def extend(src: Source, con: duckdb.DuckDBPyConnection, tables, progress=None) -> list[str]:
    """Add to `con` (a build of `src`, or its cache entry opened for writing) the canonical files `tables` need
    that it lacks, reading from the export only the staging tables they read that `con` does not hold yet; the
    names of the files run."""
    from .raw import stage, staged, unstage

    files, _ = plan(tables)
    have = built(con)
    todo = {f for f in files if f.name not in have}
    if not todo:
        return []
    # a file that defines only staging views or tables (25_calls.sql) left them in the load that ran it, gone
    # with it: it runs again for the files left to build that include it
    order = _order()
    for f in reversed(files):
        if f in todo:
            todo.update(g for g in order[f] if not _kept(g))
    todo = [f for f in files if f in todo]
    todo_staging: set[str] = set()
    for f in todo:
        todo_staging.update(s for s in _header(f).staging if "." not in s)
    stage(src, con, progress, names=todo_staging - staged(con))  # (and puts the staging in `con`'s search path)
    src.unchanged()
    _write_beyond(src, con)  # data_quality's, of the tables this process read
    # every file replaces what it defines (CREATE OR REPLACE): one stopped halfway lacks a definition (`built`)
    # and runs again whole next time
    run_files(con, todo, progress)
    done = have | {f.name for f in todo}  # every file of `todo` ran (run_files raises otherwise)
    # nothing left to build: the staged rows are not needed (else they stay, out of the search path)
    unstage(con, detach=len(done) == len(_order()))
    _release(con, done)
    return [f.name for f in todo]


# What each canonical SQL file builds, as the progress line of a cold load says it (`building iterations`); a
# file not listed is named by its stem.
BUILDING = {
    "00_macros": "shared rules",
    "05_strings": "names",
    "10_processes_threads": "processes and threads",
    "20_devices": "GPUs",
    "25_calls": "CUDA API calls",
    "30_api_calls": "CUDA API calls",
    "40_gpu_ops": "GPU operations",
    "42_op_launch": "which calls launched the GPU operations",
    "43_gpu_ops_named": "GPU operations with their names",
    "44_kernel_rules": "kernel naming rules",
    "45_kernel_classes": "kernel categories",
    "46_device_layers": "GPU layers",
    "47_gpu_memory": "GPU memory allocations",
    "48_gpu_activity": "SM and tensor activity",
    "48_gpu_metrics": "GPU metrics",
    "48_gpu_metric_counts": "GPU metrics counts",
    "49_kernel_tensor_use": "tensor-core use",
    "50_nvtx": "NVTX ranges",
    "55_graph_nodes": "CUDA graph nodes",
    "55_nvtx_payloads": "NVTX payloads",
    "56_session_clock": "the session's clock",
    "60_op_ranges": "which NVTX ranges launched which kernels",
    "65_cpu_samples": "CPU samples",
    "66_cpu_threads": "thread states",
    "67_thread_roles": "thread roles",
    "68_python_samples": "Python samples",
    "70_profile_facts": "profile facts",
    "80_gpu_busy": "GPU busy time",
    "90_process_roles": "main threads and devices",
    "95_data_quality": "data quality checks",
}


def _while_reading(con: duckdb.DuckDBPyConnection, files: list[Path], stop=None):
    """Start the files of `files` that read nothing (no @include, @staging or @tables: the macros, the kernel
    rules' constants) on a thread and cursor of their own, so that they are built while the export is read and the
    files that include them start as soon as its rows are staged. Returns those files and a function that waits
    for them (raising their error). One after another with the rest where nsysql.tuning's `parallel_sql` is off."""
    free = [f for f in files if not (_order()[f] or _header(f).staging or _header(f).tables)]
    if not free or not tuning.on("parallel_sql"):
        return [], lambda: None
    from concurrent.futures import ThreadPoolExecutor

    where = con.execute("SELECT current_database(), current_setting('search_path')").fetchall()[0]

    def run():
        cur = cursor(con, where)
        try:
            for f in free:
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt  # abandoned: nothing more is written into the entry
                if not _made_empty(cur, f):  # as run_files runs each file
                    cur.execute(f.read_text(encoding="utf-8"))
        finally:
            cur.close()

    pool = ThreadPoolExecutor(1, thread_name_prefix="nsysql-sql-early")
    done = pool.submit(run)
    pool.shutdown(wait=False)  # its one thread ends with `run`
    return free, done.result


def run_files(con: duckdb.DuckDBPyConnection, files=None, progress=None, later=None, stop=None) -> None:
    """Run the canonical SQL files (`files`: all of them), each on its own cursor as soon as the files it
    `@include`s are done (queries.canonical_order: the DAG their headers declare): independent files (gpu_busy
    and op_ranges, say) run at once, which keeps more cores busy than DuckDB does inside one statement (a window
    over one device's ops is mostly serial). TEMP tables are the file's own. `later()`, called on this thread
    while `files` run, returns more files to run with them, each as soon as its includes are done (the files a
    cold load's first question adds: see `build`). `stop` set (the load abandoned): no file starts after it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    whole = _order()
    keep = set(whole if files is None else files)  # a subset: the includes it lacks are built already
    lock, started, total = threading.Lock(), [], [len(keep) if later is None else None]
    where = con.execute("SELECT current_database(), current_setting('search_path')").fetchall()[0]

    def tell(f) -> None:  # under `lock`: told in the order counted, once the total is known (after `later`)
        if progress and total[0] is not None:
            progress(f"building {BUILDING.get(f.stem, f.stem)} (step {started.index(f) + 1} of {total[0]})")

    def run(f, deps):
        for d in deps:
            d.result()  # and re-raises its error
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt  # abandoned: nothing more is written into the entry being built
        with lock:
            started.append(f)
            tell(f)
        cur = cursor(con, where)
        try:
            if not _made_empty(cur, f):
                cur.execute(f.read_text(encoding="utf-8"))
        finally:
            cur.close()

    done: dict[Path, object] = {}

    def submit(pool, chosen) -> None:
        for f, includes in whole.items():  # in order: each after its includes, whose futures exist
            if f in chosen:  # (an include not chosen, nor submitted before, is built already)
                done[f] = pool.submit(run, f, [done[g] for g in includes if g in done])

    workers = len(whole) if tuning.on("parallel_sql") else 1  # one worker: the files in order, one at a time
    with ThreadPoolExecutor(workers, thread_name_prefix="nsysql-sql") as pool:
        submit(pool, keep)
        if later is not None:
            added = set(later()) - keep
            with lock:
                total[0] = len(keep) + len(added)
                for f in started:  # those started meanwhile
                    tell(f)
            submit(pool, added)
        for f in list(done):
            done[f].result()


def _made_empty(cur: duckdb.DuckDBPyConnection, f: Path) -> bool:
    """Whether canonical file `f` was not run because a set of inputs its header names (`@empty_without`) is
    empty: then what it defines is made here, its tables empty, of the shapes a run gives them (`shapes`)."""
    groups = _header(f).empty_without
    if not groups or not tuning.on("empty_inputs"):
        return False
    empty = " OR ".join("(" + " AND ".join(f"NOT EXISTS (SELECT 1 FROM {t})" for t in g) + ")" for g in groups)
    if not cur.execute(f"SELECT {empty}").fetchall()[0][0]:
        return False
    from .shapes import empty_definitions

    cur.execute(empty_definitions(f.name))
    return True


def cursor(con: duckdb.DuckDBPyConnection, where: tuple[str, str] | None = None) -> duckdb.DuckDBPyConnection:
    """A cursor of `con` (for another thread) that sees the same tables: a new cursor starts in DuckDB's default
    database and search path, not the ones `con` was switched to (the staging database, an opened cache entry).
    `where`: `con`'s (database, search path), read once by a caller making cursors while `con` may be busy."""
    db, path = where or con.execute("SELECT current_database(), current_setting('search_path')").fetchall()[0]
    cur = con.cursor()
    cur.execute(f'USE "{db}"')
    cur.execute("SET search_path = '" + path.replace("'", "''") + "'")
    return cur


# What a profile lacks, said plainly: (staging table, nsys table(s), what its absence means).
_WHAT_IT_MEANS = (
    ("raw_kernel", "CUPTI_ACTIVITY_KIND_KERNEL", "no CUDA kernels traced (captured without -t cuda, or none ran)"),
    (
        "raw_runtime",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "no CUDA API calls (captured without -t cuda): GPU work cannot be tied to threads or NVTX ranges",
    ),
    ("raw_nvtx", "NVTX_EVENTS", "captured without -t nvtx, or the program has no NVTX annotations"),
    ("raw_osrt", "OSRT_API", "captured without -t osrt: gap causes cannot name OS calls"),
    ("raw_memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", "no memory copies traced"),
    (
        "raw_meta",
        "META_DATA_EXPORT",
        "no export metadata (export older than 2022): nsys version read from other tables where they say it",
    ),
    ("raw_gpu_info", "TARGET_INFO_GPU", "GPU models unknown"),
)


def _missing(src: Source, con: duckdb.DuckDBPyConnection) -> list[str]:
    from .raw import RAW_TABLES, STAGE
    from .raw import _select as _raw_select
    from .raw import staged as _staged

    # one query for the tables staged, not one per table (each round trip from this thread needs the GIL, which the
    # main thread's imports may hold at this point); SQLite's first row of the others (a question that reads no
    # CUDA API call reads none of them to say whether there are any)
    have = [s for s, _, _ in _WHAT_IT_MEANS if s in _staged(con)]
    tests = ", ".join(f"NOT EXISTS (SELECT 1 FROM {STAGE}.{s})" for s in have)
    is_empty = dict(zip(have, con.execute(f"SELECT {tests}").fetchall()[0] if have else ()))
    out = _missing_payloads(con)
    for staging, table, meaning in _WHAT_IT_MEANS:
        rt = next(r for r in RAW_TABLES if r.name == staging)
        if staging not in is_empty:
            sql = _raw_select(src, rt)[0]
            is_empty[staging] = sql is None or not src.scalar(f"SELECT EXISTS ({sql} LIMIT 1)")
        if is_empty[staging]:
            present = next((t for t in rt.sources if src.has(t)), None)
            out.append(f"{'empty ' + present if present else 'no ' + table}: {meaning}")
    return out


# the staging tables _missing_payloads counts
_PAYLOAD_STAGING = ("raw_payload_schemas", "raw_nvtx_payload_count")

# the `nsys export` that keeps NVTX payload bytes (nsys leaves them out by default)
REEXPORT_BLOBS = "nsys export --type sqlite --include-blobs=true -o X.sqlite X.nsys-rep"


def _missing_payloads(con: duckdb.DuckDBPyConnection) -> list[str]:
    """NVTX payload schemas declared but no event's bytes: the export was made without --include-blobs."""
    from .raw import STAGE

    schemas, events = con.execute(
        f"SELECT (SELECT count(*) FROM {STAGE}.raw_payload_schemas), "
        f"(SELECT coalesce(sum(rows), 0) FROM {STAGE}.raw_nvtx_payload_count)"
    ).fetchall()[0]
    if schemas and not events:
        return [
            "no NVTX_EVENTS.binaryData: the export left out the NVTX payload bytes its payload schemas describe "
            f"(NCCL message sizes, Python sampling frames); export the report again with `{REEXPORT_BLOBS}`"
        ]
    return []


def __getattr__(name):  # RAW_TABLES without importing raw.py up front
    if name == "RAW_TABLES":
        from .raw import RAW_TABLES

        return RAW_TABLES
    raise AttributeError(name)
