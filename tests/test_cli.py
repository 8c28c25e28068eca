"""The CLI mirrors the Python API: same numbers, same switches everywhere (through click's CliRunner)."""

from __future__ import annotations

import io
import json
import os

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import built_cache, fixture, loaded

from nsysql.cli import main

TRAIN = fixture("train_small")


def run(args, env=None):
    return CliRunner(env=env).invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize("cmd", ["kernels", "api", "ranges", "kernels-by-range", "info"])
def test_csv_equals_python_api(cmd):
    res = run([cmd, str(TRAIN), "-f", "csv"])
    assert res.exit_code == 0
    got = pl.read_csv(io.StringIO(res.stdout))
    prof = loaded(str(TRAIN))
    want = {
        "kernels": prof.kernels,
        "api": prof.api,
        "ranges": prof.ranges,
        "kernels-by-range": prof.kernels_by_range,
        "info": prof.info,
    }[cmd]()
    assert got.columns == want.columns
    assert got.height == want.height
    for c in want.columns:
        if want.schema[c] in (pl.Int64, pl.Int32):
            assert got[c].to_list() == want[c].to_list()


def test_every_format_and_output_file(tmp_path):
    for fmt in ("table", "csv", "json", "markdown"):
        out = tmp_path / f"k.{fmt}"
        res = run(["kernels", str(TRAIN), "--top", "3", "-f", fmt, "-o", str(out)])
        assert res.exit_code == 0 and res.stdout == ""
        text = out.read_text()
        if fmt == "json":
            rows = json.loads(text)
            assert len(rows) == 3 and {"name", "count", "total_ns", "pct"} <= set(rows[0])
        elif fmt == "markdown":
            assert text.startswith("| name | count |") and text.count("\n") == 5
        elif fmt == "csv":
            assert (
                text.splitlines()[0]
                == "name,count,total_ns,avg_ns,med_ns,min_ns,max_ns,stddev_ns,pct,category,tensor_cores"
            )
        else:
            assert "total_us" in text.splitlines()[0]  # tables show times in a readable unit


@pytest.mark.parametrize("cmd", [["kernels"], ["ranges"], ["iterations"], ["gaps"], ["stats", "-r", "kernels"]])
def test_format_switches_equal_format_option(cmd):
    """--table/--csv/--json/--markdown on every command, as sqlite-utils has them; the last one given wins."""
    for fmt in ("table", "csv", "json", "markdown"):
        by_option = run(cmd + [str(TRAIN), "-f", fmt])
        by_switch = run(cmd + [str(TRAIN), f"--{fmt}"])
        assert by_option.exit_code == by_switch.exit_code == 0, by_switch.output
        assert by_switch.stdout == by_option.stdout
    assert run(["kernels", str(TRAIN), "--json", "--csv"]).stdout == run(["kernels", str(TRAIN), "-f", "csv"]).stdout


def test_summary_sections_in_json():
    res = run(["summary", str(TRAIN), "-f", "json"])
    doc = json.loads(res.stdout)
    assert {"facts", "gpus", "kernels", "ranges", "memory"} <= set(doc)
    assert len(doc["kernels"]) == 10
    total = loaded(str(TRAIN)).kernels()["total_ns"].sum()
    assert doc["gpus"][0]["kernel_ns"] == total


def test_kernel_name_kinds():
    short = run(["kernels", str(TRAIN), "--name", "short", "-f", "json"])
    names = [r["name"] for r in json.loads(short.stdout)]
    assert all("(" not in n for n in names)  # base names carry no parameter list
    assert sum(r["count"] for r in json.loads(short.stdout)) == loaded(str(TRAIN)).kernels()["count"].sum()


def test_file_may_be_left_out(tmp_path, monkeypatch):
    # a cache of its own (it remembers the profile analysed last), holding the entries a first load builds
    env = {"NSYSQL_CACHE_DIR": str(built_cache(tmp_path / "cache", TRAIN, fixture("loop_after")))}
    monkeypatch.chdir(tmp_path)
    # none anywhere: a clear error
    res = run(["kernels"], env={**env, "NSYSQL_PROFILE": ""})
    assert res.exit_code == 2 and "no FILE given" in res.stderr
    # $NSYSQL_PROFILE
    res = run(["kernels", "--top", "1"], env={**env, "NSYSQL_PROFILE": str(TRAIN)})
    assert res.exit_code == 0 and "NSYSQL_PROFILE" in res.stderr
    # the profile analysed last
    res = run(["kernels", "--top", "1"], env={**env, "NSYSQL_PROFILE": ""})
    assert res.exit_code == 0 and "analysed last" in res.stderr and str(TRAIN) in res.stderr
    # the only export in the current directory wins over the last one
    os.symlink(fixture("loop_after"), tmp_path / "here.sqlite")
    res = run(["kernels", "--top", "1"], env={**env, "NSYSQL_PROFILE": ""})
    assert res.exit_code == 0 and "here.sqlite" in res.stderr
    # ... and is remembered as the link named, not its target (a `latest.sqlite` repointed at each run)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    res = run(["kernels", "--top", "1"], env={**env, "NSYSQL_PROFILE": ""})
    assert res.exit_code == 0, res.stderr
    assert res.stderr == f"nsysql: using {tmp_path / 'here.sqlite'} (the profile analysed last)\n"


def test_sql_command():
    res = run(["sql", str(TRAIN), "SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'", "-f", "csv"])
    assert res.stdout.splitlines() == ["n", str(loaded(str(TRAIN)).kernels()["count"].sum())]
    # a query that fails is one line naming the export (FILE is optional for sql: once it said "(no file)")
    bad = run(["sql", str(TRAIN), "SELECT nope FROM gpu_ops"])
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith(f"nsysql: error: {TRAIN}: query failed: Binder Error"), bad.stderr


def test_stats_writes_one_file_per_report(tmp_path):
    res = run(["stats", str(TRAIN), "-o", str(tmp_path / "run")])
    assert res.exit_code == 0, res.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "run_gaps.csv",
        "run_iterations.csv",
        "run_kernels.csv",
        "run_kernels_by_range.csv",
        "run_ranges.csv",
    ]
    k = pl.read_csv(tmp_path / "run_kernels.csv")
    assert k["total_ns"].to_list() == loaded(str(TRAIN)).kernels()["total_ns"].to_list()
    bad = run(["stats", str(TRAIN), "-r", "kernels,nope"])
    assert bad.exit_code == 2 and "unknown report 'nope'" in bad.stderr


def test_output_into_a_missing_directory_is_one_line(tmp_path):
    res = run(["kernels", str(TRAIN), "-o", str(tmp_path / "no" / "such" / "k.csv")])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_summary_markdown_is_the_pr_snippet():
    res = run(["summary", str(TRAIN), "-f", "markdown"])
    assert res.exit_code == 0
    text = res.stdout
    assert text.startswith("#### nsysql: `train_small.sqlite`")
    assert "**Top 10 kernels**" in text and "**GPU idle by cause**" in text and "**Findings**" in text
    assert "iterations 4, 9, 14, 19 (every 5th)" in text
    assert "| `host:Load data` |" in text  # names from the export are code spans


def test_schema_lists_every_canonical_table_with_documented_columns():
    from nsysql.loader import CANONICAL_TABLES

    res = run(["schema", "-f", "csv"])
    tables = pl.read_csv(io.StringIO(res.stdout))["table"].to_list()
    assert set(CANONICAL_TABLES) <= set(tables)
    cols = pl.read_csv(io.StringIO(run(["schema", "gpu_ops", "-f", "csv"]).stdout))
    have = set(loaded(str(TRAIN)).sql("SELECT * FROM gpu_ops LIMIT 0").columns)
    assert set(cols["column"]) == have  # every column documented, none invented
    assert cols["description"].str.len_chars().min() > 5


@pytest.mark.parametrize("no_tuning", ["", "1"], ids=["os_exit", "NSYSQL_NO_TUNING"])
def test_the_executable_flushes_everything_and_keeps_exit_codes(tmp_path, no_tuning):
    """`python -m nsysql` (as the `nsysql` script) leaves without interpreter teardown, or through sys.exit with
    NSYSQL_NO_TUNING=1: either way its output must be whole, its exit codes those of the commands, and a cold
    load's cache entry on disk when it returns."""
    import subprocess
    import sys

    env = {**os.environ, "NSYSQL_CACHE_DIR": str(tmp_path / "c"), "NSYSQL_NO_TUNING": no_tuning}

    def nsysql(*args):
        return subprocess.run(
            [sys.executable, "-m", "nsysql", *args], capture_output=True, text=True, env=env, timeout=120
        )

    ok = nsysql("kernels-by-range", str(TRAIN), "-f", "csv")
    assert ok.returncode == 0, ok.stderr
    assert pl.read_csv(io.StringIO(ok.stdout)).height == loaded(str(TRAIN)).kernels_by_range().height > 0
    assert list((tmp_path / "c").glob("*.duckdb"))
    bad = nsysql("info", str(tmp_path / "missing.sqlite"))
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert nsysql("--version").returncode == 0
    assert nsysql("no-such-command").returncode == 2  # click's usage error


def test_sql_only_reads_even_on_a_first_load(tmp_path):
    """A write through `nsysql sql` on the first load would land in the cache entry being built and change
    every later answer (kernel times x100 after an UPDATE): refused, one line, and the next answer is right."""
    env = {"NSYSQL_CACHE_DIR": str(tmp_path / "cache")}
    copy = tmp_path / "run.sqlite"
    copy.write_bytes(TRAIN.read_bytes())
    for q in (
        "UPDATE gpu_ops SET duration_ns = duration_ns * 100",
        "DROP TABLE gpu_ops",
        "SELECT 1; DELETE FROM gpu_ops",
    ):
        res = run(["sql", str(copy), q], env=env)
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert str(copy) in res.stderr and "only read" in res.stderr
    k = run(["kernels", str(copy), "-f", "csv"], env=env)
    assert (
        pl.read_csv(io.StringIO(k.stdout))["total_ns"].to_list() == loaded(str(TRAIN)).kernels()["total_ns"].to_list()
    )


def test_sql_results_of_any_type_print_in_every_format():
    q = "SELECT [1, 2] AS l, {'a': 1} AS s, INTERVAL 1 DAY AS d, 'x' AS t"
    for fmt in ("csv", "json", "table", "markdown"):
        res = run(["sql", str(TRAIN), q, "-f", fmt])
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert run(["sql", str(TRAIN), q, "-f", "csv"]).stdout.splitlines()[1] == '"[1, 2]","{""a"": 1}",1 day,x'


@pytest.fixture(scope="module")
def export_copy(tmp_path_factory):
    """A copy of train_small that the cases below name as their output: one for all (its entry built once)."""
    copy = tmp_path_factory.mktemp("over") / "run.sqlite"
    copy.write_bytes(TRAIN.read_bytes())
    return copy


@pytest.mark.parametrize("cmd", [["kernels"], ["summary"], ["report"], ["stats", "-r", "kernels"]])
def test_output_never_goes_over_an_export(tmp_path, export_copy, cmd):
    copy = export_copy
    before = copy.read_bytes()
    target = str(copy) if cmd[0] != "stats" else str(tmp_path / "run")  # stats writes PREFIX_kernels.csv
    if cmd[0] == "stats":
        (tmp_path / "run_kernels.csv").write_bytes(before)
    res = run([cmd[0], str(copy), *cmd[1:], "-o", target])
    assert res.exit_code == 2 and "SQLite database" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert copy.read_bytes() == before


def test_stats_json_on_stdout_is_one_document():
    res = run(["stats", str(TRAIN), "-r", "kernels,gaps", "-f", "json"])
    doc = json.loads(res.stdout)
    assert list(doc) == ["kernels", "gaps"] and len(doc["kernels"]) == loaded(str(TRAIN)).kernels().height


@pytest.mark.parametrize("cmd", ["kernels", "iterations", "gaps"])
def test_a_quoted_glob_is_several_ranks(cmd):
    """`nsysql kernels 'rank*.sqlite'`: nsysql expands the glob (as summary and ranks do) and adds a rank column."""
    import glob

    from conftest import FIXTURES

    pattern = str(FIXTURES / "ddp_pair" / "rank*.sqlite")
    res = run([cmd, pattern, "-f", "csv"])
    assert res.exit_code == 0, res.stderr
    got = pl.read_csv(io.StringIO(res.stdout))
    assert sorted(got["rank"].unique().to_list()) == list(range(len(glob.glob(pattern))))


def test_range_counts_the_instances_it_selects():
    res = run(["iterations", str(TRAIN), "--range", "Batch1", "--skip", "0"])
    assert res.exit_code == 0 and "selects 1 range name (exact match), 1 instance on" in res.stdout


def test_one_profile_answers_several_threads_at_once():
    """Each thread gets its own DuckDB cursor: the same frames as asked one after another, cold and warm."""
    from concurrent.futures import ThreadPoolExecutor

    from polars.testing import assert_frame_equal

    import nsysql

    want = loaded(str(TRAIN))
    for cache in (False, True):
        with nsysql.load(TRAIN, cache=cache) as p:
            asks = ("kernels", "api", "ranges", "iterations", "gaps")
            with ThreadPoolExecutor(len(asks)) as pool:
                got = [f.result(timeout=120) for f in [pool.submit(getattr(p, a)) for a in asks]]
            for a, g in zip(asks, got):
                assert_frame_equal(g, getattr(want, a)())
        with pytest.raises(nsysql.NsysqlError, match="closed"):
            p.kernels()


def test_python_api_errors_are_nsysql_errors():
    import nsysql

    p = loaded(str(TRAIN))
    for call in (
        lambda: p.sql("SELEC 1"),
        lambda: p.sql("SELECT * FROM nope"),
        lambda: p.gaps(min_ns=-1),
        lambda: p.timeline(bins=0),
        lambda: p.timeline(start_ns=5),
    ):
        with pytest.raises(nsysql.NsysqlError):
            call()


def test_a_file_named_two_ways_is_one_rank():
    from conftest import FIXTURES

    from nsysql.many import expand

    r0 = FIXTURES / "ddp_pair" / "rank0.sqlite"
    assert expand([str(r0), os.path.relpath(r0), str(FIXTURES / "ddp_pair" / "rank*.sqlite")]) == [
        str(r0),
        str(FIXTURES / "ddp_pair" / "rank1.sqlite"),
    ]


@pytest.mark.parametrize("cmd", ["kernels", "report", "trace"])
def test_output_over_an_export_is_refused_before_the_export_is_loaded(tmp_path, cmd):
    """`-o run.sqlite` by mistake is said at once: nothing is read or built first (the cache stays empty)."""
    copy, cdir = tmp_path / "run.sqlite", tmp_path / "cache"
    copy.write_bytes(TRAIN.read_bytes())
    res = run(["--cache-dir", str(cdir), cmd, str(copy), "-o", str(copy)])
    assert res.exit_code == 2 and "SQLite database" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not [p for p in cdir.rglob("*") if p.is_file()]
    assert copy.read_bytes() == TRAIN.read_bytes()
