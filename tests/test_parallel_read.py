"""Reading large tables in rowid-range chunks on several threads gives the same canonical tables."""

from __future__ import annotations

import pytest

import nsysql
from conftest import fixture
from nsysql.loader import raw
from nsysql.loader.source import Source

TABLES = {
    "gpu_ops": "op_id",
    "api_calls": "call_id",
    "op_ranges": "op_id, range_id",
    "nvtx_ranges": "range_id",
    "gpu_busy": "device_id, start_ns",
}


def _tables(prof):
    return {t: prof.sql(f"SELECT * FROM {t} ORDER BY {key}") for t, key in TABLES.items()}


@pytest.mark.parametrize("name", ["train_small", "big_step"])
def test_chunked_read_equals_serial_read(name, monkeypatch):
    monkeypatch.setenv("NSYSQL_READERS", "2")
    serial = _tables(nsysql.load(fixture(name), cache=False))
    monkeypatch.setenv("NSYSQL_READERS", "5")
    monkeypatch.setattr(raw, "CHUNK_ROWS", 500)  # so the fixtures' kernel and runtime tables are split
    chunks = []
    stream = Source.stream

    def counting_stream(self, sql):
        chunks.extend(["chunk"] if "WHERE rowid BETWEEN" in sql else [])
        return stream(self, sql)

    monkeypatch.setattr(Source, "stream", counting_stream)
    chunked_prof = nsysql.load(fixture(name), cache=False)
    chunked_prof.con
    assert len(chunks) >= 5
    views = chunked_prof.sql("SELECT count(*) AS n FROM duckdb_tables() WHERE table_name LIKE 'raw_%__%'")
    chunked = _tables(chunked_prof)
    for t in TABLES:
        assert serial[t].height > 0, t
        assert serial[t].equals(chunked[t]), t
    assert views["n"][0] == 0  # the staging database (and its chunk tables) is gone after the load


def test_fallback_reader_equals_fast_reader(monkeypatch):
    """Without the ADBC driver rows go through Python's sqlite3 and pyarrow batches: the same tables. (A table
    DuckDB refuses to scan, Latin-1 text, takes the ADBC + pyarrow path: test_bad_input.)"""
    import sys

    fast = _tables(nsysql.load(fixture("train_small"), cache=False))
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # `import adbc_driver_sqlite` now fails
    slow = _tables(nsysql.load(fixture("train_small"), cache=False))
    for t in TABLES:
        assert fast[t].height > 0 and fast[t].equals(slow[t]), t
