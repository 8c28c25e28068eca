"""DuckDB's settings for a profile's connection: the memory limit (with its default) and the spill directory.

In the store's layer, beside the spill directory it names, so that the engine and the loader's entry point
(nsysql.store.opening) take them from one place below both, at no import cost to a load (the store is imported already).
"""

from __future__ import annotations

import os

from . import tables as _tables


def duckdb_config(memory_limit: str | None, threads: int | None) -> dict:
    """DuckDB's settings from _checked()'s values."""
    cfg = {
        "memory_limit": memory_limit or default_memory_limit(threads),
        "temp_directory": _tables.spill_dir(),
    }
    if threads:
        cfg["threads"] = threads
    return cfg


def default_memory_limit(threads: int | None = None, ram_mb: int | None = None) -> str:
    """DuckDB's memory limit (beyond it, it spills to disk): 512 MB per thread and at least 3 GB, but at most a
    quarter of the machine's memory (and never below 512 MB). 3 GB on a 2-core laptop with 12 GB or more, 2 GB
    with 8 GB; more on a many-core server, where DuckDB's per-thread buffers would otherwise run out (a
    16-thread aggregate over 10M kernels needs more than 2 GB). At 10M kernels on 2 cores, 3 GB instead of 2 GB
    keeps the canonical tables and the answers' sorts in memory (faster, for more peak memory; the figures are in
    the commit that set it)."""
    threads = threads or os.cpu_count() or 2
    if ram_mb is None:
        try:
            ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        except (ValueError, OSError, AttributeError):
            ram_mb = 8192
    return f"{max(512, min(max(3072, 512 * threads), ram_mb // 4))}MB"
