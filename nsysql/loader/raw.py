"""Which raw nsys columns nsysql reads, and how they land in DuckDB as `raw_*` staging tables.

This is the only module that knows nsys table and column names. Every staging table has the same columns
whatever the export's version: a column the file lacks becomes NULL, a table it lacks becomes an empty
table, and the file's other columns are never read. The canonical tables are then built from these staging
tables by `queries/v1/canonical/*.sql`.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from .source import Source

I = pa.int64()
S = pa.string()


@dataclass(frozen=True)
class RawTable:
    name: str  # staging table in DuckDB
    sources: tuple[str, ...]  # nsys tables to try, first present wins
    columns: tuple[tuple[str, pa.DataType], ...]  # nsys column name, type in staging
    aliases: tuple[tuple[str, str], ...] = ()  # (staging column, other nsys name for it in older schemas)

    def schema(self) -> pa.Schema:
        return pa.schema([(c, t) for c, t in self.columns])


STAGE = "nsysql_stage"


def unstage(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the staging database and its tables."""
    con.execute("RESET search_path")
    con.execute(f"DETACH DATABASE IF EXISTS {STAGE}")


GPU_COMMON = (("start", I), ("end", I), ("deviceId", I), ("streamId", I), ("correlationId", I), ("globalPid", I))

RAW_TABLES: tuple[RawTable, ...] = (
    RawTable("raw_strings", ("StringIds",), (("id", I), ("value", S))),
    RawTable("raw_threadnames", ("ThreadNames",), (("nameId", I), ("globalTid", I))),
    RawTable("raw_processes", ("PROCESSES",), (("globalPid", I), ("pid", I), ("name", S))),
    RawTable(
        "raw_kernel",
        ("CUPTI_ACTIVITY_KIND_KERNEL",),
        GPU_COMMON + (("demangledName", I), ("shortName", I), ("mangledName", I), ("graphNodeId", I)),
    ),
    RawTable(
        "raw_memcpy",
        ("CUPTI_ACTIVITY_KIND_MEMCPY",),
        GPU_COMMON + (("bytes", I), ("copyKind", I), ("srcKind", I), ("dstKind", I), ("graphNodeId", I)),
    ),
    RawTable(
        "raw_memset",
        ("CUPTI_ACTIVITY_KIND_MEMSET",),
        GPU_COMMON + (("bytes", I), ("memKind", I), ("graphNodeId", I)),
    ),
    RawTable("raw_graph", ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE",), GPU_COMMON + (("graphId", I),)),
    RawTable(
        "raw_runtime",
        ("CUPTI_ACTIVITY_KIND_RUNTIME",),
        (("start", I), ("end", I), ("globalTid", I), ("correlationId", I), ("nameId", I)),
    ),
    RawTable(
        "raw_nvtx",
        ("NVTX_EVENTS",),
        (
            ("start", I),
            ("end", I),
            ("eventType", I),
            ("text", S),
            ("textId", I),
            ("globalTid", I),
            ("endGlobalTid", I),
            ("domainId", I),
            ("category", I),
        ),
    ),
    RawTable(
        "raw_osrt",
        ("OSRT_API",),
        (("start", I), ("end", I), ("globalTid", I), ("nameId", I), ("nestingLevel", I)),
    ),
    RawTable(
        "raw_gpu_info",
        ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"),
        (
            ("id", I),
            ("name", S),
            ("smCount", I),
            ("totalMemory", I),
            ("computeMajor", I),
            ("computeMinor", I),
            ("busLocation", S),
        ),
        aliases=(
            ("id", "deviceId"),
            ("smCount", "numMultiprocessors"),
            ("totalMemory", "globalMemorySize"),
            ("computeMajor", "computeCapabilityMajor"),
            ("computeMinor", "computeCapabilityMinor"),
            ("busLocation", "pciBusId"),
        ),
    ),
    RawTable("raw_meta", ("META_DATA_EXPORT", "EXPORT_META_DATA"), (("name", S), ("value", S))),
    RawTable("raw_env", ("TARGET_INFO_SYSTEM_ENV",), (("name", S), ("value", S))),
    # the profiled processes' environment (PROCESS_n:ENVIRONMENT_VARIABLE rows), 2023.3 and later
    RawTable("raw_capture", ("META_DATA_CAPTURE",), (("name", S), ("value", S))),
    RawTable("raw_analysis", ("ANALYSIS_DETAILS",), (("startTime", I), ("stopTime", I), ("duration", I))),
    RawTable("raw_enum_memkind", ("ENUM_CUDA_MEM_KIND",), (("id", I), ("label", S))),
)


def _select(src: Source, rt: RawTable) -> tuple[str | None, str]:
    """The SELECT that reads `rt` from the export (None if no source table), and the table used."""
    table = next((t for t in rt.sources if src.has(t)), None)
    if table is None:
        return None, ""
    alias = dict(rt.aliases)
    exprs = []
    present = 0
    for col, typ in rt.columns:
        name = col if src.has(table, col) else alias.get(col) if src.has(table, alias.get(col, "")) else None
        if name is None:
            exprs.append(f"NULL AS \"{col}\"")
            continue
        present += 1
        ident = f'"{name}"'
        exprs.append(f'CAST({ident} AS BLOB) AS "{col}"' if typ == S else f'{ident} AS "{col}"')
    if present == 0:
        return None, table
    return f'SELECT {", ".join(exprs)} FROM "{table}"', table


def stage(src: Source, con: duckdb.DuckDBPyConnection, progress=None, workers: int = 2) -> dict[str, str]:
    """Copy the needed raw columns into DuckDB `raw_*` tables; returns staging name -> nsys table read.

    Tables stream in Arrow batches straight into DuckDB; the large ones are read concurrently, each on its
    own DuckDB cursor (the SQLite driver and DuckDB both release the GIL).
    """
    used: dict[str, str] = {}
    jobs = []
    # staging lives in an attached in-memory database, so building into a cache file never writes raw rows
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {STAGE}")
    con.execute(f"SET search_path = '{db},{STAGE}'")
    for rt in RAW_TABLES:
        sql, table = _select(src, rt)
        if sql is None:
            cols = ", ".join(f'CAST(NULL AS {_ddb(t)}) AS "{c}"' for c, t in rt.columns)
            con.execute(f"CREATE OR REPLACE TABLE {STAGE}.{rt.name} AS SELECT {cols} WHERE false")
        else:
            used[rt.name] = table
            jobs.append((rt, sql, table))

    # biggest first, so the two workers stay busy
    jobs.sort(key=lambda j: -src.approx_rows(j[2]))

    def ingest(job):
        rt, sql, table = job
        if progress:
            progress(table)
        cur = con.cursor()
        try:
            cur.register("_reader", src.read(sql, rt.schema()))
            cur.execute(f"CREATE OR REPLACE TABLE {STAGE}.{rt.name} AS SELECT * FROM _reader")
            cur.unregister("_reader")
        finally:
            cur.close()

    if workers > 1 and len(jobs) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(ingest, jobs))
    else:
        for job in jobs:
            ingest(job)
    return used


def _ddb(t: pa.DataType) -> str:
    return "VARCHAR" if t == S else "BIGINT"
