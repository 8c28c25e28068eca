"""nsysql.tuning: every speed trick behind one switch, none of them changing an answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysql import tuning
from nsysql.cli import main

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "fixtures" / "train_small" / "train_small.sqlite"
# 4 threads: the background persist applies from 4 (on 2 cores too: 4 per CPU are allowed)
COMMAND = ["summary", str(SMALL), "-f", "json"]


def _nsysql(args, tmp_path: Path, no_tuning: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NSYSQL_CACHE_DIR": str(tmp_path / f"cache-{no_tuning or 'on'}"),
        "NSYSQL_THREADS": "4",
        "NSYSQL_NO_TUNING": no_tuning,
    }
    return subprocess.run(
        [sys.executable, "-m", "nsysql", *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


def _in_process(args, tmp_path: Path, no_tuning: str) -> subprocess.CompletedProcess:
    """`_nsysql`'s command through click's CliRunner in this process, with the same settings: for a trick that a
    load applies (its switch is read where the load reads it), not the executable's way out."""
    env = {"NSYSQL_CACHE_DIR": str(tmp_path / f"cache-{no_tuning or 'on'}"), "NSYSQL_THREADS": "4"}
    res = CliRunner(env={**env, "NSYSQL_NO_TUNING": no_tuning}).invoke(main, args)
    return subprocess.CompletedProcess(args, res.exit_code, res.stdout, res.stderr)


# what the executable does (fast_exit: how it leaves; background_persist: an entry still being copied when the
# process ends, then read by the next one; 1: all at once): in a process of its own; the others in this one
OWN_PROCESS = ("fast_exit", "background_persist", "1")


@pytest.fixture(scope="module")
def tuned_answer(tmp_path_factory):
    r = _nsysql(COMMAND, tmp_path_factory.mktemp("on"), "")
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("off", [*tuning.TRICKS, "1"])
def test_a_trick_turned_off_changes_no_answer(off, tuned_answer, tmp_path):
    """A cold command (every trick applies to a first load) with the trick off: the same bytes, exit 0, and a
    cache entry left; where the entry is written differently, a second command answers from it the same."""
    command = _nsysql if off in OWN_PROCESS else _in_process
    cold = command(COMMAND, tmp_path, off)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout == tuned_answer
    assert list((tmp_path / f"cache-{off}").glob("train_small-*.duckdb"))
    if off not in ("background_persist", "1"):
        return
    warm = command(COMMAND, tmp_path, off)
    assert (warm.returncode, warm.stdout) == (0, tuned_answer)


def test_a_word_that_is_no_trick_is_said_in_one_line(tmp_path):
    # in this process (click's CliRunner): the load refuses the switch (store.opening), as it does in the executable
    r = _in_process(["info", str(SMALL)], tmp_path, "fast_exit,early_reader")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "NSYSQL_NO_TUNING" in r.stderr and "'early_reader'" in r.stderr


def test_the_switches_read_the_environment(monkeypatch):
    monkeypatch.setenv("NSYSQL_NO_TUNING", "")
    assert all(tuning.on(t) for t in tuning.TRICKS)
    monkeypatch.setenv("NSYSQL_NO_TUNING", "1")
    assert not any(tuning.on(t) for t in tuning.TRICKS)
    monkeypatch.setenv("NSYSQL_NO_TUNING", "parallel_sql, fast_exit")
    assert {t for t in tuning.TRICKS if not tuning.on(t)} == {"parallel_sql", "fast_exit"}


def test_every_trick_has_its_switch_in_the_code_and_no_switch_is_unnamed():
    """Each name of tuning.TRICKS is asked somewhere in nsysql/ (tuning.on("name")), and nothing asks for one that
    is not there (tuning.on raises KeyError for it, but only when that line runs)."""
    asked = set()
    for path in (ROOT / "nsysql").rglob("*.py"):
        asked |= set(re.findall(r"tuning\.on\(\"(\w+)\"\)", path.read_text(encoding="utf-8")))
    assert asked == set(tuning.TRICKS)
