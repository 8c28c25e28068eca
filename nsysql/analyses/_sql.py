"""Run a SQL file of queries/v1/analyses against the canonical tables and return a polars DataFrame."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb
import polars as pl

from .. import queries


def run(con: duckdb.DuckDBPyConnection, name: str, **params) -> pl.DataFrame:
    sql = queries.read(f"analyses/{name}.sql")
    return frame(con, sql, params)


def frame(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pl.DataFrame:
    """The result of one query as a polars DataFrame: polars reads DuckDB's Arrow C stream itself (no Python
    rows, and no pyarrow: importing it took 0.2-0.3 s of a cold command's critical path on a 16-core machine)."""
    return pl.DataFrame(_Stream(con.sql(sql, params=params or None).__arrow_c_stream__()))


# DuckDB types polars cannot hold (INTERVAL: "could not import from month_day_nano_interval"): shown as text
_AS_TEXT = ("INTERVAL", "BIT", "UNION", "TIME WITH TIME ZONE")


def user_frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """A user's own query (`nsysql sql`, Profile.sql) on a sandbox's cursor as a DataFrame: read-only statements
    only, and columns of types polars cannot hold cast to text."""
    import duckdb

    from ..errors import NsysqlError, one_line

    try:
        return _user_frame(con, sql)
    except duckdb.Error as e:  # a typo in the user's SQL is their input's problem: one line, as the CLI says it
        raise NsysqlError(f"query failed: {one_line(e)}") from None


def _user_frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    from ..sandbox import check

    check(con, sql)  # and `con` is a sandbox's (see nsysql.sandbox): what the check lets through cannot write
    rel = con.sql(sql)
    if rel is None:
        return pl.DataFrame()
    if any(str(t).startswith(_AS_TEXT) for t in rel.types):
        q = lambda c: '"' + c.replace('"', '""') + '"'  # noqa: E731
        rel = rel.project(
            ", ".join(
                f"CAST({q(c)} AS VARCHAR) AS {q(c)}" if str(t).startswith(_AS_TEXT) else q(c)
                for c, t in zip(rel.columns, rel.types)
            )
        )
    return pl.DataFrame(_Stream(rel.__arrow_c_stream__()))


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
