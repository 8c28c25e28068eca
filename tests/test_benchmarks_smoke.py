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
    argv = [sys.executable, str(BENCH), "--here", str(SMALL), "--quick",
            "--scratch", str(tmp_path), "--timeout", "60", "--out", str(tmp_path / "t.md")]
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
