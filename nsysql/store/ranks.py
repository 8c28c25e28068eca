"""The per-rank frames of `nsysql ranks` (nsysql.many), stored beside the export's tables under the store's key:
`<name>-<key>.<table>.parquet`, one file per table of RANK_TABLES, `info` written last (its presence marks a
whole set)."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from .. import store

RANK_TABLES = ("info", "iterations", "causes")


def _files(path: str, cache_dir: str | None) -> dict[str, Path] | None:
    """Where the per-rank frames of `path` are stored: one Parquet file each, named after the export's stem."""
    try:
        stem = store.stem(store.directory(cache_dir), Path(os.path.expanduser(path)))
    except OSError:
        return None
    return {t: Path(f"{stem}.{t}.parquet") for t in RANK_TABLES}


def get(path: str, cache_dir: str | None) -> dict[str, pl.DataFrame] | None:
    """The stored frames of `path`, or None (none stored, or damaged: rebuilt)."""
    files = _files(path, cache_dir)
    if not files or not files["info"].exists():
        return None
    try:
        frames = {t: pl.read_parquet(f) for t, f in files.items() if f.exists()}
    except Exception:  # noqa: BLE001 - a damaged frame is rebuilt
        return None
    store.used(files["info"].with_name(files["info"].name.removesuffix(".info.parquet")))
    return frames


def put(path: str, cache_dir: str | None, tables: dict[str, pl.DataFrame]) -> None:
    files = _files(path, cache_dir)
    if not files:
        return
    try:
        store.claim(files["info"].with_name(files["info"].name.removesuffix(".info.parquet")))
        for t in sorted(tables, key=lambda t: t == "info"):  # info last: its presence marks a complete set
            store.write(files[t], tables[t].write_parquet)
    except (OSError, pl.exceptions.PolarsError) as e:  # a full disk: answered anyway, recomputed next time
        store.failed(e, files["info"].parent)
