"""Exports still being written, or with changes in a log beside them (issue 26, item 3).

nsysql reads an export with SQLite's `immutable=1`, which sees neither a `-wal` log nor a `-journal` nor another
writer. Each test builds such a file from a copy of the train_small fixture (a writer in another process where a
lock must be held), and asserts that nsysql refuses in one line naming the file, or reads it whole; that it
writes nothing into or beside it; and that the fixture itself keeps its sha256 and mtime."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import fixture

import nsysql
from nsysql.cli import main
from nsysql.errors import NsysqlError

TRAIN = fixture("train_small")
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


def stamp(p):
    return hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns


def files(d):
    return {p.name: stamp(p) for p in sorted(d.iterdir())}


@pytest.fixture(scope="module", autouse=True)
def fixture_untouched():
    before = stamp(TRAIN)
    yield
    assert stamp(TRAIN) == before


@pytest.fixture
def copy(tmp_path):
    d = tmp_path / "exports"
    d.mkdir()
    c = d / "run.sqlite"
    c.write_bytes(TRAIN.read_bytes())
    return c


def count(path, table=KERNELS):
    """Rows of `table` as SQLite itself reads the file (WAL and journal included)."""
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def refused(path, cache_dir, words):
    """nsysql.load and `nsysql summary` both refuse `path` in one line naming it, and write nothing beside it."""
    before = files(path.parent)
    with pytest.raises(NsysqlError) as e:
        nsysql.load(path, cache_dir=cache_dir)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg and any(w in msg for w in words), msg
    res = CliRunner(env={"NSYSQL_CACHE_DIR": str(cache_dir)}).invoke(
        main, ["summary", str(path)], catch_exceptions=False
    )
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nsysql: error: {path}: ") and "Traceback" not in res.stderr
    assert files(path.parent) == before  # not a byte written into or beside the export
    assert not list(cache_dir.glob("*.duckdb"))  # nothing cached from it
    return msg


def test_rows_only_in_the_wal_are_not_missed(copy, tmp_path):
    """A WAL-mode export whose last rows are still in `-wal` (a writer has it open, no checkpoint): refused,
    not read without them (632 kernels instead of 1,264 in the issue)."""
    writer = sqlite3.connect(copy)
    try:
        assert writer.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        n = count(copy)
        with writer:
            writer.execute(f"INSERT INTO {KERNELS} SELECT * FROM {KERNELS}")
        assert count(copy) == 2 * n  # true by construction: the copy's kernels doubled, in the WAL only
        assert (copy.parent / "run.sqlite-wal").stat().st_size > 0
        msg = refused(copy, tmp_path / "cache", ["write-ahead log", "run.sqlite-wal"])
        assert ".backup" in msg
    finally:
        writer.close()


def test_a_wal_left_behind_without_a_writer_is_refused_too(copy, tmp_path):
    """The same -wal and -shm, copied beside another file while the writer had them open: what a crashed writer
    leaves. SQLite would fold the log in on opening; nsysql cannot without writing, so it refuses."""
    writer = sqlite3.connect(copy)
    left = tmp_path / "left"
    left.mkdir()
    try:
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        with writer:
            writer.execute(f"DELETE FROM {KERNELS} WHERE rowid % 2 = 0")
        for suffix in ("", "-wal", "-shm"):
            (left / f"crashed.sqlite{suffix}").write_bytes((copy.parent / f"run.sqlite{suffix}").read_bytes())
    finally:
        writer.close()
    refused(left / "crashed.sqlite", tmp_path / "cache", ["write-ahead log"])


def test_a_wal_mode_export_without_a_log_reads_whole_and_creates_no_shm(copy, tmp_path):
    """WAL mode in the header but every change in the file (the writer closed it, checkpointing): read whole
    with immutable=1, which creates no -shm beside it (opening it read-only without immutable would)."""
    writer = sqlite3.connect(copy)
    writer.execute("PRAGMA journal_mode = WAL")
    with writer:
        writer.execute(f"INSERT INTO {KERNELS} SELECT * FROM {KERNELS}")
    writer.close()
    assert sorted(os.listdir(copy.parent)) == ["run.sqlite"]
    assert copy.read_bytes()[18:20] == b"\x02\x02"  # WAL mode, by the SQLite file format
    before = files(copy.parent)
    n = count(copy)
    with nsysql.load(copy, cache_dir=tmp_path / "cache") as p:
        assert p.sql("SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'")["n"][0] == n
    assert files(copy.parent) == before


HOLD = r"""
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute(sys.argv[2])
for stmt in sys.argv[3:]:
    con.execute(stmt)
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def writer_process():
    """Another process that runs SQL on a file and keeps its transaction (and SQLite's locks) open."""
    procs = []

    def start(path, *sql):
        p = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(path), *sql], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        procs.append(p)
        assert p.stdout.readline().strip() == "holding"
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_an_export_under_another_writers_lock_is_refused(copy, tmp_path, writer_process):
    """Another process holds SQLite's EXCLUSIVE lock (it may be rewriting pages in place): refused, not read
    torn (2,769 kernels instead of 5,440 committed in the issue)."""
    before = stamp(copy)
    writer_process(copy, "BEGIN EXCLUSIVE")
    refused(copy, tmp_path / "cache", ["being written", "write lock"])
    assert stamp(copy) == before


def test_a_journal_beside_the_export_is_refused_while_written_and_after_a_crash(copy, tmp_path, writer_process):
    """A writer mid-transaction in rollback-journal mode: its -journal holds the pages it is changing. Refused
    while it runs; killed, it leaves a hot journal (the file may hold half a transaction): refused still."""
    w = writer_process(copy, "BEGIN IMMEDIATE", "PRAGMA cache_size = 1", f"DELETE FROM {KERNELS}")
    assert (copy.parent / "run.sqlite-journal").stat().st_size > 0
    refused(copy, tmp_path / "cache", ["rollback journal", "being written"])
    w.kill()
    w.wait()
    msg = refused(copy, tmp_path / "cache", ["rollback journal"])
    assert "run.sqlite-journal" in msg
    assert count_via_backup(copy, tmp_path) == count(TRAIN)  # rolled back, the committed rows are all there


def count_via_backup(path, tmp_path):
    """The kernels SQLite reads from a copy of `path` with its journal (it rolls the copy's journal back)."""
    d = tmp_path / "rollback"
    d.mkdir()
    for suffix in ("", "-journal"):
        (d / f"x.sqlite{suffix}").write_bytes(path.with_name(path.name + suffix).read_bytes())
    return count(d / "x.sqlite")


@pytest.mark.parametrize("change", ["mtime", "size"])
def test_a_file_changed_during_the_load_is_refused_and_not_cached(copy, tmp_path, change):
    """The file changes after nsysql opened it and before its rows are all read (here: from the progress
    callback, which runs while the readers read): refused, and no cache entry is left that would answer the
    next command from torn rows. Loaded again, unchanged, it reads whole."""
    cache_dir = tmp_path / "cache"
    done = []

    def progress(step):
        if not done:
            done.append(step)
            if change == "mtime":
                st = copy.stat()
                os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
            else:
                with open(copy, "ab") as f:  # a page more at the end, as an appending writer makes
                    f.write(b"\0" * 4096)

    with pytest.raises(NsysqlError) as e:
        nsysql.load(copy, cache_dir=cache_dir, progress=progress)
    msg = str(e.value)
    assert msg.startswith(f"{copy}: changed while nsysql read it (") and change in msg.split("(")[1], msg
    assert not list(cache_dir.glob("*.duckdb")) and not list(cache_dir.glob(".*.tmp"))
    with nsysql.load(copy, cache_dir=cache_dir) as p:
        assert p.sql("SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'")["n"][0] == count(TRAIN)
