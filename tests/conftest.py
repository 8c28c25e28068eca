"""Shared test data: the project's own fixtures, and the real exports in ../shared (skipped when absent)."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import pytest

# every test run gets its own cache directory, never the user's
os.environ.setdefault("NSYSQL_CACHE_DIR", tempfile.mkdtemp(prefix="nsysql-test-cache-"))

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared" / "nsys-exports"
H200 = SHARED / "h200"
PUBLIC = SHARED / "public"


def own_exports() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/*.sqlite"))


def h200_exports() -> list[Path]:
    return sorted(H200.glob("*.sqlite")) if H200.is_dir() else []


def public_exports() -> list[Path]:
    return sorted(PUBLIC.glob("*.sqlite")) if PUBLIC.is_dir() else []


def reference_csv(export: Path, report: str) -> Path:
    """nsys stats CSV made from `export`: <dir>/reference/<stem>_<report>.csv."""
    return export.parent / "reference" / f"{export.stem}_{report}.csv"


@functools.lru_cache(maxsize=None)
def loaded(path: str):
    import nsysql

    return nsysql.load(path)


def h200(name: str) -> Path:
    p = H200 / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def fixture(name: str) -> Path:
    return FIXTURES / name / f"{name}.sqlite"
