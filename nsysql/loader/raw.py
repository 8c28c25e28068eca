"""Which raw nsys columns nsysql reads, and how they land in DuckDB as `raw_*` staging tables.

This is the only module that knows nsys table and column names. Every staging table has the same columns
whatever the export's version: a column the file lacks becomes NULL, a table it lacks becomes an empty
table, and the file's other columns are never read. The canonical tables are then built from these staging
tables by `queries/v1/canonical/*.sql`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .source import Source, q

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# staging column types (DuckDB's names)
I = "BIGINT"  # noqa: E741 (the staging schema reads as a table of types: I, S, ...)
S = "VARCHAR"
D = "DOUBLE"
B = "BLOB"


@dataclass(frozen=True)
class RawTable:
    name: str  # staging table in DuckDB
    sources: tuple[str, ...]  # nsys tables to try, first present wins
    columns: tuple[tuple[str, str], ...]  # nsys column name, type in staging
    aliases: tuple[tuple[str, str], ...] = ()  # (staging column, other nsys name for it in older schemas)
    # extent: (nsys start column, nsys end column). No rows are read, only the first and last timestamp of each
    # present source, aggregated in SQLite: one row per source table (its name, min of start, max of end). For
    # timed tables that only widen the profile's span: scheduling events, CPU samples.
    extent: tuple[str, str] | None = None
    # only the rows where this nsys column IS NOT NULL, and nothing when the column is absent: for a sparse
    # column such as NVTX_EVENTS.binaryData (payloads), read apart from the table's other rows
    nonnull: str | None = None
    # only the rows this SQL condition keeps (it may read other nsys tables, as SQLite runs it), and where
    # `subset_of` names a staging table read in the same pass, those rows taken from it instead: (staging table,
    # the same condition as DuckDB runs it on the staged rows). A reader of a few rows of a large table reads
    # them alone, and a pass that reads the whole table reads it once.
    where: str | None = None
    where_reads: tuple[tuple[str, str], ...] = ()  # the (nsys table, column)s `where` reads: nothing without one
    # `where`'s `{ids}`, filled in as the export is read with the whole numbers this SQL gives (its column `id`,
    # from a small table) as a literal list: SQLite tests `x IN (3, 5)` faster than `x IN (SELECT ...)` (GPU_METRICS,
    # 7.7M rows: 0.39 against 0.57 s CPU)
    where_ids: str | None = None
    subset_of: tuple[str, str] | None = None
    # (nsys column, SQL condition on it): the rows it holds are left out where the table has that column; where
    # the table lacks it, none are (where `where` would read nothing). The column is one of `codes`: SQLite tests
    # the condition only where it holds a whole number, as DuckDB does on the staged column
    unless: tuple[str, str] | None = None
    # (nsys column, nsys table): the column is read only where the export has that table, else it is NULL, as a
    # column the export lacks (and `unless`, on it, leaves no row out): a column that only says something where
    # another table was written
    only_with: tuple[tuple[str, str], ...] = ()
    # nsys columns that hold an enum's whole numbers (ENUM_NSYS_*): a value of another storage class (text, a
    # real, a blob: no code nsys writes) is read as NULL, unknown, rather than refuse the export or truncate it
    # into a code it is not (67.5 into 67)
    codes: tuple[str, ...] = ()
    # an extent of several sources: the staging table each of `sources` is read into, in their order. Where every
    # one of those of the sources the export has is read in the same pass, the extent is taken from them (under
    # `where`, which is then DuckDB's condition too), not aggregated in SQLite
    over: tuple[str, ...] = ()
    # (column, small nsys table, its column naming the values the rows kept may hold): where that small table
    # names one whole number alone, the column is not read from the export; the rows that hold it are, and DuckDB
    # writes it into each staged row (Job.fixed). A column of one value crosses the driver at its cost per value
    # all the same (GPU_METRICS.typeId with one GPU sampled: 7.7M values, a quarter of what is read)
    single: tuple[str, str, str] | None = None
    # counted: no rows are read, only how many rows `where` keeps, counted in SQLite (the staging column `rows`;
    # one row per rowid range read, as a large table is read in several: their sum is the count)
    counted: bool = False
    # distinct: each different row once (SELECT DISTINCT): for a few values repeated over many rows
    distinct: bool = False

    def schema(self) -> pa.Schema:
        """The Arrow schema of the staging table (for the fallback reader only: the fast path needs no pyarrow)."""
        import pyarrow as pa

        kinds = {S: pa.string(), D: pa.float64(), B: pa.binary()}
        return pa.schema([(c, kinds.get(t, pa.int64())) for c, t in self.columns])


# is_interval (00_macros.sql) as SQLite and DuckDB both read it, over a table's "start" and "end": both known, the
# end not before the start, both inside [-2^62, 2^62)
_INTERVAL = '"start" <= "end" AND "start" >= -4611686018427387904 AND "end" < 4611686018427387904'
# the NVTX events nvtx_ranges holds (push/pop and start/end ranges, is_interval) and the marks nvtx_marks holds
# (50_nvtx.sql), within the bounds is_interval sets
_NVTX_RANGE = f'"eventType" IN (59, 60) AND {_INTERVAL}'
# The rows of CUPTI_ACTIVITY_KIND_RUNTIME that are no call: the CUDA backtraces (`--cudabacktrace`) nsys 2020-2022
# wrote as a second row of the call they were taken for, of eventClass TRACE_PROCESS_EVENT_CUDABACKTRACE (67, and
# its _START 68 and _FINISH 69: the numbers of ENUM_NSYS_EVENT_CLASS from 2022.4 to 2026, and of the 2020-2022
# exports without that table). In SQL that SQLite and DuckDB both run; 25_calls.sql states the same rule
# (a range of two comparisons: SQLite tests an IN list per row at about a scan's cost again; BETWEEN is how the
# readers' rowid ranges read)
_BACKTRACE = '("eventClass" >= 67 AND "eventClass" <= 69)'
_NO_BACKTRACE = ("eventClass", _BACKTRACE)
# nsys writes the frames of every CUDA backtrace into CUDA_CALLCHAINS (a backtrace row's callchainId names them):
# an export without that table holds no backtrace row, and its calls' eventClass is not read (a column of every
# call, 1M in a 500k-kernel export, that only exports recorded with --cudabacktrace need)
_ONLY_WITH_BACKTRACES = (("eventClass", "CUDA_CALLCHAINS"),)
_NVTX_MARK = '"eventType" = 34 AND "start" >= -4611686018427387904 AND "start" < 4611686018427387904'

STAGE = "nsysql_stage"  # also named by canonical SQL that makes staging views (queries/v1/canonical/25_calls.sql)
# The tables the loader itself writes into the staging database beside the raw_* tables (loader.LOADER_TABLES),
# with their columns: loader.build fills them, loader.shapes makes them empty.
LOADER_COLUMNS = {
    "_load_facts": "key VARCHAR, value VARCHAR",
    "_load_beyond_int64": "source VARCHAR, col VARCHAR, n BIGINT",
}


def staged(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The staging tables `con` holds (none once unstaged, or on a cache entry just opened)."""
    return {
        r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [STAGE]).fetchall()
    }


def unstage(con: duckdb.DuckDBPyConnection, detach: bool = True) -> None:
    """Take the staging database out of `con`'s search path and (`detach`) drop it with its tables (and its file,
    when it was staged on disk: `_staging_db`)."""
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    con.execute(f'USE "{db}"')  # the search path as it was before staging (USE sets it too)
    if detach:
        (path,) = con.execute(
            "SELECT coalesce(max(path), '') FROM duckdb_databases() WHERE database_name = ?", [STAGE]
        ).fetchall()[0]
        con.execute(f"DETACH DATABASE IF EXISTS {STAGE}")
        if path:
            remove_staging_file(path)


# A staging file's name in the spill directory: this prefix, the process id, then a number of its own.
STAGE_FILE_PREFIX = "nsysql_stage_"


def remove_staging_file(path: str) -> None:
    """Delete a staging file of `_staging_db` and DuckDB's write-ahead log beside it, if any."""
    for f in (path, path + ".wal"):
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass


# Staged rows in memory take about 8 bytes a value (DuckDB keeps an in-memory table uncompressed); on disk,
# compressed as DuckDB writes them, a tenth of that (big_step scaled to 2M kernels: 434 MiB in memory, 50 MiB in a
# file). Rows that would take more than this share of DuckDB's memory limit go to a file: memory then stays
# within the limit, where in memory they would be spilled to disk uncompressed and read back by every statement.
STAGE_SHARE = 3


def _staging_db(con: duckdb.DuckDBPyConnection, readers: Readers) -> str:
    """Where the staging tables live, as ATTACH names it: in memory, or, for rows that would take more than
    1/STAGE_SHARE of DuckDB's memory limit, a file of the spill directory (private to this user), deleted when the
    staging database is detached (`unstage`), or as the process ends (store.tables.remove_spill_files, atexit)."""
    import atexit
    import itertools

    from ..duck import quoted_path, spill_dir

    est = sum(j.rows * sum(8 if t in (I, D) else 32 for _, t in j.rt.columns) for j in readers.jobs)
    (limit,) = con.execute("SELECT current_setting('memory_limit')").fetchall()[0]
    if est * STAGE_SHARE <= size_bytes(limit):
        return "':memory:'"
    for n in itertools.count():
        path = os.path.join(spill_dir(), f"{STAGE_FILE_PREFIX}{os.getpid()}_{n}.duckdb")
        if not os.path.exists(path):
            # a load that keeps its staging attached for later questions (loader.extend) leaves it to the end
            # of the process: removed then, whoever closes it
            atexit.register(remove_staging_file, path)
            return quoted_path(path)
    raise AssertionError("unreachable")


def size_bytes(text: str) -> int:
    """DuckDB's way of writing a size ('1.3 GiB', '512.0 MiB', '2GB') in bytes; no limit (unparsable) is huge."""
    import re

    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGTP]?)(i?)B?\s*", text or "", re.IGNORECASE)
    if not m:
        return 1 << 62
    return int(float(m.group(1)) * (1024 if m.group(3) else 1000) ** " KMGTP".index(m.group(2).upper() or " "))


# `row_id` is SQLite's rowid of the row, read through a name that no declared column shadows (Source.rowid): a
# unique, stable id per table, read at no cost (the b-tree key); it lets large tables be read in rowid-range
# chunks in parallel and gives GPU ops and API calls ids without a window.
ROW_ID = "row_id"
GPU_COMMON = (
    (ROW_ID, I),
    ("start", I),
    ("end", I),
    ("deviceId", I),
    ("streamId", I),
    ("correlationId", I),
    ("globalPid", I),
)

_GPU_COLUMNS = (
    ("id", I),
    ("name", S),
    ("smCount", I),
    ("totalMemory", I),
    ("computeMajor", I),
    ("computeMinor", I),
    ("busLocation", S),
    ("cuDevice", I),
)
_GPU_ALIASES = (
    ("id", "deviceId"),
    ("smCount", "numMultiprocessors"),
    ("totalMemory", "globalMemorySize"),
    ("computeMajor", "computeCapabilityMajor"),
    ("computeMinor", "computeCapabilityMinor"),
    ("busLocation", "pciBusId"),
)

_METRIC_COLUMNS = (("timestamp", I), ("typeId", I), ("metricId", I), ("value", D))
# GPU_METRICS rows whose metric is named `SM Active`, `SMs Active` or `Tensor Active` (with whatever follows:
# a unit, `/ FP16 Active`), in SQL that SQLite and DuckDB both run; `names`: the table of metric names. The test
# of metricId alone first: SQLite tests it faster than the pair (0.54 against 0.69 s CPU on 7.7M rows)
_NAMED = (
    'SELECT "typeId", "metricId" FROM {names} WHERE substr("metricName", 1, 9) = \'SM Active\' '
    "OR substr(\"metricName\", 1, 10) = 'SMs Active' OR substr(\"metricName\", 1, 13) = 'Tensor Active'"
)
_ACTIVITY = f'"metricId" IN (SELECT "metricId" FROM ({_NAMED})) AND ("typeId", "metricId") IN ({_NAMED})'
_ACTIVITY_IDS = 'SELECT DISTINCT "metricId" AS id FROM ({names})'.format(names=_NAMED)
# The event types of the metrics named (one per GPU sampled): a sample of another type has no name, and the
# canonical files (48_gpu_metrics.sql, 48_gpu_activity.sql) keep only named samples, so reading only the rows of
# the one type named, where there is one, leaves out none they keep (RawTable.single)
_ONE_TYPE = ("typeId", "TARGET_INFO_GPU_METRICS", "typeId")


# an extent table's one row per source table: its name, min of start, max of end (RawTable.extent)
EXTENT_COLUMNS = (("source", S), ("start", I), ("end", I))


def _extent_of(
    name: str,
    source: str,
    of: str,
    where: str,
    reads: str = "",
    instants: bool = False,
    unless=None,
    only_with: tuple[tuple[str, str], ...] = (),
) -> RawTable:
    """The extent of `source`'s rows that `where` keeps (the same condition in SQLite and DuckDB), taken from the
    staging table `of` where the same pass reads it: the span's share of a table a question may not read whole.
    `reads`: a column `where` names beyond start and end; `instants`: no end column (min to max of start);
    `unless`, `only_with`: RawTable's (`of` stages the column: NULL where it is not read, and no row is left out)."""
    staged = f"{where} AND NOT coalesce({unless[1]}, false)" if unless else where
    return RawTable(
        name,
        (source,),
        EXTENT_COLUMNS,
        extent=("start", "start") if instants else ("start", "end"),
        where=where,
        where_reads=((source, reads),) if reads else (),
        subset_of=(of, staged),
        unless=unless,
        only_with=only_with,
    )


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
    # the GPU ops' extent alone, for the profile's span (70_profile_facts.sql): the ops of every kind that gpu_ops
    # holds (is_interval, 40_gpu_ops.sql), so that a question that reads no GPU op (a cold `api`) reads none
    RawTable(
        "raw_gpu_extent",
        (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        ),
        EXTENT_COLUMNS,
        extent=("start", "end"),
        where=_INTERVAL,
        over=("raw_kernel", "raw_memcpy", "raw_memset", "raw_graph"),
    ),
    # CUDA graph nodes as they were created (captured, added, or cloned when a graph is instantiated: a clone's
    # originalGraphNodeId is the node it copies), with the thread and time: node kernels are credited to the
    # ranges open where their original node was created (canonical/55_graph_nodes.sql)
    RawTable(
        "raw_graph_nodes",
        ("CUDA_GRAPH_NODE_EVENTS",),
        (("start", I), ("globalTid", I), ("graphNodeId", I), ("originalGraphNodeId", I)),
    ),
    # eventClass: which kind of event the row is (nsys's ENUM_NSYS_EVENT_CLASS): a CUDA runtime (0) or driver (1)
    # call, or a CUDA backtrace (_BACKTRACE), which is no call (25_calls.sql)
    RawTable(
        "raw_runtime",
        ("CUPTI_ACTIVITY_KIND_RUNTIME",),
        (
            (ROW_ID, I),
            ("start", I),
            ("end", I),
            ("globalTid", I),
            ("correlationId", I),
            ("nameId", I),
            ("eventClass", I),
        ),
        codes=("eventClass",),
        only_with=_ONLY_WITH_BACKTRACES,
    ),
    # the CUDA API calls' extent alone, for the profile's span (70_profile_facts.sql): a question that reads no call
    # reads no call's row (one aggregate in SQLite), or, where raw_runtime is read in the same pass, DuckDB's over it.
    # The calls counted are those api_calls holds (is_interval, 00_macros.sql; no backtrace row, 25_calls.sql)
    _extent_of(
        "raw_call_extent",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "raw_runtime",
        _INTERVAL,
        unless=_NO_BACKTRACE,
        only_with=_ONLY_WITH_BACKTRACES,
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
    # for the profile's facts (70_profile_facts.sql), without reading NVTX_EVENTS' rows (a question that reads no
    # NVTX range, such as a cold `kernels`: aggregates in SQLite), or, where raw_nvtx is read in the same pass, from
    # it: the extents of the ranges and of the marks, and the PyTorch operator names (`aten::...`) that ranges hold
    # as inline text (those named by textId are StringIds' values, which the facts read whole)
    _extent_of("raw_nvtx_range_extent", "NVTX_EVENTS", "raw_nvtx", _NVTX_RANGE, reads="eventType"),
    _extent_of("raw_nvtx_mark_extent", "NVTX_EVENTS", "raw_nvtx", _NVTX_MARK, reads="eventType", instants=True),
    RawTable(
        "raw_nvtx_aten",
        ("NVTX_EVENTS",),
        (("text", S),),
        where=f"{_NVTX_RANGE} AND \"text\" GLOB 'aten::*'",  # GLOB: case-sensitive, as starts_with
        where_reads=(("NVTX_EVENTS", "eventType"), ("NVTX_EVENTS", "text")),
        subset_of=("raw_nvtx", f"{_NVTX_RANGE} AND starts_with(\"text\", 'aten::')"),
        distinct=True,
    ),
    # NVTX events that carry binary payloads (exported with `--include-blobs=true`; NULL otherwise), and the
    # schemas that lay those bytes out (NVTX payload extension: nvToolsExtPayload.h). Read apart from raw_nvtx so
    # that the bytes of a few events never widen the read of millions without.
    RawTable(
        "raw_nvtx_payload",
        ("NVTX_EVENTS",),
        (
            ("start", I),
            ("end", I),
            ("eventType", I),
            ("text", S),
            ("textId", I),
            ("globalTid", I),
            ("domainId", I),
            ("binaryData", B),
        ),
        nonnull="binaryData",
    ),
    # how many events carry payload bytes, counted in SQLite: what the load's note on payloads left out
    # (loader._missing_payloads) reads, whatever is built, without reading the bytes (or, where raw_nvtx_payload
    # is read in the same pass, counted there)
    RawTable(
        "raw_nvtx_payload_count",
        ("NVTX_EVENTS",),
        (("rows", I),),
        where='"binaryData" IS NOT NULL',
        where_reads=(("NVTX_EVENTS", "binaryData"),),
        counted=True,
        subset_of=("raw_nvtx_payload", "true"),
    ),
    RawTable(
        "raw_payload_schemas",
        ("NVTX_PAYLOAD_SCHEMAS",),
        (
            ("domainId", I),
            ("schemaId", I),
            ("name", S),
            ("type", I),
            ("flags", I),
            ("numEntries", I),
            ("payloadSize", I),
            ("alignTo", I),
        ),
    ),
    RawTable(
        "raw_payload_entries",
        ("NVTX_PAYLOAD_SCHEMA_ENTRIES",),
        (
            ("domainId", I),
            ("schemaId", I),
            ("idx", I),
            ("flags", I),
            ("type", I),
            ("name", S),
            ("description", S),
            ("arrayOrUnionDetail", I),
            ("offset", I),
        ),
    ),
    RawTable(
        "raw_payload_enums",
        ("NVTX_PAYLOAD_ENUMS",),
        (("domainId", I), ("schemaId", I), ("name", S), ("numEntries", I), ("size", I)),
    ),
    RawTable(
        "raw_payload_enum_entries",
        ("NVTX_PAYLOAD_ENUM_ENTRIES",),
        (("domainId", I), ("schemaId", I), ("idx", I), ("name", S), ("value", I), ("isFlag", I)),
    ),
    RawTable(
        "raw_osrt",
        ("OSRT_API",),
        (("start", I), ("end", I), ("globalTid", I), ("nameId", I), ("nestingLevel", I)),
    ),
    # the OS runtime calls' extent alone, for the profile's span, as raw_call_extent is the CUDA API calls'
    _extent_of("raw_osrt_extent", "OSRT_API", "raw_osrt", _INTERVAL),
    RawTable("raw_gpu_info", ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"), _GPU_COLUMNS, aliases=_GPU_ALIASES),
    # 2020-2021 exports have both, and their TARGET_INFO_GPU holds only id, name and bus: the SM count, memory
    # and compute capability are in TARGET_INFO_CUDA_GPU (devices.sql merges the two)
    RawTable("raw_cuda_gpu_info", ("TARGET_INFO_CUDA_GPU",), _GPU_COLUMNS, aliases=_GPU_ALIASES),
    # each process's CUDA device id (the deviceId of its GPU work) and the GPU it is (TARGET_INFO_GPU.id), 2025.5 on
    RawTable("raw_cuda_device", ("TARGET_INFO_CUDA_DEVICE",), (("gpuId", I), ("cudaId", I), ("pid", I))),
    RawTable("raw_meta", ("META_DATA_EXPORT", "EXPORT_META_DATA"), (("name", S), ("value", S))),
    RawTable("raw_env", ("TARGET_INFO_SYSTEM_ENV",), (("name", S), ("value", S))),
    # the profiled processes' environment (PROCESS_n:ENVIRONMENT_VARIABLE rows), 2023.3 and later
    RawTable("raw_capture", ("META_DATA_CAPTURE",), (("name", S), ("value", S))),
    # the UTC time of the session's time zero (each nsys process has its own zero: ranks profiled by one nsys
    # each are put on one clock with it)
    RawTable("raw_session", ("TARGET_INFO_SESSION_START_TIME",), (("utcEpochNs", I),)),
    RawTable("raw_analysis", ("ANALYSIS_DETAILS",), (("startTime", I), ("stopTime", I), ("duration", I))),
    RawTable("raw_enum_memkind", ("ENUM_CUDA_MEM_KIND",), (("id", I), ("label", S))),
    # CUDA memory allocations and frees (`nsys profile --cuda-memory-usage=true`): the table exists only in
    # exports that traced them, so an export without it reads nothing more
    RawTable(
        "raw_gpu_memory",
        ("CUDA_GPU_MEMORY_USAGE_EVENTS",),
        (
            ("start", I),
            ("globalPid", I),
            ("deviceId", I),
            ("address", I),
            ("bytes", I),
            ("memKind", I),
            ("memoryOperationType", I),
            ("name", S),
        ),
    ),
    # GPU metrics sampling (`nsys profile --gpu-metrics-devices=...`): both tables exist only in exports that
    # sampled, so an export without them reads nothing more. The value is read as a DOUBLE: the schema says
    # INTEGER, and a REAL written by another version must not fail the load.
    RawTable("raw_gpu_metrics", ("GPU_METRICS",), _METRIC_COLUMNS, single=_ONE_TYPE),
    RawTable("raw_gpu_metric_names", ("TARGET_INFO_GPU_METRICS",), (("typeId", I), ("metricId", I), ("metricName", S))),
    # how many samples each metric has (after the session's time origin, as 48_gpu_metrics.sql keeps them),
    # counted in SQLite: what `info` says of them, without reading them (one scan of GPU_METRICS, no rows moved)
    RawTable(
        "raw_gpu_metric_counts",
        ("GPU_METRICS",),
        (("rows", I),),
        # a GROUP BY here would sort them (4.5 s CPU for hw_big's 7.7M, against 0.9 s for this count)
        where='"timestamp" >= 0 AND ("typeId", "metricId") IN (SELECT "typeId", "metricId" FROM '
        '"TARGET_INFO_GPU_METRICS")',
        where_reads=(
            ("GPU_METRICS", "timestamp"),
            ("GPU_METRICS", "typeId"),
            ("GPU_METRICS", "metricId"),
            ("TARGET_INFO_GPU_METRICS", "typeId"),
            ("TARGET_INFO_GPU_METRICS", "metricId"),
        ),
        counted=True,
    ),
    # the samples of the metrics nsysql's own answers read (SMs Active, Tensor Active: canonical
    # 48_gpu_activity.sql applies the exact rule, this is a superset of it): a tenth of the rows, so that a
    # question that needs no other metric reads no other
    RawTable(
        "raw_gpu_activity",
        ("GPU_METRICS",),
        _METRIC_COLUMNS,
        # the metric ids alone: a superset of the pairs (typeId, metricId) named so, which 48_gpu_activity.sql
        # joins (0.46 against 0.51 s CPU with the pairs tested here too, hw_big through ADBC)
        where='"metricId" IN ({ids})',
        where_ids=_ACTIVITY_IDS.format(names="TARGET_INFO_GPU_METRICS"),
        where_reads=(
            ("GPU_METRICS", "typeId"),
            ("GPU_METRICS", "metricId"),
            ("TARGET_INFO_GPU_METRICS", "typeId"),
            ("TARGET_INFO_GPU_METRICS", "metricId"),
            ("TARGET_INFO_GPU_METRICS", "metricName"),
        ),
        subset_of=("raw_gpu_metrics", _ACTIVITY.format(names=f"{STAGE}.raw_gpu_metric_names")),
        single=_ONE_TYPE,
    ),
    # CPU activity (`nsys profile -s process-tree`, `--cpuctxsw=process-tree`): each CPU sample with its thread,
    # the frames of its call stack (stackDepth 0 is the leaf), and the scheduling events (a thread put on or
    # taken off a CPU). The tables exist only in exports that sampled or traced scheduling.
    RawTable("raw_samples", ("COMPOSITE_EVENTS",), (("id", I), ("start", I), ("cpu", I), ("globalTid", I))),
    RawTable(
        "raw_callchains",
        ("SAMPLING_CALLCHAINS",),
        (("id", I), ("symbol", I), ("module", I), ("kernelMode", I), ("stackDepth", I)),
    ),
    RawTable("raw_sched", ("SCHED_EVENTS",), (("start", I), ("cpu", I), ("isSchedIn", I), ("globalTid", I))),
    # instants (no end column): the extent is min(start) to max(start)
    RawTable(
        "raw_extents",
        ("SCHED_EVENTS", "COMPOSITE_EVENTS"),
        EXTENT_COLUMNS,
        extent=("start", "start"),
    ),
)

# What each staging table holds, as the progress line of a cold load says it (`reading CUDA kernels`).
READING = {
    "raw_strings": "names",
    "raw_threadnames": "thread names",
    "raw_processes": "processes",
    "raw_kernel": "CUDA kernels",
    "raw_memcpy": "memory copies",
    "raw_memset": "memsets",
    "raw_graph": "CUDA graph launches",
    "raw_runtime": "CUDA API calls",
    "raw_nvtx": "NVTX ranges",
    "raw_osrt": "OS runtime calls",
    "raw_gpu_metrics": "GPU metrics samples",
    "raw_gpu_activity": "SM and tensor activity samples",
    "raw_gpu_metric_counts": "GPU metrics samples counted",
    "raw_nvtx_payload": "NVTX payloads",
    "raw_nvtx_payload_count": "NVTX payloads counted",
    "raw_extents": "the capture's extent",
    "raw_call_extent": "the CUDA API calls' extent",
    "raw_gpu_extent": "the GPU operations' extent",
    "raw_osrt_extent": "the OS runtime calls' extent",
    "raw_nvtx_range_extent": "the NVTX ranges' extent",
    "raw_nvtx_mark_extent": "the NVTX marks' extent",
    "raw_nvtx_aten": "PyTorch operator names in NVTX ranges",
}

# Where the rows of each nsys table nsysql reads are found among the canonical tables: a user's `nsysql sql` that
# names an nsys table (`FROM CUPTI_ACTIVITY_KIND_KERNEL`) is answered with the canonical table to use instead.
CANONICAL_FOR: dict[str, str] = {
    "StringIds": "strings",
    "ThreadNames": "threads",
    "PROCESSES": "processes",
    "CUPTI_ACTIVITY_KIND_KERNEL": "gpu_ops WHERE kind = 'kernel' (gpu_ops_named spells out the names)",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "gpu_ops WHERE kind = 'memcpy' (gpu_ops_named spells out the names)",
    "CUPTI_ACTIVITY_KIND_MEMSET": "gpu_ops WHERE kind = 'memset' (gpu_ops_named spells out the names)",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": "gpu_ops WHERE kind = 'graph'",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "api_calls",
    "NVTX_EVENTS": "nvtx_ranges (and nvtx_marks for marks)",
    "OSRT_API": "os_calls",
    "TARGET_INFO_GPU": "devices",
    "TARGET_INFO_CUDA_GPU": "devices",
    "TARGET_INFO_CUDA_DEVICE": "devices",
    "META_DATA_EXPORT": "profile_facts",
    "EXPORT_META_DATA": "profile_facts",
    "META_DATA_CAPTURE": "profile_facts",
    "TARGET_INFO_SYSTEM_ENV": "profile_facts",
    "GPU_METRICS": "gpu_metric_samples",
    "TARGET_INFO_GPU_METRICS": "gpu_metric_samples",
}


def _extent_select(src: Source, rt: RawTable, text_as_blob: bool) -> tuple[str | None, str]:
    """One aggregate row per present source table of an extent RawTable (see RawTable.extent)."""
    lo, hi = rt.extent
    parts = []
    for t in rt.sources:
        if src.has(t, lo) and src.has(t, hi) and all(src.has(w, c) for w, c in rt.where_reads if w == t):
            name = f"CAST('{t}' AS BLOB)" if text_as_blob else f"'{t}'"
            conds = [f"({c})" for c in [rt.where] if c] + _unless(src, rt, t)
            where = f" WHERE {' AND '.join(conds)}" if conds else ""
            parts.append(f'SELECT {name} AS "source", min("{lo}") AS "start", max("{hi}") AS "end" FROM "{t}"{where}')
    return (" UNION ALL ".join(parts) or None), ",".join(t for t in rt.sources if src.has(t))


def _select(src: Source, rt: RawTable, text_as_blob: bool = False) -> tuple[str | None, str]:
    """The SELECT that reads `rt` from the export (None if no source table), and the table used. Text columns
    come as TEXT (DuckDB checks their UTF-8), or as BLOB for the fallback reader, which decodes them itself."""
    if rt.extent is not None:
        return _extent_select(src, rt, text_as_blob)
    if rt.counted:
        return _counted_select(src, rt)
    table = next((t for t in rt.sources if src.has(t)), None)
    if (
        table is None
        or (rt.nonnull and not src.has(table, rt.nonnull))
        or not all(src.has(t, c) for t, c in rt.where_reads)
    ):
        return None, table or ""
    alias = dict(rt.aliases)
    fixed = _fixed(src, rt, table)
    exprs = []
    present = 0
    for col, typ in rt.columns:
        if (col in fixed or not _read(src, rt, col)) and not text_as_blob:
            continue  # DuckDB writes its one value, or NULL (Job.fixed); the fallback reader reads it
        if col == ROW_ID:
            exprs.append(f"{src.rowid(table)} AS {q(ROW_ID)}")
            continue
        name = col if src.has(table, col) else alias.get(col) if src.has(table, alias.get(col, "")) else None
        if name is None or not _read(src, rt, col):
            exprs.append(f"NULL AS {q(col)}")
            continue
        present += 1
        # bytes are read as BLOB whatever the column's declared type (nsys declares binaryData TEXT)
        as_blob = typ == B or (typ == S and text_as_blob)
        value = f"CASE WHEN typeof({q(name)}) = 'integer' THEN {q(name)} END" if col in rt.codes else q(name)
        exprs.append(f"CAST({q(name)} AS BLOB) AS {q(col)}" if as_blob else f"{value} AS {q(col)}")
    if present == 0:
        return None, table
    conds = [f"{q(c)} IS NOT NULL" for c in [rt.nonnull] if c] + [f"({c})" for c in [_where(src, rt)] if c]
    conds += [f"{q(c)} = {v}" for c, v in fixed.items()] + _unless(src, rt, table)
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    return f"SELECT {'DISTINCT ' if rt.distinct else ''}{', '.join(exprs)} FROM {q(table)}{where}", table


def _read(src: Source, rt: RawTable, col: str) -> bool:
    """Whether column `col` of `rt` is read where the export holds it: not where RawTable.only_with names a table
    the export lacks."""
    return all(src.has(t) for c, t in rt.only_with if c == col)


def _unless(src: Source, rt: RawTable, table: str) -> list[str]:
    """`rt.unless` as a condition on `table`'s rows: none where the column is not read (RawTable.unless)."""
    if rt.unless is None or not src.has(table, rt.unless[0]) or not _read(src, rt, rt.unless[0]):
        return []
    return [f"NOT coalesce(typeof({q(rt.unless[0])}) = 'integer' AND ({rt.unless[1]}), 0)"]


def _fixed(src: Source, rt: RawTable, table: str) -> dict[str, int]:
    """`rt.single`'s column and its one value, where its small table names one whole number alone (RawTable.single);
    else nothing."""
    if rt.single is None:
        return {}
    col, small, small_col = rt.single
    if not (src.has(table, col) and src.has(small, small_col)):
        return {}
    c = q(small_col)
    value = src.scalar(
        f"SELECT CASE WHEN count(DISTINCT {c}) = 1 AND min(typeof({c})) = 'integer' AND max(typeof({c})) = 'integer' "
        f"THEN min({c}) END FROM {q(small)}"
    )
    return {} if value is None else {col: int(value)}


def _counted_select(src: Source, rt: RawTable) -> tuple[str | None, str]:
    """How many rows of a counted RawTable `where` keeps (RawTable.counted), counted in SQLite."""
    table = next((t for t in rt.sources if src.has(t)), None)
    if table is None or not all(src.has(t, c) for t, c in rt.where_reads):
        return None, table or ""
    where = f" WHERE ({_where(src, rt)})" if rt.where else ""
    return f'SELECT count(*) AS "rows" FROM {q(table)}{where}', table


def _where(src: Source, rt: RawTable) -> str | None:
    """`rt.where` with its `{ids}` filled in (RawTable.where_ids)."""
    if rt.where_ids is None:
        return rt.where
    ids = src.scalar(f"SELECT group_concat(CAST(id AS INTEGER), ', ') FROM ({rt.where_ids})")
    return rt.where.replace("{ids}", ids or "")


# A table with more rows than this is read in rowid-range chunks, one per worker, when there are more than two
# workers (on two cores, the two largest tables already keep both busy, unless one is larger than all the others
# together: _lone_largest).
CHUNK_ROWS = 200_000


def default_workers() -> int:
    """Reader threads: $NSYSQL_READERS (1 up to 4 per CPU), else the number of CPUs, between 2 and 8."""
    env = os.environ.get("NSYSQL_READERS", "").strip()
    if not env:
        return max(2, min(8, os.cpu_count() or 2))
    if not env.isdigit() or int(env) < 1:
        from ..errors import NsysqlError

        raise NsysqlError(f"NSYSQL_READERS must be a whole number of threads, 1 or more, not {env[:40]!r}")
    return min(int(env), 4 * (os.cpu_count() or 2))  # more readers than that only wait for a core


@dataclass(frozen=True)
class Job:
    """One reader's share: a whole table, or one rowid range of a large one."""

    rows: int  # about how many rows it reads
    rt: RawTable
    sql: str  # the fast reader's SELECT
    blob_sql: str  # the fallback reader's (text as BLOB)
    table: str  # the nsys table read
    # columns not read, with the one value DuckDB writes (RawTable.single), or NULL (RawTable.only_with)
    fixed: tuple[tuple[str, int | str], ...] = ()


def would_read(src: Source) -> dict[str, str]:
    """Staging name -> the nsys table a whole build reads for it (the tables the export has)."""
    out = {}
    for rt in RAW_TABLES:
        sql, table = _select(src, rt)
        if sql is not None:
            out[rt.name] = table
    return out


def _chosen(names) -> tuple[RawTable, ...]:
    return RAW_TABLES if names is None else tuple(rt for rt in RAW_TABLES if rt.name in names)


def plan(src: Source, workers: int, names=None) -> tuple[dict[str, str], list[Job]]:
    """What to read (the staging tables `names`, None: all): staging name -> nsys table read, and the jobs,
    biggest first (so the workers stay busy). SQLite only: no DuckDB needed yet."""
    used: dict[str, str] = {}
    jobs = []
    selects = {rt: _select(src, rt) for rt in _chosen(names)}
    sizes = src.approx_rows_of({table for rt, (sql, table) in selects.items() if sql is not None and not rt.extent})
    subsets = derived(selects)
    read = [rt for rt, (sql, _) in selects.items() if sql is not None and rt not in subsets]
    rows_of = {rt: 1 if rt.extent else sizes[selects[rt][1]] for rt in read}  # an extent: one row per source table
    lone = max(read, key=rows_of.__getitem__) if _lone_largest(list(rows_of.values()), workers) else None
    for rt, (sql, table) in selects.items():
        if sql is None:
            continue
        used[rt.name] = table
        if rt in subsets:
            continue  # taken from the staging table it is a subset of, once read (stage)
        rows = rows_of[rt]
        n = min(workers, -(-rows // CHUNK_ROWS)) if workers > 2 or rt is lone else 1
        blob_sql = _select(src, rt, text_as_blob=True)[0]
        fixed = tuple(_fixed(src, rt, table).items())
        # and the columns not read (RawTable.only_with): DuckDB writes NULL into each staged row, which costs
        # nothing, where a NULL the driver reads costs as much as a column's values
        written = fixed + tuple((c, "NULL") for c, t in rt.only_with if src.has(table, c) and not src.has(t))
        if n <= 1:
            jobs.append(Job(rows, rt, sql, blob_sql, table, written))
            continue
        rowid = src.rowid(table)
        conj = "AND" if rt.nonnull or rt.where or fixed or _unless(src, rt, table) else "WHERE"  # as _select's
        for a, b in rowid_ranges(src.scalar(f"SELECT min({rowid}) FROM {q(table)}"), rows, n):
            where = f" {conj} {rowid} BETWEEN {a} AND {b}"
            jobs.append(Job(b - a + 1, rt, sql + where, blob_sql + where, table, written))
    jobs.sort(key=lambda j: -j.rows)
    return used, jobs


def _lone_largest(rows: list[int], workers: int) -> bool:
    """With two workers, where tables are read whole: whether reading the largest table in chunks, one per
    worker, shortens the read by a quarter or more (a table with more rows than all the others together, such as
    GPU metric samples, leaves one worker idle; 1M runtime calls beside 500k kernels do not). By the greedy
    schedule the readers follow (largest job first, to the worker free first), in rows."""
    if workers != 2 or not rows or max(rows) < CHUNK_ROWS:
        return False
    big = max(rows)
    rest = list(rows)
    rest.remove(big)
    split = _longest([*rest, big - big // 2, big // 2], workers)
    return split <= 0.75 * _longest(rows, workers)


def _longest(jobs: list[int], workers: int) -> int:
    """The rows the busiest of `workers` reads when each job, largest first, goes to the worker with fewest."""
    load = [0] * workers
    for j in sorted(jobs, reverse=True):
        load[load.index(min(load))] += j
    return max(load)


def derived(selects: dict) -> list[RawTable]:
    """Of the RawTables `selects` reads (RawTable -> its _select), those whose rows are taken from another one
    read in the same pass, a superset of them (RawTable.subset_of), rather than read again."""
    read = {rt.name for rt, (sql, _) in selects.items() if sql is not None}

    def over(rt: RawTable) -> bool:
        have = selects[rt][1].split(",")
        return all(s in read for s, t in zip(rt.over, rt.sources) if t in have)

    return [
        rt for rt in selects if rt.name in read and (rt.subset_of and rt.subset_of[0] in read or rt.over and over(rt))
    ]


def rowid_ranges(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi] split into n consecutive rowid ranges of (nearly) equal width, inclusive bounds."""
    step = -(-(hi - lo + 1) // n)
    return [(lo + i * step, min(hi, lo + (i + 1) * step - 1)) for i in range(n)]


class Readers:
    """The reader threads of one load, one per job. `start()` may come before DuckDB is even imported: each
    thread opens its stream at once (SQLite runs the query and reads the first batch, without the GIL) and then
    waits for `stage` to hand it the DuckDB connection to append to. So a cold load reads the export while
    Python imports DuckDB (nsysql.tuning's `early_readers`). `close()` releases streams that were opened but never read."""

    def __init__(self, src: Source, workers: int | None = None, names=None):
        """`names`: the staging tables to read (None: every one)."""
        self.src = src
        self.workers = workers or default_workers()
        self.names = None if names is None else frozenset(names)
        self.used, self.jobs = plan(src, self.workers, self.names)
        self.derived = derived({rt: _select(src, rt) for rt in _chosen(self.names)})
        self._threads: list[threading.Thread] = []
        self._go = threading.Event()
        self._con = None
        self._cancelled = False
        self._errors: list[BaseException] = []
        self._total_rows = sum(j.rows for j in self.jobs)  # about: what progress counts in
        self._rows_read = 0  # of the jobs read to their end
        self._lock = threading.Lock()
        self._gate = threading.BoundedSemaphore(max(1, self.workers))
        self._progress = None

    def start(self) -> Readers:
        if self._threads:
            return self
        try:  # here, not in each reader thread at once
            import adbc_driver_manager  # noqa: F401
            import adbc_driver_sqlite  # noqa: F401
        except ImportError:
            pass
        self._threads = [
            threading.Thread(target=self._run, args=(job,), name="nsysql-read", daemon=True) for job in self.jobs
        ]
        for t in self._threads:
            t.start()
        return self

    def read_into(self, con, progress=None) -> None:
        """Append every job's rows to its staging table in `con` (all of them exist already); returns when all
        are read, raising the first reader's error."""
        self._progress = progress
        self._con = con
        self.start()
        self._go.set()
        for t in self._threads:
            t.join()
        if self._errors:
            raise self._errors[0]

    def close(self) -> None:
        """Release whatever was opened and not read (a load that ended up not reading: the cache entry was
        written by another process meanwhile, or the load failed first)."""
        if self._con is None:
            self._cancelled = True
            self._go.set()
            for t in self._threads:
                t.join()

    def _run(self, job: Job) -> None:
        import contextlib

        stack = contextlib.ExitStack()
        handle = None
        try:
            try:  # fast path: the SQLite driver's Arrow stream, opened now
                handle = stack.enter_context(self.src.stream(job.sql))
            except Exception:  # noqa: BLE001 - no ADBC driver, or a file it cannot read: the fallback says why
                handle = None
            self._go.wait()
            if not self._cancelled:
                self._ingest(job, handle, stack)
        except BaseException as e:  # noqa: BLE001 - re-raised by read_into, on the loading thread
            self._errors.append(e)
        finally:
            stack.close()

    def _ingest(self, job: Job, handle, stack) -> None:
        import duckdb

        rt = job.rt
        cur = self._con.cursor()
        target = f"INSERT INTO {STAGE}.{rt.name} SELECT"
        try:
            if handle is not None:
                # DuckDB scans the driver's Arrow stream itself (no Python per batch, no GIL, no pyarrow),
                # casting each column to its staging type and checking the text's UTF-8
                try:
                    cur.register("_reader", handle)
                    try:
                        with self._gate:
                            self._tell(job)
                            fixed = dict(job.fixed)
                            casts = ", ".join(
                                f"CAST({fixed[c] if c in fixed else q(c)} AS {t}) AS {q(c)}" for c, t in rt.columns
                            )
                            cur.execute(f"{target} {casts} FROM _reader")
                    finally:
                        cur.unregister("_reader")  # before the driver's statement is released
                    self._read(job)
                    return
                except duckdb.Error:
                    pass  # text that is not UTF-8 (Latin-1 in Windows captures), or a bad file
                finally:
                    stack.close()
            # fallback: batches through pyarrow, text decoded with U+FFFD for bad bytes; errors name the file
            with self._gate:
                self._tell(job)
                cur.register("_reader", self.src.read(job.blob_sql, rt.schema(), job.table))
                try:
                    cur.execute(f"{target} * FROM _reader")
                except duckdb.Error as e:
                    raise self.src.read_error(e) from None
                finally:
                    cur.unregister("_reader")
            self._read(job)
        finally:
            cur.close()

    def _tell(self, job: Job) -> None:
        """Tell progress what is being read, in a user's words (READING), and how much of the export is read."""
        if not self._progress:
            return
        what = READING.get(job.rt.name, "GPU and capture details")
        with self._lock:  # told in the order counted: the percentage never goes back
            pct = 100 * self._rows_read // self._total_rows if self._total_rows else 0
            self._progress(f"reading {what}, {pct}% of about {self._total_rows:,} rows read")

    def _read(self, job: Job) -> None:
        with self._lock:
            self._rows_read += job.rows


def stage(
    src: Source,
    con: duckdb.DuckDBPyConnection,
    progress=None,
    workers: int | None = None,
    readers: Readers | None = None,
    names=None,
) -> dict[str, str]:
    """Copy the needed raw columns into DuckDB `raw_*` tables (those `names` lists, None: every one; `readers`,
    if given, were made for them); returns staging name -> nsys table read. Staging tables already there and
    not named are left as they are.

    Tables stream in Arrow batches straight into DuckDB, several at once, each on its own DuckDB cursor: DuckDB
    scans the SQLite driver's Arrow C stream itself, so the readers need no GIL and no pyarrow. With more than
    two workers a large table is read in rowid-range chunks in parallel, each appending to its one staging table.
    `readers`: already started (see Readers), else made here. Every job opens its stream at once; at most
    `workers` of them scan at a time.
    """
    readers = readers or Readers(src, workers, names)
    try:
        # staging lives in an attached database of its own (in memory, or a file of the spill directory for rows
        # too many for memory: _staging_db), so building into a cache file never writes raw rows
        db = con.execute("SELECT current_database()").fetchall()[0][0]
        attached = con.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [STAGE]).fetchall()
        if not attached[0][0]:
            con.execute(f"ATTACH {_staging_db(con, readers)} AS {STAGE}")
        con.execute(f"SET search_path = '{db},{STAGE}'")
        # every staging table exists, empty, before any reading: a table the export lacks stays so, and a large
        # table's rowid-range chunks append to it side by side (DuckDB's appends never conflict)
        creates = "; ".join(
            f"CREATE OR REPLACE TABLE {STAGE}.{rt.name} ({', '.join(f'{q(c)} {t}' for c, t in rt.columns)})"
            for rt in _chosen(readers.names)
        )
        if creates:
            con.execute(creates)
        readers.read_into(con, progress)
        for rt in readers.derived:
            if rt.over:  # one row per source the export has, as SQLite's aggregates give them (_extent_select)
                lo, hi = rt.extent
                have = readers.used[rt.name].split(",")
                each = [
                    f"SELECT '{t}', min({q(lo)}), max({q(hi)}) FROM {STAGE}.{s} WHERE {rt.where}"
                    for s, t in zip(rt.over, rt.sources)
                    if t in have
                ]
                con.execute(f"INSERT INTO {STAGE}.{rt.name} {' UNION ALL '.join(each)}")
                continue
            kept = f"FROM {STAGE}.{rt.subset_of[0]} WHERE {rt.subset_of[1]}"
            if rt.extent:  # the one row an extent is: (the nsys table, min of start, max of end)
                lo, hi = rt.extent
                kept = f"'{readers.used[rt.name]}', min({q(lo)}), max({q(hi)}) {kept}"
            cols = "" if rt.extent else "count(*) " if rt.counted else ", ".join(q(c) for c, _ in rt.columns) + " "
            con.execute(f"INSERT INTO {STAGE}.{rt.name} SELECT {'DISTINCT ' if rt.distinct else ''}{cols}{kept}")
    finally:
        readers.close()  # if reading never began
    return readers.used
