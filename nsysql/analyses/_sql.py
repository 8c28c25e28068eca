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
    """The result of one query as a polars DataFrame (through Arrow, no Python rows)."""
    return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())


def facts(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in con.execute(queries.read("analyses/facts.sql")).fetchall():
        out.setdefault(k, []).append(v)
    return out
