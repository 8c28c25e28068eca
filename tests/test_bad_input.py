"""Bad input: one line on stderr naming the file and the problem, exit code 2, no traceback, no writes."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixture

from nsysql.cli import main

COMMANDS = [["info"], ["summary"], ["kernels"], ["ranges"], ["kernels-by-range"]]


def run(args):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def one_line_error(result, path, words):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert str(path) in lines[0]
    assert any(w in lines[0] for w in words), lines[0]


def make_cases(tmp):
    text = tmp / "notes.sqlite"
    text.write_text("hello, not a database\n")
    empty = tmp / "empty.sqlite"
    empty.write_bytes(b"")
    real = fixture("train_small")
    truncated = tmp / "truncated.sqlite"
    truncated.write_bytes(real.read_bytes()[: real.stat().st_size // 2])
    rep = tmp / "run.nsys-rep"
    rep.write_bytes(b"\x00\x01QDSTRM" + os.urandom(2000))
    other = tmp / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE customers(id INTEGER, name TEXT)")
    con.commit()
    con.close()
    folder = tmp / "adir"
    folder.mkdir()
    return [
        (text, ["not a SQLite file"]),
        (empty, ["empty"]),
        (truncated, ["truncated"]),
        (rep, ["nsys export --type sqlite"]),
        (other, ["not an nsys export"]),
        (folder, ["directory"]),
        (tmp / "missing.sqlite", ["no such file"]),
    ]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_bad_inputs_get_one_line_and_exit_2(tmp_path, cmd):
    for path, words in make_cases(tmp_path):
        before = path.read_bytes() if path.is_file() else None
        one_line_error(run(cmd + [str(path)]), path, words)
        if before is not None:
            assert path.read_bytes() == before


def test_unknown_and_missing_columns_are_tolerated(tmp_path):
    """An nsys-like file whose tables lack most columns still loads; what is missing is said."""
    path = tmp_path / "odd.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds(id INTEGER, value TEXT)")
    con.execute("INSERT INTO StringIds VALUES (1, 'k1'), (2, CAST(X'6BE9' AS TEXT))")  # non-UTF-8 bytes
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, demangledName INTEGER, weirdColumn BLOB)"
    )
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 30, 1, x'00'), (40, 45, 2, NULL)")
    con.execute("CREATE TABLE NVTX_EVENTS(start INTEGER, end INTEGER, eventType INTEGER, text TEXT)")
    con.execute("INSERT INTO NVTX_EVENTS VALUES (5, 50, 59, CAST(X'4261746368FF' AS TEXT))")
    con.commit()
    con.close()
    res = run(["kernels", str(path), "-f", "csv"])
    assert res.exit_code == 0, res.output
    assert "k1,1,20" in res.stdout and "k\ufffd,1,5" in res.stdout
    info = run(["info", str(path)])
    assert info.exit_code == 0 and "CUPTI_ACTIVITY_KIND_RUNTIME" in info.stdout
    ranges = run(["ranges", str(path), "-f", "csv"])
    assert "Batch\ufffd" in ranges.stdout


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_commands_never_write_into_or_beside_the_input(tmp_path):
    src = tmp_path / "run.sqlite"
    shutil.copy2(fixture("train_small"), src)
    os.chmod(src, 0o444)
    before, listing = digest(src), sorted(os.listdir(tmp_path))
    for cmd in COMMANDS + [["kernels-by-range", "--range", "Batch", "--innermost"]]:
        assert run(cmd[:1] + [str(src)] + cmd[1:]).exit_code == 0
    assert digest(src) == before
    assert sorted(os.listdir(tmp_path)) == listing


def test_bad_option_values_are_one_line(tmp_path):
    res = run(["kernels-by-range", str(fixture("train_small")), "--range", "NoSuchRange"])
    assert res.exit_code == 2 and "no NVTX range matches 'NoSuchRange'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    for args, says in (
        (["-o", str(tmp_path)], "is a directory"),
        (["-f", "nope"], "'nope' is not one of"),
        (["--no-such-option"], "No such option"),
    ):
        res = run(["kernels", str(fixture("train_small")), *args])
        assert res.exit_code == 2 and says in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    # --top 0 too: no rows would print "no kernels" of a profile that has some; every command with --top
    for cmd, says in (
        (["kernels", "--top", "-1"], "--top must be 1 or more"),
        (["kernels", "--top", "0"], "--top must be 1 or more"),
        (["api", "--top", "0"], "--top must be 1 or more"),
        (["summary", "--top", "0"], "--top must be 1 or more"),
        (["gaps", "--explain", "--top", "0"], "0 is not in the range x>=1"),
        (["iterations", "--skip", "-1"], "--skip must be 0 or more"),
        # every category of every iteration is the answer there: --top would be ignored, so it is refused
        (["kernels", "--by", "category", "--per", "iteration", "--top", "3"], "--top keeps the first kernels"),
    ):
        res = run([cmd[0], str(fixture("train_small")), *cmd[1:]])
        assert res.exit_code == 2 and says in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


def test_out_of_memory_says_so_in_one_line_and_leaves_no_spill_files(tmp_path):
    """The executable (nsysql.cli.run) leaves without closing DuckDB; a command that ran out of memory while its
    tables were spilled to disk once left DuckDB's spill files behind (188 MB at 500k kernels)."""
    import subprocess
    import sys

    src = fixture("big_step")
    env = dict(os.environ, TMPDIR=str(tmp_path), NSYSQL_MEMORY_LIMIT="20MB", NSYSQL_THREADS="2")
    p = subprocess.run(
        [sys.executable, "-m", "nsysql", "--no-cache", "summary", str(src)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    spill = list(tmp_path.glob("nsysql-spill-*"))
    assert spill, "DuckDB never spilled: the memory limit no longer forces it"
    assert p.returncode == 2, p.stderr  # 20 MB is too little for the canonical tables of big_step
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(src) in lines[0] and "Out of Memory" in lines[0], p.stderr
    assert [f.name for f in spill[0].iterdir()] == []
