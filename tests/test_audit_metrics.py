"""Audit of what the GPU metrics are said to prove: SMs Active and Tensor Active are device-wide samples, so a
sample judges a kernel's tensor-core use only where that kernel ran alone on its device
(queries/v1/canonical/49_kernel_tensor_use.sql). Known answers: fixtures/hw_mix's raw GPU_METRICS and kernel rows,
read here with sqlite3, and crafted copies of it."""

from __future__ import annotations

import csv
import io
import sqlite3

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import craft, fixture, loaded

from nsysql.cli import main

HW_MIX = fixture("hw_mix")
FFMA = "%f32f32_f32f32_f32%ffma%"  # cuBLAS's SIMT float32 GEMM: no tensor cores (TF32 off, COMMAND.md)
NVJET = "nvjet_%"  # cuBLAS's bfloat16 GEMM on Hopper: tensor cores


def _metric_id(con: sqlite3.Connection, name: str) -> int:
    return con.execute("SELECT metricId FROM TARGET_INFO_GPU_METRICS WHERE metricName = ?", (name,)).fetchone()[0]


def _alone_means(path) -> dict[str, tuple[float, float]]:
    """Kernel name -> (Tensor Active, SMs Active) time-weighted over the sampling periods during which only
    kernels of that name ran on device 0 (no other kernel, no memset), from the export's raw rows."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tensor, sm = _metric_id(con, "Tensor Active [Throughput %]"), _metric_id(con, "SMs Active [Throughput %]")
    rows = con.execute(
        "SELECT timestamp, metricId, value FROM GPU_METRICS WHERE timestamp >= 0 AND metricId IN (?, ?)", (tensor, sm)
    ).fetchall()
    values: dict[int, dict[int, float]] = {}
    for t, m, v in rows:
        values.setdefault(t, {})[m] = v
    times = sorted(values)
    ops = con.execute(
        "SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
        "UNION ALL SELECT start, end, '[memset]' FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY 1"
    ).fetchall()
    con.close()
    acc: dict[str, list[float]] = {}
    j = 0
    for t0, t1 in zip(times, times[1:], strict=False):
        while j < len(ops) and ops[j][1] <= t0:  # ops are few and short: a moving lower bound is enough here
            j += 1
        inside = [(a, b, n) for a, b, n in ops[max(0, j - 50) :] if a < t1 and b > t0]
        names = {n for *_, n in inside}
        if len(names) != 1:
            continue
        w = min(t1 - t0, sum(min(b, t1) - max(a, t0) for a, b, _ in inside))
        a = acc.setdefault(names.pop(), [0.0, 0.0, 0.0])
        a[0] += w
        a[1] += values[t0][tensor] * w
        a[2] += values[t0][sm] * w
    return {n: (t / w, s / w) for n, (w, t, s) in acc.items()}


def test_tensor_use_is_judged_from_samples_where_the_kernel_ran_alone():
    """The values kernel_tensor_use states are those of the samples the kernel had the device to itself,
    recomputed here from the raw rows."""
    prof = loaded(str(HW_MIX))
    want = _alone_means(HW_MIX)
    got = prof.sql(
        "SELECT s.value AS name, tensor_active_pct, sm_active_pct, measured "
        "FROM kernel_tensor_use u JOIN strings s ON s.id = u.name_id"
    )
    assert got.height == 2
    for name, tensor, sm, measured in got.iter_rows():
        assert tensor == pytest.approx(want[name][0], rel=1e-9)
        assert sm == pytest.approx(want[name][1], rel=1e-9)
        assert measured == ("yes" if name.startswith("nvjet_") else "no")


def _concurrent_bf16(tmp_path):
    """hw_mix with a bfloat16 GEMM (the nvjet kernel's name) on another stream across every float32 GEMM's
    execution, and Tensor Active raised to 60% while it runs: what a concurrent tensor-core kernel shows."""
    con = sqlite3.connect(f"file:{HW_MIX}?mode=ro", uri=True)
    nvjet = con.execute("SELECT id FROM StringIds WHERE value LIKE ?", (NVJET,)).fetchone()[0]
    a, b = con.execute(
        "SELECT min(k.start), max(k.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
        "WHERE s.value LIKE ?",
        (FFMA,),
    ).fetchone()
    tensor = _metric_id(con, "Tensor Active [Throughput %]")
    con.close()
    return craft(
        tmp_path / "concurrent.sqlite",
        (
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, mangledName, registersPerThread, gridX, gridY, gridZ, blockX, "
            "blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) "
            "SELECT ?, ?, deviceId, contextId, streamId + 1000, NULL, globalPid, demangledName, shortName, "
            "mangledName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
            "dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId + 1000000 "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName = ? LIMIT 1",
            (a, b, nvjet),
        ),
        ("UPDATE GPU_METRICS SET value = 60 WHERE metricId = ? AND timestamp BETWEEN ? AND ?", (tensor, a, b)),
        source="hw_mix",
    )


def test_a_concurrent_tensor_core_kernel_does_not_judge_its_neighbour(tmp_path):
    """Every sample during the float32 GEMMs now also covers a bfloat16 GEMM on another stream: they say nothing
    of the float32 kernel alone, which the name judges again (CUDA-core `ffma`), never `yes` by the metrics."""
    prof = loaded(str(_concurrent_bf16(tmp_path)))
    gemm = prof.kernels().filter(pl.col("category") == "gemm")
    ffma = gemm.filter(pl.col("name").str.contains("ffma"))
    assert ffma.height == 1
    assert ffma["tensor_cores"][0] != "yes"
    measured = prof.sql(
        f"SELECT measured FROM kernel_tensor_use u JOIN strings s ON s.id = u.name_id WHERE s.value LIKE '{FFMA}'"
    )
    assert measured.height == 0
    f = prof.findings().filter(pl.col("finding") == "matrix math without tensor cores")
    assert f.height == 1 and "CUDA cores by name;" in f["evidence"][0]


def test_the_finding_names_the_samples_it_rests_on():
    f = loaded(str(HW_MIX)).findings().filter(pl.col("finding") == "matrix math without tensor cores")
    assert f.height == 1 and "by GPU metrics" in f["evidence"][0] and "ran alone on their GPU" in f["evidence"][0]


@pytest.fixture(scope="module")
def turing(tmp_path_factory):
    """hw_mix as a Turing GPU records it: its tensor counter named `Tensor Active / FP16 Active`, at sm_75."""
    return craft(
        tmp_path_factory.mktemp("turing") / "turing.sqlite",
        "UPDATE TARGET_INFO_GPU_METRICS SET metricName = 'Tensor Active / FP16 Active [Throughput %]' "
        "WHERE metricName = 'Tensor Active [Throughput %]'",
        "UPDATE TARGET_INFO_GPU SET computeMajor = 7, computeMinor = 5, name = 'Tesla T4'",
        source="hw_mix",
    )


def test_turing_counter_never_proves_tensor_cores(turing):
    """Turing samples `Tensor Active / FP16 Active`: half-precision math off the tensor cores reads high too, so
    a high value leaves the verdict to the name; under 1% (with the SMs busy) it still says `no`."""
    prof = loaded(str(turing))
    got = dict(
        prof.sql(
            "SELECT CASE WHEN s.value LIKE 'nvjet_%' THEN 'bf16' ELSE 'fp32' END, measured "
            "FROM kernel_tensor_use u JOIN strings s ON s.id = u.name_id"
        ).rows()
    )
    assert got == {"bf16": None, "fp32": "no"}
    evidence = dict(
        prof.kernels(by="category").filter(pl.col("category") == "gemm").select("tensor_cores", "evidence").rows()
    )
    assert evidence == {"yes": "name", "no": "metrics"}


def test_turing_counter_is_said_by_its_name(turing):
    """Summary's SM / tensor line and the tensor-core finding name Turing's counter as it is: `Tensor Active`
    alone would claim for the tensor cores what the fp16 pipe counts as well (the line said `Tensor Active median
    52.3%` of a counter that cannot tell them apart)."""
    s = loaded(str(turing)).summary()
    line = s["facts"].filter(pl.col("item") == "SM / tensor active")["value"].item()
    assert "Tensor Active / FP16 Active median " in line
    evidence = s["findings"].filter(pl.col("finding") == "matrix math without tensor cores")["evidence"].item()
    assert "by GPU metrics (Tensor Active / FP16 Active under 1%" in evidence


def test_turing_counter_is_named_under_the_reports_categories(turing, tmp_path):
    """The HTML report's caption under the kernel categories names the counter the export sampled; it said
    `Tensor Active` whatever the GPU."""
    loaded(str(turing))  # the run's cache holds its entry: the report reads it warm
    page = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(turing), "-o", str(page)])
    assert r.exit_code == 0, r.output
    text = page.read_text(encoding="utf-8")
    assert "(Tensor Active / FP16 Active while the kernel ran alone)" in text
    # and the metrics strip under the timeline is titled by the counters sampled (in the figure's JSON, where
    # plotly writes "/" as \u002f)
    assert "GPU metrics: SMs Active and Tensor Active \\u002f FP16 Active %" in text
    assert "GPU metrics: SMs Active and Tensor Active %" not in text


HW_ALT = fixture("hw_alt")


def _csv(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, ["metrics", "--format", "csv", *args])
    return r.exit_code, r.stdout, r.stderr


def test_by_range_keeps_only_the_ranges_named():
    """`--range` selects the ranges `--by range` lists (it was ignored: every range was listed), with the values
    they have in the whole list."""
    code, out, _ = _csv(["--by", "range", "--range", "fp32", str(HW_ALT)])
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and {r["range"] for r in rows} == {"fp32 matmul"}
    every = {
        (r["range"], r["metric"], r["unit"]): r["mean"]
        for r in csv.DictReader(io.StringIO(_csv(["--by", "range", str(HW_ALT)])[1]))
    }
    assert all(every[(r["range"], r["metric"], r["unit"])] == r["mean"] for r in rows)


def test_range_without_a_grouping_is_refused():
    code, out, err = _csv(["--range", "fp32", str(HW_ALT)])
    assert code != 0 and not out and len(err.strip().splitlines()) == 1 and "range" in err


def test_by_range_without_ranges_says_so(tmp_path):
    """An export with GPU metrics and no NVTX: `--by range` says there are no ranges, not `no metrics`."""
    path = craft(tmp_path / "no_nvtx.sqlite", "DELETE FROM NVTX_EVENTS", source="hw_alt")
    code, out, err = _csv(["--by", "range", str(path)])
    assert code != 0 and not out.strip()
    assert len(err.strip().splitlines()) == 1 and "no NVTX ranges" in err


def _means_per_batch(path, metric: str) -> dict[int, float]:
    """`metric` per `Batch<i>` iteration from the raw rows: time-weighted over the GPU-projected window of the
    ops launched from the iteration's start to the next one's, each sample describing its sampling period: up to
    the next sample, or one nominal period (the median spacing of the samples) where samples are missing after
    it (and for the last)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    mid = _metric_id(con, metric)
    samples = con.execute(
        "SELECT timestamp, value FROM GPU_METRICS WHERE metricId = ? AND timestamp >= 0 ORDER BY 1", (mid,)
    ).fetchall()
    batches = con.execute(
        "SELECT n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE coalesce(n.text, s.value) LIKE 'Batch%' ORDER BY n.start"
    ).fetchall()
    ops = con.execute(
        "SELECT r.start, k.start, k.end FROM (SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET) k "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"
    ).fetchall()
    con.close()
    ts = [t for t, _ in samples]
    spacing = sorted(b - a for a, b in zip(ts, ts[1:], strict=False))
    period = spacing[len(spacing) // 2]
    out = {}
    for i, (a,) in enumerate(batches):
        nxt = batches[i + 1][0] if i + 1 < len(batches) else 1 << 62
        mine = [(s, e) for api, s, e in ops if a <= api < nxt]
        wa, wb = min(s for s, _ in mine), max(e for _, e in mine)
        num = den = 0
        for k, (t0, v) in enumerate(samples):
            # the next sample, unless more than half a period late: then samples are missing, and this one
            # describes one period
            t1 = ts[k + 1] if k + 1 < len(ts) and ts[k + 1] - t0 <= 1.5 * period else t0 + period
            w = min(t1, wb) - max(t0, wa)
            if w > 0:
                num, den = num + v * w, den + w
        out[i] = num / den
    return out


def test_a_sample_before_missing_samples_describes_one_period(tmp_path):
    """Samples missing for 9 ms of iteration 3's float32 GEMMs (a sampling gap, a capture paused): the sample
    before the gap describes its own period, not the whole gap, so the iteration's Tensor Active is that of the
    samples it has, each for its period."""
    con = sqlite3.connect(f"file:{HW_ALT}?mode=ro", uri=True)
    b3, b4 = (
        r[0]
        for r in con.execute(
            "SELECT n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            "WHERE coalesce(n.text, s.value) IN ('Batch3', 'Batch4') ORDER BY n.start"
        )
    )
    a, b = con.execute(
        "SELECT min(k.start), max(k.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
        "WHERE s.value LIKE ? AND k.start BETWEEN ? AND ?",
        (FFMA, b3, b4),
    ).fetchone()
    con.close()
    path = craft(
        tmp_path / "gap.sqlite",
        ("DELETE FROM GPU_METRICS WHERE timestamp > ? AND timestamp < ?", (a + 1_000_000, b)),
        source="hw_alt",
    )
    want = _means_per_batch(path, "Tensor Active [Throughput %]")
    got = loaded(str(path)).gpu_metrics(by="iteration").filter(pl.col("metric") == "Tensor Active")
    assert got.height == len(want)
    for r in got.iter_rows(named=True):
        assert r["mean"] == pytest.approx(want[r["iteration"]], rel=1e-9), r["iteration"]
    its = loaded(str(path)).iterations()
    assert its.filter(pl.col("iteration") == 3)["tensor_active_pct"][0] == pytest.approx(want[3], rel=1e-9)


def test_no_metrics_on_a_gpu_nsys_cannot_sample_says_so(tmp_path):
    """nsys samples GPU metrics on Turing (sm_75) and later only: on an older GPU the refusal says so, never
    that profiling with --gpu-metrics-devices would sample them. A newer one is told how to sample them."""
    old = craft(tmp_path / "volta.sqlite", "UPDATE TARGET_INFO_GPU SET computeMajor = 7, computeMinor = 0")
    code, out, err = _csv([str(old)])
    assert code != 0 and not out and len(err.strip().splitlines()) == 1
    assert "only on Turing (sm_75) and later" in err and "sm_70" in err and "--gpu-metrics-devices" not in err
    code, _, err = _csv([str(fixture("train_small"))])
    assert code != 0 and "--gpu-metrics-devices" in err
    r = CliRunner().invoke(main, ["info", "--format", "csv", str(old)])
    assert r.exit_code == 0 and "whether kernels used tensor cores" not in r.stdout
    # nor does info's list of the commands that do not apply send them to the switch
    metrics_line = next(line for line in r.stdout.splitlines() if line.startswith("commands,metrics,"))
    assert "only on Turing (sm_75) and later" in metrics_line and "--gpu-metrics-devices" not in metrics_line


def test_no_metrics_on_an_unknown_gpu_says_where_the_switch_works(tmp_path):
    """An export that does not say which GPU ran its work (no compute capability) may come from a GPU older than
    Turing, where nsys samples no metrics: the refusal names the switch with that condition, not as a sure way."""
    path = craft(tmp_path / "unknown.sqlite", "UPDATE TARGET_INFO_GPU SET computeMajor = NULL, computeMinor = NULL")
    code, out, err = _csv([str(path)])
    assert code != 0 and not out and len(err.strip().splitlines()) == 1
    assert "--gpu-metrics-devices" in err and "Turing (sm_75) or later" in err and "does not say which GPU" in err
