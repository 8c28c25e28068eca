"""Valid exports with odd names in them, and damaged ones: read whole, or refused in one clean line (issue 26,
item 9, the loader's part). Each export is built here from a copy of the train_small fixture; the fixture keeps
its sha256 and mtime."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import fixture, loaded

import nsysql
from nsysql.cli import main
from nsysql.errors import NsysqlError

TRAIN = fixture("train_small")


def stamp(p):
    return hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns


@pytest.fixture(scope="module", autouse=True)
def fixture_untouched():
    before = stamp(TRAIN)
    yield
    assert stamp(TRAIN) == before


ODD = ['tbl"quote', "it's", "sp ace", "select", 'x"); DROP TABLE "StringIds', "ünï", "[br]"]


def test_extra_tables_and_columns_with_odd_names_do_not_make_an_export_unreadable(tmp_path):
    """Tables (and columns) nsysql does not read, named with quotes, spaces, keywords and brackets: the export
    reads as the fixture does (same kernels), and its odd tables are listed as they are named."""
    copy = tmp_path / "odd.sqlite"
    copy.write_bytes(TRAIN.read_bytes())
    con = sqlite3.connect(copy)
    for name in ODD:
        ident = '"' + name.replace('"', '""') + '"'
        con.execute(f'CREATE TABLE {ident} ({ident} INTEGER, "a""b" TEXT)')
        con.execute(f"INSERT INTO {ident} VALUES (1, 'x')")
    con.execute('ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN "odd""col" INTEGER')
    con.commit()
    con.close()
    before = stamp(copy)
    with nsysql.load(copy, cache_dir=tmp_path / "cache") as p:
        assert p.kernels().equals(loaded(str(TRAIN)).kernels())
        listed = p.sql("SELECT value FROM profile_facts WHERE key = 'tables_in_file'")["value"][0].split(",")
        assert set(ODD) <= set(listed)
    res = CliRunner(env={"NSYSQL_CACHE_DIR": str(tmp_path / "cache")}).invoke(
        main, ["info", str(copy)], catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    assert stamp(copy) == before


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """The fixture with the root page of its kernel table overwritten: its schema reads, its kernels do not."""
    copy = tmp_path_factory.mktemp("damaged") / "damaged.sqlite"
    copy.write_bytes(TRAIN.read_bytes())
    con = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()
    (page,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    with open(copy, "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\x5a" * page)
    before = stamp(copy)
    yield copy
    assert stamp(copy) == before


@pytest.mark.parametrize("flags", [[], ["--no-cache"]])
def test_a_damaged_export_is_one_line_naming_it_without_a_traceback(damaged, tmp_path, flags):
    res = CliRunner(env={"NSYSQL_CACHE_DIR": str(tmp_path / "cache")}).invoke(
        main, [*flags, "summary", str(damaged)], catch_exceptions=False
    )
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nsysql: error: {damaged}: cannot read the export ("), lines
    assert "Traceback" not in res.stderr and "Python exception" not in res.stderr and "malformed" in lines[0]
    assert lines[0].count(damaged.name) == 1  # named once, not once by nsysql and again inside DuckDB's wrapping
    assert not list((tmp_path / "cache").glob("*.duckdb"))


def test_load_of_a_damaged_export_raises_one_line_naming_it(damaged, tmp_path):
    with pytest.raises(NsysqlError) as e:
        nsysql.load(damaged, cache=False)
    msg = str(e.value)
    assert msg.startswith(f"{damaged}: cannot read the export (") and "\n" not in msg and "Traceback" not in msg
