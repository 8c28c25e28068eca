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
    read = Source.read

    def counting_read(self, sql, schema):
        chunks.extend(["chunk"] if "WHERE rowid BETWEEN" in sql else [])
        return read(self, sql, schema)

    monkeypatch.setattr(Source, "read", counting_read)
    chunked_prof = nsysql.load(fixture(name), cache=False)
    chunked_prof.con
    assert len(chunks) >= 5
    views = chunked_prof.sql("SELECT count(*) AS n FROM duckdb_tables() WHERE table_name LIKE 'raw_%__%'")
    chunked = _tables(chunked_prof)
    for t in TABLES:
        assert serial[t].height > 0, t
        assert serial[t].equals(chunked[t]), t
    assert views["n"][0] == 0  # the staging database (and its chunk tables) is gone after the load
