"""Hostile input (issue 26): exports crafted from fixtures/train_small with sqlite3, odd names and settings.

Each export is made here, in a temporary directory; every test that reads one asserts that its bytes (sha256) and
mtime are unchanged afterwards. Known answers come from the crafted rows themselves (read back with sqlite3).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import built_cache, fixture, gpu_busy_by_construction, seeded
from conftest import craft as _craft

from nsysql.cli import main

EVIL = "evil\x1b]0;pwned\x07kernel\rX\x9bY\x00Z\u202e"  # OSC title change, CR, C1 CSI, NUL, RTL override
EVIL_SHOWN = "evil\\x1b]0;pwned\\x07kernel\\rX\\x9bY\\x00Z\\u202e"
EVIL_RANGE = "Load\x1b[31mred\r"
HUGE = "K" * 1_000_000
REGEX_BAIT = "a" * 40 + "!"  # Python's backtracking re needs ~2^40 steps to fail `(a+)+$` on it


def run(args, env=None):
    return CliRunner(env=env).invoke(main, args, catch_exceptions=False)


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def craft(path, *statements):
    """conftest.craft, with a fixed mtime: digest() checks that no command changes it."""
    _craft(path, *statements)
    os.utime(path, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    return path


def unconstrained(table):
    """`table` rebuilt without its NOT NULL constraints, rows and rowids kept (so NULLs can be written)."""
    return [
        f"CREATE TABLE _t AS SELECT rowid AS _rid, * FROM {table}",
        f"DROP TABLE {table}",
        f"CREATE TABLE {table} AS SELECT * FROM _t ORDER BY _rid",
        f"ALTER TABLE {table} DROP COLUMN _rid",
        "DROP TABLE _t",
    ]


# session-wide: the long test using it runs first (conftest), the others later, and a module-scoped fixture
# would be made again for them, its copies' entries built cold again
@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    k = sqlite3.connect(fixture("train_small"))
    evil_id = k.execute(
        "SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
    ).fetchone()[0]
    k.close()
    out = {
        "plain": fixture("train_small"),  # read in place, from the run's entry (conftest.seeded)
        "evil": craft(
            d / "evil.sqlite",
            ("UPDATE StringIds SET value = ? WHERE id = ?", (EVIL, evil_id)),
            ("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'Load data'", (EVIL_RANGE,)),
        ),
        "huge": craft(
            d / "huge.sqlite",
            ("UPDATE StringIds SET value = ? WHERE id = ?", (HUGE, evil_id)),
            ("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'Load data'", ("R" * 1_000_000,)),
        ),
        "unnamed": craft(d / "unnamed.sqlite", ("DELETE FROM StringIds WHERE id = ?", (evil_id,))),
        "bait": craft(d / "bait.sqlite", ("UPDATE NVTX_EVENTS SET text = ? WHERE text = 'Load data'", (REGEX_BAIT,))),
    }
    out["evil_id"] = evil_id
    out["source"] = fixture("train_small")  # read in place by test_info_counts_what_was_dropped_and_kept
    seeded(out["plain"])
    before = {name: digest(p) for name, p in out.items() if name != "evil_id"}
    yield out
    for name, p in out.items():
        if name != "evil_id":
            assert digest(p) == before[name], f"{p} changed"


# -- item 5: control characters ------------------------------------------------------------------------------------


def test_control_characters_are_shown_not_sent_to_the_terminal(exports):
    p = str(exports["evil"])
    for fmt in ("table", "markdown"):
        for cmd in (["kernels"], ["ranges"], ["summary"], ["kernels-by-range"]):
            r = run([*cmd, p, "-f", fmt])
            assert r.exit_code == 0, r.output
            assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", r.stdout), (cmd, fmt)
        assert EVIL_SHOWN in run(["kernels", p, "-f", fmt]).stdout
        assert "Load\\x1b[31mred\\r" in run(["ranges", p, "-f", fmt]).stdout
    # CSV and JSON keep the names as they are, quoted as each format quotes
    rows = json.loads(run(["kernels", p, "-f", "json"]).stdout)
    assert EVIL in [r["name"] for r in rows]
    import csv
    import io

    assert EVIL_RANGE in [r["name"] for r in csv.DictReader(io.StringIO(run(["ranges", p, "-f", "csv"]).stdout))]
    # an error quoting the export's names says them the same way, on one line
    r = run(["kernels-by-range", p, "--range", "NoSuchRange"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Load\\x1b[31mred\\r" in r.stderr and "\x1b" not in r.stderr


# -- item 6: size amplification --------------------------------------------------------------------------------------


@pytest.mark.long
def test_a_megabyte_name_does_not_multiply_in_the_report_or_the_terminal(exports, tmp_path):
    sizes = {}
    for name in ("plain", "huge"):
        out = tmp_path / f"{name}.html"
        r = run(["report", str(exports[name]), "-o", str(out)])
        assert r.exit_code == 0, r.output
        sizes[name] = out.stat().st_size
        text = out.read_text()
    assert text.count(HUGE) <= 1 and text.count("R" * 1_000_000) <= 1  # the full name at most once
    # the kernel's name was 60-odd characters: all that may grow is a bounded copy per place it is shown
    assert sizes["huge"] < sizes["plain"] + len(HUGE) // 2, sizes
    for cmd in (["summary"], ["kernels"], ["kernels-by-range"]):
        plain, huge = (run([*cmd, str(exports[n])]) for n in ("plain", "huge"))
        assert huge.exit_code == 0, huge.output
        assert len(huge.stdout) < 2 * len(plain.stdout) + 20_000, cmd
    md = run(["report", str(exports["huge"]), "-f", "markdown"])
    assert md.exit_code == 0 and len(md.stdout) < 50_000


# -- item 7: one line, not a traceback ---------------------------------------------------------------------------------


def one_line(r, *words):
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert all(w in lines[0] for w in words), lines[0]


def test_numbers_beyond_64_bits_are_one_line_or_all_rows(exports):
    p = str(exports["plain"])
    # refused before the export is read: the line names the option, as --top's does
    one_line(run(["gaps", p, "--min", "1" + "0" * 400]), "--min", "longer than any gap")
    one_line(run(["gaps", p, "--min", "1" + "0" * 30 + "ms"]), "--min", "longer than any gap")
    one_line(run(["kernels", p, "--top", "1e26"]), "--top")
    every = run(["kernels", p, "-f", "csv"]).stdout
    assert run(["kernels", p, "--top", "9" * 30, "-f", "csv"]).stdout == every
    assert run(["api", p, "--top", "9" * 30, "-f", "csv"]).stdout == run(["api", p, "-f", "csv"]).stdout
    r = run(["summary", p, "--top", "9" * 30, "-f", "json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)["kernels"]) == len(every.splitlines()) - 1
    one_line(run(["diff", p, p, "--fail-above", "nan"]), "--fail-above")
    one_line(run(["ranks", p, "--workers", "0"]), "--workers")


def test_settings_are_checked_and_clamped(exports):
    p = str(exports["plain"])
    for env, says in (
        ({"NSYSQL_THREADS": "abc"}, "NSYSQL_THREADS"),
        ({"NSYSQL_THREADS": "-2"}, "NSYSQL_THREADS"),
        ({"NSYSQL_MEMORY_LIMIT": "lots"}, "NSYSQL_MEMORY_LIMIT"),
        ({"NSYSQL_READERS": "x"}, "NSYSQL_READERS"),
    ):
        for cache in ([], ["--no-cache"]):  # warm (an entry and answers stored) or cold: said either way
            run(["kernels", p])
            one_line(run([*cache, "kernels", p], env=env), p, says)
    most = 4 * (os.cpu_count() or 1)
    r = run(["--no-cache", "kernels", p, "-f", "csv"], env={"NSYSQL_THREADS": "100000", "NSYSQL_READERS": "100000"})
    assert r.exit_code == 0 and r.stdout == run(["kernels", p, "-f", "csv"]).stdout
    assert f"NSYSQL_THREADS=100000 is more than 4 per CPU of this machine: using {most}" in r.stderr


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
def test_sql_results_of_any_type_in_every_format(exports, fmt):
    p = str(exports["plain"])
    q = (
        "SELECT 'infinity'::DATE AS d, '-infinity'::TIMESTAMP AS t, 'infinity'::TIMESTAMP_NS AS tn, "
        "DATE '2020-01-02' AS ok, MAP{'a': 1} AS m, MAP{1: 'x'} AS m2, 'ab\\x00'::BLOB AS b, "
        "{'x': 'infinity'::DATE} AS s, [MAP{1: '\\xAA'::BLOB}] AS l"
    )
    r = run(["sql", p, q, "-f", fmt])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and "panicked" not in r.output
    if fmt == "json":
        row = json.loads(r.stdout)[0]
        assert (row["d"], row["t"], row["tn"], row["ok"], row["b"]) == (
            "infinity",
            "-infinity",
            "infinity",
            "2020-01-02",
            "ab\\x00",
        )
        assert json.loads(row["m"]) == {"a": 1} and json.loads(row["s"]) == {"x": "infinity"}
        assert json.loads(row["l"]) == [{"1": "\\xAA"}]
    else:
        for text in ("infinity", "-infinity", "2020-01-02", "ab\\x00"):
            assert text in r.stdout


def test_a_stored_answer_of_another_shape_is_a_miss_and_is_rewritten(exports, tmp_path):
    p = str(exports["plain"])
    # the entry as a first load leaves it, copied: the stored answer is under test, not the build
    cache = ["--cache-dir", str(built_cache(tmp_path / "c", exports["plain"]))]
    first = run([*cache, "kernels", p, "-f", "csv"])
    assert first.exit_code == 0
    (index,) = [i for i in (tmp_path / "c").rglob("index.json") if i.parent.name.startswith("kernels_shown-")]
    stored = json.loads(index.read_text())  # the shape the first run wrote
    for shape in (
        "[]",
        "{}",
        "null",
        '"x"',
        '{"sections": 5, "single": true}',
        '{"sections": "ab", "single": false}',
        '{"sections": [], "single": true}',
        '{"sections": ["a", "b"], "single": true}',
    ):
        index.write_text(shape)
        again = run([*cache, "kernels", p, "-f", "csv"])
        assert again.exit_code == 0, (shape, again.output)
        assert again.stdout == first.stdout
        assert json.loads(index.read_text()) == stored  # overwritten


def test_report_on_an_export_whose_strings_lack_a_name(exports, tmp_path):
    p = exports["unnamed"]
    r = run(["report", str(p), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    n = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName = ?", (exports["evil_id"],)
    ).fetchone()[0]
    con.close()
    info = {r["item"]: r["value"] for r in json.loads(run(["info", str(p), "-f", "json"]).stdout)}
    assert info["CUPTI_ACTIVITY_KIND_KERNEL: name id not in StringIds"] == f"{n} rows; kept, with no name (in gpu_ops)"


def test_a_backtracking_regex_is_answered_at_once(exports):
    p = str(exports["bait"])
    r = subprocess.run(
        [sys.executable, "-m", "nsysql", "kernels-by-range", p, "--range", "(a+)+$"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "no NVTX range matches '(a+)+$'" in r.stderr, r.stderr
    import csv
    import io

    found = run(["kernels-by-range", p, "--range", "ward Pass$", "-f", "csv"])  # a regex that finds (RE2)
    assert {row["range"] for row in csv.DictReader(io.StringIO(found.stdout))} == {"Forward Pass", "Backward Pass"}


# -- item 8: data quality --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flawed(tmp_path_factory):
    """train_small with flawed rows written into it; the flaws as made, to compare info with."""
    p = tmp_path_factory.mktemp("flawed") / "flawed.sqlite"
    k, r, n = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
    craft(
        p,
        *unconstrained(k),
        *unconstrained(r),
        *unconstrained(n),
        f"UPDATE {k} SET start = NULL WHERE rowid = 1",
        f'UPDATE {k} SET "end" = NULL WHERE rowid = 2',
        f'UPDATE {k} SET "end" = start - 1000000000 WHERE rowid = 3',  # 1 s backwards: busy went negative
        f"UPDATE {k} SET correlationId = NULL WHERE rowid = 4",
        f"INSERT INTO {k} SELECT * FROM {k} WHERE rowid IN (5, 6, 7)",
        f"UPDATE {r} SET correlationId = NULL WHERE rowid = 1",
        f"UPDATE {r} SET start = NULL WHERE rowid = 2",
        f'UPDATE {r} SET "end" = start - 1000 WHERE rowid = 3',
        f"INSERT INTO {r} SELECT * FROM {r} WHERE rowid IN (4, 5)",
        f"UPDATE {n} SET \"end\" = start - 1000 WHERE rowid = (SELECT min(rowid) FROM {n} WHERE text = 'Load data')",
        f"UPDATE {n} SET \"end\" = NULL WHERE rowid = (SELECT max(rowid) FROM {n} WHERE text = 'Load data')",
    )
    before = digest(p)
    yield p
    assert digest(p) == before


def test_info_counts_what_was_dropped_and_kept(flawed, exports):
    assert "none found" in run(["info", str(exports["source"])]).stdout  # the fixture itself is clean
    rows = {
        r["item"]: r["value"]
        for r in json.loads(run(["info", str(flawed), "-f", "json"]).stdout)
        if r["section"] == "data quality"
    }
    assert rows == {
        "CUPTI_ACTIVITY_KIND_KERNEL: no start or no end": "2 rows; dropped: not an interval of GPU time (in gpu_ops)",
        "CUPTI_ACTIVITY_KIND_KERNEL: end before start": "1 row; dropped: its duration would be negative (in gpu_ops)",
        "CUPTI_ACTIVITY_KIND_KERNEL: no correlationId": "1 row; kept: not tied to the call that launched it, nor to its NVTX ranges (in gpu_ops)",
        "CUPTI_ACTIVITY_KIND_RUNTIME: no start or no end": "1 row; dropped: not an interval of CPU time (in api_calls)",
        "CUPTI_ACTIVITY_KIND_RUNTIME: end before start": "1 row; dropped: its duration would be negative (in api_calls)",
        "CUPTI_ACTIVITY_KIND_RUNTIME: no correlationId": "1 row; kept: no GPU work is tied to it (in api_calls)",
        "NVTX_EVENTS: end before start": "1 row; dropped: its duration would be negative (in nvtx_ranges)",
        "NVTX_EVENTS: range never ended (open when the capture stopped)": "1 row; dropped, as nsys does (in nvtx_ranges)",
        "CUPTI_ACTIVITY_KIND_* (GPU work): exact duplicate rows": "3 rows; kept: counted again in counts and total times, as nsys stats counts them (in gpu_ops)",
        "CUPTI_ACTIVITY_KIND_RUNTIME: exact duplicate rows": "2 rows; kept: counted again in call counts and times, as nsys stats counts them (in api_calls)",
    }


def test_no_figure_goes_negative(flawed):
    import nsysql

    prof = nsysql.load(flawed)
    for table in ("gpu_ops", "api_calls", "nvtx_ranges", "os_calls"):
        assert (
            prof.sql(
                f"SELECT count(*) FILTER (end_ns < start_ns OR start_ns IS NULL OR end_ns IS NULL) FROM {table}"
            ).item()
            == 0
        ), table
    assert prof.sql(
        "SELECT device_id, start_ns, end_ns, busy_before_ns, prev_end_ns FROM gpu_busy ORDER BY device_id, start_ns"
    ).rows() == gpu_busy_by_construction(prof)
    gpus = prof.summary()["gpus"]
    assert (gpus["busy_ns"] >= 0).all() and (gpus["busy_pct_span"] >= 0).all()
    con = sqlite3.connect(f"file:{flawed}?mode=ro", uri=True)
    good = con.execute(
        'SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start IS NOT NULL AND "end" IS NOT NULL '
        'AND "end" >= start'
    ).fetchone()[0]
    con.close()
    assert prof.sql("SELECT count(*) FROM gpu_ops WHERE kind = 'kernel'").item() == good


# -- item 9: names, outputs and directories ---------------------------------------------------------------------------


def test_an_existing_path_is_a_path_whatever_its_name(exports, tmp_path):
    for name in ("run[1].sqlite", "what?.sqlite", "star*.sqlite"):
        p = tmp_path / name
        # a link to the plain export: the name is what is under test, and the entry is plain's (one cold build)
        p.symlink_to(exports["plain"])
        (tmp_path / "run1.sqlite").write_bytes(b"")  # what `run[1]` would match as a glob
        r = run(["summary", str(p)])
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith("== facts ==") and "ranks" not in r.stderr  # one profile, not the cross-rank mode
        k = run(["kernels", str(p), "-f", "csv"])
        assert k.exit_code == 0 and k.stdout == run(["kernels", str(exports["plain"]), "-f", "csv"]).stdout


def test_output_never_overwrites_a_report_or_an_export(exports, tmp_path):
    p = str(exports["plain"])
    zipped = tmp_path / "notes.bin"
    zipped.write_bytes(b"PK\x03\x04" + os.urandom(100))
    stream = tmp_path / "capture.data"
    stream.write_bytes(b"\x00\x01QDSTRM" + os.urandom(100))
    export = tmp_path / "copy.db"
    shutil.copy(exports["plain"], export)
    for target in (tmp_path / "rep.NSYS-REP", tmp_path / "rep.qdrep", tmp_path / "x.Qdstrm", zipped, stream, export):
        before = digest(target) if target.exists() else None
        r = run(["kernels", p, "-o", str(target)])
        one_line(r, str(target), "does not write its output over it")
        assert (digest(target) if target.exists() else None) == before
    ok = tmp_path / "kernels.txt"
    ok.write_text("an earlier output\n")
    assert run(["kernels", p, "-o", str(ok)]).exit_code == 0 and "count" in ok.read_text()


def test_export_replaces_only_its_own_files(exports, tmp_path):
    p = str(exports["plain"])
    d = tmp_path / "tables"
    d.mkdir()
    mine = d / "strings.csv"
    mine.write_text("my own strings\n")
    one_line(run(["export", p, "--to", str(d), "-f", "csv"]), str(d), "strings.csv", "no nsysql export wrote")
    assert mine.read_text() == "my own strings\n"
    fresh = tmp_path / "fresh"
    for fmt in ("csv", "csv", "parquet"):  # again into its own export: replaced
        assert run(["export", p, "--to", str(fresh), "-f", fmt]).exit_code == 0
    assert (fresh / "data_quality.csv").exists() and (fresh / "data_quality.parquet").exists()
