"""Hostile inputs and environments at the command line (issue 30, items 10, 11, 16, 17, 21-27): pipes and FIFOs
where files are expected, Ctrl-C, fake `nsys` programs that hang or flood, durations built to backtrack, SQL
results polars cannot hold, odd encodings and paths, closed standard streams.

Every test makes what it needs in tmp_path (copies of fixtures/train_small) and asserts what nsysql must say:
one line naming the file and the problem, or the known answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from conftest import ROOT, fixture

import nsysql
from nsysql.cli import main

SMALL = fixture("train_small")


def run(args, env=None):
    return CliRunner(env=env).invoke(main, [str(a) for a in args], catch_exceptions=False)


def nsysql_process(args, **kw):
    """`python -m nsysql ARGS` in a subprocess (the executable's own entry point, as a user runs it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "nsysql", *map(str, args)], env=env, capture_output=True, timeout=60, **kw
    )


def one_error_line(stderr: str | bytes) -> str:
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


# -- item 17: durations parse in linear time, with a length cap ----------------------------------------------------


def test_a_long_run_of_digits_fails_fast_in_one_line():
    p = nsysql.load(SMALL)
    for bad in ("1" * 20_000 + "x", "1" * 20_000, " " * 5_000 + "1" * 5_000 + "q"):
        t = time.perf_counter()
        with pytest.raises(nsysql.NsysqlError, match=r"cannot read duration .*characters"):
            p.gaps(min_ns=bad)
        assert time.perf_counter() - t < 0.5
    # the same from the command line, --min and --window alike: one line, the value not echoed whole
    r = run(["gaps", SMALL, "--min", "9" * 20_000 + "ms"])
    assert r.exit_code == 2 and "(20002 characters)" in one_error_line(r.stderr) and len(r.stderr) < 300
    r = run(["trace", SMALL, "--window", "1" * 20_000 + "x:", "-o", os.devnull])
    assert r.exit_code == 2 and "(20001 characters)" in one_error_line(r.stderr)
    # what was read before still is, to the nanosecond
    assert p.gaps(min_ns=" 1.5ms ").equals(p.gaps(min_ns=1_500_000))
    assert p.gaps(min_ns=".5s").equals(p.gaps(min_ns=500_000_000))
