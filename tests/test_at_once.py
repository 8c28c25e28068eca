"""How many of a request's pieces run side by side (Engine.at_once): as many as DuckDB's memory holds the rows
of the largest table they read for, at least one; a budget too small for them all runs fewer at once, with the
same answers."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from conftest import built_cache, craft

import nsysql
from nsysql.analyses import catalog  # noqa: F401 (fills the registry)
from nsysql.engine.core import ROW_BYTES, tables_of
from nsysql.loader.raw import size_bytes

# what a summary's pieces read
PIECES = ("iterations", "iteration_stats", "gaps", "kernels", "ranges", "summary_tables", "headroom_work")
READS = frozenset().union(*(tables_of(n) for n in PIECES))

# big_step with 300,000 more CUDA API calls (the first call's thread and name, ids of their own, each 100 ns
# within the capture): api_calls becomes the largest table a summary reads, by far
MORE_CALLS = (
    'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", eventClass, globalTid, correlationId, nameId, '
    "returnValue) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000) "
    "SELECT f.start + 1000 * i, f.start + 1000 * i + 100, f.eventClass, f.globalTid, 1000000 + i, f.nameId, 0 "
    "FROM n, (SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid LIMIT 1) f"
)


@pytest.fixture(scope="module")
def calls(tmp_path_factory):
    """big_step with MORE_CALLS, made once for both tests: each starts from the entry a first load of it builds
    (under the default budget, 2 GB), built once in the run (conftest.built_cache); what is tested here is how
    that entry is read."""
    return craft(tmp_path_factory.mktemp("at_once") / "calls.sqlite", MORE_CALLS, source="big_step")


def _calls(path) -> int:
    """The export's CUDA API calls, counted in SQLite (each an interval: api_calls holds them all)."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute('SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE "end" >= start').fetchone()[0]
    finally:
        con.close()


def test_pieces_run_side_by_side_as_memory_holds_their_rows(tmp_path, calls):
    path = calls
    rows = _calls(path)
    with nsysql.load(path, cache_dir=built_cache(tmp_path, path)) as p:
        assert p.sql("SELECT count(*) AS n FROM api_calls")["n"][0] == rows  # (and the connection opened)
        assert p._engine.at_once(6, READS) == 6  # it holds them all
        assert p._engine.at_once(6, None) == 6  # the tables not known: all at once
    # the same entry opened under budgets whose DuckDB share (half of a budget this small) holds the calls'
    # rows once, twice, three times
    for times in (1, 2, 3):
        budget = f"{2 * times * rows * ROW_BYTES + rows * ROW_BYTES}B"
        with nsysql.load(path, cache_dir=tmp_path, memory_limit=budget) as p:
            limit = p._engine.base().execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
            assert size_bytes(limit) // (rows * ROW_BYTES) == times  # DuckDB got the share asked for
            assert p._engine.at_once(6, READS) == times
            assert p._engine.at_once(2, READS) == min(2, times)


def test_pieces_one_at_a_time_give_the_same_summary(tmp_path, calls):
    path = calls
    with nsysql.load(path, cache_dir=built_cache(tmp_path, path)) as p:
        p.kernels()  # the entry built (whole: a small export), no piece of the summary stored
    for d in ("all", "one"):
        shutil.copytree(tmp_path, tmp_path / d, ignore=lambda _, names: [n for n in names if n in ("all", "one")])
    with nsysql.load(path, cache_dir=tmp_path / "all") as p:
        p._engine.base()  # opened (a request's pieces run once it is: Engine.plan_request)
        assert p._engine.at_once(6, READS) == 6
        whole = p.summary()
    # a DuckDB share (half of a budget this small) that holds the calls' rows once, not twice: as much as one at
    # a time allows, since gaps.sql's sort and windows over every call need more than ROW_BYTES a call (where
    # a share of 1.5 times the calls' rows ran out of memory now and then beside other tests)
    budget = f"{int(3.9 * _calls(path) * ROW_BYTES)}B"
    with nsysql.load(path, cache_dir=tmp_path / "one", memory_limit=budget) as p:
        p._engine.base()
        assert p._engine.at_once(6, READS) == 1
        one = p.summary()
    assert set(one) == set(whole)
    for k in whole:
        assert one[k].equals(whole[k]), k
