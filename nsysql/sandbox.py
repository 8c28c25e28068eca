"""Where a user's own SQL runs (`nsysql sql`, Profile.sql): a DuckDB database of its own that reads the canonical
tables and can neither write nor reach anything else.

The profile's own connection is no place for it: on a first load it is the read-write connection that built the
cache entry (a write there changes every later answer), and it may write files (export, the background copy of
the entry). So user SQL gets a separate in-memory DuckDB instance whose settings are fixed before the first user
statement runs:

- `enable_external_access = false`: no file, URL, ATTACH, COPY TO, INSTALL or LOAD;
- `autoinstall_known_extensions` / `autoload_known_extensions` / `allow_community_extensions = false`: a
  `FROM 'https://...'` does not fetch an extension;
- `python_enable_replacements = false`: no Python variable of the caller is read as a table;
- `lock_configuration = true`: no SET or PRAGMA changes any of this.

It sees the canonical tables in one of two ways:

- the cache entry, attached READ_ONLY (a DuckDB file: DuckDB refuses any write to it);
- without an entry (`cache=False`, or a cache that could not be written), the profile's own tables, each
  registered as a stream that reads the table afresh from the profile's connection for every scan (no copy
  kept; nothing in the sandbox can write back through a stream), and the shared macros of
  queries/v1/canonical/00_macros.sql created afresh, so user SQL calls the same ones either way.

Before it runs, every statement is judged by DuckDB's parser: only SELECT (and the statements DuckDB parses as
one: FROM, DESCRIBE, SUMMARIZE, VALUES) and EXPLAIN [ANALYZE] of a SELECT.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import queries
from .errors import NsysqlError

if TYPE_CHECKING:
    import duckdb

CATALOG = "nsysql"  # the attached cache entry's name in the sandbox
MACROS = "canonical/00_macros.sql"  # created in the entry; created here too where the tables are streamed

# fixed at connect: the sandbox loads and fetches nothing, and reads no Python variable as a table
CONNECT_SETTINGS = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "python_enable_replacements": False,
}
# set once the tables are in reach (ATTACH is external access), in this order (the lock comes last)
LOCKED_SETTINGS = (("enable_external_access", "false"), ("lock_configuration", "true"))

# tokens that begin a statement DuckDB parses as a SELECT: `EXPLAIN (SELECT ...)` is a statement, not options
_WORDLIKE = re.compile(r"\w+|\S")
_STATEMENT_START = {"select", "with", "from", "values", "table", "(", "summarize", "describe", "show"}


class Sandbox:
    """The user-SQL database of one Profile (shared by its workers); each thread gets its own cursor."""

    def __init__(
        self, entry: Path | None, base: Callable[[], duckdb.DuckDBPyConnection], where, config: Callable[[], dict]
    ):
        self._entry = entry
        self._base = base  # the profile's own connection (opened on first use), for the streamed tables
        self._where = where  # () -> its (database, search path)
        self._config = config  # () -> the profile's DuckDB settings (memory limit, threads, spill directory)
        self._con = None
        self._tables: list[str] | None = None  # streamed tables; None when the entry is attached
        # each thread's cursor, by thread id: not a threading.local, for the reason in nsysql/engine/core.py
        self._thread_cursors: dict[int, duckdb.DuckDBPyConnection] = {}
        self._cursors: list = []
        self._lock = threading.Lock()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        cur = self._thread_cursors.get(threading.get_ident())
        if cur is not None:
            return cur
        with self._lock:
            if self._con is None:
                self._con = self._open()
            cur = self._con.cursor()
            if self._tables is None:
                cur.execute(f"USE {CATALOG}")
            else:
                for t in self._tables:  # a registered stream is a view of this cursor only
                    cur.register(t, _Table(self, t))
            self._cursors.append(cur)
            self._thread_cursors[threading.get_ident()] = cur
            return cur

    def interrupt(self) -> None:
        """Stop the queries running on this sandbox's cursors, whichever thread runs them (each raises DuckDB's
        InterruptException); the cursors stay usable."""
        with self._lock:
            for cur in self._cursors:
                cur.interrupt()

    def close(self) -> None:
        with self._lock:
            for cur in self._cursors:
                cur.close()
            self._cursors.clear()
            self._thread_cursors.clear()
            if self._con is not None:
                self._con.close()
                self._con = None

    def _open(self) -> duckdb.DuckDBPyConnection:
        from . import duck

        con = duck.connect(":memory:", {**self._config(), **CONNECT_SETTINGS})
        try:
            con.execute("SET enable_progress_bar = false")
            if not self._attach(con):
                base = self._base()
                db = self._where()[0]
                self._tables = [
                    r[0]
                    for r in base.execute(
                        "SELECT table_name FROM duckdb_tables() WHERE database_name = $db AND schema_name = 'main' "
                        "UNION SELECT view_name FROM duckdb_views() WHERE database_name = $db AND schema_name = 'main' "
                        "AND NOT internal ORDER BY 1",
                        {"db": db},
                    ).fetchall()
                ]
                con.execute(queries.read(MACROS))  # the shared macros, as an attached entry holds them
            for name, value in LOCKED_SETTINGS:
                con.execute(f"SET {name} = {value}")
        except BaseException:
            con.close()
            raise
        return con

    def _attach(self, con) -> bool:
        """Attach the cache entry read-only, if there is one whole entry; False otherwise."""
        import duckdb

        from . import duck
        from .store import tables as _tables

        if self._entry is None:
            return False
        if not _tables.whole(self._entry):  # an entry copied to disk in the background: in place once whole
            return False
        try:
            con.execute(f"ATTACH {duck.quoted_path(self._entry)} AS {CATALOG} (READ_ONLY)")
        except duckdb.Error:
            return False
        try:
            if con.execute(f"SELECT count(*) FROM {CATALOG}.profile_facts WHERE key = 'complete'").fetchall()[0][0]:
                return True
        except duckdb.Error:
            pass
        con.execute(f"DETACH {CATALOG}")  # not a whole entry: the profile's own connection rebuilds it
        return False

    def stream(self, table: str):
        """The rows of `table` on the profile's own connection, as a new Arrow C stream."""
        from .loader import cursor

        ident = '"' + table.replace('"', '""') + '"'
        return cursor(self._base(), self._where()).sql(f"SELECT * FROM {ident}").__arrow_c_stream__()


class _Table:
    """A profile table as the sandbox sees it without a cache entry: DuckDB asks for a stream per scan."""

    __slots__ = ("name", "sandbox")

    def __init__(self, sandbox: Sandbox, name: str):
        self.sandbox, self.name = sandbox, name

    def __arrow_c_stream__(self, requested_schema=None):
        return self.sandbox.stream(self.name)


def check(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse (NsysqlError) unless every statement of `sql` only reads: judged by DuckDB's parser."""
    statements = con.extract_statements(sql)
    if not statements:
        raise NsysqlError("the query is empty")
    for st in statements:
        kind = _kind(st)
        if kind == "EXPLAIN":
            inner = _explained(con, st.query)
            if inner != "SELECT":
                raise NsysqlError(
                    f"queries here only read (SELECT, EXPLAIN of a SELECT); this one explains "
                    f"{inner or 'something else'}. For tables of your own, use `nsysql export` or "
                    "Profile.con in Python"
                )
        elif kind != "SELECT":
            raise NsysqlError(
                f"queries here only read (SELECT, EXPLAIN of a SELECT); this one is {kind}. For "
                "tables of your own, use `nsysql export` or Profile.con in Python"
            )
    if len(statements) > 1:  # DuckDB would run them all and answer with the last one's rows only
        raise NsysqlError(
            f"give one query at a time: this one holds {len(statements)} statements (separated by `;`), and "
            "only the last one's rows would come back"
        )


def _kind(st) -> str:
    return str(st.type).rsplit(".", 1)[-1]


def _explained(con, text: str) -> str | None:
    """The type of the one statement an EXPLAIN [ANALYZE] [(options)] statement explains (None if not one).
    DuckDB's grammar: EXPLAIN, then ANALYZE/ANALYSE or a parenthesised option list, then the statement."""
    import duckdb

    tokens = [a for a, kind in duckdb.tokenize(text) if "comment" not in str(kind)]
    words = [_WORDLIKE.match(text, a).group(0).lower() for a in tokens]
    if not words or words[0] != "explain":
        return None
    i = 1
    if i < len(words) and words[i] in ("analyze", "analyse"):
        i += 1
    if i < len(words) and words[i] == "(" and (i + 1 >= len(words) or words[i + 1] not in _STATEMENT_START):
        depth = 0  # an option list: the statement follows its closing parenthesis
        for j in range(i, len(words)):
            depth += words[j] == "("
            depth -= words[j] == ")"
            if depth == 0:
                i = j + 1
                break
        else:
            return None
    if i >= len(tokens):
        return None
    try:
        inner = con.extract_statements(text[tokens[i] :])
    except duckdb.Error:
        return None
    return _kind(inner[0]) if len(inner) == 1 else None
