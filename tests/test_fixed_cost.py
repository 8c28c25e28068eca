"""What every cold command pays whatever the export's size: the work is counted (commits synced, statements
run, times a table is built), never timed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, fixture

import nsysql
from nsysql.store import tables


def _cold(tmp_path, name="train_small"):
    return nsysql.load(fixture(name), cache_dir=tmp_path / "cache")


def test_a_cold_build_syncs_its_entry_once_not_at_each_commit(tmp_path):
    # the build's DuckDB writes a temporary entry, flushed whole by store.commit before its rename: DuckDB's own
    # sync of its log at each of the build's commits is off, and the entry in place is whole for another process
    p = _cold(tmp_path)
    p.summary()
    assert p.con.execute("SELECT current_setting('fsync_mode')").fetchall()[0][0].upper() == "NONE"
    tables.wait()
    entries = tables.entries(tmp_path / "cache")
    assert len(entries) == 1
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsysql",
            "--cache-dir",
            str(tmp_path / "cache"),
            "sql",
            str(fixture("train_small")),
            "SELECT value FROM profile_facts WHERE key = 'complete'",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "yes" in out.stdout


def _logged(con) -> list[str]:
    """What DuckDB ran on `con`'s database since its query log was turned on (every cursor's statements)."""
    return [m for (m,) in con.execute("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()]


@pytest.fixture(scope="module")
def summarized():
    """train_small loaded without a cache, DuckDB's query log on, then asked `summary` and then `report` (the
    order a first `nsysql report` asks them in): the profile, what ran by the end of the summary, and what ran
    by the end of the report. One load for the tests that count the statements of those two questions."""
    p = nsysql.load(fixture("train_small"), cache=False)
    p.con.execute("CALL enable_logging('QueryLog')")
    p.summary()
    after_summary = _logged(p.con)
    p.report()
    yield p, after_summary, _logged(p.con)
    p.close()


def test_a_summary_builds_the_iteration_windows_once_for_all_its_workers(summarized):
    # summary asks iterations, their stats, gaps and the per-iteration breakdown side by side, each on a cursor
    # of its own: the windows of the one iteration range (Batch*, by construction of train_small) are built once
    p, after_summary, _ = summarized
    built = [m for m in after_summary if "_iterations_" in m and m.lstrip().upper().startswith("CREATE")]
    assert len(built) == 1, built
    assert p.iterations()["iteration"].to_list() == list(range(p.iterations().height))


def test_a_summary_totals_the_ops_of_each_range_once_for_all_its_readers(summarized):
    # the ranges table and the iterations' phases both read each range's GPU op totals by the process rule
    # (op_range_totals, a grouping of every op): made once, into a table both read; the report's per-iteration
    # ranges read it too
    p, _, after_report = summarized
    totalled = [m for m in after_report if "FROM op_range_totals(" in m]
    assert len(totalled) == 1, totalled
    assert p.iterations().height > 1


def test_the_code_hash_is_kept_and_still_follows_every_edit(tmp_path):
    # the store's key hashes nsysql's files; the hash is kept for their sizes and times (as bytecode is), so an
    # edited file gives a new hash, and the same content again gives the same one
    import os
    import shutil

    tree = tmp_path / "tree"
    for part in ("nsysql", "queries"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)

    def digest() -> str:
        code = "from nsysql import store; print(store.code_hash())"
        return subprocess.run(
            [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
        ).stdout.strip()

    first = digest()
    assert list((tree / "nsysql" / "__pycache__").glob("nsysql-code-*.txt"))
    assert digest() == first
    sql = tree / "queries" / "v1" / "canonical" / "05_strings.sql"
    text = sql.read_text()
    sql.write_text(text + "-- edited\n")
    assert digest() != first
    sql.write_text(text)
    assert digest() == first


def test_without_bytecode_the_code_hash_is_kept_in_the_cache_directory(tmp_path):
    # where Python writes no bytecode (PYTHONDONTWRITEBYTECODE, common in containers) the hash is kept in the
    # cache directory instead, never in the package, and still follows every edit
    import os
    import shutil

    tree, cdir = tmp_path / "tree", tmp_path / "cache"
    for part in ("nsysql", "queries"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(tree))
    env.pop("NSYSQL_CACHE_DIR", None)

    def summary() -> list[str]:
        argv = [sys.executable, "-P", "-m", "nsysql", "--cache-dir", str(cdir), "summary", str(fixture("train_small"))]
        subprocess.run(argv, capture_output=True, env=env, cwd=tmp_path, check=True)
        return sorted(p.name for p in cdir.glob("nsysql-code-*.txt"))

    summary()  # makes the cache directory: the hash is kept there from the next command on
    first = summary()
    assert len(first) == 1 and summary() == first
    assert not list(tree.rglob("nsysql-code-*.txt"))
    entries = sorted(p.name for p in cdir.glob("*.duckdb"))
    sql = tree / "queries" / "v1" / "canonical" / "05_strings.sql"
    sql.write_text(sql.read_text() + "-- edited\n")
    assert summary() != first
    assert len(list(cdir.glob("*.duckdb"))) == len(entries) + 1  # the edit's own entry, not the old one reused


def test_stored_answers_are_not_flushed_and_one_a_crash_left_empty_is_made_again(tmp_path, monkeypatch):
    # the two dozen files of a summary's stored answers are renamed into place unflushed (store.answers): a
    # crash may leave them empty, and then they are read as missing and computed again, never served
    import os

    from click.testing import CliRunner

    from nsysql.cli import main

    cdir = tmp_path / "cache"
    args = ["--cache-dir", str(cdir), "summary", str(fixture("train_small"))]
    flushed: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    tables.wait()
    stored = [p for p in cdir.glob("*.results/*/*") if p.is_file()]
    assert any(p.name == "index.json" for p in stored) and any(p.name.startswith("printed-") for p in stored)
    assert [f for f in flushed if ".results" in f] == []
    assert any(".duckdb." in f for f in flushed), flushed  # the entry itself is flushed before its rename
    for p in stored:  # what a crash before the unflushed blocks reached the disk leaves
        p.write_bytes(b"")
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert again.stdout == first.stdout
    assert all(p.stat().st_size > 0 for p in stored)  # made again and stored again
