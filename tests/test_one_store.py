"""One store (nsysql/store/): one cache directory, one key and a size cap with least-recently-used eviction
(NSYSQL_CACHE_MAX / --cache-max), which never removes an entry in use.

Each command runs as its own process (`python -m nsysql`), as a user's commands do: what a process loaded is in use
until it ends. The exports are copies of one small fixture under other names, so their entries are of one size."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, built_cache

import nsysql
from nsysql.cli import main
from nsysql.errors import NsysqlError

SMALL = FIXTURES / "mem_growth" / "mem_growth.sqlite"


def nsysql_cli(*args, cdir: Path, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("NSYSQL_NO_CACHE", "NSYSQL_CACHE_MAX")}
    e.update({"NSYSQL_CACHE_DIR": str(cdir), "NSYSQL_THREADS": "2", **(env or {})})
    proc = subprocess.run(
        [sys.executable, "-m", "nsysql", *map(str, args)], env=e, capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def fill(*args, cdir: Path) -> None:
    """A command that only fills the cache for the one under test: in this process (click's CliRunner), with the
    settings of `nsysql_cli`. The entries it loads are in use here, never in the process whose trim is under test
    (store.in_use is a process's own); it leaves none open (the cap's trim in that process would skip it)."""
    env = {"NSYSQL_CACHE_DIR": str(cdir), "NSYSQL_THREADS": "2", "NSYSQL_NO_CACHE": None, "NSYSQL_CACHE_MAX": None}
    res = CliRunner(env=env).invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output


def exports(tmp_path: Path, *names: str) -> list[Path]:
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    out = []
    for n in names:
        shutil.copy2(SMALL, d / f"{n}.sqlite")
        out.append(d / f"{n}.sqlite")
    return out


def cache_info(cdir: Path):
    """`nsysql cache info` (in this process: it loads nothing, so it holds no entry in use)."""
    res = CliRunner().invoke(main, ["--cache-dir", str(cdir), "cache", "info", "-f", "csv"])
    assert res.exit_code == 0, res.output
    return res


def cached(cdir: Path) -> pl.DataFrame:
    """`nsysql cache info` as a frame: the entries there, with the export each was loaded from."""
    out = cache_info(cdir).stdout
    return pl.read_csv(io.StringIO(out)) if out.strip() else pl.DataFrame({"source_path": []})


def sources(cdir: Path) -> set[str]:
    return {Path(s).stem for s in cached(cdir)["source_path"].to_list()}


def entry_bytes(cdir: Path) -> int:
    return max(cached(cdir)["bytes"].to_list())


@pytest.mark.long
def test_filling_past_the_cap_evicts_the_least_recently_used(tmp_path):
    a, b, c = exports(tmp_path, "a", "b", "c")
    cdir = tmp_path / "cache"
    # the same command each time: a first load builds the tables its question needs (tuning's lazy_build), so
    # entries of the same export are of the same size
    fill("kernels", a, cdir=cdir)
    fill("kernels", b, cdir=cdir)
    fill("kernels", a, cdir=cdir)  # a used again (warm): b is now the least recently used
    assert sources(cdir) == {"a", "b"}
    cap = entry_bytes(cdir) * 5 // 2  # two entries and their answers fit, three do not
    res = nsysql_cli("--cache-max", cap, "kernels", c, cdir=cdir)
    assert sources(cdir) == {"a", "c"}
    assert not list(cdir.glob("b-*")), "every value of b goes: entry, answers, marker"
    # what is left is within the cap, whatever the answers of c added
    total = float(cache_info(cdir).stderr.split(", ")[-1].split(" MiB")[0]) * 2**20
    assert total <= cap + 2**20 * 0.1
    assert "warning" not in res.stderr
    # the same through the environment, without the option: c and a are older than a new d
    (d,) = exports(tmp_path, "d")
    nsysql_cli("kernels", d, cdir=cdir, env={"NSYSQL_CACHE_MAX": str(cap)})
    assert sources(cdir) == {"c", "d"}


@pytest.mark.long
def test_an_entry_another_process_holds_open_is_never_evicted(tmp_path):
    a, b, c = exports(tmp_path, "a", "b", "c")
    cdir = tmp_path / "cache"
    fill("info", b, cdir=cdir)
    fill("info", a, cdir=cdir)
    cap = entry_bytes(cdir) * 5 // 2
    env = {**os.environ, "NSYSQL_CACHE_DIR": str(cdir), "NSYSQL_THREADS": "2"}
    env.pop("NSYSQL_CACHE_MAX", None)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, nsysql\n"
            f"p = nsysql.load({str(b)!r})\n"
            "p.con  # the entry open in DuckDB\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n"
            "print(p.kernels().height, flush=True)\n",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open", holder.stderr.read()
        (marker,) = cdir.glob("b-*.nsysql")
        old = time.time() - 3600
        os.utime(marker, (old, old))  # b the least recently used again (the holder's load was a use)
        nsysql_cli("--cache-max", cap, "info", c, cdir=cdir)
        assert sources(cdir) == {"b", "c"}, "b is held open: a, the next least recently used, goes instead"
        out, err = holder.communicate("\n", timeout=60)
        assert holder.returncode == 0, err
        assert int(out.strip()) > 0
    finally:
        if holder.poll() is None:
            holder.kill()


def test_the_entry_a_command_loads_stays_whatever_the_cap(tmp_path):
    a, b = exports(tmp_path, "a", "b")
    cdir = tmp_path / "cache"
    fill("info", a, cdir=cdir)
    res = nsysql_cli("--cache-max", "1", "kernels", b, "-f", "csv", cdir=cdir)
    assert sources(cdir) == {"b"}
    warm = nsysql_cli("kernels", b, "-f", "csv", cdir=cdir)
    assert warm.stdout == res.stdout
    # and in one Python process: every profile it loaded is in use
    cdir2 = tmp_path / "cache2"
    first = nsysql.load(a, cache_dir=cdir2)
    second = nsysql.load(b, cache_dir=cdir2, cache_max=1)
    assert first.cache_entry.is_file() and second.cache_entry.is_file()
    first.close()
    second.close()


def test_an_entry_of_nsysql_0_3_is_evicted_by_its_age(tmp_path):
    """An entry nsysql 0.3 wrote has no marker (its name and profile_facts prove it nsysql's): its files' age is
    its last use."""
    a, b = exports(tmp_path, "a", "b")
    cdir = tmp_path / "cache"
    fill("info", a, cdir=cdir)
    (marker,) = cdir.glob("a-*.nsysql")
    marker.unlink()  # as 0.3 left it
    old = time.time() - 3600
    for f in cdir.glob("a-*"):
        os.utime(f, (old, old))
    assert sources(cdir) == {"a"}  # still listed
    nsysql_cli("--cache-max", entry_bytes(cdir) * 3 // 2, "info", b, cdir=cdir)
    assert sources(cdir) == {"b"}
    assert not list(cdir.glob("a-*"))


@pytest.mark.parametrize("value", ["lots", "10 GBB", "-5MB", "iB"])
def test_a_cap_that_is_not_a_size_is_said_in_one_line(tmp_path, value):
    (a,) = exports(tmp_path, "a")
    cdir = tmp_path / "cache"
    # in this process (click's CliRunner): the value is refused before anything is loaded, so no entry is in use
    env = {"NSYSQL_CACHE_DIR": str(cdir), "NSYSQL_NO_CACHE": None}
    for res in (
        CliRunner(env={**env, "NSYSQL_CACHE_MAX": None}).invoke(main, ["--cache-max", value, "info", str(a)]),
        CliRunner(env={**env, "NSYSQL_CACHE_MAX": value}).invoke(main, ["info", str(a)]),
    ):
        assert res.exit_code == 2 and res.stdout == ""
        (line,) = res.stderr.strip().splitlines()
        assert line.startswith("nsysql: error: ") and "NSYSQL_CACHE_MAX" in line and "must be a size" in line
    assert not cdir.exists()  # nothing loaded, nothing stored
    with pytest.raises(NsysqlError, match="NSYSQL_CACHE_MAX"):
        nsysql.load(a, cache_dir=cdir, cache_max=value)


def test_sizes_in_every_unit_and_none(tmp_path):
    """The cap in decimal and binary units; `none`: no cap, nothing evicted."""
    a, b = exports(tmp_path, "a", "b")
    cdir = tmp_path / "cache"
    fill("info", a, cdir=cdir)
    nsysql_cli("--cache-max", "none", "info", b, cdir=cdir, env={"NSYSQL_CACHE_MAX": "1"})  # the option wins
    assert sources(cdir) == {"a", "b"}
    nsysql_cli("--cache-max", "0.001GiB", "info", a, cdir=cdir)  # 1,073,741 bytes: less than one entry
    assert sources(cdir) == {"a", "b"}, "a warm load stores no new entry and evicts nothing"


def test_a_reports_export_tables_and_answers_are_one_entry_evicted_together(tmp_path):
    """An `.nsys-rep`'s SQLite export, the tables loaded from it and the answers stored for it are one entry of
    the store: named by one key (the report's), one row of `cache info` whose bytes are all of them, and evicted
    together, least recently used first. tests/fake_nsys.py stands in for nsys."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nsys"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).parent / "fake_nsys.py"}" "$@"\n')
    fake.chmod(0o755)
    reports = []
    for n in ("r1", "r2"):
        rep = tmp_path / "in" / f"{n}.nsys-rep"
        rep.parent.mkdir(exist_ok=True)
        rep.write_bytes(b"PK\x03\x04 a report nsys would write: " + n.encode())
        reports.append(rep)
    cdir = tmp_path / "cache"
    env = {"FAKE_NSYS_EXPORT": str(SMALL)}
    nsysql_cli("--nsys", fake, "summary", reports[0], cdir=cdir, env=env)
    rows = cached(cdir)
    assert rows.height == 1 and rows["source_path"][0] == str(reports[0].resolve())
    (entry,) = rows["entry"].to_list()
    parts = {p.name.removeprefix(entry) for p in cdir.iterdir() if p.name.startswith(entry)}
    assert parts == {".nsysql", ".export", ".duckdb", ".results"}, parts
    assert rows["export"][0] == f"{entry}.export/r1.sqlite"
    assert (cdir / rows["export"][0]).read_bytes() == SMALL.read_bytes()
    one = rows["bytes"][0]  # the export, its tables and the summary's answers
    values = [p for p in cdir.iterdir() if p.name.startswith(entry) and p.suffix != ".nsysql"]
    assert one == sum(f.stat().st_size for v in values for f in [v, *v.rglob("*")] if f.is_file())
    nsysql_cli("--nsys", fake, "--cache-max", one * 3 // 2, "summary", reports[1], cdir=cdir, env=env)
    rows = cached(cdir)
    assert rows.height == 1 and rows["source_path"][0] == str(reports[1].resolve()), rows
    assert not [p for p in cdir.iterdir() if p.name.startswith(entry)], "r1's export, tables and answers all went"


def test_per_rank_frames_are_counted_and_evicted_with_their_entry(tmp_path):
    """The per-rank frames of `nsysql ranks` (`<entry>.<table>.parquet`, beside the entry's tables) are values of
    the entry: one row of `cache info` whose bytes are all of its files, frames and answers included, and evicted
    with it."""
    ranks = [FIXTURES / "ddp_pair" / f"rank{i}.sqlite" for i in (0, 1)]
    cdir = built_cache(tmp_path / "cache", *ranks)  # their tables, as the run's first loads left them
    fill("ranks", *ranks, "--workers", "1", cdir=cdir)
    rows = cached(cdir)
    assert rows.height == 2
    for entry, nbytes in rows.select("entry", "bytes").rows():
        assert list(cdir.glob(f"{entry}.*.parquet")), "ranks stored its frames beside the entry"
        values = [p for p in cdir.iterdir() if p.name.startswith(f"{entry}.") and p.suffix != ".nsysql"]
        assert nbytes == sum(f.stat().st_size for v in values for f in [v, *v.rglob("*")] if f.is_file())
    (c,) = exports(tmp_path, "c")
    nsysql_cli("--cache-max", "1", "info", c, cdir=cdir)
    assert sources(cdir) == {"c"}
    assert not list(cdir.glob("rank*")), "every value of both ranks went: tables, frames, answers, marker"
