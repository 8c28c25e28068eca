"""Run a SQL file of queries/v1/analyses against the canonical tables and return a polars DataFrame."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
import polars as pl

from .. import queries
from ..engine import reading


def run(con: duckdb.DuckDBPyConnection, name: str, **params) -> pl.DataFrame:
    """queries/v1/analyses/`name`.sql with `params`: exactly the parameters its header declares (`-- @param`)."""
    reading(name)  # the canonical tables its header names, built if the profile's connection lacks them
    sql = queries.read(f"analyses/{name}.sql")
    declared = _declared_params(name)
    if set(params) != declared:
        raise TypeError(
            f"analyses/{name}.sql takes {', '.join('$' + p for p in sorted(declared)) or 'no parameters'}, "
            f"not {', '.join('$' + p for p in sorted(params)) or 'none'}"
        )
    return frame(con, sql, params)


@lru_cache(maxsize=None)
def _declared_params(name: str) -> frozenset[str]:
    return frozenset(queries.declarations(queries.read(f"analyses/{name}.sql"), f"analyses/{name}.sql").param)


def frame(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pl.DataFrame:
    """The result of one query (one statement) as a polars DataFrame: polars reads DuckDB's Arrow C stream
    itself (no Python rows, and no pyarrow, whose import would lie on a cold command's critical path)."""
    return pl.DataFrame(_Stream(_arrow_stream(con, sql, params or None)))


def _arrow_stream(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None):
    """The Arrow C stream of one statement, parsed, bound and planned once. DuckDB's relation (`con.sql(...)`,
    then its stream) parses and binds the text to describe the relation, tokenizes it in Python to find its
    parameter markers, and then parses, binds and plans it again to run it, for each of the two dozen queries
    of a cold `summary`. Its statement submission (what the relation's stream itself calls, with the same text
    and values) does it once. It is not DuckDB's public API: a DuckDB without it, or whose call takes other
    arguments (a TypeError before anything runs; a query's own errors are duckdb.Error), gets the relation."""
    submit = getattr(con, "_submit", None)
    if submit is not None:
        try:
            return submit(sql, params, "stream", _BATCH).arrow_capsule()
        except TypeError:
            pass
    return con.sql(sql, params=params).__arrow_c_stream__()


_BATCH = 131072  # rows per Arrow batch: what the relation's stream asks (duckdb._seam.DEFAULT_BATCH_SIZE)


# The DuckDB types polars holds value for value (by DuckDBPyType.id), and the nested types whose children are
# judged the same way. A user's column of any other type (INTERVAL, BIT, UNION, TIME WITH TIME ZONE, UHUGEINT,
# whose values past 2^127 polars' 128-bit decimal turns negative, BIGNUM/VARINT, VARIANT, GEOMETRY, and any type
# DuckDB adds later), or a nested one holding such a type anywhere, is cast to VARCHAR: DuckDB's own text of it.
_HELD = {
    "boolean",
    "tinyint",
    "smallint",
    "integer",
    "bigint",
    "hugeint",
    "utinyint",
    "usmallint",
    "uinteger",
    "ubigint",
    "float",
    "double",
    "decimal",
    "varchar",
    "blob",
    "date",
    "time",
    "timestamp",
    "timestamp_s",
    "timestamp_ms",
    "timestamp_ns",
    "timestamp with time zone",
    "uuid",
    "enum",
    "null",
}
_NESTED = {"list", "array", "struct", "map"}


def _held(t) -> bool:
    """Whether polars holds the values of DuckDB type `t` (a DuckDBPyType) as they are."""
    kind = t.id
    if kind in _NESTED:
        return all(_held(c) for _, c in t.children if not isinstance(c, int))
    return kind in _HELD


def user_frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """A user's own query (`nsysql sql`, Profile.sql) on a sandbox's cursor as a DataFrame: read-only statements
    only, and columns of types polars cannot hold cast to text."""
    import duckdb

    from ..errors import NsysqlError, one_line

    try:
        return _user_frame(con, sql)
    except duckdb.Error as e:  # a typo in the user's SQL is their input's problem: one line, as the CLI says it
        raise NsysqlError(f"query failed: {one_line(e)}{_canonical_hint(e)}") from None


def _canonical_hint(e: Exception) -> str:
    """For a query that names an nsys table (`CUPTI_ACTIVITY_KIND_KERNEL`, in any case) that the sandbox does not
    have: the canonical table that holds its rows. Empty for any other error."""
    import duckdb

    from ..loader.raw import CANONICAL_FOR

    m = re.search(r"Table with name (\S+) does not exist", str(e))
    if not isinstance(e, duckdb.CatalogException) or not m:
        return ""
    name = m.group(1).strip('"').lower()
    got = next((v for k, v in CANONICAL_FOR.items() if k.lower() == name), None)
    if got is None:
        return ""
    return f" ({m.group(1)} is a table of the nsys export; nsysql's canonical table for it: {got}; `nsysql schema`)"


def _user_frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    from ..sandbox import check

    check(con, sql)  # and `con` is a sandbox's (see nsysql.sandbox): what the check lets through cannot write
    rel = con.sql(sql)
    if rel is None:
        return pl.DataFrame()
    names = _unique(rel.columns)
    held = [_held(t) for t in rel.types]
    if names != rel.columns or not all(held):
        # columns by position (#1, #2, ...): a repeated name cannot be told apart by name
        q = lambda c: '"' + c.replace('"', '""') + '"'  # noqa: E731
        rel = rel.project(
            ", ".join(
                f"#{i} AS {q(c)}" if ok else f"CAST(#{i} AS VARCHAR) AS {q(c)}"
                for i, (c, ok) in enumerate(zip(names, held), start=1)
            )
        )
    return pl.DataFrame(_Stream(rel.__arrow_c_stream__()))


def _unique(columns: list[str]) -> list[str]:
    """Column names made unique as a DataFrame needs them (`SELECT *` over a join repeats `pid`): the first of a
    name keeps it; a repeat becomes `<name>_<n>` with the smallest n = 1, 2, ... that no column is named
    (`pid`, `pid_1`)."""
    taken = set(columns)
    seen: set[str] = set()
    out = []
    for c in columns:
        name, n = c, 0
        while name in seen or (n and name in taken):
            n += 1
            name = f"{c}_{n}"
        seen.add(name)
        out.append(name)
    return out


class _Stream:
    """An Arrow C stream (PyCapsule) for polars to read. Polars is not handed the DuckDB relation itself: it
    probes its argument for `__arrow_c_array__`, and DuckDB 2.0's relation leaks a reference on a failed
    attribute lookup, which keeps DuckDB's module alive at exit and makes nanobind print ~40 lines of "leaked
    instances" when a script that used nsysql ends."""

    __slots__ = ("capsule",)

    def __init__(self, capsule):
        self.capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self.capsule


def facts(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in con.execute(queries.read("analyses/facts.sql")).fetchall():
        out.setdefault(k, []).append(v)
    return out
