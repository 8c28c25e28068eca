"""The slow-iteration finding says where the outlier steps' extra time is (findings.slow_phase), from the
iterations' own child-range times: a finding a user can act on names the phase to look at."""

from __future__ import annotations

import re

import polars as pl
from conftest import fixture, loaded


def _slow(path) -> str:
    f = loaded(str(path)).summary()["findings"]
    row = f.filter(pl.col("finding").str.contains("slow iterations"))
    assert row.height == 1, f
    return row["evidence"][0]


def test_train_small_slow_steps_are_slow_in_load_data():
    """By construction batches 4, 9, 14, 19 sleep 20 ms inside `Load data`: their extra time is there, and the
    figures are the means of the iterations' own columns."""
    path = fixture("train_small")
    its = loaded(str(path)).iterations().filter(~pl.col("warmup"))
    slow, typical = its.filter(pl.col("outlier")), its.filter(~pl.col("outlier"))
    assert sorted(slow["iteration"].to_list()) == [4, 9, 14, 19]
    extra = slow["wall_ns"].mean() - typical["wall_ns"].mean()
    grew = slow["Load data cpu_ns"].mean() - typical["Load data cpu_ns"].mean()
    assert grew > 0.9 * extra  # the sleep is 20 ms of the ~21 ms
    text = _slow(path)
    m = re.search(r"their extra ([\d.,]+) ms a step is in `Load data` \(\+([\d.,]+) ms on the CPU\)", text)
    assert m, text
    assert float(m.group(1)) == round(extra / 1e6, 1) and float(m.group(2)) == round(grew / 1e6, 1)


def test_a_wait_outside_every_child_range_is_said_so():
    """loader_cpu_before waits for the workers' batch directly in `train step N`, outside `forward`, `backward`
    and `optimizer`: no child range is named as the place of the extra time."""
    text = _slow(fixture("loader_cpu_before"))
    assert "in none of the step's child ranges (`forward`, `backward`, `optimizer`" in text, text
    assert "spent in the step range itself" in text


def test_no_phase_clause_for_steps_timed_on_the_gpu():
    """graph_loop's steps are timed on the GPU (h31head's rule): CPU phase times say nothing about them, and the
    noise floor leaves it no slow-iteration finding at all."""
    f = loaded(str(fixture("graph_loop"))).summary()["findings"]
    assert not f.filter(pl.col("finding").str.contains("slow iterations")).height
    assert not f["evidence"].str.contains("child range").any()


def test_a_tiny_headroom_is_not_fix_first(tmp_path):
    """One slow iteration in 187 of an NVTX-only loop gives back 0.3% of its step: the summary's first line says no
    finding is worth fixing first and names the largest with its figure, rather than `fix first`."""
    from conftest import PUBLIC

    path = PUBLIC / "YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite"
    if not path.exists():
        import pytest

        pytest.skip(f"{path} not present")
    prof = loaded(str(path))
    f = prof.findings()
    assert f.height and f["headroom_pct"][0] < 2.0
    first = prof.summary()["facts"].row(0, named=True)
    assert first["key"] == "fix_first" and first["item"] == "findings"  # the lead line, not labelled `fix first`
    assert (
        f"none worth fixing first: the largest, {f['finding'][0]}, gives back {f['headroom_ms'][0]:,.3f} ms"
        in (first["value"])
    )


def test_outliers_slow_in_another_range_are_named_apart():
    """loop_before: by construction steps 9, 19 and 29 sleep in `batch_to_device`; the detector also flags a
    step that is slow for another reason. The finding averaged them all and put the whole extra time in
    `batch_to_device`; it now says that of the steps it holds for and names each other one with the child range
    where its own extra time grew most (computed here from the iterations' columns)."""
    path = fixture("loop_before")
    its = loaded(str(path)).iterations().filter(~pl.col("warmup"))
    slow, typical = its.filter(pl.col("outlier")), its.filter(~pl.col("outlier"))
    phases = [c[: -len(" cpu_ns")] for c in its.columns if c.endswith(" cpu_ns")]
    top = {}
    for row in slow.iter_rows(named=True):
        grew = {p: (row[f"{p} cpu_ns"] or 0) - typical[f"{p} cpu_ns"].fill_null(0).mean() for p in phases}
        top[row["iteration"]] = max(grew, key=grew.get)
    assert {i for i, p in top.items() if p == "batch_to_device"} >= {9, 19, 29}
    others = {i: p for i, p in top.items() if p != "batch_to_device"}
    assert others  # the step slow for another reason
    text = _slow(path)
    mine = ", ".join(str(i) for i in sorted(i for i, p in top.items() if p == "batch_to_device"))
    assert "is in `batch_to_device` (+" in text and f"on the CPU) for iterations {mine}; " in text, text
    for i, p in others.items():
        assert f"that of {i} is in `{p}`" in text, text


def test_a_rank_that_waits_for_the_straggler_is_told_so():
    """ddp_pair (fixtures/workloads/ddp_straggler.py): rank 1 sleeps 30 ms in `data` every 5th step by
    construction; rank 0's matching steps are slow too, but its `data` time there is a cudaStreamSynchronize that
    waits while NCCL's all-reduce waits for rank 1. Rank 0's finding names the call and the collectives under it
    (both counted here from the raw rows); rank 1's, whose `data` time is the sleep, names no call."""
    from conftest import FIXTURES, raw

    path = FIXTURES / "ddp_pair" / "rank0.sqlite"
    its = loaded(str(path)).iterations().filter(~pl.col("warmup") & pl.col("outlier"))
    sync_ns = comm_ns = 0
    for s, e in zip(its["start_ns"], its["end_ns"]):
        for ds, de, tid in raw(
            path, "SELECT start, end, globalTid FROM NVTX_EVENTS WHERE text = 'data' AND start < ? AND end > ?", e, s
        ):
            ds, de = max(ds, s), min(de, e)
            for cs, ce in raw(
                path,
                "SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId "
                "WHERE n.value LIKE 'cudaStreamSynchronize%' AND r.globalTid = ? AND r.start < ? AND r.end > ?",
                tid,
                de,
                ds,
            ):
                cs, ce = max(cs, ds), min(ce, de)
                sync_ns += ce - cs
                for ks, ke in raw(
                    path,
                    "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON n.id = k.demangledName "
                    "WHERE n.value LIKE 'ncclDevKernel%' AND k.start < ? AND k.end > ?",
                    ce,
                    cs,
                ):
                    comm_ns += min(ke, ce) - max(ks, cs)
    assert sync_ns * 2 >= its["data cpu_ns"].sum() and comm_ns * 2 >= sync_ns
    text = _slow(path)
    per_step = f"{sync_ns / its.height / 1e6:,.1f} ms"
    assert f"where `cudaStreamSynchronize` took {per_step} a step while the GPU ran collectives" in text, text
    assert "took" not in _slow(FIXTURES / "ddp_pair" / "rank1.sqlite")


def test_a_loop_whose_work_grows_says_its_trend():
    """grow_steps' step i runs a product over 2048 x (i + 1) rows beside a fixed one and ends when the GPU is done:
    its step time grows with the iteration by construction. The steady-state sentence (iterations, summary) says
    so, with a slope close to the growth of the GPU's busy time per step (made here from the iterations' own
    gpu_busy_ns, the growing product being the only work that differs): the median of such a loop is no typical
    step. Steps 4 and 8 are host stalls, outliers, which the trend leaves aside; train_small, whose steps repeat,
    says no trend."""
    prof = loaded(str(fixture("grow_steps")))
    s = prof.iteration_stats().row(0, named=True)
    said = s["trend"]
    assert said is not None and said.startswith("step time grows steadily with the iteration, +")
    assert "the 2 outliers aside" in said and said.endswith("the median is no typical step")
    slope = float(re.search(r"\+([0-9.]+) ms per iteration", said).group(1))
    typical = prof.iterations().filter(~pl.col("warmup") & ~pl.col("outlier"))
    x, y = typical["iteration"].cast(pl.Float64), typical["gpu_busy_ns"].cast(pl.Float64)
    busy_slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()) / 1e6
    assert busy_slope > 0 and abs(slope - busy_slope) <= 0.25 * busy_slope, (slope, busy_slope)
    assert said in prof.iteration_note()["steady"]
    facts = dict(prof.summary()["facts"].select("key", "value").iter_rows())
    assert said in facts["iterations"]
    assert loaded(str(fixture("train_small"))).iteration_stats()["trend"][0] is None
