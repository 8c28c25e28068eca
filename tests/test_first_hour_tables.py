"""A new user's first hour, tables that fit a terminal (issue 36): widths, units, counts, folded families,
ranges' GPU columns, schema's wrapped descriptions, a sentence for an empty answer."""

from __future__ import annotations

import csv
import io
from collections import defaultdict

from click.testing import CliRunner
from conftest import fixture, reference_csv

from nsysql.cli import main

SMALL = fixture("train_small")


def run(args, columns: int | None = None):
    env = {"COLUMNS": str(columns)} if columns else {}
    return CliRunner(env=env).invoke(main, [str(a) for a in args])


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_ranges_name_the_projection_and_add_the_gpu_time():
    """`gpu_proj_ns` is nsys's projected span (nvtx_gpu_proj_sum); `gpu_time_ns` is the summed time of the ops
    themselves, for these ranges the kernels nvtx_kern_sum lists under them (nsys's rule: --attribution thread)."""
    got = {r["name"]: r for r in rows(run(["ranges", SMALL, "--attribution", "thread", "-f", "csv"]).stdout)}
    proj = {r["Range"].lstrip(":"): r for r in csv.DictReader(open(reference_csv(SMALL, "nvtx_gpu_proj_sum")))}
    kern, inst = defaultdict(int), defaultdict(int)
    for r in csv.DictReader(open(reference_csv(SMALL, "nvtx_kern_sum"))):
        kern[r["NVTX Range"].lstrip(":")] += int(r["Total Time (ns)"])
        inst[r["NVTX Range"].lstrip(":")] += int(r["Kern Inst"])
    checked = 0
    for name, r in got.items():
        if name in proj:
            assert int(r["gpu_proj_ns"]) == int(proj[name]["Total Proj Time (ns)"]), name
        if name in kern and inst[name] == int(r["gpu_ops"]):  # ranges whose GPU ops are all kernels
            assert int(r["gpu_time_ns"]) == kern[name], name
            checked += 1
    assert checked >= 3 and "gpu_total_ns" not in got["Forward Pass"]


def test_tables_fit_the_terminal_and_say_what_they_left_out():
    """With a terminal of 100 columns ($COLUMNS), no line is longer; the columns left out are named, and --wide
    or -f csv still give them all."""
    for args in (["kernels", SMALL], ["launches", SMALL], ["iterations", SMALL], ["summary", SMALL]):
        r = run(args, columns=100)
        assert r.exit_code == 0, r.output
        long = [line for line in r.stdout.splitlines() if len(line) > 100]
        assert long == [], (args, long[:2])
    r = run(["launches", SMALL], columns=100)
    header = rows(run(["launches", SMALL, "-f", "csv"]).stdout)[0].keys()
    note = r.stdout.splitlines()[-1]
    assert note.startswith("(") and "more columns" in note and "--wide" in note
    shown = r.stdout.splitlines()[0].split()
    assert len(shown) < len(header)
    wide = run(["launches", SMALL, "--wide"], columns=100).stdout.splitlines()[0].split()
    assert len(wide) == len(header) and max(map(len, run(["launches", SMALL, "--wide"]).stdout.splitlines())) > 100


def test_times_in_a_unit_with_the_unit_in_the_header():
    """The table shows kernels' times in µs (their typical magnitude), rounded from the exact ns of -f csv; --unit
    sets the unit in every format, and CSV keeps every digit of the ns."""
    exact = rows(run(["kernels", SMALL, "--top", "3", "-f", "csv"]).stdout)
    table = run(["kernels", SMALL, "--top", "3", "--wide"]).stdout.splitlines()
    head = table[0].split()
    assert "total_us" in head and "total_ns" not in head
    at = head.index("total_us")
    for line, want in zip(table[2:], exact):
        cells = line[line.index("  ") :].split()  # past the kernel's name
        assert cells[at - 1] == f"{int(want['total_ns']) / 1e3:,.1f}"
    ms = rows(run(["kernels", SMALL, "--top", "3", "-f", "csv", "--unit", "ms"]).stdout)
    for got, want in zip(ms, exact):
        assert abs(float(got["total_ms"]) * 1e6 - int(want["total_ns"])) < 1e-3
        assert "total_ns" not in got
    assert "total_ns" in run(["kernels", SMALL, "--top", "1", "-f", "json"]).stdout  # ns unless --unit
    r = run(["kernels", SMALL, "--unit", "minutes"])
    assert r.exit_code == 2 and "--unit" in r.stderr


def test_counts_are_integers():
    """diff's `steady-state iterations` is a count (19 steady steps in train_small: 20, one warm-up)."""
    r = run(["diff", SMALL, SMALL, "--wide"])
    line = next(x for x in r.stdout.splitlines() if x.startswith("steady-state iterations"))
    assert line.split()[3] == "19" and "19.0" not in line, line


def test_an_empty_answer_is_a_sentence():
    r = run(["gaps", SMALL, "--min", "100s"])
    assert r.exit_code == 0 and r.stdout == "no gaps of at least 100s (--min sets the shortest)\n"
    assert "(no rows)" not in run(["sql", SMALL, "SELECT * FROM gpu_ops LIMIT 0"]).stdout


def test_schema_wraps_its_descriptions():
    """In a pipe, schema's descriptions (gpu_ops' devices note runs to 1,400 characters) wrap at 120 characters,
    every word kept: the wrapped text is the description, as -f csv gives it whole."""
    r = run(["schema"])
    assert r.exit_code == 0 and max(len(line) for line in r.stdout.splitlines()) <= 120
    whole = {x["table"]: x["description"] for x in rows(run(["schema", "-f", "csv"]).stdout)}
    assert max(len(d) for d in whole.values()) > 1000
    text = "".join("".join(line[20:].split()) for line in r.stdout.splitlines()[2:])
    for d in whole.values():  # every character, in order (a word longer than the column is broken)
        assert "".join(d.split()) in text


def _raw_batch_names() -> tuple[int, int]:
    """Distinct `Batch<n>` range names in train_small's export and their instances, counted in the export."""
    import sqlite3

    con = sqlite3.connect(f"file:{SMALL}?mode=ro&immutable=1", uri=True)
    try:
        q = (
            "SELECT count(DISTINCT n), count(*) FROM (SELECT coalesce(e.text, s.value) AS n FROM NVTX_EVENTS e"
            " LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL) WHERE n GLOB 'Batch[0-9]*'"
        )
        return con.execute(q).fetchone()
    finally:
        con.close()


def test_ranges_fold_numbered_families_unless_expanded():
    """The table folds Batch0..Batch19 into `Batch*`, its statistics over all their instances (counted in the
    export, and summed from the rows -f csv lists one per name); --expand lists them in the table too."""
    import nsysql

    names, instances = _raw_batch_names()
    assert names == 20
    every = rows(run(["ranges", SMALL, "-f", "csv"]).stdout)
    batches = [r for r in every if r["name"].startswith("Batch")]
    assert len(batches) == names and "Batch*" not in {r["name"] for r in every}
    folded = {r["name"]: r for r in nsysql.load(str(SMALL)).ranges(families=True).iter_rows(named=True)}
    b = folded["Batch*"]
    assert (b["names"], b["count"]) == (names, instances)
    assert b["total_ns"] == sum(int(r["total_ns"]) for r in batches)
    assert b["gpu_proj_ns"] == sum(int(r["gpu_proj_ns"]) for r in batches)
    assert b["min_ns"] == min(int(r["min_ns"]) for r in batches)
    assert b["max_ns"] == max(int(r["max_ns"]) for r in batches)
    assert not any(n.startswith("Batch") and n != "Batch*" for n in folded)
    assert folded["Forward Pass"]["names"] == 1
    table = run(["ranges", SMALL, "--wide"]).stdout.splitlines()
    assert [line.split()[0] for line in table if "Batch" in line] == ["Batch*"]
    head = table[0].split()
    row = next(line.split() for line in table if line.startswith("        Batch*"))
    assert row[head.index("names") - 1] == "20"  # the domain column is empty
    assert sum("Batch" in line for line in run(["ranges", SMALL, "--wide", "--expand"]).stdout.splitlines()) == 20
    summary = run(["summary", SMALL, "--wide"]).stdout
    part = summary[summary.index("== ranges ==") :]
    assert "Batch*" in part and "Batch0 " not in part
    expanded = run(["summary", SMALL, "--wide", "--expand"]).stdout
    assert "Batch*" not in expanded[expanded.index("== ranges ==") :]
