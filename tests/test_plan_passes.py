"""A cold command reads the export and builds what its question reads in one pass, whatever its options: the
engine plans the first question with its parameters (nsysql.engine.core.reads), a declaration saying which of
its parts only some values read (nsysql.engine.Only). Passes are counted: each run of the canonical files
(nsysql.loader.run_files) is one, the load's own included; a question that meets a table its plan missed adds one.
"""

from __future__ import annotations

import glob

import duckdb
import pytest
from click.testing import CliRunner
from conftest import craft, fixture, raw

import nsysql.loader as loader
from nsysql.cli import main
from nsysql.engine import REGISTRY, Only, Param, analysis

SMALL, HW_MIX = fixture("train_small"), fixture("hw_mix")
MEM, CPU, DDP = fixture("mem_growth"), fixture("loader_cpu_before"), fixture("ddp_pair").parent / "rank0.sqlite"


@pytest.fixture(autouse=True)
def lazy_for_small_exports(monkeypatch):
    """The lazy build applies from $NSYSQL_LAZY_MIN_MB MiB; 0: to these small fixtures too."""
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", "0")


def cold(tmp_path, monkeypatch, path, *args) -> tuple[int, set[str]]:
    """Run `nsysql ARGS[0] PATH ARGS[1:]` cold: the passes over the canonical files, and the tables its entry holds."""
    runs: list[int] = []
    run_files = loader.run_files

    def counted(*args, **kw):
        runs.append(1)
        return run_files(*args, **kw)

    monkeypatch.setattr(loader, "run_files", counted)
    cdir = tmp_path / "cache"
    more = [a.replace("{tmp}", str(tmp_path)) for a in args[1:]]  # written into tmp_path, never the working folder
    res = CliRunner().invoke(main, ["--cache-dir", str(cdir), args[0], str(path), *more])
    assert res.exit_code == 0, res.output
    (entry,) = glob.glob(f"{cdir}/**/*.duckdb", recursive=True)
    con = duckdb.connect(entry, read_only=True)
    try:
        return len(runs), {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()


@pytest.mark.parametrize(
    "path, args",
    [
        (SMALL, ["gaps"]),
        (SMALL, ["gaps", "--range", "step"]),
        (SMALL, ["gaps", "--min", "1ms"]),
        (SMALL, ["gaps", "--by", "cause"]),
        (SMALL, ["gaps", "--include-warmup"]),
        (SMALL, ["kernels", "--by", "category", "--per", "iteration"]),
        (SMALL, ["trace", "-o", "{tmp}/trace.json"]),
        (HW_MIX, ["metrics", "--by", "iteration"]),
        (MEM, ["gpu-memory", "--by", "iteration"]),
        (CPU, ["cpu"]),
        (CPU, ["cpu", "--during", "gaps"]),
        (DDP, ["overlap", "--by", "iteration"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v.stem,
)
def test_a_cold_command_is_built_in_one_pass_whatever_its_options(tmp_path, monkeypatch, path, args):
    # `kernels --by category --per range`, `metrics --by range` and `gpu-memory` are held to one pass too, by
    # the tests below that build them cold to see what their entries hold (one cold build each, not two)
    passes, _ = cold(tmp_path, monkeypatch, path, *args)
    assert passes == 1


def test_options_that_read_less_build_less(tmp_path, monkeypatch):
    # kernels reads the NVTX nesting (op_ranges' tables) per range only, the loop (process roles) per iteration
    nesting = {"op_range_links", "range_chains"}
    _, plain = cold(tmp_path / "a", monkeypatch, SMALL, "kernels", "--by", "category")
    passes, per_range = cold(tmp_path / "b", monkeypatch, SMALL, "kernels", "--by", "category", "--per", "range")
    assert passes == 1 and nesting <= per_range and not (nesting | {"process_roles"}) & plain
    # GPU memory without --by reads the memory events alone: not every table (a query meeting one it lacked)
    passes, memory = cold(tmp_path / "c", monkeypatch, MEM, "gpu-memory")
    assert passes == 1 and "gpu_memory_events" in memory
    assert not {"gpu_busy", "op_range_links", "kernel_classes"} & memory


def test_metrics_reads_the_nvtx_nesting_by_range_only(tmp_path, monkeypatch):
    # a report of `stats` is planned with its parameters: GPU metrics per device read no NVTX nesting nor the loop
    nesting = {"op_range_links", "range_chains", "process_roles"}
    passes, device = cold(tmp_path / "a", monkeypatch, HW_MIX, "stats", "-r", "metrics")
    assert passes == 1 and "gpu_metric_values" in device and not nesting & device
    passes, by_range = cold(tmp_path / "b", monkeypatch, HW_MIX, "metrics", "--by", "range")
    assert passes == 1 and {"op_range_links", "range_chains"} <= by_range


def test_a_declaration_names_only_its_own_parts():
    # refused before it is registered: an Only's parts are among the declaration's, its parameter one it takes
    by = Param("by", (str, type(None)), None, (None, "range"))
    with pytest.raises(ValueError, match="are not among its tables"):
        analysis("_only_bad", params=(by,), tables=("gpu_ops",), only=(Only("by", ("range",), tables=("op_ranges",)),))(
            _fn
        )
    with pytest.raises(ValueError, match="not one of its parameters"):
        analysis("_only_bad", params=(by,), tables=("gpu_ops",), only=(Only("per", ("range",), tables=("gpu_ops",)),))(
            _fn
        )
    assert "_only_bad" not in REGISTRY


def _fn(ctx, by):
    return None


def _raw_samples(path) -> int:
    """gpu_metric_samples' rows, counted straight from the export: samples from the time origin on, of a metric
    TARGET_INFO_GPU_METRICS names."""
    return raw(
        path,
        "SELECT count(*) FROM GPU_METRICS m WHERE m.timestamp >= 0 AND EXISTS (SELECT 1 FROM TARGET_INFO_GPU_METRICS n "
        "WHERE n.typeId = m.typeId AND n.metricId = m.metricId)",
    )[0][0]


def test_a_cold_info_counts_the_gpu_metrics_samples_without_reading_them(tmp_path, monkeypatch):
    passes, built = cold(tmp_path, monkeypatch, HW_MIX, "info", "-f", "csv")
    assert passes == 1 and not {"gpu_metric_values", "gpu_metric_names"} & built
    res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "info", str(HW_MIX), "-f", "csv"])
    assert f"contents,GPU metrics samples,{_raw_samples(HW_MIX)}\n" in res.stdout
    assert "commands,metrics,yes\n" in res.stdout
    # the same count where the export's samples are built (every table at once)
    monkeypatch.setenv("NSYSQL_NO_TUNING", "lazy_build")
    whole = CliRunner().invoke(main, ["--no-cache", "info", str(HW_MIX), "-f", "csv"])
    assert whole.stdout == res.stdout


def test_info_says_gpu_metrics_do_not_apply_where_no_sample_is_kept(tmp_path, monkeypatch):
    # every sample before the session's time origin: the table is there, gpu_metric_samples keeps none
    path = craft(tmp_path / "hw.sqlite", "UPDATE GPU_METRICS SET timestamp = -1", source="hw_mix")
    assert _raw_samples(path) == 0
    _, built = cold(tmp_path, monkeypatch, path, "info", "-f", "csv")
    res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "info", str(path), "-f", "csv"])
    assert "contents,GPU metrics samples,0\n" in res.stdout
    assert "commands,metrics,no: this export has no GPU metrics: profile with" in res.stdout
