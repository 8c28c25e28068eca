"""A new user's first hour, the small things that bite (issue 36): each test runs the CLI as a user would."""

from __future__ import annotations

from click.testing import CliRunner
from conftest import fixture

from nsysql.cli import main

SMALL = str(fixture("train_small"))


def run(args):
    return CliRunner().invoke(main, args)


def refused(r, *words):
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert all(w in lines[0] for w in words), lines[0]


def test_duration_without_unit_is_refused_in_one_line():
    """`--min 5` once meant 5 ns, silently: a number without its unit is refused, naming the spellings."""
    refused(run(["gaps", SMALL, "--min", "5"]), "no unit", "5ms", "5us")
    refused(run(["trace", SMALL, "--window", "1:2s", "-o", "/dev/null"]), "no unit")
    assert run(["gaps", SMALL, "--min", "5ms", "-f", "csv"]).exit_code == 0


def test_stats_output_prefix_in_a_missing_folder_is_made(tmp_path):
    prefix = tmp_path / "not" / "yet" / "run"
    r = run(["stats", SMALL, "-r", "kernels,api", "-o", str(prefix)])
    assert r.exit_code == 0, r.output
    kernels = (tmp_path / "not" / "yet" / "run_kernels.csv").read_text().splitlines()
    raw = fixture_count("SELECT COUNT(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert len(kernels) == raw + 1  # one row per kernel name, and the header
    assert (tmp_path / "not" / "yet" / "run_api.csv").exists()


def fixture_count(query: str) -> int:
    import sqlite3

    con = sqlite3.connect(f"file:{SMALL}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query).fetchone()[0]
    finally:
        con.close()


def test_sql_on_an_nsys_table_names_the_canonical_table():
    """`FROM CUPTI_ACTIVITY_KIND_KERNEL` is what an nsys user types first: the error says which table to use, and
    that table holds the export's kernel rows, counted here in the export itself."""
    r = run(["sql", SMALL, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"])
    refused(r, "CUPTI_ACTIVITY_KIND_KERNEL", "gpu_ops WHERE kind = 'kernel'")
    refused(run(["sql", SMALL, "SELECT * FROM nvtx_events"]), "nvtx_ranges")
    r = run(["sql", SMALL, "SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'", "-f", "csv"])
    assert r.stdout.splitlines()[1] == str(fixture_count("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    r = run(["sql", SMALL, "SELECT * FROM no_such_table"])
    assert r.exit_code == 2 and "canonical table for it" not in r.stderr


def _metric_max(path, name: str) -> float:
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        q = (
            "SELECT max(abs(value)) FROM GPU_METRICS g JOIN TARGET_INFO_GPU_METRICS t"
            " ON t.typeId = g.typeId AND t.metricId = g.metricId WHERE t.metricName = ?"
        )
        return con.execute(q, (name,)).fetchone()[0]
    finally:
        con.close()


def test_metrics_prints_clocks_in_mhz_and_leaves_out_idle_graphics_counters():
    import csv
    import io

    path = fixture("hw_mix")
    r = run(["metrics", str(path), "-f", "csv"])
    assert r.exit_code == 0, r.output
    rows = {(x["metric"], x["unit"]): x for x in csv.DictReader(io.StringIO(r.stdout))}
    raw_hz = _metric_max(path, "GPC Clock Frequency [MHz]")
    assert raw_hz > 1e6  # nsys wrote Hz under the MHz label in this export
    assert abs(float(rows[("GPC Clock Frequency", "MHz")]["max"]) - raw_hz / 1e6) < 1e-3
    assert "shown in MHz" in rows[("GPC Clock Frequency", "MHz")]["note"]
    # the graphics counters are 0 in every sample of the export: left out, and said so in one line
    assert _metric_max(path, "Pixel Warps in Flight [Avg]") == 0
    assert not any(m.startswith(("Pixel", "Vertex")) for m, _ in rows)
    assert "Pixel Warps in Flight" in r.stderr and "--graphics" in r.stderr
    every = run(["metrics", str(path), "-f", "csv", "--graphics"]).stdout
    assert every.count("Pixel Warps in Flight") == 3 and "Tensor Active" in every


def test_diff_leads_with_periodic_outliers_gone_when_the_mean_is_within_noise():
    """loader_cpu: every 8th batch holds large images (steps 7, 15, 23, 31, by construction); after the fix the
    transforms run on the GPU and that period is gone, while the mean's change stays within its noise (a few slow
    steps make the spread that hides them). The verdict leads with what changed; reversed, with what appeared."""
    import csv
    import io

    before, after = str(fixture("loader_cpu_before")), str(fixture("loader_cpu_after"))
    r = run(["diff", before, after, "-f", "json"])
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.stdout)
    verdict = next(x["value"] for x in doc["verdict"] if x["item"] == "verdict")
    mean = next(x for x in doc["iteration time"] if x["metric"] == "iteration time, mean")
    assert mean["significant"] is False
    assert verdict.startswith("periodic outliers gone: in loader_cpu_before.sqlite iterations 7, 15, 23, 31")
    back = run(["diff", after, before, "-f", "csv"]).stdout
    rows = list(csv.reader(io.StringIO(back)))
    assert rows[2][1].startswith("periodic outliers appeared: in loader_cpu_before.sqlite iterations 7, 15, 23, 31")
    same = run(["diff", before, before, "-f", "csv"]).stdout
    assert "periodic outliers" not in same


def test_the_suite_says_where_the_real_exports_are_and_what_their_absence_cost(tmp_path):
    """NSYSQL_TEST_EXPORTS names the folder of real exports; where it holds none, the run's last line says so,
    names the variable, and counts the tests that were skipped for it (one here: test_diff's h200 pair)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    node = "tests/test_diff.py::test_same_workload_no_significant_change"
    env = dict(os.environ, NSYSQL_TEST_EXPORTS=str(tmp_path / "none"))
    env.pop("PYTEST_ADDOPTS", None)  # the outer run's options (e.g. --durations) would print after the last line
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", node],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    last = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 0, r.stdout[-2000:]
    assert last.startswith(f"nsysql: no real exports at {tmp_path / 'none'}") and "NSYSQL_TEST_EXPORTS" in last
    assert last.endswith(", and 1 test needing one skipped"), last


def test_the_cold_load_progress_says_what_it_reads_and_how_far_it_is():
    """Each step of a cold load is told in a user's words (`reading CUDA kernels, 15% of about 5,805 rows read`,
    `building GPU busy time (step 7 of 18)`): no nsys table or SQL file name, a percentage that only grows, and
    one building step per canonical SQL file it builds."""
    import re
    from pathlib import Path

    import nsysql

    said: list[str] = []
    nsysql.load(SMALL, cache=False, progress=said.append)
    reading = [s for s in said if s.startswith("reading ")]
    building = [s for s in said if s.startswith("building ")]
    assert reading and building and len(reading) + len(building) == len(said)
    assert not [s for s in said if re.search(r"CUPTI|NVTX_EVENTS|StringIds|[0-9]{2}_[a-z]", s)]
    pcts = [int(re.search(r", (\d+)% of about [\d,]+ rows read$", s).group(1)) for s in reading]
    assert pcts == sorted(pcts) and 0 <= pcts[0] and pcts[-1] < 100
    assert any("CUDA kernels" in s for s in reading)
    files = len(list((Path(nsysql.__file__).parent.parent / "queries" / "v1" / "canonical").glob("*.sql")))
    # a cold load builds what its question reads (nsysql.tuning's lazy_build): at most every file, each once
    steps = sorted(int(re.search(r"\(step (\d+) of (\d+)\)$", s).group(1)) for s in building)
    (total,) = {int(re.search(r" of (\d+)\)$", s).group(1)) for s in building}
    assert total <= files and steps == list(range(1, total + 1))
