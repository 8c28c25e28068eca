"""Find and read the SQL files of `queries/` (inside the wheel, or beside the package in a checkout)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

SCHEMA_VERSION = "v1"


@lru_cache(maxsize=1)
def queries_dir() -> Path:
    here = Path(__file__).resolve().parent
    for cand in (here / "queries", here.parent / "queries"):
        if (cand / SCHEMA_VERSION).is_dir():
            return cand / SCHEMA_VERSION
    raise FileNotFoundError("nsysql's SQL files (queries/) are missing from this installation")


@lru_cache(maxsize=None)
def read(relpath: str) -> str:
    """Text of `queries/v1/<relpath>`, e.g. read('analyses/kernels.sql')."""
    return (queries_dir() / relpath).read_text(encoding="utf-8")


def canonical_files() -> list[Path]:
    return sorted((queries_dir() / "canonical").glob("*.sql"))
