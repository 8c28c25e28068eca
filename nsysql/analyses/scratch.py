"""Results that several analysis queries of one profile read, made once per DuckDB instead of once per query.

They live in an in-memory database of their own, attached to the profile's DuckDB (not TEMP tables, which are
one cursor's own): the workers of one request (summary asks iterations, their stats, gaps, ranges and the
breakdown side by side, each on its own cursor) read the one table the first of them made. Apart from the
canonical tables, so that nothing that lists or copies those (export, the cache entry) sees them; a DuckDB of
another Profile has its own. A table is named for everything it is made from (its SQL file and parameter
values), so two results never replace each other, and a query cannot read one that nobody made for it (DuckDB
says the table does not exist). The canonical tables they are made from do not change while a DuckDB holds
them (a build adds tables, never rewrites one), so a result made once stays true.
"""

from __future__ import annotations

import hashlib
import json
import threading

from .. import queries
from ..engine import reading

DB = "nsysql_windows"  # (named for its first tables, the iteration windows)
_GUARD = threading.Lock()
_LOCKS: dict[str, threading.Lock] = {}  # per table name: one thread makes it, the others then find it


def table(con, prefix: str, sql: str, params: dict) -> str:
    """The qualified name of the table holding queries/v1/analyses/`sql`.sql's result for `params` on `con`'s
    DuckDB, made now if it lacks it (the canonical tables the file's header names built first: `reading`)."""
    key = json.dumps([sql, params], sort_keys=True, default=str)
    name = f"{prefix}{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    with _GUARD:
        lock = _LOCKS.setdefault(name, threading.Lock())
        # under the one guard: two cursors of a DuckDB attaching at once (for two different tables) both find it
        # missing, and the second fails ("database with name ... already exists"), IF NOT EXISTS or not
        con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {DB}")
    with lock:
        there = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = ?", [DB, name]
        ).fetchall()[0][0]
        if not there:
            reading(sql)
            con.execute(f"CREATE TABLE {DB}.main.{name} AS " + queries.read(f"analyses/{sql}.sql"), params)
    return f"{DB}.main.{name}"
