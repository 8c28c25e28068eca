"""`launches` agrees with `nsys stats -r cuda_kern_exec_sum` on every export that ships its CSV, to the CSV's
rounding, on every row and every figure."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import fixture, h200_exports, loaded, own_exports, reference_csv

from nsysql.cli import main

EXPORTS = [p for p in h200_exports() + own_exports() if reference_csv(p, "cuda_kern_exec_sum").exists()]
IDS = [f"{p.parent.name}/{p.name}" for p in EXPORTS]
PARTS = {"T": "total", "A": "api", "Q": "queue", "K": "kernel"}
STATS = {"Avg": "avg", "Med": "med", "Min": "min", "Max": "max", "StdDev": "stddev"}
KEY = ("pid", "tid", "device_id", "api_name", "kernel_name")


def as_printed(v: float) -> str:
    """A figure as nsys stats prints it: the double's exact value to one decimal, halves away from zero
    (752414.25 -> 752414.3, while 802.65, stored as 802.6499999..., -> 802.6)."""
    return str(Decimal(float(v)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def test_every_fixture_has_its_reference():
    assert all(reference_csv(p, "cuda_kern_exec_sum").exists() for p in own_exports())


@pytest.mark.parametrize("path", EXPORTS, ids=IDS)
def test_launches_match_cuda_kern_exec_sum(path):
    want = pl.read_csv(reference_csv(path, "cuda_kern_exec_sum"), infer_schema_length=0)  # text: exact digits
    got = loaded(str(path)).launches()
    assert got.height == want.height
    rows = {tuple(r[k] for k in KEY): r for r in got.iter_rows(named=True)}
    assert len(rows) == got.height
    for w in want.iter_rows(named=True):
        g = rows[(int(w["PID"]), int(w["TID"]), int(w["DevId"]), w["API Name"], w["Kernel Name"])]
        assert (g["count"], g["queue_count"]) == (int(w["Count"]), int(w["QCount"]))
        for p, part in PARTS.items():
            for s, stat in STATS.items():
                mine, theirs = g[f"{part}_{stat}_ns"], w[f"{p}{s} (ns)"]
                if theirs is None:  # no kernel of the row queued: nsys leaves the queue figures empty
                    assert mine is None and g["queue_count"] == 0, (p, s)
                elif stat in ("min", "max"):
                    assert mine == int(theirs), (p, s, w["Kernel Name"])
                else:
                    assert as_printed(mine) == theirs, (p, s, w["Kernel Name"])


@pytest.mark.parametrize("name", ["train_small", "ddp_pair"])
def test_by_kernel_rolls_up_every_launch(name):
    path = fixture(name) if name != "ddp_pair" else fixture(name).parent / "rank0.sqlite"
    prof = loaded(str(path))
    each, per_kernel = prof.launches(), prof.launches(by="kernel")
    assert per_kernel.columns[0] == "kernel_name" and "pid" not in per_kernel.columns
    assert per_kernel["kernel_name"].n_unique() == per_kernel.height == each["kernel_name"].n_unique()
    summed = each.group_by("kernel_name").agg(
        pl.col("count").sum(), pl.col("queue_count").sum(), pl.col("kernel_min_ns").min(), pl.col("total_max_ns").max()
    )
    joined = per_kernel.join(summed, on="kernel_name", suffix="_each")
    assert joined.height == per_kernel.height
    for c in ("count", "queue_count", "kernel_min_ns", "total_max_ns"):
        assert joined[c].to_list() == joined[f"{c}_each"].to_list(), c
    # a kernel's total time covers its launch call and the kernel itself
    assert (per_kernel["total_min_ns"] >= per_kernel["api_min_ns"]).all()
    assert (per_kernel["total_min_ns"] >= per_kernel["kernel_min_ns"]).all()


def test_cli_launches_by_kernel_csv():
    path = str(fixture("train_small"))
    r = CliRunner().invoke(main, ["launches", path, "--by", "kernel", "--csv"])
    assert r.exit_code == 0, r.output
    header = r.output.splitlines()[0].split(",")
    assert header[:3] == ["kernel_name", "count", "queue_count"]
    assert {f"{p}_{s}_ns" for p in PARTS.values() for s in STATS.values()} <= set(header)
    bad = CliRunner().invoke(main, ["launches", path, "--by", "stream"])
    assert bad.exit_code == 2


def _rule_figures(prof) -> dict:
    """The launch-bound rule's figures, made here from gpu_ops with the definitions of `launches`: kernels with a
    traced launch, those that found the queue empty, the median launch call, the median time from one launch
    call to the process's next, the median kernel."""
    k = prof.sql(
        "SELECT start_ns - api_end_ns AS queue, api_end_ns - api_start_ns AS api, duration_ns AS kernel, "
        "lead(api_start_ns) OVER (PARTITION BY pid ORDER BY api_start_ns) - api_start_ns AS every "
        "FROM gpu_ops_named WHERE kind = 'kernel' AND api_call_id IS NOT NULL"
    )
    return {
        "kernels": k.height,
        "empty_queue": (k["queue"] <= 10_000).sum(),
        "api_med_ns": k["api"].median(),
        "interval_med_ns": k["every"].median(),
        "kernel_med_ns": k["kernel"].median(),
    }


def test_launch_bound_on_big_step_rests_on_launch_figures():
    """big_step launches thousands of short kernels back to back: the GPU idles with an empty queue."""
    from nsysql.analyses.findings import launch_bound

    prof = loaded(str(fixture("big_step")))
    f = prof.summary()["findings"]
    evidence = dict(f.select("finding", "evidence").rows())["launch bound"]
    launched = prof.launches()["count"].sum()
    assert f"of {launched:,} kernels start within 10 us" in evidence
    figures = _rule_figures(prof)
    busy = prof.iteration_stats()["median_gpu_busy_pct"][0]
    assert launch_bound(figures, busy) and evidence.startswith(launch_bound(figures, busy))
    share = figures["empty_queue"] / figures["kernels"]
    # each threshold is a parameter, and each condition is needed
    assert launch_bound(figures, busy, max_busy_pct=busy) is None
    assert launch_bound(figures, busy, empty_queue_share=share + 1e-9) is None
    as_kernel = {"api_med_ns": figures["kernel_med_ns"], "interval_med_ns": figures["kernel_med_ns"]}
    assert launch_bound({**figures, **as_kernel}, busy) is None


@pytest.mark.parametrize("name", ["loop_before", "jitter_before", "train_small"])
def test_no_launch_bound_where_host_work_explains_the_idle_time(name):
    kinds = loaded(str(fixture(name))).summary()["findings"]["finding"].to_list()
    assert "data-loader bound" in kinds and "launch bound" not in kinds


def test_launch_bound_where_the_cpu_takes_longer_per_kernel_than_the_launch_call():
    """compile_infer runs an inductor-compiled block of 4 kernels a step: each launch call is shorter than the
    kernel it launches, but the Python between launches makes the CPU slower per kernel than the GPU, which idles
    with an empty queue. The rule reads the median time from one launch call to the process's next, made here
    from the rows; without it (the launch call alone) the rule does not hold."""
    from nsysql.analyses.findings import launch_bound

    prof = loaded(str(fixture("compile_infer")))
    figures = _rule_figures(prof)
    assert figures["api_med_ns"] < figures["kernel_med_ns"] < figures["interval_med_ns"]
    busy = prof.iteration_stats()["median_gpu_busy_pct"][0]
    f = prof.summary()["findings"]
    evidence = dict(f.select("finding", "evidence").rows())["launch bound"]
    assert evidence.startswith(launch_bound(figures, busy))
    assert f"the CPU launches a kernel every {figures['interval_med_ns'] / 1000:,.1f} us (median" in evidence
    assert launch_bound({**figures, "interval_med_ns": None}, busy) is None
