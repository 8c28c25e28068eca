"""The canonical tables of each export, one DuckDB file each (a second command on the same file skips the load),
and `cache info|clear` and the size cap (`trim`) over the whole store.

Where: store.directory. Named, keyed and written as every value of the store is (nsysql.store): the export's identity and the hash of
nsysql's code, so a changed export or an edited or new nsysql never reads a stale entry.
Built under a temporary name unique to the process (straight into the file, or in memory and copied there by a
background thread while the builder answers), then flushed and renamed into place once whole. Two processes
on the same export both succeed (the last rename wins; readers see a whole file either way; one that meets DuckDB's
file lock loads without the cache that once). An entry in place is never written: a question that needs tables
an entry built in part lacks gets them in a copy renamed over it (`grow`). An entry that cannot be opened, or lacks the `complete` fact
written last, is deleted and rebuilt. A cache directory that cannot be written (read-only, full), at any step,
degrades to an in-memory load with one warning. Answers to questions asked of a profile are stored beside its
entry by store.answers.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
    import polars as pl

from .. import store

SUFFIX = ".duckdb"


def entry(cache_dir: Path, path: Path) -> Path:
    """The entry's file: the export's name (for people listing the directory) and the store's key. Once any
    background write of it by this process is done (`wait`), and marked used (store.used: in use by this process,
    and the most recently used of the directory)."""
    file = Path(f"{store.stem(cache_dir, path)}{SUFFIX}")
    wait(file)
    store.used(file.with_suffix(""))
    return file


def whole(file: Path) -> bool:
    """Whether the entry `file` is in place, once any background write of it by this process is done."""
    wait(file)
    return file.is_file()


def open_entry(file: Path, config: dict) -> duckdb.DuckDBPyConnection | None:
    """A connection whose default catalog is the cached entry, read-only (a question that needs more tables gets
    them in a new entry: `grow`), or None if missing or unusable (or held by another process)."""
    import duckdb

    if not file.exists():
        return None
    con = connect(":memory:", config)
    try:
        con.execute(f"ATTACH '{_sql_str(file)}' AS {ENTRY_DB} (READ_ONLY)")
        con.execute(f"USE {ENTRY_DB}")
        ok = con.execute("SELECT count(*) FROM profile_facts WHERE key = 'complete'").fetchall()[0][0]
        if ok:
            return con
    except duckdb.Error as e:
        # the process that just built it still has it open: whole, but not ours to read now
        if _locked(e):
            con.close()
            return None
    con.close()
    store.remove(file)  # corrupt or half-written: rebuild
    return None


ENTRY_DB = "cache"  # the name a connection gives its cache entry (ATTACH ... AS cache), whatever file it is
_GROWN = [0]  # how many entries this process has grown (`grow`): each copy attached under a name of its own


def grow(con: duckdb.DuckDBPyConnection, file: Path, add) -> None:
    """Add tables to the cache entry `file`, which `con`'s DuckDB holds as ENTRY_DB, without writing it: a copy
    of it, made under a temporary name (store.temp_path), is attached to the same DuckDB (where the export's
    staged rows already are), `add(cursor)` builds into the copy, which is checkpointed, attached as ENTRY_DB in
    place of the old one (ATTACH OR REPLACE: every cursor, by that name, sees the new tables at its next query;
    one running on the old file goes on with it) and renamed over `file` (store.commit). A process that reads
    the old file meanwhile keeps reading a whole file, never one being written: an entry in place is never
    written after its rename. NotWritten where the copy cannot be made or written.

    The copy is of the file in place, which may be another process's newer one: `add` builds what it lacks.
    Two processes that add to one entry at once each answer from their own copy; the last rename stays."""
    import shutil

    import duckdb

    _GROWN[0] += 1
    name = f"nsysql_grow_{_GROWN[0]}"
    tmp = store.temp_path(file)
    cur = con.cursor()  # its own current database: memory, then the copy
    try:
        try:
            shutil.copyfile(file, tmp)
            cur.execute(f"ATTACH '{_sql_str(tmp)}' AS {name}")
            cur.execute(f"USE {name}")
            with writing(cur):
                add(cur)
                cur.execute(f"CHECKPOINT {name}")
        except (OSError, duckdb.IOException) as e:
            raise NotWritten() from e
        finally:
            cur.execute("USE memory")
            cur.execute(f"DETACH DATABASE IF EXISTS {name}")
        # in the mode the old one was attached in (DuckDB replaces none in another): read-only as an entry opened
        # warm is, else as the cold load that wrote it (nothing writes to an entry in place either way)
        (ro,) = cur.execute("SELECT readonly FROM duckdb_databases() WHERE database_name = ?", [ENTRY_DB]).fetchone()
        cur.execute(f"ATTACH OR REPLACE '{_sql_str(tmp)}' AS {ENTRY_DB}" + (" (READ_ONLY)" if ro else ""))
        if tmp.exists():  # else `nsysql cache clear` from another process removed it: answer, store nothing
            try:
                store.commit(tmp, file)
            except OSError as e:
                raise NotWritten() from e
    finally:
        cur.close()
        store.remove(tmp)
        store.remove(Path(f"{tmp}.wal"))


class NotWritten(Exception):
    """A cache entry could not take what was added to it (the cause is the error): see `writing`."""


@contextlib.contextmanager
def writing(con: duckdb.DuckDBPyConnection):
    """Around adding tables to `con`: where its database is a file (a cache entry) and a write fails (a full
    disk, a file too large), NotWritten from the error. An error of the SQL itself is raised as it is, as is
    one in memory (nothing was to be written)."""
    import duckdb

    try:
        yield
    except (duckdb.InterruptException, duckdb.OutOfMemoryException):
        raise
    except (OSError, duckdb.IOException, duckdb.TransactionException, duckdb.FatalException) as e:
        if file_of(con) is None:
            raise
        raise NotWritten() from e


def file_of(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        got = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    except Exception:  # noqa: BLE001 - a database DuckDB invalidated after a failed write
        return "?"
    return got[0][0] if got and got[0][0] else None


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
    with cores to spare and memory for a second copy (nsysql.store.opening decides). The interpreter waits for the
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
            store.claim(file.with_suffix(""))
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
        store.claim(file.with_suffix(""))  # before the entry: what `cache clear` may remove
        # attached by name, as an entry opened later is (open_entry): a question that adds tables attaches the
        # new entry under that name (`grow`)
        con = connect(":memory:", config)
        con.execute(f"ATTACH '{_sql_str(tmp)}' AS {ENTRY_DB}")
        con.execute(f"USE {ENTRY_DB}")
        build(con)
        con.execute("INSERT INTO profile_facts VALUES ('complete', 'yes')")
        con.execute(f"CHECKPOINT {ENTRY_DB}")
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
        store.release(file.with_suffix(""))  # no entry after all: no marker either


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
        store.release(file.with_suffix(""))


# cold builds waiting to hear what their first question reads (nsysql.store.opening's `_Question`), by entry (or
# another key): `wait` tells them to go on with what they have, and waits for them
SETTLE: dict[object, object] = {}


def wait(file: Path | None = None) -> None:
    """Wait until the entry `file` (default: every entry) being written in the background is in place."""
    for key in [file] if file is not None else list(SETTLE):
        settle = SETTLE.pop(key, None)
        if settle is not None:
            settle()
    for f in [file] if file is not None else list(_PENDING):
        t = _PENDING.get(f)
        if t is not None:
            t.join()
            _PENDING.pop(f, None)


def connect(database: str, config: dict) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with nsysql's settings: memory limit, spill directory, no progress bar (and extensions
    locked, a path always a path: nsysql.duck)."""
    import duckdb

    from .. import duck

    con = duck.connect(database, config)
    # No row-group merging at checkpoint: a parallel CREATE TABLE AS leaves a few partly filled row groups, and
    # merging them recompresses the whole table on one thread, to save a few KB of the cache entry. No fsync of
    # the log at each commit: every file this connection writes is a temporary entry, flushed whole by
    # store.commit before the rename that puts it in place, so a crash leaves at most a temporary file, never a
    # half-synced entry under its name; syncing each of a build's hundred commits only waited for the disk.
    con.execute("SET enable_progress_bar = false")
    for setting in ("max_vacuum_tasks = 0", "fsync_mode = 'NONE'"):
        try:
            con.execute(f"SET {setting}")
        except duckdb.Error:  # a DuckDB without the setting
            pass
    return con


def entries(cache_dir: Path) -> list[Path]:
    """The entries in `cache_dir` that nsysql wrote (their marker proves it, or their content: `stems`)."""
    return [e for e in (Path(f"{stem}{SUFFIX}") for stem in stems(cache_dir)) if e.is_file()]


def stems(cache_dir: Path, listing: store.Listing | None = None) -> list[Path]:
    """The stems of the store's values in `cache_dir`: those with a marker (store.owned), and those of entries
    written before markers were (nsysql 0.3 and earlier), proven by name and content (`_legacy`). `listing`: the
    names in `cache_dir`, where the caller read them already (store.Listing)."""
    own = store.owned(cache_dir, listing)
    if not cache_dir.is_dir():
        return own
    mine = set(own)
    found = cache_dir.glob(f"*{SUFFIX}") if listing is None else listing.ending(SUFFIX)
    old = [f.with_suffix("") for f in found if f.with_suffix("") not in mine and _legacy(f)]
    return sorted(own + old)


_LEGACY_NAME = re.compile(r"[A-Za-z0-9._-]*-[0-9a-f]{32}\.duckdb")
_LEGACY_FACTS = {"complete", "source_path", "nsysql_version", "canonical_schema"}


def _legacy(f: Path) -> bool:
    """Whether `f` is an entry an nsysql without markers wrote: named `<name>-<key>.duckdb` as store.stem names
    them, a plain file, and a DuckDB database whose profile_facts holds nsysql's facts (`complete` among them)."""
    if not _LEGACY_NAME.fullmatch(f.name) or f.is_symlink() or not f.is_file():
        return False
    import duckdb

    from .. import duck

    try:
        con = duck.connect(f, read_only=True, files=[])
    except duckdb.Error:  # not a DuckDB database, or one held open by a writer
        return False
    try:
        keys = {k for (k,) in con.execute("SELECT DISTINCT key FROM profile_facts").fetchall()}
    except duckdb.Error:
        return False
    finally:
        con.close()
    return _LEGACY_FACTS <= keys


OLD_EXPORTS = "exports"  # where nsysql 0.4.0 and 0.3 kept the exports of reports, apart from their entries


def old_exports(cache_dir: Path) -> list[Path]:
    """The SQLite exports of `.nsys-rep` reports that nsysql 0.4.0 kept apart from the report's entry,
    `exports/<key>/<name>.sqlite` with its marker beside it (and 0.3's, without: `_legacy_export`). Never read
    now (a report's export is in its entry: store.export_path); counted, trimmed and cleared."""
    d = cache_dir / OLD_EXPORTS
    if not d.is_dir() or d.is_symlink():
        return []
    out = []
    for k in sorted(d.iterdir()):
        if k.is_dir() and not k.is_symlink():
            out += [e for e in (Path(f"{stem}.sqlite") for stem in store.owned(k)) if e.is_file()] or _legacy_export(k)
    return out


def _legacy_export(k: Path) -> list[Path]:
    """The export in `exports/<key>/` that an nsysql without markers kept (0.3): a folder named by a key (32 hex
    digits) holding one file, `<name>.sqlite`, which opens as an nsys SQLite export. Still read (its key is the
    report's), so still cleared."""
    from ..errors import NsysqlError
    from ..loader.source import open_source

    if not _KEY.fullmatch(k.name):
        return []
    files = list(k.iterdir())
    if len(files) != 1 or files[0].suffix != ".sqlite" or files[0].is_symlink() or not files[0].is_file():
        return []
    try:
        open_source(files[0])
    except NsysqlError:
        return []
    return files


_KEY = re.compile(r"[0-9a-f]{32}")


def _export_temps(cache_dir: Path) -> list[Path]:
    """Folders nsysql 0.4.0 made an `.nsys-rep` export in (`exports/.<key>.<pid>.<random>.tmp`, with a marker
    inside)."""
    d = cache_dir / OLD_EXPORTS
    if not d.is_dir() or d.is_symlink():
        return []
    return [
        t
        for t in sorted(d.glob(".*.tmp"))
        if t.is_dir() and not t.is_symlink() and store._temp_pid(t) is not None and store.owned(t)
    ]


def describe(file: Path, facts: _Facts | None = None) -> dict:
    """Source path, size and age of one entry. `facts`: the reader of entries' facts that a caller describing
    many entries shares (_Facts); else the entry is opened alone."""
    info = {"entry": file.name, "bytes": file.stat().st_size, "source_path": None, "complete": False}
    found = facts.read(file) if facts is not None else _facts_alone(file)
    if found is not None:
        info["source_path"] = found.get("source_path")
        info["complete"] = found.get("complete") == "yes"
        info["source_exists"] = bool(info["source_path"]) and Path(info["source_path"]).exists()
    return info


def _facts_alone(file: Path) -> dict | None:
    """The profile_facts of the entry `file`, opened in a DuckDB instance of its own; None where it cannot be
    opened or read (not a DuckDB database, damaged, held by a writer, without the table)."""
    import duckdb

    from .. import duck

    try:
        con = duck.connect(file, read_only=True, files=[])
        try:
            return dict(con.execute("SELECT key, value FROM profile_facts").fetchall())
        finally:
            con.close()
    except duckdb.Error:
        return None


class _Facts:
    """The profile_facts of many entries of `cache_dir` read through one DuckDB instance, each attached read-only
    in turn: starting an instance costs more than reading an entry's facts, so `cache info` is not to start one
    per entry. The instance may touch files in `cache_dir` only (nsysql.duck: external access off).

    An entry the shared instance fails to attach or read is read alone (`_facts_alone`), so its facts are what an
    instance of its own reads (None where that fails too): a link to an entry outside the directory, which the
    shared instance may not open, is read, and a damaged entry, or one a writer holds, has none either way. The
    instance is started afresh after any failure, so that none left in a bad state reads the next entry."""

    _AS = "nsysql_entry"  # the name each entry is attached under, for as long as its facts are read

    def __init__(self, cache_dir: Path):
        self.dir = cache_dir
        self._con: duckdb.DuckDBPyConnection | None = None

    def read(self, file: Path) -> dict | None:
        import duckdb

        from .. import duck

        try:
            if self._con is None:
                self._con = duck.connect(duck.MEMORY, files=[self.dir])
            self._con.execute(f"ATTACH '{_sql_str(file)}' AS {self._AS} (READ_ONLY)")
            try:
                return dict(self._con.execute(f"SELECT key, value FROM {self._AS}.profile_facts").fetchall())
            finally:
                self._con.execute(f"DETACH DATABASE IF EXISTS {self._AS}")
        except duckdb.Error:
            self.close()
        return _facts_alone(file)

    def close(self) -> None:
        if self._con is not None:
            con, self._con = self._con, None
            con.close()


def info(cache_dir: Path) -> tuple[pl.DataFrame, str]:
    """What `nsysql cache info` shows: one row per entry (`entry` its name, `bytes` of all its values, the
    `source_path` it was loaded from, whether its tables are `complete`, `source_exists`, and a report's `export`);
    a temporary file, of a load still writing or killed while it did, as a row that is not complete; an export
    that nsysql 0.4.0 kept apart, as a row of its own. And one line on the directory (entries, temporary files,
    size in all)."""
    import polars as pl

    listing = store.Listing(cache_dir)  # the directory read once, for every entry (store.Listing)
    with contextlib.closing(_Facts(cache_dir)) as facts:  # one DuckDB instance reads every entry's facts
        rows = [r for r in (_describe_stem(s, listing, facts) for s in stems(cache_dir, listing)) if r is not None]
    kept = [_describe_export(cache_dir, f) for f in old_exports(cache_dir)]
    rows += kept
    temps = unfinished(cache_dir, listing)
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
        "export": pl.String,
    }
    df = (
        pl.DataFrame([{"export": None, **r} for r in rows], schema=schema, orient="row")
        if rows
        else pl.DataFrame(schema={"entry": pl.String, "bytes": pl.Int64, "source_path": pl.String})
    )
    left = sum(not t["running"] for t in temps)
    extra = f", {len(temps)} temporary files ({left} left by killed loads)" if temps else ""
    extra = (f", {len(kept)} exports kept apart by nsysql 0.4.0 (cache clear removes them)" if kept else "") + extra
    n = len(rows) - len(temps) - len(kept)
    line = f"cache: {cache_dir} ({n} entries{extra}, {size(cache_dir, listing) / 2**20:.1f} MiB in all)"
    return df, line


def _describe_stem(stem: Path, listing: store.Listing, facts: _Facts) -> dict | None:
    """An entry as a row of `cache info` (None while it holds nothing whole: only a running or killed load's
    temporary files): its tables' facts (store.tables' `describe`), what its marker names (a report), its
    report's export, and the bytes of all its values."""
    parts = [v for v in store.values(stem, listing) if store._temp_pid(v) is None]
    if not parts:
        return None
    tables = Path(f"{stem}{SUFFIX}")
    row = describe(tables, facts) if tables.is_file() else {"source_path": None, "complete": False}
    export = Path(f"{stem}{store.EXPORT}")
    named = store.note(stem) or None  # a report's entry names its report: the file the user gave
    src = named or row["source_path"]
    return {
        "entry": stem.name,
        "bytes": _bytes(parts),
        "source_path": src,
        "complete": row["complete"],
        "source_exists": bool(src) and Path(src).exists(),
        "export": str(next(export.glob("*.sqlite")).relative_to(stem.parent)) if export.is_dir() else None,
    }


def _describe_export(cache_dir: Path, f: Path) -> dict:
    """A kept export of an `.nsys-rep` as a row of `cache info`: its report is what its marker names."""
    src = store.note(f.with_suffix("")) or None
    return {
        "entry": str(f.relative_to(cache_dir)),
        "bytes": f.stat().st_size,
        "source_path": src,
        "complete": True,  # validated as an nsys export before it was kept
        "source_exists": bool(src) and Path(src).exists(),
    }


def unfinished(cache_dir: Path, listing: store.Listing | None = None) -> list[dict]:
    """The store's temporary files in `cache_dir` (see store.temps): name, size, and whether the process
    writing it still runs (else it was killed, and `clear` deletes the file)."""
    out = []
    for f in store.temps(cache_dir, listing):
        try:
            nbytes = f.stat().st_size
        except OSError:  # renamed into place or removed meanwhile
            continue
        nbytes = _bytes([f]) if f.is_dir() else nbytes  # a report's export being made
        out.append({"entry": str(f.relative_to(cache_dir)), "bytes": nbytes, "running": not store.abandoned(f)})
    return out


def size(cache_dir: Path, listing: store.Listing | None = None) -> int:
    """Bytes of what nsysql keeps in the cache directory: entries, stored answers, per-rank frames, the exports
    of reports, temporary files (a user's own files there are not counted: see clear). `listing`: as `stems`."""
    groups = _owned(cache_dir, listing or store.Listing(cache_dir))
    return sum(_bytes(files) for _, files, _ in groups) + _bytes(_export_temps(cache_dir))


def _owned(cache_dir: Path, listing: store.Listing) -> list[tuple[Path, list[Path], Path | None]]:
    """What `size` counts and `trim` may remove, one entry at a time: (stem, its values and marker, None) for each
    entry, and (stem, the export and its marker, the export) for each export nsysql 0.4.0 kept apart. Beside
    these, `size` counts the temporary folders of those exports (_export_temps)."""
    out = [(s, store.values(s, listing) + [store.marker(s)], None) for s in stems(cache_dir, listing)]
    out += [(e.with_suffix(""), [e, store.marker(e.with_suffix(""))], e) for e in old_exports(cache_dir)]
    return out


def clear(cache_dir: Path) -> int:
    """Delete what nsysql wrote in `cache_dir`, and nothing else: every entry that its marker (or an older
    entry's content) proves nsysql's (`stems`: a report's export, the tables, stored answers and per-rank frames),
    the exports nsysql 0.4.0 kept apart (`old_exports`, with their marker), the temporary files that killed
    processes left, and the code's hash where it was kept here (store.code_memos). Returns the number of entries.

    A load still running keeps its temporary files (and puts its entry in place when done): deleting them from
    under the load would only make that load warn. A file that cannot be removed (a read-only directory) is an
    NsysqlError naming it, once the rest is removed; its marker stays, so a later clear removes it."""
    import shutil

    from ..errors import NsysqlError

    failed: list[tuple[Path, OSError]] = []

    def onexc(fn, path, e) -> None:
        if not isinstance(e, FileNotFoundError):  # else removed meanwhile
            failed.append((Path(path), e))

    def rm(p: Path) -> bool:
        try:
            if p.is_dir() and not p.is_symlink():
                if sys.version_info >= (3, 12):
                    shutil.rmtree(p, onexc=onexc)
                else:
                    shutil.rmtree(p, onerror=lambda fn, path, info: onexc(fn, path, info[1]))
            else:
                p.unlink()
        except FileNotFoundError:  # removed meanwhile (another clear, a load that renamed it)
            return False
        except OSError as e:
            failed.append((p, e))
            return False
        return not os.path.lexists(p)

    # the directory listed once for the removal of every entry's values (store.Listing), and once more after it:
    # a marker stays while a running load still writes a temporary file of its stem, one it made meanwhile too
    listing = store.Listing(cache_dir)
    n, emptied = 0, []
    for stem in stems(cache_dir, listing):
        before = len(failed)
        n += _remove_values(stem, rm, listing)
        if len(failed) == before:
            emptied.append(stem)
    after = store.Listing(cache_dir)
    for stem in emptied:
        _remove_marker(stem, rm, after)
    for e in old_exports(cache_dir):
        _remove_export(e, rm)
    for t in _export_temps(cache_dir):
        if store.abandoned(t):
            rm(t)
    for m in store.code_memos(cache_dir):
        rm(m)
    if failed:
        p, e = failed[0]
        more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
        raise NsysqlError(
            f"cannot remove {p}{more} ({store.why(e)}); removed {n} cache entries, the rest is left as it was",
            str(cache_dir),
        )
    return n


def _remove_stem(stem: Path, rm, failed: list) -> int:
    """Remove the values of `stem` (not the temporary files of a running load), then its marker once nothing of it
    is left; the number of entries removed (0 or 1: one whose values, a temporary file aside, were there)."""
    before = len(failed)
    n = _remove_values(stem, rm)
    if len(failed) == before:
        _remove_marker(stem, rm)
    return n


def _remove_values(stem: Path, rm, listing: store.Listing | None = None) -> int:
    """Remove the values of `stem` but the temporary files of a running load (`listing`: as store.values); 1 where
    a value other than a temporary file was removed, else 0."""
    n = 0
    for v in store.values(stem, listing):
        if store._temp_pid(v) is not None and not store.abandoned(v):
            continue  # a running load's
        if rm(v) and store._temp_pid(v) is None:
            n = 1
    return n


def _remove_marker(stem: Path, rm, listing: store.Listing | None = None) -> None:
    """Remove the marker of `stem`, whose values are removed, unless a running load still writes one of them
    (`listing`: the directory as read after the removal)."""
    if not _running(stem, listing) and os.path.lexists(store.marker(stem)):
        rm(store.marker(stem))  # else kept: what is left is still nsysql's to remove


def _remove_export(e: Path, rm) -> None:
    if rm(e):
        rm(store.marker(e.with_suffix("")))
        try:
            e.parent.rmdir()
        except OSError:
            pass


def _bytes(files: list[Path]) -> int:
    """The bytes of the regular files among `files` and within the folders among them, as a glob and Path.is_file
    count them: a link among `files` followed to the file or folder it names; within a folder, a link to a file
    followed, one to a folder not entered. A file gone meanwhile counts nothing; a folder that fails to be read
    otherwise counts nothing in all."""
    total = 0
    for f in files:
        try:
            st = os.stat(f)
            if stat.S_ISDIR(st.st_mode):
                total += _folder_bytes(f)
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
        except OSError:
            pass
    return total


_GONE = {errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP}  # what a glob or Path.is_file takes as no file


def _folder_bytes(folder: str | os.PathLike) -> int:
    """The bytes of the regular files within `folder`, at any depth (see _bytes), by one listing of each folder
    and one stat of each file (a folder it may not list holds nothing, as for a glob)."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except PermissionError:
        return 0
    total = 0
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                total += _folder_bytes(e.path)
                continue
            st = e.stat()  # the link followed, as Path.is_file follows it
        except OSError as err:
            if err.errno in _GONE:
                continue
            raise
        if stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total


def trim(cache_dir: Path, limit: int | None) -> list[Path]:
    """Keep what nsysql stores in `cache_dir` within `limit` bytes (store.cap; None: no cap): while it holds more,
    remove the least recently used entry (store.last_use): a report's SQLite export with the tables, answers and
    per-rank frames made from it, as `clear` removes them (or an export nsysql 0.4.0 kept apart). Never one in use (store.in_use: loaded by this
    process, being written by a running one), nor one another process holds open (`_held`). Returns the stems
    removed. A value that cannot be removed is left as it is: trimming never fails a command."""
    if limit is None:
        return []
    try:
        return _trim(cache_dir, limit)
    except OSError:  # the directory changed under the listing (another clear or trim): left for the next load
        return []


def _trim(cache_dir: Path, limit: int) -> list[Path]:
    # the directory listed once for every entry (store.Listing), and each entry's bytes counted once, for the
    # total (what `size` counts: _owned) and for what removing it saves; whether an entry is in use is asked of
    # the directory as it is now
    listing = store.Listing(cache_dir)
    sets = [
        (store.last_use(s, listing if export is None else None), s, files, export)
        for s, files, export in _owned(cache_dir, listing)
    ]
    sizes = [_bytes(files) for _, _, files, _ in sets]
    total = sum(sizes) + _bytes(_export_temps(cache_dir))
    removed = []
    for (_, stem, files, export), nbytes in sorted(zip(sets, sizes), key=lambda t: t[0][0]):
        if total <= limit:
            break
        if store.in_use(stem) or _held(Path(f"{stem}{SUFFIX}") if export is None else export):
            continue
        failed: list = []

        def rm(p: Path) -> bool:
            import shutil

            try:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
            except OSError as e:
                if not isinstance(e, FileNotFoundError):
                    failed.append((p, e))
                return False
            return True

        if export is None:
            _remove_stem(stem, rm, failed)
        else:
            _remove_export(export, rm)
        if not failed:
            total -= nbytes
            removed.append(stem)
    return removed


def _held(file: Path) -> bool:
    """Whether another process holds `file` open with a lock (DuckDB locks the database files it opens, shared
    when read-only): a write lock cannot be taken then. Only for files
    this process does not hold (store.in_use): closing a descriptor drops this process's own POSIX locks."""
    try:
        import fcntl
    except ImportError:  # Windows: an open file cannot be removed there anyway
        return False
    try:
        fd = os.open(file, os.O_RDWR)
    except OSError:  # gone, or not ours to write: not held by a reader we know of
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # drops the lock just taken
    return False


def _running(stem: Path, listing: store.Listing | None = None) -> list[Path]:
    """The temporary files of `stem` that a running process still writes (its marker stays for them). `listing`:
    as store.values."""
    return [p for p in store.values(stem, listing) if store._temp_pid(p) is not None and not store.abandoned(p)]


def spill_dir() -> str:
    from .. import duck

    return duck.spill_dir()  # private to this user (see there)


def remove_spill_files() -> None:
    """Delete this process's DuckDB spill files (DuckDB names them duckdb_temp_<pid>_*). DuckDB deletes them
    when its database closes, but the CLI leaves without closing it (_process.leave): after a command that failed
    while its tables were spilled (out of memory), they stayed behind, 188 MB of them for a summary of 500k
    kernels, until another nsysql process happened to spill."""
    if "duckdb" not in sys.modules:  # no database in this process (a warm answer from the store): none spilled
        return
    from .. import duck
    from ..loader.raw import STAGE_FILE_PREFIX

    for pattern in (f"duckdb_temp_{os.getpid()}_*", f"{STAGE_FILE_PREFIX}{os.getpid()}_*"):  # and staging files
        for f in Path(spill_dir()).glob(pattern):
            store.remove(f)
    duck.remove_fresh_spill_dir()


def _sql_str(p: Path) -> str:
    return os.path.abspath(p).replace("'", "''")  # a path, never a URL (a cache dir named `md:`: nsysql.duck)
