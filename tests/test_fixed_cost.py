"""What every cold command pays whatever the export's size: the work is counted (commits synced, statements
run, times a table is built), never timed."""

from __future__ import annotations

import subprocess
import sys

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
