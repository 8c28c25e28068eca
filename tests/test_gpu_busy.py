"""gpu_busy (80_gpu_busy.sql, the union_stretches macro of 00_macros.sql): the union of each device's GPU ops, row
for row as merged in Python from gpu_ops (conftest), on copies of train_small whose kernels were made to nest, touch,
start together and last no time, on one device and on two (the macro takes a path of its own for one key)."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import craft, gpu_busy_by_construction

import nsysql

K = "CUPTI_ACTIVITY_KIND_KERNEL"


def _set(rowid: int, start: str, end: str) -> str:
    """Kernel `rowid` moved to [start, end), both SQL over `a`, kernel 3's row (121 us long)."""
    return f'UPDATE {K} SET (start, "end") = (SELECT {start}, {end} FROM {K} a WHERE a.rowid = 3) WHERE rowid = {rowid}'


SHAPES = (
    _set(4, "a.start + 1000", 'a."end" - 1000'),  # nested in kernel 3
    _set(5, 'a."end"', 'a."end" + 5000'),  # touches kernel 3's end: one stretch
    _set(6, "a.start", "a.start + 10"),  # starts with kernel 3
    _set(7, 'a."end" + 5000', 'a."end" + 5000'),  # no length, touching kernel 5's end
    _set(8, 'a."end" + 9000', 'a."end" + 9000'),  # no length, alone
)


@pytest.mark.parametrize("devices", [1, 2])
def test_gpu_busy_merges_nested_touching_and_empty_ops(tmp_path, devices):
    two = [f"UPDATE {K} SET deviceId = 1 WHERE rowid % 2 = 0 AND rowid > 8"] if devices == 2 else []
    p = craft(tmp_path / "shapes.sqlite", *SHAPES, *two)
    con = sqlite3.connect(p)
    start3, end3 = con.execute(f'SELECT start, "end" FROM {K} WHERE rowid = 3').fetchone()
    con.close()
    prof = nsysql.load(p, cache=False)
    busy = prof.sql(
        "SELECT device_id, start_ns, end_ns, busy_before_ns, prev_end_ns FROM gpu_busy ORDER BY device_id, start_ns"
    ).rows()
    assert busy == gpu_busy_by_construction(prof)
    assert len({row[0] for row in busy}) == devices
    # kernels 3-7 make one stretch, kernel 8 one of no length right after it
    i = [row[1] for row in busy].index(start3)
    assert busy[i][2] == end3 + 5000
    assert busy[i + 1][1:3] == (end3 + 9000, end3 + 9000) and busy[i + 1][4] == end3 + 5000
