"""DuckDB's settings for a profile's connection: the memory budget (with its default) and the spill directory.

In the store's layer, beside the spill directory it names, so that the engine and the loader's entry point
(nsysql.store.opening) take them from one place below both, at no import cost to a load (the store is imported already).

The memory budget ($NSYSQL_MEMORY_LIMIT, `nsysql.load(memory_limit=)`) bounds the whole process: DuckDB gets the
budget less what the Python side holds (PYTHON_MB: the interpreter, polars, the answers' frames), and spills what
exceeds its share to disk; the loader stages the export's rows in a compressed file when they would not fit in a
third of that share (nsysql/loader/raw.py, `_staging_db`).
"""

from __future__ import annotations

import os
import re

from . import tables as _tables

# What a command holds outside DuckDB's buffers: the interpreter with polars and DuckDB's modules loaded, the
# answers as polars frames, the readers' Arrow batches, and what DuckDB allocates beside its buffer manager
# (duckdb_memory() does not count it). At least PYTHON_MB, and 1/PYTHON_SHARE of a larger budget: DuckDB fills
# its share at 10M kernels, and what the process held beside it there grew with that share (sampled RSS less
# duckdb_memory(): the commit that set the share has the runs).
PYTHON_MB = 320
PYTHON_SHARE = 4


def duckdb_config(memory_limit: str | None, threads: int | None) -> dict:
    """DuckDB's settings from _checked()'s values: its share of the budget `memory_limit` (None: the default)."""
    cfg = {
        "memory_limit": duckdb_share(memory_limit or default_memory_limit(threads)),
        "temp_directory": _tables.spill_dir(),
    }
    if threads:
        cfg["threads"] = threads
    return cfg


def duckdb_share(budget: str) -> str:
    """DuckDB's memory limit within the process's `budget` (a size such as 2GB or 512MB; GB = 1024 MB, as
    everywhere in nsysql): the budget less the Python side's part (PYTHON_MB, or 1/PYTHON_SHARE of the budget
    where that is more), and at least half of it: 1.5 GB of 2 GB, 704 MB of 1 GB. A budget that is no size (80%,
    -1, none: DuckDB's own ways of saying a share of RAM or no limit) is DuckDB's limit as it is."""
    n = size_bytes(budget)
    return budget if n is None else f"{max(n // 2, n - max(PYTHON_MB * 2**20, n // PYTHON_SHARE))}B"


def size_bytes(size: str) -> int | None:
    """A size as nsysql and DuckDB read it (2GB, 512 megabytes, a number of bytes) in bytes, K, M, G and T
    counted in powers of 1024; None for what is no size (a percentage, or none)."""
    m = re.fullmatch(
        r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:(k|m|g|t|kilo|mega|giga|tera|kibi|mebi|gibi|tebi)\w*|b|bytes)?\s*", size, re.I
    )
    if not m:
        return None
    return int(float(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ")[0].lower()))


def default_memory_limit(threads: int | None = None, ram_mb: int | None = None) -> str:
    """The memory budget of a process: 2 GB, or 256 MB per thread where that is more (DuckDB's per-thread buffers
    would otherwise run short on a many-core server), at most a quarter of the machine's memory and never below
    512 MB. 2 GB on a 2-core laptop with 8 GB or more; 4 GB with 16 threads. At 10M kernels a cold `summary` then
    peaks under 2 GB (BENCHMARKS.md): the export's rows are staged compressed on disk and what else exceeds
    DuckDB's share spills."""
    threads = threads or os.cpu_count() or 2
    if ram_mb is None:
        try:
            ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        except (ValueError, OSError, AttributeError):
            ram_mb = 8192
    return f"{max(512, min(max(2048, 256 * threads), ram_mb // 4))}MB"
