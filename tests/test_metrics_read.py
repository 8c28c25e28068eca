"""How GPU metrics samples are read and kept: SMs Active and Tensor Active (what tensor-core use, iterations and
the report read) apart from the other metrics, each sampling period computed once per device and time. Checked
against the rows of the exports' GPU_METRICS, counted here straight from the SQLite file."""

from __future__ import annotations

import glob

import duckdb
import polars as pl
import pytest
from conftest import built_cache, craft, fixture, loaded, raw

import nsysql

HW_MIX, HW_ALT = fixture("hw_mix"), fixture("hw_alt")
ACTIVITY = ("SMs Active", "SM Active", "Tensor Active", "Tensor Active / FP16 Active")


def _raw_activity(path) -> list[tuple]:
    """(device, metric, unit, t0, value) of every SMs / Tensor Active sample in a percent unit, from the file."""
    rows = raw(
        path,
        "SELECT m.typeId & 255, n.metricName, m.timestamp, m.value FROM GPU_METRICS m "
        "JOIN TARGET_INFO_GPU_METRICS n ON n.typeId = m.typeId AND n.metricId = m.metricId WHERE m.timestamp >= 0",
    )
    out = []
    for dev, name, t, v in rows:
        metric, _, unit = name.partition(" [")
        unit = unit[:-1] if unit else None
        if metric in ACTIVITY and (unit is None or "%" in unit):
            out.append((dev, metric, unit, t, float(v)))
    return sorted(out)


def _with_ends(rows: list[tuple]) -> list[tuple]:
    """Each sample with its period's end: the next sample of its device and metric, or one period on."""
    out = []
    for i, (dev, metric, unit, t, v) in enumerate(rows):
        same = lambda j: 0 <= j < len(rows) and rows[j][:3] == (dev, metric, unit)  # noqa: E731
        end = rows[i + 1][3] if same(i + 1) else (2 * t - rows[i - 1][3] if same(i - 1) else None)
        out.append((dev, metric, unit, t, end, v))
    return out


def _activity(p) -> list[tuple]:
    df = p.sql("SELECT device_id, metric, unit, t0_ns, t1_ns, value FROM gpu_metric_activity ORDER BY ALL")
    return [tuple(r) for r in df.iter_rows()]


@pytest.mark.parametrize("path", [HW_MIX, HW_ALT], ids=["hw_mix", "hw_alt"])
def test_activity_is_the_raw_samples_of_the_two_metrics(path):
    want = _with_ends(_raw_activity(path))
    assert len(want) == 2 * len({r[3] for r in want}) > 1000  # one SMs and one Tensor Active sample per period
    assert _activity(loaded(str(path))) == want  # the session's entry


@pytest.mark.parametrize("path", [HW_MIX, HW_ALT], ids=["hw_mix", "hw_alt"])
def test_activity_is_stored_once_per_sampling_period(path, tmp_path):
    # the entry holds one row per device and sampling time, both metrics' values in it, not one row per sample
    want: dict[tuple, dict] = {}
    for dev, metric, _unit, t, v in _raw_activity(path):
        want.setdefault((dev, t), {})["tensor" if metric.startswith("Tensor") else "sm"] = v
    # the entry a first load leaves (the run's, copied: test_activity_is_the_raw_samples_of_the_two_metrics reads
    # it too), and what a summary adds to it
    with nsysql.load(path, cache_dir=built_cache(tmp_path / "c", path)) as p:
        assert p.summary()
        got = p.sql("SELECT device_id, t0_ns, sm_active, tensor_active FROM gpu_activity_periods ORDER BY ALL")
    assert [tuple(r) for r in got.iter_rows()] == [
        (d, t, v.get("sm"), v.get("tensor")) for (d, t), v in sorted(want.items())
    ]
    assert len(want) > 500
    tables = _entry_tables(tmp_path / "c")
    assert "gpu_activity_periods" in tables and "gpu_metric_activity" not in tables  # a view over the periods


def test_periods_are_the_raw_sampling_times():
    times = [r[0] for r in raw(HW_MIX, "SELECT DISTINCT timestamp FROM GPU_METRICS WHERE timestamp >= 0 ORDER BY 1")]
    got = loaded(str(HW_MIX)).sql("SELECT device_id, t0_ns, t1_ns FROM gpu_metric_periods ORDER BY 2")
    ends = times[1:] + [2 * times[-1] - times[-2]]
    assert [tuple(r) for r in got.iter_rows()] == [(0, t, e) for t, e in zip(times, ends)]


def _entry_tables(cache_dir) -> set[str]:
    (entry,) = glob.glob(f"{cache_dir}/**/*.duckdb", recursive=True)
    con = duckdb.connect(entry, read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()


def test_a_lazy_build_reads_the_two_metrics_alone(tmp_path, monkeypatch):
    # a metric whose name begins like SM Active's (the SQLite side reads it, the exact rule leaves it out)
    path = craft(
        tmp_path / "hw.sqlite",
        "UPDATE TARGET_INFO_GPU_METRICS SET metricName = 'SM Active Cycles [Throughput %]' "
        "WHERE metricName = 'SM Issue [Throughput %]'",
        source="hw_mix",
    )
    want = _with_ends(_raw_activity(path))
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "0")
    p = nsysql.load(path, cache_dir=tmp_path / "c")
    its = p.iterations()
    assert its.height == 16 and its["tensor_active_pct"].null_count() == 0  # every iteration's ...
    assert "gpu_metric_samples" not in _entry_tables(tmp_path / "c")  # ... without reading the other metrics
    assert _activity(p) == want
    monkeypatch.setenv("NSYSQL_NO_TUNING", "lazy_build")
    assert _activity(nsysql.load(path, cache=False)) == want  # and taken from the whole table when it is read


def test_iterations_and_metrics_by_iteration_agree():
    # two paths: iterations reads gpu_metric_activity, metrics --by iteration every metric's samples
    p = loaded(str(HW_MIX))
    its = {r["iteration"]: r for r in p.iterations().iter_rows(named=True)}
    by = p.gpu_metrics(by="iteration")
    for metric, col in (("SMs Active", "sm_active_pct"), ("Tensor Active", "tensor_active_pct")):
        rows = by.filter((by["metric"] == metric) & (by["device_id"] == 0)).iter_rows(named=True)
        got = {r["iteration"]: r["mean"] for r in rows}
        assert len(got) == 16 and got == pytest.approx({i: its[i][col] for i in got}, rel=1e-12)


@pytest.mark.parametrize("off", ["", "lazy_build"], ids=["lazy", "whole"])
def test_metric_names_missing_read_no_activity(tmp_path, monkeypatch, off):
    # an export whose metric table lacks the names: no activity sample can be told, and the load goes on
    path = craft(tmp_path / "hw.sqlite", "ALTER TABLE TARGET_INFO_GPU_METRICS DROP COLUMN metricName", source="hw_mix")
    monkeypatch.setenv("NSYSQL_NO_TUNING", off)
    p = nsysql.load(path, cache_dir=tmp_path / "c")
    assert p.iterations().height == 16
    assert p.sql("SELECT count(*) FROM gpu_metric_activity").item() == 0
    assert p.sql("SELECT count(*) FROM kernel_tensor_use").item() == 0


def test_a_whole_build_leaves_every_sample_to_the_question_that_reads_it(tmp_path, monkeypatch):
    # the whole build (the lazy one off): a cold summary builds every table but the samples of every metric
    monkeypatch.setenv("NSYSQL_NO_TUNING", "lazy_build")
    path = craft(tmp_path / "hw.sqlite", source="hw_mix")
    want = loaded(str(HW_MIX)).gpu_metrics(by="iteration")  # of the export it is a copy of (the run's entry)
    with nsysql.load(path, cache_dir=tmp_path / "c") as p:
        assert p.summary()
    tables = _entry_tables(tmp_path / "c")
    assert {"gpu_ops", "nvtx_ranges", "gpu_busy", "gpu_activity_periods", "kernel_tensor_use"} <= tables
    assert not {"gpu_metric_values", "gpu_metric_names"} & tables
    # a later question adds them: from the entry opened again, and in the process that built it
    assert nsysql.load(path, cache_dir=tmp_path / "c").gpu_metrics(by="iteration").equals(want)
    assert "gpu_metric_values" in _entry_tables(tmp_path / "c")
    with nsysql.load(path, cache_dir=tmp_path / "d") as p:
        assert p.summary() and p.gpu_metrics(by="iteration").equals(want)
    # a question that reads no metric reads none
    with nsysql.load(path, cache_dir=tmp_path / "e") as p:
        assert p.api().height
    assert not {t for t in _entry_tables(tmp_path / "e") if "metric" in t or "tensor" in t or "activity" in t}


def test_activity_of_a_second_gpu_whose_ids_name_other_metrics(tmp_path, monkeypatch):
    # a second GPU (typeId + 1: device 1) whose metric id of SMs Active names another metric there: SQLite reads
    # the samples by metric id alone, the exact rule (type and metric id) keeps only its Tensor Active
    path = craft(
        tmp_path / "hw.sqlite",
        "INSERT INTO TARGET_INFO_GPU_METRICS SELECT typeId + 1, sourceId, typeName, metricId, CASE WHEN metricName "
        "LIKE 'SMs Active%' THEN 'DRAM Read Bandwidth [Throughput %]' ELSE metricName END FROM TARGET_INFO_GPU_METRICS",
        "INSERT INTO GPU_METRICS SELECT rawTimestamp, timestamp, typeId + 1, metricId, value FROM GPU_METRICS "
        "WHERE rowid % 3 = 0",
        source="hw_mix",
    )
    want = _with_ends(_raw_activity(path))
    assert {(r[0], r[1]) for r in want} == {(0, "SMs Active"), (0, "Tensor Active"), (1, "Tensor Active")}
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "0")
    p = nsysql.load(path, cache_dir=tmp_path / "c")
    assert p.metrics_timeline(0, 1 << 40, bins=10).height  # the activity samples alone, read from the file
    assert "gpu_metric_values" not in _entry_tables(tmp_path / "c")
    assert _activity(p) == want


def test_window_means_read_the_samples_of_their_own_device(tmp_path):
    # a second GPU (typeId + 1: device 1) sampled at the very same times, other values, and no GPU work: the
    # windows of device 0 meet only device 0's samples (gpu_metric_values.key >> 23), whatever the timestamps
    path = craft(
        tmp_path / "hw.sqlite",
        "INSERT INTO TARGET_INFO_GPU_METRICS SELECT typeId + 1, sourceId, typeName, metricId, metricName "
        "FROM TARGET_INFO_GPU_METRICS",
        "INSERT INTO GPU_METRICS SELECT rawTimestamp, timestamp, typeId + 1, metricId, value + 1000 FROM GPU_METRICS",
        source="hw_mix",
    )
    one = loaded(str(HW_MIX))  # the session's entry
    two = nsysql.load(path, cache=False)
    assert set(two.gpu_metrics()["device_id"]) == {0, 1}
    for by in ("iteration", "range"):
        want = one.gpu_metrics(by=by)
        assert want.height > 100 and set(want["device_id"]) == {0}
        assert two.gpu_metrics(by=by).equals(want), by


def test_one_gpu_named_its_type_is_written_not_read(tmp_path):
    # one GPU named (device 2 here), and samples of a type no name describes: the loader reads the named type's
    # rows alone without their typeId (RawTable.single) and writes it into each; the unnamed rows stay out,
    # as the canonical join with the names leaves them out
    path = craft(
        tmp_path / "hw.sqlite",
        "UPDATE TARGET_INFO_GPU_METRICS SET typeId = typeId + 2",
        "UPDATE GPU_METRICS SET typeId = typeId + 2",
        "INSERT INTO GPU_METRICS SELECT rawTimestamp, timestamp, typeId + 3, metricId, value FROM GPU_METRICS "
        "WHERE rowid % 4 = 0",
        source="hw_mix",
    )
    want = raw(
        path,
        "SELECT m.typeId, m.metricId, m.timestamp, m.value FROM GPU_METRICS m WHERE m.timestamp >= 0 "
        "AND EXISTS (SELECT 1 FROM TARGET_INFO_GPU_METRICS n WHERE n.typeId = m.typeId AND n.metricId = m.metricId)",
    )
    assert len({r[0] for r in want}) == 1 and len(want) > 1000
    assert len(want) < raw(path, "SELECT count(*) FROM GPU_METRICS WHERE timestamp >= 0")[0][0]
    p = nsysql.load(path, cache=False)
    got = p.sql(
        "SELECT n.type_id, n.metric_id, v.timestamp_ns, v.value FROM gpu_metric_values v "
        "JOIN gpu_metric_names n USING (key) ORDER BY ALL"
    )
    assert [tuple(r) for r in got.iter_rows()] == sorted((t, m, ts, float(v)) for t, m, ts, v in want)
    assert set(p.gpu_metrics()["device_id"]) == {2}


def test_window_means_of_large_whole_values_are_exact(tmp_path):
    # every GPC clock sample holds V, a whole number below 2^53: its mean over any window is V exactly. value x
    # overlap (ns) is beyond 2^53, where a sum of doubles rounds, and rounds by the order the rows come in
    big = 3 * 2**50 + 7
    path = craft(
        tmp_path / "hw.sqlite",
        (
            "UPDATE GPU_METRICS SET value = ? WHERE metricId IN (SELECT metricId FROM TARGET_INFO_GPU_METRICS "
            "WHERE metricName LIKE 'GPC Clock Frequency%')",
            (big,),
        ),
        source="hw_mix",
    )
    p = nsysql.load(path, cache=False)
    for by in ("iteration", "range"):
        clock = p.gpu_metrics(by=by).filter(pl.col("metric") == "GPC Clock Frequency")
        assert clock.height > 10
        assert clock["mean"].to_list() == [float(big)] * clock.height, by


def test_metrics_read_the_samples_once_in_one_pass(tmp_path, monkeypatch):
    # a cold `metrics --by iteration` reads GPU_METRICS once, with the iteration windows' tables in that pass
    # (no second pass copying the entry to add them); later metrics questions read no sample of the export
    from click.testing import CliRunner

    from nsysql.cli import main
    from nsysql.loader.source import Source
    from nsysql.store import tables

    reads, grown = [], []
    opened, grow = Source.stream, tables.grow
    monkeypatch.setattr(Source, "stream", lambda self, sql: reads.append(sql) or opened(self, sql))
    monkeypatch.setattr(tables, "grow", lambda *a, **k: grown.append(1) or grow(*a, **k))
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "0")
    path = craft(tmp_path / "hw.sqlite", source="hw_mix")
    cache = ["--cache-dir", str(tmp_path / "c")]
    r = CliRunner().invoke(main, [*cache, "metrics", "--by", "iteration", "-f", "csv", str(path)])
    assert r.exit_code == 0 and r.output.count("\n") > 100
    assert sum('FROM "GPU_METRICS"' in s for s in reads) == 1 and not grown
    reads.clear()
    for more in (["--by", "range"], [], ["--by", "iteration", "--range", "Batch"]):
        r = CliRunner().invoke(main, [*cache, "metrics", *more, "-f", "csv", str(path)])
        assert r.exit_code == 0 and r.output.count("\n") > 10
    assert not [s for s in reads if "GPU_METRICS" in s]
