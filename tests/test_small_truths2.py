"""Small sentences that must be true on profiles unlike ours: GPU activity recorded but all left out as flawed
(iterations and gaps say so, as summary does), an idle cause made from an NVTX range without a name, a diff of
a profile against itself. Each on a crafted copy of a small fixture, built once."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import craft, fixture, loaded, raw
from test_small_truths import _cli

import nsysql

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


@pytest.fixture(scope="module")
def flawed_gpu(tmp_path_factory):
    """train_small with every kernel, copy and memset (where the export has that table) ending before it
    starts: GPU activity recorded, and all of it left out by the load."""
    d = tmp_path_factory.mktemp("flawed2")
    present = {t for (t,) in raw(fixture("train_small"), "SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = [t for t in GPU_TABLES if t in present]
    path = craft(d / "flawed.sqlite", *(f'UPDATE {t} SET "end" = "start" - 1' for t in tables))
    recorded = sum(raw(path, f'SELECT count(*) FROM {t} WHERE "end" < "start"')[0][0] for t in tables)
    return path, recorded


def test_iterations_and_gaps_say_gpu_activity_was_left_out_not_untraced(flawed_gpu):
    path, recorded = flawed_gpu
    assert recorded > 0
    said = f"the export's {recorded:,} rows of GPU activity were all left out"
    loop = _cli("iterations", path)
    assert loop.exit_code == 0, loop.output
    lines = [ln for ln in loop.output.splitlines() if ln.startswith(("range:", "steady state"))]
    assert len(lines) == 2, loop.output
    for line in lines:  # which range is the loop, and the steady state: both say why the GPU columns are empty
        assert said in line and "traced" not in line, line
    named = _cli("iterations", "--range", "Batch", path)
    assert named.exit_code == 0 and said in named.output and "was traced" not in named.output, named.output
    gaps = _cli("gaps", path)
    assert gaps.exit_code != 0 and said in gaps.output and "traced" not in gaps.output, gaps.output
    assert len(gaps.output.strip().splitlines()) == 1 and "Traceback" not in gaps.output, gaps.output


@pytest.fixture(scope="module", params=["''", "NULL"], ids=["empty", "null"])
def unnamed_loader(request, tmp_path_factory):
    """train_small with its data-loading ranges (`Load data`, which hold the GPU idle time: COMMAND.md) pushed
    with an empty message or none."""
    d = tmp_path_factory.mktemp("unnamed2")
    path = craft(d / "unnamed.sqlite", f"UPDATE NVTX_EVENTS SET text = {request.param} WHERE text = 'Load data'")
    # in the run's cache, which the commands run here (_cli) read too: one build of the copy, not two
    prof = nsysql.load(path)
    yield path, prof
    prof.close()


def test_an_idle_cause_of_a_range_without_a_name_says_unnamed(unnamed_loader):
    path, prof = unnamed_loader
    ((renamed,),) = raw(path, "SELECT count(*) FROM NVTX_EVENTS WHERE coalesce(text, '') = '' AND eventType = 59")
    assert renamed == 20  # train_small's 20 `Load data` ranges (COMMAND.md)
    causes = prof.gaps(by="cause")["cause"].to_list()
    assert "host:(unnamed range)" in causes and "host:" not in causes and None not in causes, causes
    s = prof.summary()
    facts = {k: v for k, _, v in s["facts"].iter_rows()}
    assert "host:(unnamed range) 100%" in facts["idle"], facts["idle"]
    host = s["findings"].filter(pl.col("finding").is_in(["host bound", "data-loader bound"])).row(0, named=True)
    assert "`host:(unnamed range)` idle" in host["headroom_basis"], host["headroom_basis"]
    assert "spent in (unnamed range) on the CPU" in host["evidence"], host["evidence"]
    for text in [*facts.values(), *s["findings"]["headroom_basis"].to_list()]:
        assert "host:`" not in text and "host: " not in text and not str(text).endswith("host:"), text


def test_iterations_titles_the_columns_of_a_child_range_without_a_name(unnamed_loader):
    path, prof = unnamed_loader
    ((total,),) = raw(
        path, "SELECT sum(\"end\" - start) FROM NVTX_EVENTS WHERE coalesce(text, '') = '' AND eventType = 59"
    )
    its = prof.iterations()
    assert len(set(its.columns)) == len(its.columns) and not [c for c in its.columns if c != c.strip()], its.columns
    # the 20 unnamed children, one in each `BatchN` wrapper: all their CPU time in the one column titled for them
    assert its["iteration"].len() == 20 and its["(unnamed range) cpu_ns"].sum() == total
    assert "(unnamed range) gpu_ns" in its.columns
    head = _cli("iterations", path).output.splitlines()[0]
    assert "(unnamed range) cpu_us  (unnamed range) gpu_us" in head and "  cpu_us" not in head, head


def test_a_range_named_unnamed_is_told_apart_from_ranges_without_a_name(tmp_path):
    """A range whose message is really "(unnamed range)" (here train_small's `Load data`, which holds the idle
    time) beside ranges without one (its `Forward Pass`, pushed with none): iterations gives each its own columns,
    and gaps and the findings quote the real name, as every real name is quoted, never as the unnamed ones."""
    path = craft(
        tmp_path / "named_unnamed.sqlite",
        "UPDATE NVTX_EVENTS SET text = '(unnamed range)' WHERE text = 'Load data'",
        "UPDATE NVTX_EVENTS SET text = NULL WHERE text = 'Forward Pass'",
    )
    real, none = (
        raw(path, f'SELECT sum("end" - start) FROM NVTX_EVENTS WHERE {w} AND eventType = 59')[0][0]
        for w in ("text = '(unnamed range)'", "text IS NULL")
    )
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    try:
        its = prof.iterations()
        assert its["`(unnamed range)` cpu_ns"].sum() == real and its["(unnamed range) cpu_ns"].sum() == none
        causes = prof.gaps(by="cause")["cause"].to_list()
        assert "host:`(unnamed range)`" in causes and "host:(unnamed range)" not in causes, causes
        host = prof.summary()["findings"].filter(pl.col("finding").is_in(["host bound", "data-loader bound"]))
        assert "spent in `(unnamed range)` on the CPU" in host["evidence"][0], host["evidence"][0]
        # its headroom's basis names the cause as gaps does, the name's backticks not inside another pair
        basis = host["headroom_basis"][0]
        assert "of host:`(unnamed range)` idle per typical step" in basis and "``" not in basis, basis
    finally:
        prof.close()


def test_a_diff_of_a_profile_against_itself_says_its_slow_iterations_once():
    path = fixture("loop_before")
    # the run's one entry of loop_before (conftest.loaded), which diff reads too: no build here
    pattern = loaded(str(path)).iteration_stats()["outlier_pattern"][0]
    assert pattern  # loop_before stalls every 10th step (COMMAND.md): it has slow iterations to tell
    res = _cli("diff", path, path)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("slow iterations"))
    assert res.output.count(pattern) == 1 and "the same in both" in line, line
