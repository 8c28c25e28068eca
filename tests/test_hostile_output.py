"""Hostile inputs and environments, round 2 (issue 30): bounded output and security.

- every DuckDB connection nsysql opens locks extension loading, and paths stay paths (a cache directory named
  `md:` is a directory, not MotherDuck);
- the spill directory is private to the user;
- Markdown output code-quotes names from the export, so no export can put live Markdown or HTML into a PR;
- `report` on an export whose kernels claim hundreds of devices draws a bounded report, and says what it left out.

Exports are copies of fixtures/train_small mutated here with sqlite3; known answers come from the mutated rows.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, fixture

import nsysql
from nsysql.cli import main


def run(args, env=None):
    return CliRunner(env=env).invoke(main, args, catch_exceptions=False)


def craft(path: Path, *statements) -> Path:
    shutil.copy(fixture("train_small"), path)
    con = sqlite3.connect(path)
    for st in statements:
        con.execute(*st) if isinstance(st, tuple) else con.execute(st)
    con.commit()
    con.close()
    return path


# --- item 19: every connection locks extensions; paths are always paths ---------------------------------------

SETTINGS = (
    "SELECT current_setting('autoload_known_extensions'), current_setting('autoinstall_known_extensions'), "
    "current_setting('allow_community_extensions')"
)


@pytest.mark.parametrize("name", ["md:", "md:foo", "motherduck:x", "s3://bucket", "http://e"])
def test_cache_dir_named_like_a_url_is_a_directory(tmp_path, monkeypatch, name):
    """A cache directory named `md:` made the profile's own connection open the entry as a MotherDuck database:
    DuckDB tried to download and load the motherduck extension (a DNS query), the cache failed with a warning."""
    src = craft(tmp_path / "train.sqlite")
    monkeypatch.chdir(tmp_path)
    import warnings

    for attempt in ("cold", "warm"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p = nsysql.load(src, cache_dir=name)
            assert p.con.execute(SETTINGS).fetchall() == [(False, False, False)], attempt
            assert p.sql("SELECT count(*) FROM gpu_ops").item() == 679  # the sandbox attaches the entry as a path
            assert p.worker().con.execute(SETTINGS).fetchall() == [(False, False, False)]
            p.close()
        said = [str(w.message) for w in caught]
        assert not [w for w in said if "cache" in w or "extension" in w.lower()], said
        entry = p.cache_entry
        assert entry is not None and entry.is_file() and entry.parent == Path(name), (attempt, entry)
        assert tmp_path / entry in list((tmp_path / name).iterdir())
    r = run(["--cache-dir", name, "cache", "info"])
    assert r.exit_code == 0 and entry.name in r.stdout and "1 entries" in r.stderr, r.output


def test_export_named_like_a_url_is_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("md:foo", "md:", "motherduck:x"):
        craft(tmp_path / name)
        r = run(["--cache-dir", "cache", "kernels", name, "-f", "csv", "--top", "1"])
        assert r.exit_code == 0 and r.stdout.count("\n") == 2, r.output
        assert "warning" not in r.stderr, r.stderr


def test_sql_sandbox_and_profile_connection_load_no_extension(tmp_path):
    src = craft(tmp_path / "train.sqlite")
    for cache in (True, False):
        p = nsysql.load(src, cache=cache, cache_dir=tmp_path / "cache")
        assert p.sql(SETTINGS).rows() == [(False, False, False)]
        assert p.sql("SELECT current_setting('enable_external_access')").item() is False
        for q in ("SELECT * FROM 'md:foo'", "SELECT * FROM 'https://e.invalid/x.parquet'"):
            with pytest.raises(nsysql.NsysqlError):
                p.sql(q)
        # on the profile's own connection, a URL as a table needs an extension nsysql does not fetch
        for q in ("SELECT * FROM 's3://bucket/x.parquet'", "SELECT * FROM 'https://e.invalid/x.csv'"):
            with pytest.raises(Exception, match="httpfs") as e:
                p.con.execute(q)
            assert "download" not in str(e.value).lower()
        p.close()


def test_only_one_function_opens_duckdb_connections():
    """Every DuckDB connection nsysql opens goes through nsysql.duck.connect, which locks extension loading: a
    `duckdb.connect(` anywhere else in the package is one that may not."""
    found = []
    for f in sorted((ROOT / "nsysql").rglob("*.py")):
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bduckdb\s*\.\s*connect\s*\(", line) and not line.lstrip().startswith("#"):
                found.append(f"{f.relative_to(ROOT).as_posix()}:{n}")
    assert [f for f in found if not f.startswith("nsysql/duck.py:")] == []
    assert "duckdb.connect(path(database)" in (ROOT / "nsysql" / "duck.py").read_text()


# --- item 18: the spill directory is private ---------------------------------------------------------------------

SPILL_OF = """
import os, stat, sys, warnings
import nsysql
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    p = nsysql.load(sys.argv[1], cache=False)
d = p.con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
st = os.lstat(d)
private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
print(d, private, len(said), sep="\\n")
"""


def spill_dir_used(tmp: Path, src: Path) -> tuple[Path, bool, int]:
    """The spill directory DuckDB is given in a fresh process whose temporary directory is `tmp`, whether it is
    private (a directory of this user's, mode 0700, not a link) while the process runs, and how many warnings
    the load gave."""
    r = subprocess.run(
        [sys.executable, "-c", SPILL_OF, str(src)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    d, ok, warned = r.stdout.split()
    return Path(d), ok == "True", int(warned)


def cli_says(tmp: Path, src: Path) -> list[str]:
    """What `nsysql sql` says on stderr with `tmp` as the temporary directory."""
    r = subprocess.run(
        [sys.executable, "-m", "nsysql", "--no-cache", "sql", str(src), "SELECT 1 AS one", "-f", "csv"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout == "one\n1\n", r.stderr
    return r.stderr.splitlines()


def private(d: Path) -> bool:
    st = os.lstat(d)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700


@pytest.fixture
def spill_env(tmp_path):
    src = craft(tmp_path / "train.sqlite")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return src, tmp, tmp / f"nsysql-spill-{os.getuid()}"


def test_spill_dir_is_created_private(spill_env):
    src, tmp, shared = spill_env
    used, ok, warned = spill_dir_used(tmp, src)
    assert used == shared and ok and private(shared) and warned == 0, oct(os.lstat(shared).st_mode)


def test_own_spill_dir_left_open_is_made_private(spill_env):
    """An older nsysql (or DuckDB itself) made the shared directory 0755: spill files readable by all."""
    src, tmp, shared = spill_env
    shared.mkdir()
    os.chmod(shared, 0o755)
    used, ok, warned = spill_dir_used(tmp, src)
    assert used == shared and ok and private(shared) and warned == 0, oct(os.lstat(shared).st_mode)


def fresh(used: Path, tmp: Path, shared: Path) -> bool:
    """`used` is a spill directory of the process's own, not the shared name (and was removed as it ended)."""
    return used != shared and used.parent == tmp and used.name.startswith("nsysql-spill-") and not used.exists()


def test_spill_dir_that_is_a_link_is_not_used(spill_env):
    """Another user makes `$TMPDIR/nsysql-spill-<uid>` a link to a directory of theirs first: nsysql spilled the
    profile's tables into it."""
    src, tmp, shared = spill_env
    elsewhere = tmp.parent / "elsewhere"
    elsewhere.mkdir()
    os.chmod(elsewhere, 0o777)
    shared.symlink_to(elsewhere)
    used, ok, warned = spill_dir_used(tmp, src)
    assert ok and warned == 1 and fresh(used, tmp, shared), used
    assert list(elsewhere.iterdir()) == [] and shared.is_symlink()
    lines = cli_says(tmp, src)
    assert len(lines) == 1 and str(shared) in lines[0] and "symbolic link" in lines[0], lines


def test_spill_dir_that_is_a_file_is_not_used(spill_env):
    src, tmp, shared = spill_env
    shared.write_text("not a directory")
    used, ok, warned = spill_dir_used(tmp, src)
    assert ok and warned == 1 and fresh(used, tmp, shared) and shared.read_text() == "not a directory"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a directory away needs root")
def test_spill_dir_of_another_user_is_not_used(spill_env):
    src, tmp, shared = spill_env
    shared.mkdir(mode=0o700)
    os.chown(shared, 12345, 12345)
    used, ok, warned = spill_dir_used(tmp, src)
    assert ok and warned == 1 and fresh(used, tmp, shared)
    lines = cli_says(tmp, src)
    assert len(lines) == 1 and "owned by uid 12345" in lines[0], lines


def test_spill_files_land_in_the_private_dir(spill_env):
    """A load that spills (a memory limit below what the tables need) spills into the private directory, and
    the CLI leaves nothing there."""
    src, tmp, shared = spill_env
    r = subprocess.run(
        [sys.executable, "-m", "nsysql", "--no-cache", "summary", str(fixture("big_step"))],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), "NSYSQL_MEMORY_LIMIT": "20MB"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Out of Memory" in r.stderr, r.stderr
    assert private(shared) and list(shared.iterdir()) == []
