"""GPU metrics (`nsys profile --gpu-metrics-devices=...`): fixtures/hw_mix against `nsys recipe
gpu_metric_util_sum`, facts true by construction of fixtures/workloads/hw_mix.py (steps 0-7 float32 with TF32
off, 8-15 bfloat16), and exports without metrics."""

from __future__ import annotations

import csv

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import craft, fixture, loaded

import nsysql
from nsysql.cli import main

HW_MIX = fixture("hw_mix")
RECIPE = HW_MIX.parent / "reference" / "hw_mix_gpu_metric_util_sum_rank_stats.csv"
FP32, BF16 = range(1, 8), range(8, 16)  # iteration 0 is the warm-up (cuBLAS initialisation)
# the recipe renames these four to their bare names (nsys_recipe/lib/table_config.py, process_to_gpu_metrics_table)
RENAMED = {"SMs Active", "SM Issue", "Tensor Active", "Unallocated Warps in Active SMs"}


@pytest.fixture(scope="module")
def prof():
    return loaded(str(HW_MIX))


def _recipe(path=RECIPE) -> dict[tuple[int, str, str], dict]:
    """(GPU ID, metric, unit) -> the recipe's row, its names split as gpu_metric_samples splits them."""
    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            name = row["Metric Name"]
            if name in RENAMED:
                metric, unit = name, "Throughput %"
            else:
                metric, unit = name[: name.rindex(" [")], name[name.rindex("[") + 1 : -1]
            out[(int(row["GPU ID"]), metric, unit)] = row
    return out


HW_ALT = fixture("hw_alt")


@pytest.mark.parametrize("path", [HW_MIX, HW_ALT], ids=["hw_mix", "hw_alt"])
def test_whole_capture_matches_the_recipe(path):
    want = _recipe(path.parent / "reference" / f"{path.stem}_gpu_metric_util_sum_rank_stats.csv")
    got = loaded(str(path)).gpu_metrics()
    assert got.columns == ["device_id", "metric", "unit", "samples", "mean", "min", "p50", "p90", "max", "note"]
    assert len(want) == 22 and {(r["device_id"], r["metric"], r["unit"]) for r in got.iter_rows(named=True)} == set(
        want
    )
    for r in got.iter_rows(named=True):
        ref = want[(r["device_id"], r["metric"], r["unit"])]
        assert r["samples"] == int(ref["Count"]), r
        for ours, theirs in (("mean", "Mean"), ("min", "Min"), ("max", "Max"), ("p50", "Median")):
            # the recipe rounds to one decimal
            assert abs(r[ours] - float(ref[theirs])) <= 0.05 + 1e-12 * abs(r[ours]), (r["metric"], r["unit"], ours)
        assert r["min"] <= r["p50"] <= r["p90"] <= r["max"]


def test_notes_on_counters_that_do_not_fit_their_unit(prof):
    got = {(r["metric"], r["unit"]): r for r in prof.gpu_metrics().iter_rows(named=True)}
    # every percentage is within 0-100 on this export: none is flagged
    pct = [r for (m, u), r in got.items() if u == "Throughput %"]
    assert pct and all(0 <= r["min"] and r["max"] <= 100 and r["note"] is None for r in pct)
    # the warps counters that are sums over a sample's cycles (their per-cycle sibling is at most a few hundred)
    for m in ("Compute Warps in Flight", "Unallocated Warps in Active SMs"):
        assert got[(m, "Avg Warps per Cycle")]["max"] <= 200 and got[(m, "Avg Warps per Cycle")]["note"] is None
        assert got[(m, "Avg")]["max"] > 1000 * got[(m, "Avg Warps per Cycle")]["max"]
        assert "not a per-cycle average" in got[(m, "Avg")]["note"]
    # all-zero counters (no graphics work) say nothing wrong
    assert got[("Pixel Warps in Flight", "Avg")]["note"] is None
    # H200's clocks are under 2 GHz, so a value above 1e6 "MHz" is in Hz
    for m in ("GPC Clock Frequency", "SYS Clock Frequency"):
        assert got[(m, "MHz")]["note"].startswith("values are in Hz")


def _per_iteration(df: pl.DataFrame, metric: str) -> dict[int, float]:
    rows = df.filter((pl.col("metric") == metric) & (pl.col("device_id") == 0))
    return dict(zip(rows["iteration"].to_list(), rows["mean"].to_list()))


def test_by_iteration_follows_the_precision(prof):
    by = prof.gpu_metrics(by="iteration")
    assert by.columns == ["iteration", "device_id", "metric", "unit", "mean"]
    tensor, sm = _per_iteration(by, "Tensor Active"), _per_iteration(by, "SMs Active")
    assert set(tensor) == set(range(16))
    assert min(tensor[i] for i in BF16) > max(tensor[i] for i in FP32)
    assert all(sm[i] > 50 for i in FP32)
    # the same means as the iterations table's columns, beside gpu_busy_ns
    its = prof.iterations()
    at = its.columns.index("gpu_busy_ns")
    assert its.columns[at + 1 : at + 3] == ["sm_active_pct", "tensor_active_pct"]
    for r in its.iter_rows(named=True):
        assert r["sm_active_pct"] == pytest.approx(sm[r["iteration"]])
        assert r["tensor_active_pct"] == pytest.approx(tensor[r["iteration"]])


def test_by_range_matches_by_iteration(prof):
    """`Batch<i>` wraps iteration i and encloses all the GPU work it launches, so its GPU-projected window and
    its means are the iteration's."""
    by = prof.gpu_metrics(by="range")
    tensor = _per_iteration(by_it := prof.gpu_metrics(by="iteration"), "Tensor Active")
    rows = by.filter(pl.col("range").str.starts_with("Batch") & (pl.col("metric") == "Tensor Active"))
    assert rows.height == 16 and set(rows["instances"]) == {1}
    for r in rows.iter_rows(named=True):
        assert r["mean"] == pytest.approx(tensor[int(r["range"][5:])])
    assert by_it.height > 0
    fwd = by.filter((pl.col("range") == "Forward Pass") & (pl.col("metric") == "SMs Active"))
    assert fwd.height == 1 and fwd["instances"][0] == 16


def test_metrics_judge_tensor_cores(prof):
    k = prof.kernels()
    gemm = {r["name"]: r["tensor_cores"] for r in k.filter(pl.col("category") == "gemm").iter_rows(named=True)}
    fp32 = [n for n in gemm if "f32f32_f32f32_f32" in n and "ffma" in n]  # cuBLAS's SIMT kernel (float32)
    bf16 = [n for n in gemm if n.startswith("nvjet_")]  # cuBLAS on Hopper, bfloat16
    assert fp32 and bf16
    assert all(gemm[n] == "no" for n in fp32) and all(gemm[n] == "yes" for n in bf16)
    by = prof.kernels(by="category").filter(pl.col("category") == "gemm")
    assert set(by["evidence"]) == {"metrics"}
    used = prof.sql("SELECT tensor_active_pct, sm_active_pct, measured FROM kernel_tensor_use").rows()
    assert sorted(m for *_, m in used) == ["no", "yes"]
    f = prof.findings().filter(pl.col("finding") == "matrix math without tensor cores")
    assert f.height == 1 and "by GPU metrics" in f["evidence"][0]


def test_summary_line(prof):
    facts = dict(prof.summary()["facts"].select("key", "value").rows())
    assert "SMs Active median" in facts["sm_tensor_active"] and "Tensor Active median" in facts["sm_tensor_active"]


def test_cli_metrics():
    r = CliRunner().invoke(main, ["metrics", "--by", "iteration", "--format", "csv", str(HW_MIX)])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "iteration,device_id,metric,unit,mean"


def test_without_metrics_says_so():
    train = fixture("train_small")
    r = CliRunner().invoke(main, ["metrics", str(train)])
    assert r.exit_code == 2
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "no GPU metrics" in err and "--gpu-metrics-devices" in err
    p = loaded(str(train))
    assert "sm_active_pct" not in p.iterations().columns
    assert "sm_tensor_active" not in dict(p.summary()["facts"].select("key", "value").rows())
    assert p.sql("SELECT count(*) FROM gpu_metric_samples").item() == 0
    assert "GPU_METRICS" not in p.facts["tables_read"][0]


def test_report_draws_the_metrics_strip(prof):
    from nsysql.report.html import build

    assert "metrics" in build(prof)[1]
    assert "metrics" not in build(loaded(str(fixture("train_small"))))[1]


def test_categories_per_iteration(prof):
    """By construction: each step runs 6 matrix products, on CUDA cores in float32 steps and on tensor cores in
    bfloat16 steps; the per-iteration rows add up to the iteration's kernels."""
    per = prof.kernels(by="category", per="iteration")
    assert per.columns == ["iteration", "category", "tensor_cores", "count", "total_ns", "pct", "evidence"]
    gemm = per.filter(pl.col("category") == "gemm")
    for i in range(16):
        rows = gemm.filter(pl.col("iteration") == i)
        assert rows["tensor_cores"].to_list() == ["yes" if i in BF16 else "no"] and rows["count"][0] == 6
    its = prof.iterations()
    sums = per.group_by("iteration").agg(pl.col("count").sum(), pl.col("total_ns").sum()).sort("iteration")
    assert sums["count"].to_list() == its["kernels"].to_list()
    assert sums["total_ns"].to_list() == its["kernel_ns"].to_list()


def test_info_says_whether_metrics_apply(prof):
    def item(p, section, name):
        return dict(((s, i), v) for s, i, v in p.info().rows())[(section, name)]

    assert (
        item(prof, "contents", "GPU metrics samples") == str(22 * 6393) and item(prof, "commands", "metrics") == "yes"
    )
    train = loaded(str(fixture("train_small")))
    assert item(train, "commands", "metrics").startswith("no: this export has no GPU metrics")


def test_alternating_ranges_by_construction():
    """fixtures/hw_alt (fixtures/workloads/hw_alt.py): every step runs the same products in an `fp32 matmul` range
    (TF32 off) then a `bf16 matmul` range. The fp32 range's tensor-core share of kernel time and its Tensor Active
    are ~0, the bf16 range's are high; the SMs are busy in both; the finding fires, on the metrics' evidence."""
    p = loaded(str(HW_ALT))
    m = {
        (r["range"], r["metric"]): r["mean"]
        for r in p.gpu_metrics(by="range").filter(pl.col("unit") == "Throughput %").iter_rows(named=True)
    }
    assert m[("fp32 matmul", "Tensor Active")] < 1 and m[("bf16 matmul", "Tensor Active")] > 20
    assert m[("fp32 matmul", "SMs Active")] > 50 and m[("bf16 matmul", "SMs Active")] > 50
    cats = p.kernels(by="category", per="range")
    tc = {
        rng: cats.filter((pl.col("range") == rng) & (pl.col("tensor_cores") == "yes"))["total_ns"].sum()
        / cats.filter(pl.col("range") == rng)["total_ns"].sum()
        for rng in ("fp32 matmul", "bf16 matmul")
    }
    assert tc["fp32 matmul"] == 0 and tc["bf16 matmul"] > 0.5
    gemm = cats.filter((pl.col("category") == "gemm") & pl.col("range").is_in(["fp32 matmul", "bf16 matmul"]))
    assert set(gemm["evidence"]) == {"metrics"}
    f = p.findings().filter(pl.col("finding") == "matrix math without tensor cores")
    assert f.height == 1 and "by GPU metrics" in f["evidence"][0]


def test_categories_per_range_add_up_to_kernels_by_range():
    """Each range's category rows add up to its kernel time and count in kernels-by-range (as nvtx_kern_sum)."""
    p = loaded(str(HW_ALT))
    cats = p.kernels(by="category", per="range").group_by("range").agg(pl.col("total_ns").sum(), pl.col("count").sum())
    kbr = p.kernels_by_range().group_by("range").agg(pl.col("total_ns").sum(), pl.col("count").sum())
    assert dict(cats.select("range", "total_ns").iter_rows()) == dict(kbr.select("range", "total_ns").iter_rows())
    assert dict(cats.select("range", "count").iter_rows()) == dict(kbr.select("range", "count").iter_rows())


def test_by_iteration_without_gpu_work_says_none_was_traced(tmp_path):
    """hw_mix without its CUDA trace (GPU metrics and NVTX alone, as `-t nvtx --gpu-metrics-devices=all` records):
    per iteration and per range the metrics are read over the GPU work each launched, of which the export holds
    none: the refusal says so and points to the whole-capture answer; it said no iteration (range) launched GPU
    work that the metrics sampled, as though the work were there and unsampled."""
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMSET")
    path = craft(tmp_path / "nocuda.sqlite", *(f"DROP TABLE {t}" for t in tables), source="hw_mix")
    runner = CliRunner()
    for by, what in (("iteration", "iteration"), ("range", "NVTX range")):
        r = runner.invoke(main, ["--cache-dir", str(tmp_path / "cache"), "metrics", "--by", by, str(path)])
        assert r.exit_code == 2, r.output
        assert r.stderr.strip().splitlines() == [
            f"nsysql: error: {path}: no GPU work traced (no kernel, copy or memset in the export), so no {what}'s "
            "time on the GPU is known to read the metrics over; `nsysql metrics` gives them over the whole capture"
        ]
    assert runner.invoke(main, ["--cache-dir", str(tmp_path / "cache"), "metrics", str(path)]).exit_code == 0


def test_by_iteration_says_which_iterations_no_sample_covers(tmp_path):
    """hw_mix with its samples from 1 ms before `Batch8` on dropped (sampling that stopped, a buffer lost):
    iterations 8-15 launch GPU work that no sample covers, and `metrics --by iteration` listed iterations 0-7
    alone, silent on the others. It says which are left out and of how many; each shown iteration has its rows
    as before."""
    cut = "DELETE FROM GPU_METRICS WHERE timestamp > (SELECT start FROM NVTX_EVENTS WHERE text = 'Batch8') - 1000000"
    path = craft(tmp_path / "cut.sqlite", cut, source="hw_mix")
    r = CliRunner().invoke(
        main, ["--cache-dir", str(tmp_path / "cache"), "metrics", "--by", "iteration", "--csv", str(path)]
    )
    assert r.exit_code == 0, r.output
    shown = list(csv.DictReader(r.stdout.splitlines()))
    assert sorted({int(row["iteration"]) for row in shown}) == list(range(8)) and all(row["metric"] for row in shown)
    assert r.stderr.strip().splitlines()[-1] == (
        "nsysql: no GPU metrics sample covers the GPU work of iterations 8, 9, 10, 11, 12, 13, … (8 in all, of the "
        "16 with GPU work): they are left out"
    )
    # `stats -r metrics-by-iteration` is what the command prints (it printed rows of nulls for 8-15, unsaid)
    st = CliRunner().invoke(
        main, ["--cache-dir", str(tmp_path / "cache"), "stats", "-r", "metrics-by-iteration", str(path)]
    )
    assert st.exit_code == 0, st.output
    assert st.stdout.splitlines() == ["# metrics-by-iteration", *r.stdout.splitlines()]
    assert st.stderr.strip().splitlines()[-1] == (
        "nsysql: metrics-by-iteration: no GPU metrics sample covers the GPU work of iterations 8, 9, 10, 11, 12, "
        "13, … (8 in all, of the 16 with GPU work): they are left out"
    )
    # summary's SM / tensor line counts the steady-state iterations its medians come from, not all of them
    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    steady = prof.iterations().filter(~pl.col("warmup"))["iteration"].to_list()
    sampled = [i for i in steady if i in {int(row["iteration"]) for row in shown}]
    facts = dict(prof.summary()["facts"].select("item", "value").iter_rows())
    assert 0 < len(sampled) < len(steady)
    assert facts["SM / tensor active"].endswith(
        f"(GPU metrics, {len(sampled)} of the {len(steady)} iterations, the others unsampled)"
    ), facts["SM / tensor active"]
