"""Kernels per range in a deep nesting of ranges that share a few names: each kernel counts once per enclosing
range of a name, and the figures are those of that multiset, as nsys's nvtx_kern_sum counts them (issue 35:
computed from weights, never by repeating each kernel once per enclosing range)."""

from __future__ import annotations

import sqlite3
import statistics
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import ROOT

import nsysql

NAMES = 3  # the ranges' names, r0 r1 r2 in turn down the chain


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """A chain of 300 push/pop ranges, one inside the other, launching 60 kernels (benchmarks/gen_deep_nvtx.py),
    renamed so that 100 ranges of each name enclose each other."""
    out = tmp_path_factory.mktemp("deep") / "deep.sqlite"
    gen = ROOT / "benchmarks" / "gen_deep_nvtx.py"
    subprocess.run(
        [sys.executable, str(gen), str(out), "--ranges", "300", "--depth", "300", "--kernels", "60"],
        check=True,
        capture_output=True,
    )
    con = sqlite3.connect(out)
    con.execute(f"UPDATE NVTX_EVENTS SET text = 'r' || (rowid % {NAMES}) WHERE eventType = 59")
    con.commit()
    con.close()
    return out


def by_construction(path) -> dict[tuple[str, str], tuple[int, int, int, float, float]]:
    """(range name, kernel name) -> (range_count, count, total_ns, med_ns, stddev_ns), from the export's rows:
    a kernel belongs to every push/pop range open on its launching thread when its launch call started."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ranges = con.execute("SELECT rowid, text, start, end, globalTid FROM NVTX_EVENTS WHERE eventType = 59").fetchall()
    kernels = con.execute(
        "SELECT s.value, k.end - k.start, r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "JOIN StringIds s ON s.id = k.demangledName"
    ).fetchall()
    con.close()
    durations = defaultdict(list)
    enclosing = defaultdict(set)
    for kname, dur, t, tid in kernels:
        for rid, rname, start, end, rtid in ranges:
            if rtid == tid and start <= t < end:
                durations[rname, kname].append(dur)
                enclosing[rname, kname].add(rid)
    return {
        k: (len(enclosing[k]), len(d), sum(d), statistics.median(d), statistics.stdev(d) if len(d) > 1 else 0.0)
        for k, d in durations.items()
    }


def test_kernels_per_range_in_a_deep_nesting_of_repeated_names(deep):
    want = by_construction(deep)
    assert max(c for _, c, *_ in want.values()) > 60  # each of the 60 kernels counted many times over
    with nsysql.load(deep, cache=False) as p:
        got = p.kernels_by_range(attribution="thread")
    rows = {(r["range"], r["kernel"]): r for r in got.iter_rows(named=True)}
    assert rows.keys() == want.keys()
    for k, (range_count, count, total, med, stddev) in want.items():
        r = rows[k]
        assert (r["range_count"], r["count"], r["total_ns"]) == (range_count, count, total), k
        assert r["avg_ns"] == pytest.approx(total / count, rel=1e-12), k
        assert r["med_ns"] == med, k
        assert r["stddev_ns"] == pytest.approx(stddev, rel=1e-9, abs=1e-9), k
