"""Findings with headroom: the time each would give back per steady-state iteration, ranked, capped by the pool
of time it shares with the findings it overlaps (rules in nsysql/analyses/headroom.py). Every figure here is
made again from the iterations, gaps and kernels answers, which agree with nsys stats elsewhere in the suite."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, gpu_waits_per_typical_step, h200_exports, loaded, own_exports, raw

import nsysql
from nsysql.cli import main

HEADROOM_COLUMNS = ["headroom_ms", "headroom_pct", "pool", "additive", "needs", "headroom_basis"]


def _steady(prof) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The steady-state iterations and the typical ones among them (not outliers), from `iterations`."""
    its = prof.iterations()
    steady = its.filter(~pl.col("warmup"))
    return steady, steady.filter(~pl.col("outlier"))


def _row(prof, name: str) -> dict:
    f = prof.findings().filter(pl.col("finding") == name)
    assert f.height == 1, prof.findings()["finding"].to_list()
    return f.row(0, named=True)


def test_train_small_values_by_construction():
    """train_small sleeps 20 ms in `Load data` every 5th step and reads a batch in ~1.5 ms in the others. The
    data-loader finding gives back the `Load data` idle of a typical step (the gaps of that cause, summed per
    iteration, averaged over the steady steps that are not outliers: close to their median); the periodic one
    what the outliers add to the mean step; each as a share of the mean steady-state step."""
    prof = loaded(str(fixture("train_small")))
    steady, typical = _steady(prof)
    mean_step = steady["step_ns"].mean()
    gaps = prof.gaps().filter(pl.col("cause") == "host:Load data")
    per_step = typical.join(
        gaps.group_by("iteration").agg(pl.col("duration_ns").sum().alias("load_ns")), on="iteration", how="left"
    )["load_ns"].fill_null(0)
    loader = _row(prof, "data-loader bound")
    assert loader["headroom_ms"] == pytest.approx(per_step.mean() / 1e6, abs=5e-4)
    assert loader["headroom_pct"] == pytest.approx(100 * per_step.mean() / mean_step, abs=0.05)
    assert loader["headroom_ms"] == pytest.approx(per_step.median() / 1e6, rel=0.15)
    assert loader["pool"] == "idle" and loader["additive"]
    slow = _row(prof, "periodic slow iterations")
    assert slow["headroom_ms"] == pytest.approx((mean_step - typical["step_ns"].mean()) / 1e6, abs=5e-4)
    assert slow["pool"] == "slow"
    # the symptom: the idle of a typical step, not added to the causes it summarises
    idle = _row(prof, "GPU mostly idle")
    assert idle["headroom_ms"] == pytest.approx(typical["step_idle_ns"].mean() / 1e6, abs=5e-4)
    assert not idle["additive"]
    # pageable copies: no pinned copy to measure the pinned rate, so their whole GPU time per typical step
    copies = prof.sql(
        "SELECT coalesce(api_start_ns, start_ns) AS t, duration_ns FROM gpu_ops_named "
        "WHERE kind = 'memcpy' AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable'"
    )
    inside = sum(
        d for t, d in copies.iter_rows() for s, e in typical.select("start_ns", "end_ns").iter_rows() if s <= t < e
    )
    # the steps end when the CPU is done: the busy-time findings share the time the CPU waited for the GPU in
    # CUDA calls (0.15 ms per typical step), under the GPU work they would shorten; the larger takes it first
    waited = gpu_waits_per_typical_step(prof)
    tensor, page = _row(prof, "matrix math without tensor cores"), _row(prof, "pageable host-to-device copies")
    per = prof.kernels(by="category", per="iteration").filter(
        pl.col("category").is_in(["gemm", "conv"])
        & (pl.col("tensor_cores") == "no")
        & pl.col("iteration").is_in(typical["iteration"].to_list())
    )
    simt = per["total_ns"].sum() / typical.height  # 0.40 ms of products on CUDA cores, TF32 at 2x: 0.20 ms
    assert waited < 0.5 * simt
    assert tensor["headroom_ms"] == pytest.approx(waited / 1e6, abs=5e-4)
    assert page["headroom_ms"] == pytest.approx(
        max(0.0, min(inside / typical.height, waited - tensor["headroom_ms"] * 1e6)) / 1e6, abs=5e-4
    )
    assert "upper bound" in page["headroom_basis"] and "wait for the GPU" in tensor["headroom_basis"]


def test_pageable_copies_outside_the_steps_say_so():
    """ops_transformer copies its pageable inputs before its loop and none in a step (counted here from the
    copies and the typical steps' windows): the finding stays, giving back 0 ms, and its basis says why, not
    that 0 ms is an upper bound for want of a pinned rate."""
    prof = loaded(str(fixture("ops_transformer")))
    _, typical = _steady(prof)
    starts = prof.sql(
        "SELECT coalesce(api_start_ns, start_ns) AS t FROM gpu_ops_named "
        "WHERE kind = 'memcpy' AND copy_kind = 'Host-to-Device' AND src_kind = 'Pageable'"
    )["t"].to_list()
    windows = typical.select("start_ns", "end_ns").rows()
    assert starts and not any(s <= t < e for t in starts for s, e in windows)
    page = _row(prof, "pageable host-to-device copies")
    assert page["headroom_ms"] == 0
    assert page["headroom_basis"].startswith("no pageable copy in a typical steady-state step")
    assert "upper bound" not in page["headroom_basis"]


def test_sorted_by_headroom_and_top_leads():
    """Additive findings by headroom, largest first, then the symptoms; the top one is the first line of the
    summary (the `fix first` fact), of the Markdown snippet and of the HTML report (test_every_format...); the
    order on every export: test_headrooms_never_add_up_to_more_than_the_step."""
    prof = loaded(str(fixture("train_small")))
    f = prof.findings()
    assert f["finding"].to_list()[:2] == ["periodic slow iterations", "data-loader bound"]
    assert f["finding"][-1] == "GPU mostly idle"
    facts = prof.summary()["facts"]
    assert facts["key"][0] == "fix_first"
    assert facts["value"][0].startswith(f"periodic slow iterations: {f['headroom_ms'][0]:,.2f} ms per iteration")
    r = CliRunner().invoke(main, ["summary", str(fixture("train_small"))], catch_exceptions=False)
    assert re.match(r"fix first +periodic slow iterations: ", r.output.splitlines()[3])
    r = CliRunner().invoke(main, ["report", "-f", "markdown", str(fixture("train_small"))], catch_exceptions=False)
    body = [line for line in r.output.splitlines() if line.strip()]
    assert re.match(r"\*\*Fix first\*\*: `+periodic slow iterations:", body[1]), body[1]  # a code span (h30sec)


def _pools(prof) -> dict[str, float]:
    steady, typical = _steady(prof)
    mean_step, typical_step = steady["step_ns"].mean(), typical["step_ns"].mean()
    idle = typical["step_idle_ns"].mean()
    return {
        "step": mean_step,
        "idle": idle,
        "busy": typical_step - idle,
        "slow": mean_step - typical_step,
    }


def _loops(paths):
    out = []
    for p in paths:
        prof = loaded(str(p))
        try:
            prof.iterations()
        except nsysql.NsysqlError:
            continue
        out.append(prof)
    return out


@pytest.mark.parametrize("where", ["fixtures", "h200"])
def test_headrooms_never_add_up_to_more_than_the_step(where):
    """On every fixture and shared h200 export with a loop: the additive headrooms of each pool add up to at
    most that pool (made here from `iterations`), and all of them to at most the mean steady-state step. And
    the order: additive findings by headroom, largest first, then the symptoms."""
    profs = _loops(own_exports() if where == "fixtures" else h200_exports())
    if not profs:
        pytest.skip(f"no {where} exports")
    for prof in profs:
        f = prof.findings()
        known = f.filter(pl.col("headroom_ms").is_not_null())
        additive = known.filter(pl.col("additive"))["headroom_ms"].to_list()
        assert additive == sorted(additive, reverse=True), prof.path
        flags = known["additive"].to_list()
        assert flags == sorted(flags, reverse=True), prof.path  # the symptoms after the additive findings
        if not known.height:
            continue
        pools = _pools(prof)
        add = f.filter(pl.col("additive") & pl.col("headroom_ms").is_not_null())
        slack = 1e-3 * (add.height + 1)  # each headroom is rounded to the µs
        assert add["headroom_ms"].sum() <= pools["step"] / 1e6 + slack, prof.path
        assert add["headroom_pct"].sum() <= 100.0 + 0.1 * (add.height + 1), prof.path
        for pool, ms in add.group_by("pool").agg(pl.col("headroom_ms").sum()).iter_rows():
            assert ms <= pools[pool] / 1e6 + slack, (prof.path, pool)
        for r in f.filter(~pl.col("additive")).iter_rows(named=True):
            assert r["headroom_ms"] <= pools[r["pool"]] / 1e6 + 1e-3, prof.path


def test_the_copy_findings_count_the_copies_once(tmp_path):
    """pipit saxpy's loop, its device-to-host copies left out: its host-to-device copies are all pageable (no
    pinned rate measured: their whole time is the pageable headroom) and all with no kernel beside them (the
    transfer-bound headroom, each step's at most its kernel time). Pinning them and overlapping them give back
    the same copy time: the two headrooms together stay within the copies' time per typical step. They counted
    it twice (27.948 + 13.295 ms of 27.954 ms)."""
    src = PUBLIC / "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
    if not src.exists():
        pytest.skip(f"{src} not present")
    prof = loaded(
        str(craft(tmp_path / "saxpy.sqlite", "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2", source=src))
    )
    its = prof.iterations()
    typical = its.filter(~pl.col("warmup") & ~pl.col("outlier"))
    copies = typical["memcpy_ns"].sum() / typical.height  # host-to-device copies only, by construction
    pageable, transfer = _row(prof, "pageable host-to-device copies"), _row(prof, "transfer bound")
    assert pageable["headroom_ms"] == pytest.approx(copies / 1e6, abs=1e-2)
    # within 10 us: the exposed copies are measured inside the step windows, memcpy_ns by the steps' launches
    assert pageable["headroom_ms"] + transfer["headroom_ms"] <= copies / 1e6 + 1e-2
    assert "their time, counted once" in transfer["headroom_basis"]


@pytest.mark.parametrize("before, after", [("jitter_before", "jitter_after"), ("loop_before", "loop_after")])
def test_the_fix_shows_in_the_headroom(before, after):
    """jitter_after moves ColorJitter off the DataLoader workers, loop_after fixes the every-10th stall: the
    slow iterations' headroom (what the outliers add to the mean step) shrinks to a fraction, and it was the
    top finding before."""
    b, a = loaded(str(fixture(before))), loaded(str(fixture(after)))
    fb, fa = b.findings(), a.findings()
    assert fb["pool"][0] == "slow" and fb["finding"][0].endswith("slow iterations")
    slow_after = fa.filter(pl.col("pool") == "slow")["headroom_ms"].sum()
    assert slow_after < 0.25 * fb["headroom_ms"][0]
    for prof, f in ((b, fb), (a, fa)):
        row = f.filter(pl.col("pool") == "slow").row(0, named=True)
        assert row["headroom_ms"] == pytest.approx(_pools(prof)["slow"] / 1e6, abs=5e-4)


def test_tensor_core_headroom_on_hw_mix():
    """hw_mix runs fp32 products on CUDA cores in its first steps, bf16 on tensor cores after (GPU metrics
    judge). The headroom is their GPU time per typical step (kernels --by category --per iteration) x (1 - 1/2):
    TF32's conservative speedup on an H200 (compute capability 9.0)."""
    prof = loaded(str(fixture("hw_mix")))
    _, typical = _steady(prof)
    per = prof.kernels(by="category", per="iteration").filter(
        pl.col("category").is_in(["gemm", "conv"])
        & (pl.col("tensor_cores") == "no")
        & pl.col("iteration").is_in(typical["iteration"].to_list())
    )
    simt = per["total_ns"].sum() / typical.height
    r = _row(prof, "matrix math without tensor cores")
    assert r["headroom_ms"] == pytest.approx(simt * 0.5 / 1e6, abs=5e-4)
    assert r["pool"] == "busy" and "tf32 at 2x (compute capability 9.0)" in r["headroom_basis"]
    assert "compute capability 7.0 or higher" in r["needs"]
    # its one long host gap (loading the bf16 kernels) falls in the outlier step: nothing per typical step; what
    # it costs is what the outlier adds to the mean, the slow iterations' headroom, which ranks first
    outliers = prof.iterations().filter(pl.col("outlier"))["iteration"].to_list()
    host = prof.gaps().filter((pl.col("cause") == "host:Forward Pass") & ~pl.col("warmup").fill_null(True))
    assert host.height and set(host["iteration"].to_list()) <= set(outliers)
    h = _row(prof, "host bound")
    assert h["headroom_ms"] == 0.0 and "in the outliers count in the slow iterations' headroom" in h["headroom_basis"]
    assert prof.findings()["finding"].to_list()[:2] == ["slow iterations", "matrix math without tensor cores"]


def test_one_gap_and_one_outlier_are_said_as_one():
    """hw_mix has one steady-state gap >= 1 ms and one outlier step (by construction the first bf16 product's
    set-up, in `Batch8`): the host-bound evidence and the slow-iteration basis count them in the singular; they
    said "in 1 gaps" and "(1 outliers of 15)"."""
    prof = loaded(str(fixture("hw_mix")))
    assert prof.iterations().filter(pl.col("outlier")).height == 1
    host, slow = _row(prof, "host bound"), _row(prof, "slow iterations")
    assert " in 1 gap) is spent in " in host["evidence"]
    assert slow["headroom_basis"].endswith("(1 outlier of 15)")


def test_tensor_core_headroom_abstains_on_a_gpu_that_may_have_none(tmp_path):
    """Where the export does not say which GPU ran the matrix kernels (no compute capability), the GPU may be
    older than Volta, with no tensor cores: the finding stays (its kernels are on CUDA cores, by name) but its
    headroom is not counted, and the basis says why. It counted 0.201 ms per step at the lowest speedup. Where
    GPU metrics sampled that GPU (hw_mix), nsys's Turing-or-later rule says it has tensor cores: counted."""
    unknown = "UPDATE TARGET_INFO_GPU SET computeMajor = NULL, computeMinor = NULL"
    r = _row(loaded(str(craft(tmp_path / "small.sqlite", unknown))), "matrix math without tensor cores")
    assert r["headroom_ms"] is None and "the export does not say which GPU ran them" in r["headroom_basis"]
    r = _row(loaded(str(craft(tmp_path / "mix.sqlite", unknown, source="hw_mix"))), "matrix math without tensor cores")
    assert r["headroom_ms"] > 0 and "GPU metrics sampled there, so Turing (sm_75) or later" in r["headroom_basis"]


def test_no_tensor_core_finding_without_tensor_cores(tmp_path):
    """The same export, its GPU said to be compute capability 6.1 (a Pascal card: no tensor cores): the
    tensor-core finding's precondition does not hold, so it is not emitted; the others stay."""
    src = fixture("train_small")
    copy = tmp_path / "pascal.sqlite"
    shutil.copy(src, copy)
    with sqlite3.connect(copy) as con:
        con.execute("UPDATE TARGET_INFO_GPU SET computeMajor = 6, computeMinor = 1")
    found = nsysql.load(str(copy)).findings()["finding"].to_list()
    assert "matrix math without tensor cores" not in found
    assert "data-loader bound" in found
    assert "matrix math without tensor cores" in loaded(str(src)).findings()["finding"].to_list()


def test_every_format_carries_the_columns(tmp_path):
    path = str(fixture("train_small"))
    prof = loaded(path)
    f = prof.findings()
    assert f.columns[:3] == ["finding", "headroom_ms", "headroom_pct"]
    assert set(HEADROOM_COLUMNS) <= set(f.columns)
    assert set(HEADROOM_COLUMNS) <= set(prof.summary()["findings"].columns)
    run = lambda *a: CliRunner().invoke(main, ["summary", *a, path], catch_exceptions=False).output  # noqa: E731
    js = json.loads(run("-f", "json"))["findings"]
    assert js[0]["finding"] == f["finding"][0] and js[0]["headroom_ms"] == f["headroom_ms"][0]
    assert all(set(HEADROOM_COLUMNS) <= set(r) for r in js)
    csv = run("-f", "csv")
    assert "# findings\nfinding,headroom_ms,headroom_pct,pool,additive,evidence,needs,headroom_basis\n" in csv
    table = run()
    assert "finding                           headroom_ms  headroom_pct  pool  additive  evidence" in table
    md = run("-f", "markdown")
    assert f"- **data-loader bound** ({_row(prof, 'data-loader bound')['headroom_ms']:,.2f} ms per iteration" in md
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", path, "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0
    html = out.read_text()
    assert 'id="fix-first">Fix first: periodic slow iterations' in html
    assert f"{_row(prof, 'data-loader bound')['headroom_ms']:,.2f} ms per iteration" in html


def test_without_a_loop_no_headroom():
    """extra-p's profile1 holds no loop (its NVTX families fail the loop tests): there is no step to give time
    back to, so the headrooms are empty, the basis says why, and the summary's first line says so."""
    path = PUBLIC / "extra-p__extrap__profile1.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present")
    prof = loaded(str(path))
    with pytest.raises(nsysql.NsysqlError):
        prof.iterations()
    f = prof.findings()
    assert f.height and f["headroom_ms"].null_count() == f.height and f["headroom_pct"].null_count() == f.height
    assert all(b.startswith("no loop") for b in f["headroom_basis"].to_list())
    facts = prof.summary()["facts"]
    assert facts.row(0) == (
        "fix_first",
        "findings",
        f"{f.height} finding{'s' if f.height != 1 else ''}, not ranked by headroom: {f['headroom_basis'][0]}",
    )


def test_nothing_to_fix_first_when_every_headroom_is_zero():
    """graph_whole replays a CUDA graph whose steps the GPU runs back to back: its pageable copies lie outside
    the steady-state steps (0 per iteration), and the GEMMs the graph replays are not recorded (traced whole), so
    the tensor-core finding has no figure: the first line names no fix, says none measured gives time back, and
    which finding could not be measured."""
    path = h200_exports()
    path = [p for p in path if p.name == "graph_whole.sqlite"]
    if not path:
        pytest.skip("graph_whole.sqlite not present")
    prof = loaded(str(path[0]))
    f = prof.findings()
    measured = f.filter(f["headroom_ms"].is_not_null())
    assert measured.height and (measured["headroom_ms"] == 0).all() and measured.height < f.height
    first = prof.summary()["facts"].row(0)
    assert first[:2] == ("fix_first", "findings")
    assert first[2].startswith(f"{f.height} findings, none measured giving back time")


def test_allocation_stalls_give_back_the_time_their_calls_cover(tmp_path):
    """A copy of train_small in which a cudaMalloc on the main thread covers the first 60% of every steady-state
    gap >= 1 ms: each gap's cause becomes `alloc` (calls of one kind over half of it) and the finding is
    `allocation stalls`. Removing the calls gives back the 60% they cover, not the gap's other 40%, in which
    no call of theirs ran: the headroom is the covered time per typical step, made here from the crafted calls."""
    base = loaded(str(fixture("train_small")))
    steady, typical = _steady(base)
    gaps = base.gaps().filter(pl.col("iteration").is_in(steady["iteration"].to_list()))
    # the thread that makes most of the export's CUDA calls: the loop's
    (main_tid,) = raw(
        fixture("train_small"),
        "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1",
    )[0]
    calls = [(g["start_ns"], g["start_ns"] + g["duration_ns"] * 6 // 10) for g in gaps.iter_rows(named=True)]
    path = craft(
        tmp_path / "alloc.sqlite",
        *[
            (
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
                "returnValue) VALUES (?, ?, 1, ?, ?, "
                "(SELECT id FROM StringIds WHERE value = 'cudaMalloc_v3020'), 0)",
                (s, e, main_tid, 1_000_000 + i),
            )
            for i, (s, e) in enumerate(calls)
        ],
    )
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    assert set(prof.gaps().filter(pl.col("iteration").is_in(steady["iteration"].to_list()))["cause"]) == {"alloc"}
    covered = pl.DataFrame(
        {"iteration": gaps["iteration"], "ns": [e - s for s, e in calls]},
        schema={"iteration": pl.Int64, "ns": pl.Int64},
    )
    per_step = (
        typical.select(pl.col("iteration").cast(pl.Int64))
        .join(covered.group_by("iteration").agg(pl.col("ns").sum()), on="iteration", how="left")["ns"]
        .fill_null(0)
    )
    stalls = _row(prof, "allocation stalls")
    assert stalls["headroom_ms"] == pytest.approx(per_step.mean() / 1e6, abs=5e-4)
    whole = (
        typical.select(pl.col("iteration").cast(pl.Int64))
        .join(
            gaps.group_by(pl.col("iteration").cast(pl.Int64)).agg(pl.col("duration_ns").sum()),
            on="iteration",
            how="left",
        )["duration_ns"]
        .fill_null(0)
    )
    assert stalls["headroom_ms"] < 0.7 * whole.mean() / 1e6  # not the whole gaps


def test_launch_bound_beside_host_gaps_that_hold_little_of_the_idle():
    """loader_cpu_after runs its image transforms on the GPU in the loop, as thousands of small kernels launched
    one by one: most of a step's idle time lies between kernels, in gaps shorter than 1 ms, and a few gaps >= 1
    ms are host work. The host-bound finding covers those gaps; the idle between kernels is launch bound's (the
    idle outside gaps >= 1 ms, per typical step), said beside it. Where those gaps hold enough of the idle
    (`host_explains_share` at or below their share) the host work explains it, and launch bound is not said."""
    from nsysql.analyses.findings import Thresholds

    prof = loaded(str(fixture("loader_cpu_after")))
    steady, typical = _steady(prof)
    found = prof.findings()["finding"].to_list()
    assert {"host bound", "launch bound"} <= set(found), found
    big = prof.gaps().filter(pl.col("iteration").is_in(typical["iteration"].implode()))["duration_ns"].sum()
    launch = _row(prof, "launch bound")
    assert launch["headroom_ms"] == pytest.approx(
        (typical["step_idle_ns"].sum() - big) / typical.height / 1e6, abs=5e-4
    )
    st = prof.iteration_stats().row(0, named=True)
    held = prof.gaps(by="cause")["idle_ns"].sum() / st["steady_idle_ns"]
    assert 0 < held < 0.5
    explained = prof.summary(thresholds=Thresholds(host_explains_share=held * 0.99))["findings"]["finding"]
    assert "host bound" in explained and "launch bound" not in explained


def test_a_gpu_that_hardly_idles_sets_the_pace_whatever_the_cpu_waited(tmp_path):
    """hw_mix's GPU idles 3% of a typical step: the GPU sets its pace, and the tensor-core headroom is the GPU
    time it would save. With its synchronize and copy calls gone from the trace (as where a blocked launch waits
    on a full queue, which no such call shows), the CPU is seen waiting for the GPU hardly at all; the GPU still
    sets the pace, so the headroom stays what it was (it fell to 0.05 ms when the CPU's waits capped it)."""
    path = craft(
        tmp_path / "nosync.sqlite",
        "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN "
        "(SELECT id FROM StringIds WHERE value LIKE '%ynchronize%' OR value LIKE '%emcpy%')",
        source="hw_mix",
    )
    prof, base = nsysql.load(path, cache_dir=tmp_path / "c"), loaded(str(fixture("hw_mix")))
    _, typical = _steady(prof)
    assert typical["step_idle_ns"].sum() < 0.1 * typical["step_ns"].sum()
    assert gpu_waits_per_typical_step(prof) < 0.1e6
    assert _row(prof, "matrix math without tensor cores")["headroom_ms"] == pytest.approx(
        _row(base, "matrix math without tensor cores")["headroom_ms"], abs=5e-4
    )
