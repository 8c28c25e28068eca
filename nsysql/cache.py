"""Cache of canonical tables: one DuckDB file per export, so a second command on the same file skips the load.

Where: `cache_dir` argument, else $NSYSQL_CACHE_DIR, else $XDG_CACHE_HOME/nsysql, else ~/.cache/nsysql.
Named, keyed and written as every value of the store is (nsysql.store): the export's identity and the hash of
nsysql's code, so a changed export or an edited or new nsysql never reads a stale entry.
Built under a temporary name unique to the process (straight into the file, or in memory and copied there by a
background thread while the builder answers), then flushed and renamed into place once whole. Two processes
on the same export both succeed (the last rename wins; readers see a whole file either way; one that meets DuckDB's
file lock loads without the cache that once). An entry that cannot be opened, or lacks the `complete` fact
written last, is deleted and rebuilt. A cache directory that cannot be written (read-only, full), at any step,
degrades to an in-memory load with one warning. Answers to questions asked of a profile are stored beside its
entry by nsysql.memo.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
    import polars as pl

from . import store
from .store import CacheWarning, default_dir  # noqa: F401 (nsysql.cache.CacheWarning, as before)

SUFFIX = ".duckdb"


def entry(cache_dir: Path, path: Path) -> Path:
    """The entry's file: the export's name (for people listing the directory) and the store's key."""
    return Path(f"{store.stem(cache_dir, path)}{SUFFIX}")


def open_entry(file: Path, config: dict) -> duckdb.DuckDBPyConnection | None:
    """A connection whose default catalog is the cached entry (read-only), or None if missing or unusable."""
    import duckdb

    if not file.exists():
        return None
    con = connect(":memory:", config)
    try:
        con.execute(f"ATTACH '{_sql_str(file)}' AS cache (READ_ONLY)")
        con.execute("USE cache")
        ok = con.execute("SELECT count(*) FROM profile_facts WHERE key = 'complete'").fetchall()[0][0]
        if ok:
            return con
    except duckdb.Error as e:
        if _locked(e):  # the process that just built it still has it open: whole, but not ours to read now
            con.close()
            return None
    con.close()
    store.remove(file)  # corrupt or half-written: rebuild
    return None


def _locked(e: Exception) -> bool:
    return "lock" in str(e).lower()


def build_entry(file: Path, build, config: dict, background: bool = False) -> duckdb.DuckDBPyConnection:
    """Run `build(con)` and store the result as the entry `file`; returns the connection to ask questions on.
    The entry is built under a temporary name unique to this process and renamed into place once whole, so no
    reader ever sees half an entry. If it cannot be written, at any step (a read-only directory, a full disk
    when the tables are written, at the checkpoint, or in the background copy), the answers come from memory
    and the store warns once (store.failed).

    In the file (default): the tables are built straight into the entry, checkpointed and renamed, and the
    connection stays open on it (its tables still in DuckDB's buffers). Another process that tries to open it
    meanwhile meets DuckDB's file lock and loads without the cache that once (open_entry).

    `background=True`: built in memory, and a background thread copies the tables into the entry while the
    caller asks its questions from memory. The same CPU in all, but the copy overlaps with answering: worth it
    with cores to spare and memory for a second copy (nsysql._load decides). The interpreter waits for the
    copy before it exits; `wait()` waits sooner.
    """
    try:
        return _build_entry(file, build, config, background)
    except _NotStored as e:
        # Built again in memory. A failure of the load itself (a malformed export: DuckDB's errors do not
        # always say whether reading or writing failed) fails here too, and is the command's to report.
        con = build(connect(":memory:", config))
        store.failed(e.__cause__, file.parent)
        return con


class _NotStored(Exception):
    """The entry could not be written (the cause is the error)."""


def _build_entry(file: Path, build, config: dict, background: bool) -> duckdb.DuckDBPyConnection:
    import duckdb

    tmp = store.temp_path(file)
    if background:
        try:  # can the directory take it at all? (read-only, no permission): say so now, not later
            file.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb"):
                pass
            store.remove(tmp)
        except OSError as e:
            raise _NotStored() from e
        con = connect(":memory:", config)
        build(con)
        con.execute("INSERT INTO profile_facts VALUES ('complete', 'yes')")  # the entry is renamed in only whole
        t = threading.Thread(target=_persist, args=(con.cursor(), tmp, file), name="nsysql-persist")  # not daemon
        t.start()
        _PENDING[file] = t
        return con
    con = None
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        con = connect(str(tmp), config)
        build(con)
        con.execute("INSERT INTO profile_facts VALUES ('complete', 'yes')")
        con.execute("CHECKPOINT")
        if not tmp.exists():  # `nsysql cache clear` meanwhile, from another process: answer, store nothing
            return con
        try:
            store.commit(tmp, file)
        except PermissionError:  # a platform that cannot rename an open file: close, rename, reopen
            con.close()
            con = None
            store.commit(tmp, file)
            return open_entry(file, config)
        return con
    except (duckdb.InterruptException, duckdb.OutOfMemoryException):
        _close(con)
        raise
    except (OSError, duckdb.Error) as e:  # a write that failed (File too large, No space left: a commit, the
        _close(con)  # WAL, a checkpoint), or the load's own error (see build_entry)
        raise _NotStored() from e
    finally:
        store.remove(tmp)
        store.remove(Path(f"{tmp}.wal"))


def _close(con) -> None:
    if con is not None:
        try:
            con.close()
        except Exception:  # noqa: BLE001 - a database DuckDB invalidated after a failed write
            pass


_PENDING: dict[Path, threading.Thread] = {}
PERSIST = "nsysql_persist"


def _persist(cur, tmp: Path, file: Path) -> None:
    import duckdb

    try:
        cur.execute(f"ATTACH '{_sql_str(tmp)}' AS {PERSIST}")
        try:
            db = cur.execute("SELECT current_database()").fetchall()[0][0]
            # the schema (tables, views) first, then the tables' rows side by side, biggest first, each on its
            # own cursor: one COPY FROM DATABASE copies one table after another, and that copy is the last
            # thing a cold command waits for
            cur.execute(f'COPY FROM DATABASE "{db}" TO {PERSIST} (SCHEMA)')
            tables = cur.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
                "ORDER BY estimated_size DESC",
                [db],
            ).fetchall()

            todo = list(reversed(tables))  # popped from the end: biggest first
            errors: list[BaseException] = []

            def copier():
                c = cur.cursor()
                try:
                    while not errors:
                        try:
                            t = todo.pop()
                        except IndexError:
                            return
                        name = f'"{t[0]}"."{t[1]}"'
                        c.execute(f'INSERT INTO {PERSIST}.{name} SELECT * FROM "{db}".{name}')
                except BaseException as e:  # noqa: BLE001 - re-raised below, on this thread
                    errors.append(e)
                finally:
                    c.close()

            # plain threads, not a ThreadPoolExecutor: this copy may still be running when the interpreter
            # shuts down (a script that exits right after load()), and an executor refuses new work then
            n = max(1, min(len(tables), 8))
            copiers = [threading.Thread(target=copier, name="nsysql-persist") for _ in range(n)]
            for t in copiers:
                t.start()
            for t in copiers:
                t.join()
            if errors:
                raise errors[0]
        finally:
            cur.execute(f"DETACH {PERSIST}")
        if tmp.exists():  # else `nsysql cache clear` from another process removed it: store nothing
            store.commit(tmp, file)
    except (OSError, duckdb.Error) as e:  # full disk, or the directory went away
        store.failed(e, file.parent)
    finally:
        cur.close()
        store.remove(tmp)
        store.remove(Path(f"{tmp}.wal"))


def wait(file: Path | None = None) -> None:
    """Wait until the entry `file` (default: every entry) being written in the background is in place."""
    for f in [file] if file is not None else list(_PENDING):
        t = _PENDING.get(f)
        if t is not None:
            t.join()
            _PENDING.pop(f, None)


def connect(database: str, config: dict) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with nsysql's settings: memory limit, spill directory, no progress bar (and extensions
    locked, a path always a path: nsysql.duck)."""
    import duckdb

    from . import duck

    con = duck.connect(database, config)
    con.execute("SET enable_progress_bar = false")
    try:
        # No row-group merging at checkpoint: a parallel CREATE TABLE AS leaves a few partly filled row groups,
        # and merging them recompresses the whole table on one thread, to save a few KB of the cache entry.
        con.execute("SET max_vacuum_tasks = 0")
    except duckdb.Error:  # a DuckDB without the setting
        pass
    return con


def entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob(f"*{SUFFIX}")) if cache_dir.is_dir() else []


def describe(file: Path) -> dict:
    """Source path, size and age of one entry."""
    import duckdb

    from . import duck

    info = {"entry": file.name, "bytes": file.stat().st_size, "source_path": None, "complete": False}
    try:
        con = duck.connect(file, read_only=True, files=[])
        try:
            facts = dict(con.execute("SELECT key, value FROM profile_facts").fetchall())
        finally:
            con.close()
        info["source_path"] = facts.get("source_path")
        info["complete"] = facts.get("complete") == "yes"
        info["source_exists"] = bool(info["source_path"]) and Path(info["source_path"]).exists()
    except duckdb.Error:
        pass
    return info


def info(cache_dir: Path) -> tuple[pl.DataFrame, str]:
    """What `nsysql cache info` shows: one row per entry (`entry, bytes, source_path, complete, source_exists`;
    a temporary file, of a load still writing or killed while it did, as a row that is not complete), and one
    line on the directory (entries, temporary files, size in all)."""
    import polars as pl

    rows = [describe(f) for f in entries(cache_dir)]
    temps = unfinished(cache_dir)
    rows += [
        {"entry": t["entry"], "bytes": t["bytes"], "source_path": None, "complete": False, "source_exists": None}
        for t in temps
    ]
    schema = {
        "entry": pl.String,
        "bytes": pl.Int64,
        "source_path": pl.String,
        "complete": pl.Boolean,
        "source_exists": pl.Boolean,
    }
    df = (
        pl.DataFrame(rows, schema=schema, orient="row")
        if rows
        else pl.DataFrame(schema={"entry": pl.String, "bytes": pl.Int64, "source_path": pl.String})
    )
    left = sum(not t["running"] for t in temps)
    extra = f", {len(temps)} temporary files ({left} left by killed loads)" if temps else ""
    line = f"cache: {cache_dir} ({len(rows) - len(temps)} entries{extra}, {size(cache_dir) / 2**20:.1f} MiB in all)"
    return df, line


def unfinished(cache_dir: Path) -> list[dict]:
    """The store's temporary files in `cache_dir` (see store.temps): name, size, and whether the process
    writing it still runs (else it was killed, and `clear` deletes the file)."""
    out = []
    for f in store.temps(cache_dir):
        try:
            nbytes = f.stat().st_size
        except OSError:  # renamed into place or removed meanwhile
            continue
        out.append({"entry": str(f.relative_to(cache_dir)), "bytes": nbytes, "running": not store.abandoned(f)})
    return out


def size(cache_dir: Path) -> int:
    """Bytes of everything in the cache directory: entries, stored answers, per-rank frames, temporary files."""
    total = 0
    for f in cache_dir.rglob("*") if cache_dir.is_dir() else []:
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:
            pass
    return total


def clear(cache_dir: Path) -> int:
    """Delete every entry (with its stored answers, per-rank frames and the exports of .nsys-rep reports) and the
    temporary files that killed processes left; returns the number of entries. A load still running keeps its
    temporary file (and puts its entry in place when done): deleting it from under the load would only make that
    load warn."""
    import shutil

    if not cache_dir.is_dir():
        return 0
    n = sum(1 for f in entries(cache_dir) if store.remove(f))
    for f in [t for t in store.temps(cache_dir) if store.abandoned(t)] + list(cache_dir.glob("*.parquet")):
        store.remove(f)
    for d in cache_dir.glob("*.results"):
        shutil.rmtree(d, ignore_errors=True)
    for f in (cache_dir / "exports").glob("*/*.sqlite"):  # the SQLite exports of .nsys-rep reports (nsysql.nsys)
        store.remove(f)
        try:
            f.parent.rmdir()
        except OSError:
            pass
    return n


def spill_dir() -> str:
    from . import duck

    return duck.spill_dir()  # private to this user (see there)


def remove_spill_files() -> None:
    """Delete this process's DuckDB spill files (DuckDB names them duckdb_temp_<pid>_*). DuckDB deletes them
    when its database closes, but the CLI leaves without closing it (_process.leave): after a command that failed
    while its tables were spilled (out of memory), they stayed behind, 188 MB of them for a summary of 500k
    kernels, until another nsysql process happened to spill."""
    from . import duck

    for f in Path(spill_dir()).glob(f"duckdb_temp_{os.getpid()}_*"):
        store.remove(f)
    duck.remove_fresh_spill_dir()


def _sql_str(p: Path) -> str:
    return os.path.abspath(p).replace("'", "''")  # a path, never a URL (a cache dir named `md:`: nsysql.duck)
