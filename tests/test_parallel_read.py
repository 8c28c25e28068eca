"""Reading large tables in rowid-range chunks on several threads gives the same canonical tables."""

from __future__ import annotations

import pytest
from conftest import fixture, loaded, union_of_gpu_ops

import nsysql
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

    fast = _tables(loaded(str(fixture("train_small"))))  # the run's entry, built with the driver
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # `import adbc_driver_sqlite` now fails
    slow = _tables(nsysql.load(fixture("train_small"), cache=False))
    for t in TABLES:
        assert fast[t].height > 0 and fast[t].equals(slow[t]), t


def test_parallel_canonical_build_equals_one_file_at_a_time(monkeypatch):
    from concurrent import futures

    parallel = _tables(loaded(str(fixture("big_step"))))  # the run's entry, built as every load builds

    made = []

    class Serial(futures.ThreadPoolExecutor):  # one worker: the files run one after another, in order
        def __init__(self, *args, **kwargs):
            kwargs.pop("max_workers", None)
            made.append(kwargs.get("thread_name_prefix"))
            super().__init__(1, *args[1:], **kwargs)

    monkeypatch.setattr(futures, "ThreadPoolExecutor", Serial)
    serial = _tables(nsysql.load(fixture("big_step"), cache=False))
    assert "nsysql-sql" in made
    for t in TABLES:
        assert parallel[t].height > 0 and parallel[t].equals(serial[t]), t


def test_gpu_busy_prev_end_is_the_previous_stretch_end():
    """gpu_busy.prev_end_ns (what gaps reads) is the end of the device's previous busy stretch, and
    busy_before_ns sums the stretches before: both by construction, on a fixture with thousands of stretches."""
    prof = loaded(str(fixture("big_step")))
    bad = prof.sql("""
        SELECT count(*) FILTER (WHERE prev_end_ns IS DISTINCT FROM prev) AS bad_prev,
               count(*) FILTER (WHERE busy_before_ns <> before) AS bad_before, count(*) AS n
        FROM (SELECT prev_end_ns, busy_before_ns,
                     lag(end_ns) OVER w AS prev,
                     coalesce(sum(end_ns - start_ns) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
              FROM gpu_busy WINDOW w AS (PARTITION BY device_id ORDER BY start_ns))""")
    assert bad["n"][0] > 1000
    assert bad["bad_prev"][0] == 0 and bad["bad_before"][0] == 0


def test_gpu_busy_is_the_union_of_gpu_ops():
    """gpu_busy is exactly the union of gpu_ops' intervals per device (merged in Python: conftest), on a fixture
    with thousands of ops on several streams. test_public checks the same on every public export."""
    prof = loaded(str(fixture("big_step")))
    merged = union_of_gpu_ops(prof)
    busy = prof.sql("SELECT device_id, start_ns, end_ns FROM gpu_busy ORDER BY device_id, start_ns")
    assert prof.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0] > 5000 and len(merged) > 1000
    assert list(busy.iter_rows()) == merged


def test_two_readers_split_only_a_table_larger_than_all_the_others(monkeypatch):
    """With two readers, tables are read whole, but one with more rows than all the others together (GPU metric
    samples, where a question reads them and not their counts, a scan of the same table) is read in two rowid
    ranges, one per reader: the same samples as one reader reads. 12k runtime calls read beside 5k kernels
    (big_step, a whole build) are not split: the kernels keep the other reader busy."""
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "0")  # the build of what the first question reads
    streams = []
    stream = Source.stream

    def counting_stream(self, sql):
        streams.append(sql)
        return stream(self, sql)

    monkeypatch.setattr(Source, "stream", counting_stream)
    monkeypatch.setattr(raw, "CHUNK_ROWS", 1000)

    def samples(readers):
        monkeypatch.setenv("NSYSQL_READERS", readers)
        prof = nsysql.load(fixture("hw_mix"), cache=False)
        prof.gpu_metrics()  # the first question: the samples are read with it
        return prof.sql("SELECT * FROM gpu_metric_values ORDER BY ALL")

    one = samples("1")
    assert [s for s in streams if "GPU_METRICS" in s] and not [s for s in streams if " BETWEEN " in s]
    two = samples("2")
    split = [s for s in streams if " BETWEEN " in s]
    assert len(split) == 2 and all("GPU_METRICS" in s for s in split)
    assert one.height > 0 and one.equals(two)
    streams.clear()
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "1000")  # a whole build: the calls are read beside the kernels
    nsysql.load(fixture("big_step"), cache=False).sql("SELECT count(*) FROM api_calls")
    assert any("RUNTIME" in s for s in streams) and not [s for s in streams if " BETWEEN " in s]
