"""What other threads and processes did during GPU idle gaps (gaps --explain, Profile.gap_activity): facts true
by construction of the workloads (fixtures/README.md, fixtures/workloads/jitter.py)."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import fixture, h200, loaded

from nsysql.cli import main

BIG = [9, 19, 29, 39]  # jitter.py: batch i holds 384x384 images when i % 10 == 9 (40 steps)


@pytest.fixture(scope="module")
def before():
    return loaded(str(fixture("jitter_before")))


@pytest.fixture(scope="module")
def after():
    return loaded(str(fixture("jitter_after")))


def training_pid(prof) -> int:
    """The process that owns the GPU (the training process): the one every gap belongs to."""
    pids = prof.gaps()["pid"].unique().to_list()
    assert len(pids) == 1
    return pids[0]


def worker_pids(prof) -> set[int]:
    """By construction the DataLoader workers are the processes whose NVTX ranges are `LoadImage` (domain
    `transforms`); they launch no GPU work."""
    r = prof.sql("SELECT DISTINCT pid FROM nvtx_ranges WHERE name = 'LoadImage' AND domain = 'transforms'")
    return set(r["pid"].to_list())


def longest_gap(prof, iteration: int) -> dict:
    g = prof.gaps().filter(pl.col("iteration") == iteration).sort("duration_ns", descending=True)
    assert g.height, f"no gap in iteration {iteration}"
    return g.row(0, named=True)


def test_big_batches_wait_for_worker_colorjitter(before):
    """In each big batch the training thread waits in `Data loading` while a worker runs ColorJitter on the
    CPU: that is the top activity of the batch's longest gap, in a worker process, not the training one."""
    train, workers = training_pid(before), worker_pids(before)
    assert len(workers) == 2 and train not in workers  # 2 spawn workers, each its own process
    act = before.gap_activity()
    for i in BIG:
        gap = longest_gap(before, i)
        assert gap["cause"] == "host:Data loading"
        rows = act.filter(pl.col("start_ns") == gap["start_ns"]).sort("place")
        top = rows.row(0, named=True)
        assert (top["kind"], top["domain"], top["activity"]) == ("nvtx", "transforms", "ColorJitter"), rows
        assert top["pid"] in workers and top["pid"] != train and top["other_process"]
        assert not top["waiting"] and 0 < top["overlap_ns"] <= gap["duration_ns"]
        # places are 1..n in order of (work first, then) overlap
        assert rows["place"].to_list() == list(range(1, rows.height + 1))
        work = rows.filter(~pl.col("waiting"))
        assert work["overlap_ns"].to_list() == sorted(work["overlap_ns"].to_list(), reverse=True)
    # the training thread itself (its main thread, where the cause is read) is never listed: its wait is the cause
    main_tid = before.sql(f"SELECT main_tid FROM process_roles WHERE pid = {train}")["main_tid"][0]
    assert act.filter((pl.col("pid") == train) & (pl.col("tid") == main_tid)).height == 0


def test_innermost_range_only_and_never_more_than_the_gap(before):
    act = before.gap_activity()
    assert (act["overlap_ns"] <= act["duration_ns"]).all()
    assert (act["pct_of_gap"] <= 100.0).all()
    # one thread is in one innermost range at a time: its NVTX rows of one gap add up to at most the gap
    per_thread = (
        act.filter(pl.col("kind") == "nvtx")
        .group_by("start_ns", "pid", "tid")
        .agg(pl.col("overlap_ns").sum(), pl.col("duration_ns").first())
    )
    assert (per_thread["overlap_ns"] <= per_thread["duration_ns"]).all()


def test_by_cause_names_worker_colorjitter_first(before):
    by = before.gap_activity(by="cause", top=3)
    assert by["cause"][0] == before.gaps(by="cause")["cause"][0] == "host:Data loading"
    top = by.filter(pl.col("cause") == "host:Data loading").row(0, named=True)
    assert (top["activity"], top["domain"], top["pid"] in worker_pids(before)) == ("ColorJitter", "transforms", True)
    assert by.group_by("cause").len()["len"].max() <= 3


def test_summary_and_finding_name_the_worker_activity(before):
    s = before.summary()
    facts = dict(s["facts"].select("key", "value").iter_rows())
    line = facts["meanwhile"]
    assert line.startswith("during host:Data loading: `ColorJitter`")
    assert "`ColorJitter`" in line and "domain `transforms`" in line
    top = before.gap_activity(by="cause").row(0, named=True)
    assert f"process {top['pid']}" in line
    f = s["findings"].filter(pl.col("finding") == "data-loader bound")["evidence"][0]
    assert "`Data loading`" in f and "`ColorJitter`" in f


def test_after_fix_no_big_gaps_and_no_worker_colorjitter(before, after):
    """jitter_after applies ColorJitter on the GPU in the training loop: the workers only load."""
    big_before = min(longest_gap(before, i)["duration_ns"] for i in BIG)
    g = after.gaps()
    steady = g.filter(pl.col("iteration").is_not_null() & ~pl.col("warmup"))
    assert steady.height and steady["duration_ns"].max() < big_before
    act = after.gap_activity()
    assert act.filter(pl.col("other_process") & (pl.col("activity") == "ColorJitter")).height == 0
    assert act.filter(pl.col("other_process") & (pl.col("activity") == "LoadImage")).height > 0


def test_diff_says_worker_colorjitter_vanished(before, after):
    d = before.diff(after)
    act = d.activity
    cj = act.filter(pl.col("activity") == "transforms:ColorJitter [other processes]").row(0, named=True)
    assert cj["status"] == "vanished" and cj["new_ns"] == 0 and cj["delta_ns"] < 0 and cj["significant"]
    idle = d.idle.filter(pl.col("cause") == "host:Data loading").row(0, named=True)
    assert idle["delta_ns"] < 0
    verdict = dict(d.verdict().iter_rows())
    assert verdict["largest idle activity elsewhere change"].startswith(
        "transforms:ColorJitter [other processes] (vanished)"
    )


def test_train_small_sleep_is_on_the_training_thread():
    """train_small sleeps in `Load data` on the training thread itself: one process, no worker to blame."""
    prof = loaded(str(fixture("train_small")))
    by = prof.gap_activity(by="cause")
    rows = by.filter(pl.col("cause") == "host:Load data")
    assert rows.height and not rows["other_process"].any()
    assert rows.filter(~pl.col("waiting") & (pl.col("pct_of_idle") >= 20)).height == 0
    facts = dict(prof.summary()["facts"].select("key", "value").iter_rows())
    assert facts["meanwhile"].startswith("during host:Load data: no other thread or process")
    f = prof.summary()["findings"].filter(pl.col("finding") == "data-loader bound")["evidence"][0]
    assert "meanwhile" not in f


def test_h200_train_osrt_blames_no_worker():
    prof = loaded(str(h200("train_osrt.sqlite")))
    by = prof.gap_activity(range="Batch", by="cause")
    rows = by.filter(pl.col("cause") == "host:Load data")
    assert rows.height and not rows["other_process"].any()
    assert rows.filter(~pl.col("waiting") & (pl.col("pct_of_idle") >= 20)).height == 0


def test_h200_threads_main_waits_for_worker_threads():
    """w_threads.py: the main thread joins two worker threads, each inside its own `worker<t>/iter` ranges
    (domain `workers`): during the gap in `main/step` those ranges are what the other threads do."""
    prof = loaded(str(h200("threads.sqlite")))
    gaps = prof.gaps().filter(pl.col("cause") == "host:main/step")
    assert gaps.height
    act = prof.gap_activity().filter(pl.col("start_ns").is_in(gaps["start_ns"].implode()) & (pl.col("place") <= 2))
    assert set(act["activity"].to_list()) == {"worker0/iter", "worker1/iter"}
    assert (act["domain"] == "workers").all() and act["tid"].n_unique() == 2 and not act["other_process"].any()


def test_cli_explain(before):
    path = str(fixture("jitter_before"))
    r = CliRunner().invoke(main, ["gaps", path, "--explain", "--top", "2", "-f", "csv"])
    assert r.exit_code == 0, r.output
    df = pl.read_csv(r.output.encode())
    assert df.group_by("start_ns").len()["len"].max() <= 2
    assert df.height == before.gap_activity(top=2).height
    r = CliRunner().invoke(main, ["gaps", path, "--explain", "--by", "cause", "-f", "csv"])
    assert r.exit_code == 0, r.output
    assert pl.read_csv(r.output.encode())["activity"][0] == "ColorJitter"


def test_report_shows_work_elsewhere(tmp_path):
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(fixture("jitter_before")), "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    i = text.index("While the GPU waited: work elsewhere")
    assert "ColorJitter" in text[i : i + 5000]
