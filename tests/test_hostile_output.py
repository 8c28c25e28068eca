"""Hostile inputs and environments, round 2 (issue 30): bounded output and security.

- every DuckDB connection nsysql opens locks extension loading, and paths stay paths (a cache directory named
  `md:` is a directory, not MotherDuck);
- the spill directory is private to the user;
- Markdown output code-quotes names from the export, so no export can put live Markdown or HTML into a PR;
- `report` on an export whose kernels claim hundreds of devices draws a bounded report, and says what it left out.

Exports are copies of fixtures/train_small mutated here with sqlite3; known answers come from the mutated rows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import ROOT, built_cache, craft, fixture, seeded

import nsysql
from nsysql.cli import main


def run(args, env=None):
    return CliRunner(env=env).invoke(main, args, catch_exceptions=False)


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
            assert_sandboxed(p)  # the entry as the load writes it (cold) and as a later one opens it (warm)
            p.close()
        said = [str(w.message) for w in caught]
        assert not [w for w in said if "cache" in w or "extension" in w.lower()], said
        entry = p.cache_entry
        assert entry is not None and entry.is_file() and entry.parent == Path(name), (attempt, entry)
        assert tmp_path / entry in list((tmp_path / name).iterdir())
    r = run(["--cache-dir", name, "cache", "info"])
    assert r.exit_code == 0 and entry.stem in r.stdout and "1 entries" in r.stderr, r.output  # one row per entry


def test_export_named_like_a_url_is_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("md:foo", "md:", "motherduck:x"):
        craft(tmp_path / name)
        r = run(["--cache-dir", "cache", "kernels", name, "-f", "csv", "--top", "1"])
        assert r.exit_code == 0 and r.stdout.count("\n") == 2, r.output
        assert "warning" not in r.stderr, r.stderr


def assert_sandboxed(p) -> None:
    """The profile's sql sandbox reaches no file nor URL, and its own connection loads no extension."""
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


def test_sql_sandbox_and_profile_connection_load_no_extension(tmp_path):
    """In memory (cache=False) here, and over a stored entry (the run's, copied: its cold build and a warm open
    are checked in test_cache_dir_named_like_a_url_is_a_directory)."""
    src = fixture("train_small")
    cache = built_cache(tmp_path / "cache", src)
    for p in (nsysql.load(src, cache=False), nsysql.load(src, cache_dir=cache)):
        assert_sandboxed(p)
        p.close()
    assert p.cache_entry is not None and p.cache_entry.parent == cache


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
    p = nsysql.load(sys.argv[1], cache_dir=sys.argv[2])
    d = p.con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]  # (DuckDB opens here)
st = os.lstat(d)
private = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
print(d, private, len(said), sep="\\n")
"""


def spill_dir_used(tmp: Path, src: tuple[Path, Path]) -> tuple[Path, bool, int]:
    """The spill directory DuckDB is given in a fresh process whose temporary directory is `tmp`, whether it is
    private (a directory of this user's, mode 0700, not a link) while the process runs, and how many warnings
    the load and the opening of its DuckDB gave. `src`: the export and a cache directory holding its entry
    (spill_env)."""
    r = subprocess.run(
        [sys.executable, "-c", SPILL_OF, *map(str, src)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    d, ok, warned = r.stdout.split()
    return Path(d), ok == "True", int(warned)


def cli_says(tmp: Path, src: tuple[Path, Path]) -> list[str]:
    """What `nsysql sql` says on stderr with `tmp` as the temporary directory."""
    export, cache = src
    r = subprocess.run(
        [sys.executable, "-m", "nsysql", "--cache-dir", str(cache), "sql", str(export), "SELECT 1 AS one", "-f", "csv"],
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
    """(export, cache directory holding its entry), the temporary directory, and the shared spill directory's name
    in it. The entry is the one a first load builds (conftest.built_cache): DuckDB gets its spill directory as
    it opens, whatever it opens (the profile's connection over the entry here, an entry being built or the
    tables in memory alike: nsysql.duck.connect), so a process need not build the export's tables to show it."""
    export = fixture("train_small")
    src = (export, built_cache(tmp_path / "cache", export))
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


# --- item 20: Markdown output code-quotes names from the export -------------------------------------------------

KERNEL_NAMES = [
    "![x](http://e/x.png)",
    "<img src=x>",
    "[a](b)",
    "tick`s ``here`` ` ![t](http://e/t.png) `",
    "p|q | ![z](http://e/z.png)",
]
RANGE_NAMES = {"Load data": "x` ![r](http://e/r.png) <img src=r> `y", "Forward Pass": "<b>fw</b>|[l](http://e)"}


@pytest.fixture(scope="module")
def hostile_names(tmp_path_factory):
    """train_small with its five kernels of most GPU time, and two NVTX ranges, renamed to live Markdown/HTML, in a
    file whose name is live Markdown/HTML too (a file name is the user's, but may come with the export)."""
    path = tmp_path_factory.mktemp("md") / "<img src=f>[n](x).sqlite"
    shutil.copy(fixture("train_small"), path)
    con = sqlite3.connect(path)
    ids = [
        r[0]
        for r in con.execute(
            "SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY sum(end - start) DESC LIMIT 5"
        )
    ]
    for i, name in zip(ids, KERNEL_NAMES):
        con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (name, i))
    for old, new in RANGE_NAMES.items():
        con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text = ?", (new, old))
    con.commit()
    con.close()
    return path


def code_spans(line: str) -> tuple[list[str], str]:
    """The code spans of one line of Markdown (their content, as CommonMark reads it) and the text outside them:
    a run of n backticks opens a span that the next run of exactly n closes (no such run: literal backticks); a
    backslash outside a span escapes the next character; one space is stripped from both ends of a span whose
    content begins and ends with one."""
    codes, text, i, start = [], [], 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] != "`":
            i += 1
            continue
        j = i
        while j < len(line) and line[j] == "`":
            j += 1
        n, k, close = j - i, j, None
        while k < len(line):
            if line[k] != "`":
                k += 1
                continue
            m = k
            while m < len(line) and line[m] == "`":
                m += 1
            if m - k == n:
                close = k
                break
            k = m
        if close is None:
            i = j
            continue
        text.append(line[start:i])
        content = line[j:close]
        if len(content) >= 2 and content[0] == content[-1] == " " and content.strip(" "):
            content = content[1:-1]
        codes.append(content)
        i = start = close + n
    text.append(line[start:])
    return codes, "".join(text)


def read_markdown(doc: str) -> tuple[list[str], list[str]]:
    """Every code span of `doc` and every piece of text outside one, table rows split into cells first (GitHub
    splits a row at each `|` not escaped as `\\|`, then reads `\\|` as `|`, in code spans too)."""
    codes, texts = [], []
    for line in doc.splitlines():
        cells = re.split(r"(?<!\\)\|", line) if line.startswith("|") else [line]
        for cell in cells:
            c, t = code_spans(cell)
            codes += [x.replace("\\|", "|") for x in c]
            texts.append(t)
    return codes, texts


LIVE = re.compile(r"!\[|\]\(|<[A-Za-z/!?]|https?:|www\.")  # an image, a link, a tag, an autolinked URL


def assert_inert(doc: str, names: list[str]) -> None:
    codes, texts = read_markdown(doc)
    live = [t for t in texts if LIVE.search(re.sub("</?sub>", "", t))]  # nsysql's own small print is <sub>
    assert not live, live
    for name in names:
        assert name in codes or any(name in c for c in codes), (name, codes)


def test_report_markdown_quotes_names(hostile_names):
    r = run(["report", str(hostile_names), "-f", "markdown"])
    assert r.exit_code == 0, r.output
    assert_inert(r.stdout, KERNEL_NAMES)
    assert_rows_keep_their_columns(r.stdout)
    # a finding quotes the renamed data-loading range; the name (with its backticks) stays inside one span
    assert any(RANGE_NAMES["Load data"] in c for c in read_markdown(r.stdout)[0]), r.stdout
    # `<unnamed>` (PyTorch's anonymous namespace) is shown, not read as an HTML tag
    assert any("<unnamed>" in c for c in read_markdown(r.stdout)[0])


def test_markdown_tables_quote_names(hostile_names):
    for args, names in (
        (["kernels", "--top", "8"], KERNEL_NAMES),
        (["ranges"], list(RANGE_NAMES.values())),
        (["kernels-by-range", "--range", RANGE_NAMES["Forward Pass"]], [RANGE_NAMES["Forward Pass"]]),
        (["summary"], KERNEL_NAMES),
    ):
        r = run([args[0], str(hostile_names), *args[1:], "-f", "markdown"])
        assert r.exit_code == 0, (args, r.output)
        assert_inert(r.stdout, names)
        assert_rows_keep_their_columns(r.stdout)


def assert_rows_keep_their_columns(doc: str) -> None:
    """Every row of every table has as many cells as its header: no `|` in a name splits a cell."""
    tables, last = [], False
    for line in doc.splitlines():
        row = line.startswith("|")
        if row and not last:
            tables.append([])
        if row:
            tables[-1].append(len(re.split(r"(?<!\\)\|", line)))
        last = row
    assert tables and all(len(set(t)) == 1 for t in tables), tables


def test_diff_markdown_quotes_names(hostile_names, tmp_path):
    """The diff snippet names both files (headline, per-file notes) and the changed ranges and kernels."""
    base, new = fixture("train_small"), hostile_names
    seeded(base)
    r = run(["report", str(new), "--baseline", str(base), "-f", "markdown"])
    assert r.exit_code == 0, r.output
    assert_inert(r.stdout, [*RANGE_NAMES.values(), new.name])
    assert_rows_keep_their_columns(r.stdout)
    r = run(["diff", str(base), str(new), "-f", "markdown"])
    assert r.exit_code == 0, r.output
    assert_inert(r.stdout, list(RANGE_NAMES.values()))
    assert_rows_keep_their_columns(r.stdout)
    # without iterations (no NVTX ranges) the diff compares totals; its lines are labelled by file name
    flat = tmp_path / "<i>flat [f](x).sqlite"
    shutil.copy(hostile_names, flat)
    con = sqlite3.connect(flat)
    con.execute("DELETE FROM NVTX_EVENTS")
    con.commit()
    con.close()
    r = run(["report", str(flat), "--baseline", str(base), "-f", "markdown"])
    assert r.exit_code == 0, r.output
    assert "no iteration-time verdict" in r.stdout and f"{flat.name} GPU 0 busy" in r.stdout, r.stdout
    assert_inert(r.stdout, [flat.name])


def test_code_span_holds_any_backticks():
    """Known answers of CommonMark's rule: the span's content reads back as the name, whatever backticks it holds."""
    from nsysql.render import code

    for name in ["`", "``", "a`b", " `x` ", "`lead", "trail`", "```", " ", "a  b", "x|y"]:
        codes, text = code_spans(code(name))
        assert codes == [name] and text == "", (name, code(name))


# --- item 15: a report of an export whose kernels claim hundreds of devices is bounded ---------------------------

DEVICES = 632


def busiest_devices(path: Path, n: int) -> tuple[list[int], int]:
    """The `n` devices with the most busy time (the union of their kernels' and copies' intervals, from the
    export's rows; ties by device id), and the number of devices."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY 1, 2, 3"
    ).fetchall()
    con.close()
    busy: dict[int, int] = {}
    last: dict[int, tuple[int, int]] = {}
    for dev, start, end in rows:
        s, e = last.get(dev, (None, None))
        if s is not None and start <= e:
            last[dev] = (s, max(e, end))
            continue
        if s is not None:
            busy[dev] = busy.get(dev, 0) + e - s
        last[dev] = (start, end)
    for dev, (s, e) in last.items():
        busy[dev] = busy.get(dev, 0) + e - s
    return sorted(sorted(busy, key=lambda d: (-busy[d], d))[:n]), len(busy)


@pytest.mark.long
def test_report_of_hundreds_of_devices_is_bounded(tmp_path):
    """An export whose kernels claimed 632 device ids made `report` draw a timeline trace of ~1,500 points per
    device: 50 s and 21 MB (train_small's own report: 4 s, 4.7 MB). It draws the 16 busiest and says so."""
    import time

    many = craft(tmp_path / "many.sqlite", f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = rowid % {DEVICES}")
    drawn, devices = busiest_devices(many, 16)
    assert devices == DEVICES
    plain = tmp_path / "plain.html"
    seeded(fixture("train_small"))
    assert run(["report", str(fixture("train_small")), "-o", str(plain)]).exit_code == 0  # the run's entry
    out = tmp_path / "many.html"
    t = time.monotonic()
    r = run(["report", str(many), "-o", str(out)])
    took = time.monotonic() - t
    assert r.exit_code == 0, r.output
    assert took < 25, took
    assert out.stat().st_size < plain.stat().st_size + 2**20, (out.stat().st_size, plain.stat().st_size)
    page = out.read_text()
    shown = sorted(int(d) for d in re.findall(r'"name":"GPU (\d+) busy"', page))
    assert shown == drawn
    assert f"{DEVICES} GPUs ran work; the 16 busiest are drawn" in page and f"the other {DEVICES - 16} left out" in page


# --- item 14: `trace` streams its events --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def startend(tmp_path_factory):
    """train_small with its iteration ranges recorded as start/end ranges (async pairs in the trace) and its
    kernels spread over two devices (two GPU processes); and a cache directory holding its entry, built once for
    the tests here (what they check is the trace written from the tables, not the build)."""
    folder = tmp_path_factory.mktemp("trace")
    path = craft(
        folder / "startend.sqlite",
        "UPDATE NVTX_EVENTS SET eventType = 60, rangeId = rowid WHERE text LIKE 'Batch%'",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = rowid % 2",
    )
    return path, built_cache(folder / "cache", path)


def test_trace_rows_come_in_batches_in_query_order(startend):
    """The trace of a whole profile held every event in memory (~3x the JSON: 2M kernels, 5 GB). The CLI asks
    for lazy tables: read from DuckDB a batch at a time, in the order of the whole query."""

    p = nsysql.load(startend[0], cache_dir=startend[1])
    whole, lazy = p.trace(), p.trace(lazy=True)
    for table in ("gpu_ops", "api_calls", "nvtx_ranges"):
        assert whole[table].height > 7
        assert not hasattr(lazy[table], "height")  # no rows held
        batches = list(lazy[table].batches(7))
        assert {b.height for b in batches[:-1]} == {7} and 1 <= batches[-1].height <= 7
        assert pl.concat(batches).equals(whole[table]), table
    assert whole["nvtx_ranges"].filter(pl.col("style") == "StartEnd").height == 20
    assert whole["gpu_ops"]["device_id"].n_unique() == 2
    p.close()


def test_streamed_trace_is_the_whole_trace_byte_for_byte(startend, tmp_path, monkeypatch):
    """Written seven rows at a time (every track, async pair and device crossing batch boundaries), the file is
    the one written from whole tables."""
    from nsysql import perfetto

    src, cache = startend
    p = nsysql.load(src, cache_dir=cache)
    whole = tmp_path / "whole.json"
    perfetto.write(p.trace(), whole, source=str(p.path))
    p.close()
    monkeypatch.setattr(perfetto, "CHUNK", 7)
    out = tmp_path / "streamed.json"
    r = run(["--cache-dir", str(cache), "trace", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == whole.read_bytes()
    doc = json.loads(out.read_text())
    assert sum(e["ph"] == "b" for e in doc["traceEvents"]) == 20
    assert "679 GPU ops, 2333 CUDA API calls, 120 NVTX ranges" in r.stderr
