"""Loader: nsys SQLite export -> canonical tables in DuckDB.

`build(path, con)` probes the export (`source`), stages only the columns nsysql needs (`raw`), then runs the
versioned SQL files of `queries/v1/canonical/` that define the canonical tables. Nothing above this package
names an nsys table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

from .. import __version__
from ..queries import SCHEMA_VERSION, canonical_files
from .source import Source, open_source

CANONICAL_TABLES = (
    "profile_facts", "devices", "processes", "threads", "strings", "api_calls", "os_calls", "gpu_ops",
    "nvtx_ranges", "nvtx_open", "nvtx_marks", "op_ranges", "gpu_busy", "process_roles",
)

__all__ = ["build", "open_source", "Source", "CANONICAL_TABLES", "RAW_TABLES"]


def build(src: Source, con: duckdb.DuckDBPyConnection, progress=None, staged=None) -> None:
    """Fill `con` with the canonical tables of the export `src`; `staged()` is called once the export has been
    read (only SQL is left)."""
    from .raw import stage, unstage

    used = stage(src, con, progress)
    if staged:
        staged()
    facts = [
        ("source_path", str(src.path)),
        ("source_bytes", str(src.path.stat().st_size)),
        ("canonical_schema", SCHEMA_VERSION),
        ("nsysql_version", __version__),
        ("tables_read", ",".join(sorted(set(used.values())))),
        ("tables_in_file", ",".join(sorted(src.tables))),
    ]
    facts += [("missing", msg) for msg in _missing(src, con)]
    con.execute("CREATE OR REPLACE TEMP TABLE _load_facts(key VARCHAR, value VARCHAR)")
    con.executemany("INSERT INTO _load_facts VALUES (?, ?)", facts)
    for f in canonical_files():
        if progress:
            progress(f.stem)
        con.execute(f.read_text(encoding="utf-8"))
    unstage(con)


# What a profile lacks, said plainly: (staging table, nsys table(s), what its absence means).
_WHAT_IT_MEANS = (
    ("raw_kernel", "CUPTI_ACTIVITY_KIND_KERNEL", "no CUDA kernels traced (captured without -t cuda, or none ran)"),
    ("raw_runtime", "CUPTI_ACTIVITY_KIND_RUNTIME",
     "no CUDA API calls (captured without -t cuda): GPU work cannot be tied to threads or NVTX ranges"),
    ("raw_nvtx", "NVTX_EVENTS", "captured without -t nvtx, or the program has no NVTX annotations"),
    ("raw_osrt", "OSRT_API", "captured without -t osrt: gap causes cannot name OS calls"),
    ("raw_memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", "no memory copies traced"),
    ("raw_meta", "META_DATA_EXPORT", "no export metadata (export older than 2022): nsys version inferred"),
    ("raw_gpu_info", "TARGET_INFO_GPU", "GPU models unknown"),
)


def _missing(src: Source, con: duckdb.DuckDBPyConnection) -> list[str]:
    from .raw import RAW_TABLES, STAGE

    out = []
    for staging, table, meaning in _WHAT_IT_MEANS:
        if con.execute(f"SELECT count(*) FROM {STAGE}.{staging}").fetchall()[0][0] == 0:
            rt = next(r for r in RAW_TABLES if r.name == staging)
            present = next((t for t in rt.sources if src.has(t)), None)
            out.append(f"{'empty ' + present if present else 'no ' + table}: {meaning}")
    return out


def __getattr__(name):  # RAW_TABLES without importing DuckDB up front (raw.py imports it)
    if name == "RAW_TABLES":
        from .raw import RAW_TABLES

        return RAW_TABLES
    raise AttributeError(name)
