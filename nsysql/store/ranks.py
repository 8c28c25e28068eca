"""The per-rank frames of `nsysql ranks` (nsysql.many), stored beside the export's tables under the store's key:
`<name>-<key>.<table>.parquet`, one file per table of RANK_TABLES, `info` written last (its presence marks a
whole set); for an iteration range given (load_many's `range`), `<name>-<key>.range-<hash of it>.<table>.parquet`,
a set of its own (store.values lists both)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import polars as pl

from .. import store

RANK_TABLES = ("info", "iterations", "causes")


def _files(path: str, cache_dir: str | None, range: str | None) -> tuple[Path, dict[str, Path]] | None:
    """The store's stem of `path` and where its per-rank frames for the iteration range `range` (None: the one
    detected) are stored: one Parquet file each, named after the export's stem."""
    try:
        stem = store.stem(store.directory(cache_dir), Path(os.path.expanduser(path)))
    except OSError:
        return None
    of = "" if range is None else f".range-{hashlib.sha256(range.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"
    return stem, {t: Path(f"{stem}{of}.{t}.parquet") for t in RANK_TABLES}


def get(path: str, cache_dir: str | None, range: str | None = None) -> dict[str, pl.DataFrame] | None:
    """The stored frames of `path` for `range`, or None (none stored, or damaged: rebuilt)."""
    found = _files(path, cache_dir, range)
    if not found or not found[1]["info"].exists():
        return None
    stem, files = found
    try:
        frames = {t: pl.read_parquet(f) for t, f in files.items() if f.exists()}
    except Exception:  # noqa: BLE001 - a damaged frame is rebuilt
        return None
    store.used(stem)
    return frames


def put(path: str, cache_dir: str | None, tables: dict[str, pl.DataFrame], range: str | None = None) -> None:
    found = _files(path, cache_dir, range)
    if not found:
        return
    stem, files = found
    try:
        store.claim(stem)
        for t in sorted(tables, key=lambda t: t == "info"):  # info last: its presence marks a complete set
            store.write(files[t], store.parquet(tables[t]))
    except (OSError, pl.exceptions.PolarsError) as e:  # a full disk: answered anyway, recomputed next time
        store.failed(e, files["info"].parent)
