"""Open an nsys SQLite export read-only, check that it is one, and read columns from it as Arrow batches.

Nothing here writes: the file is opened with SQLite's `mode=ro&immutable=1`, which takes no locks and creates
no journal, WAL or shm file beside it. Rows travel as Arrow record batches (ADBC's SQLite driver, or the
standard library's sqlite3 when that driver is missing), never as a whole table of Python objects.

`immutable=1` also tells SQLite that nothing else writes the file, so SQLite itself would not see a file that
is being written, nor changes still in a `-wal` log or a `-journal` beside it. So `open_source` refuses such
a file (one line naming it and what to do), and `Source.unchanged()`, called once every row is read, refuses
one that changed meanwhile. Reading those files properly without immutable would need SQLite to create a
`-shm` beside the export (WAL) or to roll a journal back into it, both writes beside or into the input.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..errors import NsysqlError, one_line
from ..filekind import SQLITE_MAGIC, looks_like_report, special_file

if TYPE_CHECKING:
    import pyarrow as pa


def looks_like_sqlite(path: str | Path) -> bool:
    """Whether `path` begins with the SQLite header (False when it cannot be read): the check the loader makes
    first, for callers that only pick among files."""
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


BATCH_ROWS = 65536  # rows per batch of Python's sqlite3 (the fallback without the ADBC driver)
# Rows per Arrow batch of the ADBC driver. The driver reads the first batch when the query starts, on the reader
# thread and without the GIL, and a cold load starts its readers before importing DuckDB (see raw.Readers), so
# a larger first batch is more of the export read while DuckDB is imported (measured in the commit that set
# it; no cost in time or peak memory at 10M kernels). A batch is at most 12 integer columns: 262,144 rows are about 25 MB per reader.
STREAM_BATCH_ROWS = 262144

# SQLite's names for a rowid table's row id, in the order tried (Source.rowid).
ROWID_NAMES = ("rowid", "_rowid_", "oid")

# Tables any nsys export has, whatever its version (INDEX.md of the public exports).
NSYS_MARKER_TABLES = {"StringIds", "ThreadNames"}


@dataclass
class Source:
    """An nsys export on disk and what it holds: table name -> list of column names."""

    path: Path
    tables: dict[str, list[str]] = field(default_factory=dict)
    stamp: tuple = ()  # what `unchanged()` compares: see _stamp
    failures: list = field(default_factory=list, repr=False, compare=False)  # errors `read`'s batches raised
    # (table, column, rows) per batch of `read` that held REALs beyond 64-bit integers in an integer column: read as
    # NULL (see _to_int64); the loader sums them for data_quality
    beyond_int64: list = field(default_factory=list, repr=False, compare=False)

    def unchanged(self) -> None:
        """Raise NsysqlError if the file, or a log beside it, changed since `open_source` (another program
        writes it): what was read may be torn, and must not be answered from nor cached."""
        now = _stamp(self.path)
        if self.stamp and now != self.stamp:
            what = [name for name, a, b in zip(_STAMP_FIELDS, self.stamp, now) if a != b]
            raise NsysqlError(
                f"changed while nsysql read it ({', '.join(what)}): another program is writing it; "
                "run again once it has finished",
                str(self.path),
            )

    def rowid(self, table: str) -> str:
        """The name that reads SQLite's rowid of `table`: `rowid`, else `_rowid_`, else `oid`, the first that no
        declared column shadows (SQLite's names are case-insensitive, and a declared column of one of these names
        reads that column, not the rowid). Raises NsysqlError when all three are declared: the table's rows then
        cannot be addressed, and reading a column of that name as the rowid would give rows one id."""
        declared = {c.lower() for c in self.tables.get(table, ())}
        for name in ROWID_NAMES:
            if name not in declared:
                return name
        raise NsysqlError(
            f"table {table} declares columns named rowid, _rowid_ and oid, which hide SQLite's row ids that "
            "nsysql addresses its rows by; not a table nsys writes",
            str(self.path),
        )

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.tables.get(table)
        if cols is None:
            return False
        return column is None or column in cols

    # -- reading ---------------------------------------------------------------------------------------
    def _uri(self) -> str:
        return "file:" + urllib.parse.quote(str(self.path)) + "?mode=ro&immutable=1"

    def sqlite(self) -> sqlite3.Connection:
        # one reader at a time, but DuckDB may pull its batches on another thread than the one that opened it
        con = sqlite3.connect(self._uri(), uri=True, check_same_thread=False)
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        return con

    def scalar(self, sql: str):
        con = self.sqlite()
        try:
            row = con.execute(sql).fetchone()
        except sqlite3.DatabaseError as e:
            raise NsysqlError(f"cannot read the export ({e})", str(self.path)) from None
        finally:
            con.close()
        return row[0] if row else None

    def approx_rows(self, table: str) -> int:
        """max(rowid): the row count of an nsys table without scanning it (0 for a table whose row ids
        cannot be addressed: see `rowid`)."""
        return self.approx_rows_of([table])[table]

    def approx_rows_of(self, tables) -> dict[str, int]:
        """approx_rows of each table, on one connection (each connection parses the export's schema again)."""
        out = {}
        con = self.sqlite()
        try:
            for table in tables:
                try:
                    rowid = self.rowid(table)
                    out[table] = int(con.execute(f"SELECT max({rowid}) FROM {q(table)}").fetchone()[0] or 0)
                except (sqlite3.DatabaseError, NsysqlError, TypeError, ValueError):
                    out[table] = 0
        finally:
            con.close()
        return out

    @contextlib.contextmanager
    def stream(self, sql: str) -> Iterator[object]:
        """Run `sql` with ADBC's SQLite driver and yield its result as an Arrow C stream (the PyCapsule
        interface), for DuckDB to scan without Python in between. ImportError without the driver."""
        # the driver manager's own API, not its DB-API module: that one imports pyarrow.dataset and polars
        import adbc_driver_manager  # noqa: PLC0415
        import adbc_driver_sqlite  # noqa: PLC0415

        db = adbc_driver_sqlite.connect(self._uri())
        con = adbc_driver_manager.AdbcConnection(db)
        stmt = adbc_driver_manager.AdbcStatement(con)
        try:
            stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(STREAM_BATCH_ROWS)})
            stmt.set_sql_query(sql)
            handle, _ = stmt.execute_query()
            yield handle
        finally:
            stmt.close()
            con.close()
            db.close()

    def read(self, sql: str, schema: pa.Schema, table: str = "") -> pa.RecordBatchReader:
        """Run `sql` on the export and stream its rows as Arrow batches of `schema`, through pyarrow (the
        fallback of raw.stage; `stream` is the fast path).

        Text columns are read as bytes and decoded here, invalid UTF-8 replaced by U+FFFD, because some real
        exports (Windows captures) hold Latin-1 bytes in TEXT columns. REALs in an integer column are read as
        `_to_int64` says (the fast reader's DuckDB cast refuses those beyond 64 bits, which sends the table here).
        `table`: the nsys table read, named in `beyond_int64`.
        """
        import pyarrow as pa

        try:
            import adbc_driver_sqlite  # noqa: F401, PLC0415

            batches = self._stream_batches(sql)
        except ImportError:
            batches = _read_sqlite3(self, sql, schema)
        return pa.RecordBatchReader.from_batches(
            schema, _conform(batches, schema, self.path, self.failures, (table, self.beyond_int64))
        )

    def read_error(self, e: BaseException) -> NsysqlError:
        """The error to say when scanning `read`'s batches failed with `e`: the reader's own error (which names
        the file) if it raised one, not DuckDB's wrapping of it (which appends a Python traceback)."""
        if self.failures:
            return self.failures[-1]
        return NsysqlError(f"cannot read the export ({one_line(e)})", str(self.path))

    def _stream_batches(self, sql: str) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        with self.stream(sql) as handle:
            yield from pa.RecordBatchReader.from_stream(handle)


def _read_sqlite3(source: Source, sql: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    con = source.sqlite()
    con.text_factory = bytes
    try:
        cur = con.execute(sql)
        while True:
            rows = cur.fetchmany(BATCH_ROWS)
            if not rows:
                break
            cols = list(zip(*rows))
            arrays = []
            for i, f in enumerate(schema):
                t = pa.binary() if pa.types.is_string(f.type) else f.type
                try:
                    arrays.append(pa.array(cols[i], type=t))
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # REALs among integers: _conform
                    arrays.append(pa.array(cols[i]))
            yield pa.RecordBatch.from_arrays(arrays, names=schema.names)
    finally:
        con.close()


def _conform(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, path: Path, failures: list, beyond=("", [])
) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    table, counts = beyond
    try:
        for b in batches:
            arrays = []
            for i, f in enumerate(schema):
                a = b.column(i)
                if pa.types.is_string(f.type):
                    a = _to_utf8(a)
                elif pa.types.is_int64(f.type) and pa.types.is_floating(a.type):
                    a, n = _to_int64(a)
                    if n:
                        counts.append((table, f.name, n))
                elif a.type != f.type:
                    a = a.cast(f.type, safe=False) if not pa.types.is_null(a.type) else pa.nulls(len(a), f.type)
                arrays.append(a)
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    except NsysqlError as e:
        failures.append(e)
        raise
    except Exception as e:  # noqa: BLE001 - any driver error means the file cannot be read
        failures.append(NsysqlError(f"cannot read the export ({one_line(e)})", str(path)))
        raise failures[-1] from None


def _to_int64(a: pa.Array) -> tuple[pa.Array, int]:
    """REALs of an integer column as 64-bit integers, rounded to the nearest (ties to even, as the fast reader's
    DuckDB cast rounds those it takes), and the number that are NULL here for being no 64-bit integer: NaN, or
    beyond +-2^63 (a plain cast would wrap them round to INT64_MIN, a negative size or time)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    fits = pc.and_(pc.less(a, 2.0**63), pc.greater_equal(a, -(2.0**63)))  # NaN compares false: not fitting
    kept = pc.if_else(fits, a, pa.scalar(None, a.type))
    return pc.round(kept).cast(pa.int64(), safe=False), kept.null_count - a.null_count


def _to_utf8(a: pa.Array) -> pa.Array:
    import pyarrow as pa

    if pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
        a = a.cast(pa.binary()) if pa.types.is_string(a.type) else a.cast(pa.large_binary())
    if pa.types.is_null(a.type):
        return pa.nulls(len(a), pa.string())
    if not (pa.types.is_binary(a.type) or pa.types.is_large_binary(a.type)):
        import pyarrow.compute as pc  # only here: a costly import, needed for TEXT columns alone

        return pc.cast(a, pa.string())  # numbers stored in a TEXT column
    try:
        if pa.types.is_binary(a.type):  # same layout: reinterpret, then check the UTF-8 (no compute kernels)
            s = a.view(pa.string())
            s.validate(full=True)
            return s
        return a.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in a.to_pylist()], pa.string())


# -- opening and checking ----------------------------------------------------------------------------------


def open_source(path: str | os.PathLike) -> Source:
    """Check that `path` is a readable nsys SQLite export and list its tables and columns."""
    shown = str(path)
    p = Path(os.path.expanduser(str(path)))
    if not p.exists():
        raise NsysqlError("no such file", shown)
    if p.is_dir():
        raise NsysqlError("is a directory, not an nsys SQLite export", shown)
    special = special_file(p)
    if special:  # checked before open(): opening a FIFO waits for a writer, forever
        raise NsysqlError(f"is {special}, not an nsys SQLite export (a regular file)", shown)
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise NsysqlError(f"cannot read ({e.strerror})", shown) from None
    if size == 0:
        raise NsysqlError("is empty, not an nsys SQLite export", shown)
    if not head.startswith(SQLITE_MAGIC):
        if looks_like_report(p, head):
            raise NsysqlError(
                "is an Nsight Systems report, not its SQLite export; make one with "
                f"`nsys export --type sqlite {p.name}` (or profile with --export=sqlite)",
                shown,
            )
        raise NsysqlError("is not an Nsight Systems export or report (not a SQLite file)", shown)
    if len(head) < 100:
        raise NsysqlError("is truncated (shorter than a SQLite header)", shown)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(head[28:32], "big")
    if page_size and page_count and page_size * page_count > size:
        raise NsysqlError(
            f"is truncated ({size} bytes on disk, the SQLite header says {page_size * page_count})", shown
        )
    _refuse_unfinished(p, shown)
    src = Source(path=p.resolve(), stamp=_stamp(p.resolve()))
    con = src.sqlite()
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for t in names:
            try:  # the name bound as a value: any table name, quotes included
                src.tables[t] = [r[0] for r in con.execute("SELECT name FROM pragma_table_info(?)", (t,))]
            except sqlite3.DatabaseError:
                if t in NSYS_MARKER_TABLES:
                    raise
                src.tables[t] = []  # a table nsysql does not read (a virtual table of an unknown module)
    except sqlite3.DatabaseError as e:
        raise NsysqlError(f"is not a readable SQLite database ({e})", shown) from None
    finally:
        con.close()
    if not (NSYS_MARKER_TABLES & set(src.tables)):
        listed = ", ".join(sorted(src.tables)[:5]) or "no tables"
        raise NsysqlError(f"is a SQLite file but not an nsys export (it has {listed}; no StringIds table)", shown)
    return src


# -- files being written -----------------------------------------------------------------------------------

_STAMP_FIELDS = ("size", "mtime", "ctime", "inode", "-wal size", "-journal size")
# SQLite's lock bytes (https://sqlite.org/lockingv3.html, os_unix.c): a writer holds a write lock on the
# RESERVED byte, then PENDING, then the SHARED range (EXCLUSIVE); readers hold read locks on the SHARED range.
PENDING_BYTE = 0x40000000
LOCK_BYTES = 2 + 510  # PENDING, RESERVED and the SHARED range


def _stamp(p: Path) -> tuple:
    """What changes when a program writes the export: its size, mtime, ctime and inode, and the size of each
    log beside it (-1: none). ctime and the inode cannot be set back by hand (`touch -d` can set mtime)."""
    st = p.stat()
    logs = (_size(_beside(p, suffix)) for suffix in ("-wal", "-journal"))
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, *logs)


def _beside(p: Path, suffix: str) -> Path:
    return p.with_name(p.name + suffix)


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return -1


def _refuse_unfinished(p: Path, shown: str) -> None:
    """Refuse an export that another program is writing, or whose last write did not finish: its rows are
    (also) in a log beside it, which `immutable=1` reading does not see. Reads and tests locks; writes nothing."""
    import shlex

    for where in dict.fromkeys([p, p.resolve()]):  # SQLite names the logs after the path it was given
        wal = _beside(where, "-wal")
        if _size(wal) > 0:
            raise NsysqlError(
                f"has a write-ahead log beside it ({wal.name}, {_size(wal)} bytes), which may hold rows the file does "
                "not; nsysql reads finished exports only: once nothing writes it, copy it whole with "
                f'`sqlite3 {shlex.quote(shown)} ".backup copy.sqlite"` and analyse the copy',
                shown,
            )
        journal = _beside(where, "-journal")
        if _size(journal) > 0:
            raise NsysqlError(
                f"has a rollback journal beside it ({journal.name}): a write to it is under way or did not finish;"
                " nsysql reads finished exports only: run again once the program writing it has finished (or, if "
                "it crashed, open the file once with sqlite3 to roll the journal back)",
                shown,
            )
    if _write_locked(p):
        raise NsysqlError(
            "is being written by another program (it holds SQLite's write lock on the file); run "
            "again once it has finished",
            shown,
        )


def _write_locked(p: Path) -> bool:
    """Whether another process holds a write lock on the export's SQLite lock bytes (a writer in its RESERVED,
    PENDING or EXCLUSIVE state). Tested by taking, and at once releasing, the read lock any SQLite reader takes
    there (never a write lock). False on platforms without fcntl."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, LOCK_BYTES, PENDING_BYTE)
    except OSError as e:  # another's lock in the way; any other error (no locks on this file system): cannot tell
        import errno

        return e.errno in (errno.EACCES, errno.EAGAIN)
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, LOCK_BYTES, PENDING_BYTE)
        return False
    finally:
        os.close(fd)


def q(name: str) -> str:
    """A SQL identifier, quoted (for SQLite and DuckDB alike)."""
    return '"' + name.replace('"', '""') + '"'
