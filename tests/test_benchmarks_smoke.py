"""Smoke test: the benchmark script runs end to end on the small fixture.

No timings are asserted (speed stays out of pass/fail; see BENCHMARKS.md). nsys-ai is
compared only when $NSYSQL_BENCH_NSYSAI names its executable (it is not a dependency).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "bench.py"
SMALL = ROOT / "fixtures" / "train_small" / "train_small.sqlite"


@pytest.mark.skipif(not SMALL.exists(), reason="fixture train_small missing")
def test_bench_here_quick_runs(tmp_path):
    argv = [
        sys.executable,
        str(BENCH),
        "--here",
        str(SMALL),
        "--quick",
        "--scratch",
        str(tmp_path),
        "--timeout",
        "60",
        "--out",
        str(tmp_path / "t.md"),
    ]
    ai = os.environ.get("NSYSQL_BENCH_NSYSAI")
    if ai:
        argv += ["--nsysai", ai]
    env = dict(os.environ, NSYSQL_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "| nsysql | summary | cold |" in out
    assert "| nsysql | summary | warm |" in out
    assert (tmp_path / "t.md").read_text().count("nsysql") >= 2
    # scratch dirs (per-command caches, outputs) are removed afterwards
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("nsysql-bench-")] == []


def test_bench_help():
    proc = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    assert "--here" in proc.stdout and "--device" in proc.stdout and "--generate" in proc.stdout


def test_ab_alternates_and_reports_each_variant(tmp_path):
    """benchmarks/ab.py runs each command once per round (the --reset command before each) and prints a row
    per variant; a failing command stops it with a non-zero exit."""
    ab = ROOT / "benchmarks" / "ab.py"
    log = tmp_path / "log"
    argv = [
        sys.executable,
        str(ab),
        "2",
        "--reset",
        f"echo reset >> {log}",
        f"one=echo one >> {log}",
        f"two=echo two >> {log}",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().split() == ["reset", "one", "reset", "two"] * 2
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| one |") or line.startswith("| two |")]
    assert len(rows) == 2 and all("| 2 |" in r for r in rows)
    bad = subprocess.run(
        [sys.executable, str(ab), "1", "ok=true", "bad=exit 3"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 1 and "bad exited 3" in bad.stderr


@pytest.mark.skipif(not SMALL.exists(), reason="fixture train_small missing")
def test_read_scaling_runs():
    """benchmarks/read_scaling.py times one table read in rowid ranges by 1 and 2 threads, layer by layer."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "read_scaling.py"), str(SMALL), "--threads", "1,2"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2"] and all(len(r) == 5 and float(r[4]) > 0 for r in rows)


@pytest.mark.skipif(not SMALL.exists(), reason="fixture train_small missing")
def test_floor_and_bound_read_every_row_and_the_bound_answers_kernels():
    """benchmarks/floor.py scans every row of the tables it is given; benchmarks/bound.py reads them into DuckDB
    and answers `kernels` with one row per kernel name: both counted here with sqlite3 directly."""
    import sqlite3

    con = sqlite3.connect(SMALL)
    kernels, names = con.execute(
        'SELECT count(*), count(DISTINCT coalesce("demangledName", "shortName")) FROM CUPTI_ACTIVITY_KIND_KERNEL'
    ).fetchone()
    con.close()

    def script(name: str, *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / name), str(SMALL), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert f"rows {kernels:,} " in script("floor.py", "--tables", "kernels")
    assert f"rows {kernels:,}  answer rows {names:,} " in script("bound.py", "--question", "kernels")


@pytest.mark.skipif(not SMALL.exists(), reason="fixture train_small missing")
def test_readers_read_every_row_of_the_summary_tables_with_each_reader_or_say_why_not():
    """benchmarks/readers.py: each reader reads every row of kernels, runtime calls, NVTX events and copies
    (counted here with sqlite3), or says in its line why it did not run."""
    import sqlite3

    con = sqlite3.connect(SMALL)
    rows = sum(
        con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "NVTX_EVENTS",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
        )
    )
    con.close()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "readers.py"), str(SMALL), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert set(lines) == {"sqlite-scan", "sqlite-rows", "adbc-arrow", "adbc-duckdb", "duckdb-sqlite"}
    for name, line in lines.items():
        assert line.endswith(f" {rows:,}") or (name == "duckdb-sqlite" and " not run: " in line), line
    assert " not run: " not in lines["adbc-duckdb"]  # nsysql's own reader always runs


@pytest.mark.skipif(not SMALL.exists(), reason="fixture train_small missing")
def test_timeline_lists_each_canonical_file_and_query_of_a_cold_command(tmp_path):
    """benchmarks/timeline.py: one line per canonical SQL file run (a whole build of train_small runs every one)
    and per analysis query, each ending no earlier than it starts."""
    import nsysql.loader as loader

    argv = [sys.executable, str(ROOT / "benchmarks" / "timeline.py"), "--cache-dir", str(tmp_path), "kernels"]
    proc = subprocess.run([*argv, str(SMALL)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split(None, 4) for line in proc.stderr.splitlines() if line[:1] == " " and "." in line[:7]]
    files = {r[4].removeprefix("FILE ").removesuffix(" (made empty)") for r in rows if r[4].startswith("FILE ")}
    assert files == {f.stem for f in loader._order()}
    assert any(r[4].startswith("QUERY ") for r in rows) and all(float(r[1]) >= float(r[0]) for r in rows)


@pytest.mark.skipif(not SMALL.exists(), reason="fixture train_small missing")
def test_sqlite_answer_gives_kernels_answer_per_name():
    """benchmarks/sqlite_answer.py answers `kernels` inside SQLite: per kernel name the count, total and median
    that nsysql's kernels() gives, with and without the median's window."""
    import nsysql

    want = {
        r["name"]: (r["count"], r["total_ns"], r["med_ns"])
        for r in nsysql.load(SMALL).kernels().select("name", "count", "total_ns", "med_ns").iter_rows(named=True)
    }
    for extra in ((), ("--no-median",)):
        proc = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "sqlite_answer.py"), str(SMALL), "--rows", *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        head, *rows = proc.stdout.splitlines()
        assert head.endswith(f"answer rows {len(want):,}")
        got = {r.split("\t")[0]: r.split("\t")[1:] for r in rows}
        assert set(got) == set(want)
        for name, (count, total, med) in want.items():
            assert (int(got[name][0]), int(got[name][1])) == (count, total)
            if not extra:
                assert float(got[name][5]) == med
