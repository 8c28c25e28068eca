"""Profiles and answers of unusual shape: thousands of columns, of distinct names, of iterations. Each command
answers in time that grows with the rows, never with their square, and in words that hold for the shape."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import ROOT, built_cache, craft, fixture, loaded, raw

import nsysql
from nsysql.cli import main


def _cli(*args, env=None):
    res = CliRunner(env=env).invoke(main, list(map(str, args)))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def test_an_answer_of_thousands_of_columns_renders_in_linear_time(tmp_path):
    """A user's query may return thousands of columns (a pivot): the table fits the terminal by leaving out the
    right-most ones and says which, the Markdown table holds them all; each column is looked at a fixed number of
    times (3,000 of them took 10 s per format when each one cost a pass over all)."""
    src = fixture("train_small")
    cache = built_cache(tmp_path / "cache", src)
    n = 3000
    query = "SELECT " + ", ".join(f"{i} AS c{i}" for i in range(n))
    for fmt in ("table", "markdown"):
        t = time.monotonic()
        res = _cli("--cache-dir", cache, "sql", "-f", fmt, src, query, env={"COLUMNS": "120"})
        took = time.monotonic() - t
        assert res.exit_code == 0, res.output
        assert took < 3, f"{fmt}: {took:.1f} s for {n} columns"
        head = res.output.splitlines()[0]
        if fmt == "markdown":
            assert head.count("|") == n + 1 and f"| c{n - 1} |" in head
        else:
            shown = head.split()
            assert shown == [f"c{i}" for i in range(len(shown))] and 1 < len(shown) < n
            note = res.output.rstrip().splitlines()[-1]
            assert note.startswith(f"(--wide shows {n - len(shown)} more columns, -f csv every value: c{len(shown)}, ")


@pytest.fixture(scope="module")
def anew(tmp_path_factory):
    """train_small with each child range of a step named anew (`Load data 57 ok`: a batch id, a hash; no trailing
    number, so no family joins them), and the cache directory its tests share (one build)."""
    d = tmp_path_factory.mktemp("anew")
    sql = "UPDATE NVTX_EVENTS SET text = text || ' ' || rowid || ' ok' WHERE text NOT LIKE 'Batch%'"
    return craft(d / "anew.sqlite", sql), d / "cache"


def test_child_ranges_named_anew_in_each_step_get_bounded_columns(anew):
    """train_small with each child range of a step named anew (`Load data 57 ok`: a batch id, a hash; no trailing
    number, so no family joins them): 100 names. `iterations` gives the 32 with the most CPU time a column pair
    each and sums the others in other_children_cpu_ns / _gpu_ns (one column pair per range made a table of steps x
    ranges: 2,000 steps took a cold `summary` 53 s), and each step's child time is what it was under the old names.
    The slow steps' extra time, spread over many names, is said to be in the child ranges, not outside them."""
    path, cache = anew
    ((names,),) = raw(path, "SELECT count(DISTINCT text) FROM NVTX_EVENTS WHERE text NOT LIKE 'Batch%'")
    assert names == 100
    before = loaded(str(fixture("train_small"))).iterations()
    with nsysql.load(path, cache_dir=cache) as p:
        its = p.iterations()
        evidence = p.summary()["findings"].filter(pl.col("finding").str.contains("slow iterations"))["evidence"][0]
    cpu = [c for c in its.columns if c.endswith(" cpu_ns")]
    assert len(cpu) == 32 and len([c for c in its.columns if c.endswith(" gpu_ns")]) == 32
    for kind in ("cpu", "gpu"):
        was = before.select(pl.sum_horizontal(pl.col(f"^.* {kind}_ns$"))).to_series()
        now = its.select(pl.sum_horizontal(pl.col(f"^.* {kind}_ns$"), pl.col(f"other_children_{kind}_ns"))).to_series()
        assert now.to_list() == was.to_list() and was.sum() > 0
    # the kept columns are those of the most CPU time: none of the others holds more than the least of them
    least = min(its[c].sum() for c in cpu)
    ((most_left,),) = raw(
        path,
        "SELECT max(d) FROM (SELECT sum(\"end\" - start) AS d FROM NVTX_EVENTS WHERE text NOT LIKE 'Batch%' "
        f"AND text NOT IN ({', '.join('?' * len(cpu))}) GROUP BY text)",
        *[c[: -len(" cpu_ns")] for c in cpu],
    )
    assert most_left <= least
    assert "their extra 21.1 ms a step is in the step's child ranges (+21.0 ms on the CPU), no one name" in evidence
    assert "outside its children" not in evidence


# train_small with a third of its kernels (and their launches) moved to 64 other processes: a whole node's workers
# in one export
KERNELS, CALLS = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
WORKER = "(1 << 48) | ((300000 + correlationId % 64) << 24)"
MOVED = f"SELECT correlationId FROM {KERNELS} WHERE correlationId % 3 = 0"
SIXTY_FOUR_PROCESSES = (
    f"UPDATE {KERNELS} SET globalPid = {WORKER} WHERE correlationId % 3 = 0",
    f"UPDATE {CALLS} SET globalTid = {WORKER} | (300000 + correlationId % 64) WHERE correlationId IN ({MOVED})",
)


def test_sentences_about_an_export_of_many_gpu_processes_name_a_few(tmp_path):
    """The processes the loop leaves out (`iterations`) and those of a file `ranks` reads as one rank are named
    six at a time, with how many in all: 64 of them made a sentence of 2,000 characters (1,000: 30 kB)."""
    path = craft(tmp_path / "procs.sqlite", *SIXTY_FOUR_PROCESSES)
    ((n,),) = raw(path, f"SELECT count(DISTINCT globalPid) FROM {KERNELS}")
    assert n == 65
    cache = tmp_path / "cache"
    res = _cli("--cache-dir", cache, "iterations", path)
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.output.splitlines() if "processes with GPU work" in x]
    assert "the export holds 65 processes with GPU work" in line and ", … (64 in all) are left out" in line
    assert line.count("process 3000") == 6 and len(line) < 1000
    res = _cli("--cache-dir", cache, "ranks", "--workers", "1", path, fixture("train_small"))
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.output.splitlines() if "processes with GPU work" in x]
    assert f"{path} holds 65 processes with GPU work (" in line and ", … (65 in all)), of which" in line
    assert line.count(" on GPU 0") == 6 and len(line) < 1000


def test_kernels_that_differ_past_the_cut_read_apart_in_tables(tmp_path):
    """train_small's optimizer kernels (`multi_tensor_apply_kernel<...>` of six functors) differ only past the 72
    characters a table shows of a name: each row of `kernels` reads as its own kernel, in the table and in
    Markdown, rather than six rows of the same cut name."""
    src = fixture("train_small")
    cache = built_cache(tmp_path / "cache", src)
    ((kernels,),) = raw(
        src,
        "SELECT count(DISTINCT s.value) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName",
    )
    shown = {}
    for fmt in ("table", "markdown"):
        res = _cli("--cache-dir", cache, "kernels", "-f", fmt, "--top", "100", src, env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        rows = res.output.splitlines()[2:]
        names = [r.split("|")[1].strip() if fmt == "markdown" else r[:72].rstrip() for r in rows if r.strip()]
        assert len(names) == kernels, res.output
        assert len(set(names)) == kernels, sorted(n for n in names if names.count(n) > 1)
        shown[fmt] = names
    assert sum("multi_tensor_apply_kernel" in n or "<unname…" in n for n in shown["table"]) >= 6


def test_kernels_without_names_are_labelled_apart_too(tmp_path):
    """Every kernel's name missing from StringIds (and every NVTX range's): a row without a name keeps its label
    (`(no name)`) where names are told apart (the Markdown summary's kernels, the report), and the command answers."""
    path = craft(
        tmp_path / "nameless.sqlite",
        f"UPDATE {KERNELS} SET shortName = 999999, demangledName = 999999, mangledName = NULL",
        "UPDATE NVTX_EVENTS SET text = NULL, textId = NULL",
    )
    cache = tmp_path / "cache"
    for args in (["summary", "-f", "markdown"], ["report", "-f", "markdown"], ["kernels", "-f", "markdown"]):
        res = _cli("--cache-dir", cache, *args, path)
        assert res.exit_code == 0, (args, res.output)


def _scaled(dest, copies: int):
    """train_small's 19-iteration window repeated `copies` times (benchmarks/gen_scaled.py): its every-5th slow
    steps, 4 a copy."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gen_scaled.py"), str(fixture("train_small")), str(dest)]
    subprocess.run([*cmd, "--copies", str(copies), "--kernels", "1"], check=True, capture_output=True)
    return dest


def test_diff_says_the_same_slow_iterations_only_of_the_same_steps(tmp_path):
    """Two loops whose first six outliers are the same but not the rest (3 and 4 copies of train_small's window:
    12 and 16 slow steps): the outliers are said of each, each with how many in all; they were "the same in both",
    as the sentence names only the first six of them."""
    base, new = _scaled(tmp_path / "three.sqlite", 3), _scaled(tmp_path / "four.sqlite", 4)
    cache = tmp_path / "cache"
    counts = []
    for path in (base, new):
        with nsysql.load(path, cache_dir=cache) as p:
            its = p.iterations()
        counts.append(its.filter(~pl.col("warmup") & pl.col("outlier")).height)
    assert counts[0] > 6 and counts[1] > counts[0]
    res = _cli("--cache-dir", cache, "diff", "--wide", base, new)
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.output.splitlines() if x.startswith("slow iterations")]
    assert "the same in both" not in line, line
    assert f"three.sqlite: iterations 4, 9, 14, 19, 23, 28, … ({counts[0]} in all) are" in line, line
    assert f"four.sqlite: iterations 4, 9, 14, 19, 23, 28, … ({counts[1]} in all) are" in line, line


def test_idle_causes_spread_over_names_are_said_together(anew):
    """train_small's idle time is its `Load data` sleeps; with the range named anew in each step (`Load data 57
    ok`) each name is a cause of its own, none holding much. The summary's idle line names the top three and then
    how many other causes hold the rest and how much (counted here from `gaps(by="cause")`): the three alone read
    as if they were the story."""
    path, cache = anew
    with nsysql.load(path, cache_dir=cache) as p:
        causes = p.gaps(by="cause")
        facts = p.summary()["facts"]
    idle = facts.filter(pl.col("key") == "idle")["value"][0]
    others = causes.slice(3)
    assert others["idle_ns"].sum() > causes["idle_ns"][0]  # by construction: no one name holds much
    pct = 100 * others["idle_ns"].sum() / causes["idle_ns"].sum()
    said = f"; {others.height:,} other causes {pct:.0f}% together, none over {others['pct_of_idle'].max():.0f}%"
    assert said in idle, idle
    # where the three named hold most of it, nothing is added
    plain = loaded(str(fixture("train_small"))).summary()["facts"].filter(pl.col("key") == "idle")["value"][0]
    assert "other cause" not in plain


def test_a_long_periodic_outlier_list_says_its_count_and_period_in_one_parenthesis():
    """jitter_before's outliers are every 2nd step from 9 (16 of them, counted here from its iterations): the
    sentence names the first six, then how many in all and the period together, not in two parentheses in a row
    (`… (16 in all) (every 2nd)`)."""
    p = loaded(str(fixture("jitter_before")))
    out = p.iterations().filter(~pl.col("warmup") & pl.col("outlier"))["iteration"].to_list()
    assert len(out) > 6 and {b - a for a, b in zip(out, out[1:])} == {2}
    line = p.summary()["facts"].filter(pl.col("key") == "outliers")["value"][0]
    head = ", ".join(map(str, out[:6]))
    assert line.startswith(f"iterations {head}, … ({len(out)} in all, every 2nd) are "), line


def test_diff_against_a_profile_without_nvtx_says_ranges_were_not_traced(tmp_path):
    """train_small without its NVTX table: the ranges were not traced there, so none of train_small's ranges
    "vanished" (or is "new" the other way round); the diff says so and compares no range."""
    bare = craft(tmp_path / "bare.sqlite", "DROP TABLE NVTX_EVENTS")
    for a, b in ((fixture("train_small"), bare), (bare, fixture("train_small"))):
        res = loaded(str(a)).diff(loaded(str(b)))
        assert res.ranges.height == 0
        warn = res.notes.filter(pl.col("item") == "warning")["value"].to_list()
        assert any(w.startswith("bare.sqlite holds no NVTX range") for w in warn), warn


def test_overlap_without_gpu_activity_says_it_was_not_traced(tmp_path):
    """train_small with its kernels and copies dropped (CUDA API calls alone, as `-t cuda` without GPU activity
    or an NVTX-only capture leaves): no communication kernel is no evidence that none ran, so `overlap` and
    `info` say the GPU work was not recorded, not that there were no communication kernels."""
    bare = craft(
        tmp_path / "bare.sqlite", "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY"
    )
    cache = tmp_path / "cache"
    res = _cli("--cache-dir", cache, "overlap", bare)
    assert res.exit_code != 0
    assert res.output.strip().splitlines() == [
        f"nsysql: error: {bare}: no GPU activity was recorded at all, so whether communication kernels ran cannot "
        "be told (they need `nsys profile -t cuda`)"
    ]
    assert "no communication kernels" not in _cli("--cache-dir", cache, "info", bare).output


def test_a_profile_whose_rows_all_share_one_timestamp_reports_and_diffs(tmp_path):
    """Every row of train_small moved to one instant: each GPU op lasts no time and the device's active span is
    empty. `report` says there is no timeline to draw and `diff` says the GPU had no GPU time (both stopped
    with a traceback: the timeline's empty frame had no start, the busy share of no span is None)."""
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    tables += ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "OSRT_API")
    one = craft(tmp_path / "one.sqlite", *[f'UPDATE {t} SET start = 5000000000, "end" = 5000000000' for t in tables])
    cache = tmp_path / "cache"
    res = _cli("--cache-dir", cache, "report", "-o", tmp_path / "r.html", one)
    assert res.exit_code == 0, res.output
    assert "span no time" in (tmp_path / "r.html").read_text()
    res = _cli("--cache-dir", cache, "diff", fixture("train_small"), one)
    assert res.exit_code == 0, res.output
    gpu_ops = raw(
        one,
        "SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY)",
    )
    said = [line.split("busy", 1)[1].strip() for line in res.output.splitlines() if line.startswith("one.sqlite GPU 0")]
    assert said == [f"no GPU time ({gpu_ops[0][0]} ops of no duration)"]


def test_a_rank_straggling_in_many_iterations_is_said_in_a_sentence(tmp_path):
    """ddp_pair's rank 1 straggles in every 5th step; its loop repeated 3 times (steps numbered, then
    gen_scaled.py) straggles in 13: the straggler sentence names six of them with how many in all, as
    every sentence about many items does (1,900 steps made a sentence of 2,000 characters)."""
    number = (
        "CREATE TEMP TABLE n AS SELECT rowid AS r, row_number() OVER (ORDER BY start) - 1 AS i FROM NVTX_EVENTS "
        "WHERE text = 'step'",
        "UPDATE NVTX_EVENTS SET text = 'step ' || (SELECT i FROM n WHERE n.r = NVTX_EVENTS.rowid) WHERE text = 'step'",
    )
    ranks = []
    for r in (0, 1):
        src = craft(tmp_path / f"n{r}.sqlite", *number, source=ROOT / "fixtures" / "ddp_pair" / f"rank{r}.sqlite")
        cmd = [sys.executable, str(ROOT / "benchmarks" / "gen_scaled.py"), str(src), str(tmp_path / f"rank{r}.sqlite")]
        cmd += ["--copies", "3", "--kernels", "1", "--rank", str(r), "--iter-regex", r"step \d+"]
        subprocess.run(cmd, check=True, capture_output=True)
        ranks.append(tmp_path / f"rank{r}.sqlite")
    res = _cli("--cache-dir", tmp_path / "cache", "ranks", "-f", "json", "--workers", "1", *ranks)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    its = sorted({e["iteration"] for e in out["straggler evidence"] if e["rank"] == 1})
    assert len(its) > 6
    (said,) = [s["sentence"] for s in out["stragglers"] if s["rank"] == 1]
    listed = ", ".join(map(str, its[:6]))
    assert said.startswith(f"rank 1 straggles in iterations {listed}, … ({len(its)} in all) (costing the job"), said


def test_launches_without_the_cuda_calls_that_launched_the_kernels_says_so(tmp_path):
    """train_small without its CUDA API table: 408 kernels ran but no launch call is there to time them from.
    `launches` refuses in one line, as `api` does, naming what the export lacks (it answered "no launches",
    exit 0), and neither says the program may have made no CUDA call: its kernels say it did."""
    bare = craft(tmp_path / "bare.sqlite", "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    cache = tmp_path / "cache"
    for cmd in ("launches", "api"):
        res = _cli("--cache-dir", cache, cmd, bare)
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [
            f"nsysql: error: {bare}: no CUDA API calls: api_calls is empty; the export holds GPU work but not the "
            "CUDA API calls that launched it"
        ]


def test_the_ranks_waiting_on_a_straggler_are_named_six_in_rank_order(tmp_path):
    """ddp_pair's straggling rank 1 first, then its rank 0 seven times (copies: one cache entry), ranked by sorted
    file name: seven ranks wait on rank 0. The sentence names six of them in rank order with how many in all; it
    named all, sorted as text (rank 1, rank 10, rank 2 ... where there are ten)."""
    pair = ROOT / "fixtures" / "ddp_pair"
    shutil.copy(pair / "rank1.sqlite", tmp_path / "r00.sqlite")
    for i in range(1, 8):
        shutil.copy(pair / "rank0.sqlite", tmp_path / f"r{i:02d}.sqlite")
    res = _cli("--cache-dir", tmp_path / "cache", "ranks", "-f", "json", "--workers", "1", tmp_path / "r*.sqlite")
    assert res.exit_code == 0, res.output
    (said,) = [s["sentence"] for s in json.loads(res.stdout)["stragglers"] if s["rank"] == 0]
    assert "; rank 1, rank 2, rank 3, rank 4, rank 5, rank 6, … (7 in all) then spend " in said, said


def test_diff_of_profiles_from_different_gpus_says_so(tmp_path):
    """train_small against itself said to be run on an H100: the same loop, so no significant change, and the
    verdict says the GPUs differ (it did not: a change between GPU models may be the hardware's); against itself
    unchanged, no such line."""
    h100 = craft(tmp_path / "h100.sqlite", "UPDATE TARGET_INFO_GPU SET name = 'NVIDIA H100 80GB HBM3'")
    base = loaded(str(fixture("train_small")))
    notes = dict(base.diff(loaded(str(h100))).notes.iter_rows())
    assert notes["GPUs differ"] == (
        "train_small.sqlite: NVIDIA H200; h100.sqlite: NVIDIA H100 80GB HBM3: a change may be the hardware's, "
        "not the code's"
    )
    assert "GPUs differ" not in dict(base.diff(base).notes.iter_rows())


def test_ranks_whose_loops_differ_in_length_are_said_to(tmp_path):
    """ddp_pair's rank 1 with its last five steps' ranges dropped (a capture cut early): the first line on stderr
    says the loops differ in length, from the shorter to the longer, as the per-rank table counts them; it said
    nothing, though the iterations past the shorter loop compare one rank alone."""
    pair = ROOT / "fixtures" / "ddp_pair"
    cut = (
        "DELETE FROM NVTX_EVENTS WHERE text = 'step' AND start >= "
        "(SELECT start FROM NVTX_EVENTS WHERE text = 'step' ORDER BY start DESC LIMIT 1 OFFSET 4)"
    )
    short = craft(tmp_path / "rank1.sqlite", cut, source=pair / "rank1.sqlite")
    res = _cli("--cache-dir", tmp_path / "cache", "ranks", "-f", "json", "--workers", "1", pair / "rank0.sqlite", short)
    assert res.exit_code == 0, res.output
    n = {r["rank"]: r["iterations"] for r in json.loads(res.stdout)["per rank"]}
    assert n[1] < n[0], n
    assert res.stderr.splitlines()[0].endswith(
        f"; the ranks' loops differ in length, from {n[1]:,} iterations (rank 1) to {n[0]:,} (rank 0): an "
        f"iteration past {n[1]:,} compares fewer ranks"
    ), res.stderr


def test_a_profile_spanning_hours_says_its_long_times_in_seconds(tmp_path):
    """train_small with its last kernel four hours on: the device's active span, whose length is that kernel's end
    less the first op's start, is said in seconds with thousands separated ("of 14,404.9 s"), as every time
    from 100 s on; it said "14404907.0 ms". Times under 100 s stay in ms."""
    shift = 4 * 3600 * 10**9
    long = craft(
        tmp_path / "long.sqlite",
        f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + {shift}, "end" = "end" + {shift} '
        "WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
    )
    ((first, last),) = raw(
        long,
        'SELECT min(s), max(e) FROM (SELECT start AS s, "end" AS e FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL '
        'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY)',
    )
    facts = dict(loaded(str(long)).summary()["facts"].select("item", "value").iter_rows())
    busy = facts["GPU 0 busy (whole profile)"]
    assert f" of {(last - first) / 1e9:,.1f} s)" in busy, busy
    assert re.search(r"included: [0-9.]+ ms of ", busy), busy  # the busy time itself, under 100 s


# loader_cpu_before with every 2nd call-stack frame named anew: a name of 10 kB, an empty name, or a name id that
# StringIds lacks (rowid % 3 picks which), as a JIT or a stripped binary can leave them
_LONG_FRAME = "y" * 10_000
_FRAME_NAMES = (
    "CREATE TEMP TABLE m AS SELECT max(id) AS m FROM StringIds",
    ("INSERT INTO StringIds (id, value) SELECT m + 1, ? FROM m", (_LONG_FRAME,)),
    "INSERT INTO StringIds (id, value) SELECT m + 2, '' FROM m",
    "UPDATE SAMPLING_CALLCHAINS SET symbol = (SELECT m FROM m) + 1 + rowid % 3 WHERE rowid % 2 = 0",
)


@pytest.fixture(scope="module")
def frame_names(tmp_path_factory):
    """The export of _FRAME_NAMES and the cache directory its tests share (one build)."""
    d = tmp_path_factory.mktemp("frames")
    return craft(d / "frames.sqlite", *_FRAME_NAMES, source="loader_cpu_before"), d / "cache"


def test_cpu_names_a_frame_without_a_name_as_one_without_text(frame_names):
    """A leaf frame whose name id StringIds lacks is `?`, as an empty name is: it was a blank cell, a row apart from
    the `?` of its module, and counted among the unresolved addresses in sentences. The `?` rows hold, per module,
    the samples whose leaf frame has no name, counted here from the export."""
    path, cache = frame_names
    want = dict(
        raw(
            path,
            "SELECT m.value, count(*) FROM COMPOSITE_EVENTS e "
            "JOIN SAMPLING_CALLCHAINS c ON c.id = e.id AND c.stackDepth = 0 "
            "LEFT JOIN StringIds s ON s.id = c.symbol JOIN StringIds m ON m.id = c.module "
            "WHERE coalesce(s.value, '') = '' GROUP BY 1",
        )
    )
    res = _cli("--cache-dir", cache, "cpu", "-f", "json", path)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert all(r["function"] for r in rows)
    assert {r["module"]: r["samples"] for r in rows if r["function"] == "?"} == want


def test_sentences_quote_a_frame_of_10_kb_cut_short(frame_names):
    """The gaps' `meanwhile` and the data-loader finding quote a top frame's function cut to 200 characters: the
    10 kB name made each sentence that quoted it 10 kB long (and the table cut the sentence at 1,000 characters,
    before its end). `cpu` gives the name whole."""
    path, cache = frame_names
    res = _cli("--cache-dir", cache, "summary", "-f", "json", path)
    assert res.exit_code == 0, res.output
    said = json.dumps(
        {k: v for k, v in json.loads(res.stdout).items() if k in ("facts", "findings")}, ensure_ascii=False
    )
    assert f"`{'y' * 199}…`" in said and "y" * 200 not in said
    res = _cli("--cache-dir", cache, "cpu", "-f", "json", path)
    assert _LONG_FRAME in {r["function"] for r in json.loads(res.stdout)}


def test_two_rows_of_one_gpu_that_disagree_describe_it_by_neither(tmp_path):
    """TARGET_INFO_GPU with a second row for device 0 naming another GPU (an A100 beside the H200): which one ran
    the work the export does not say, so the device's name, SMs, memory and compute capability are NULL where the
    rows differ, and the tensor-core advice says it does not know the GPU; any_value picked one of them (the
    H200's sm_90 here) and the advice named its tensor cores. Where the rows agree (as TARGET_INFO_GPU and
    TARGET_INFO_CUDA_GPU of one GPU do), a value is kept."""
    two = craft(
        tmp_path / "two.sqlite",
        "INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory, smCount, computeMajor, computeMinor, clockRate) "
        "SELECT vmId, id, 'NVIDIA A100-SXM4-80GB', 85899345920, 108, 8, 0, clockRate FROM TARGET_INFO_GPU",
    )
    prof = nsysql.load(two, cache=False)
    assert prof.sql("SELECT device_id, name, sm_count, memory_bytes, compute_capability FROM devices").rows() == [
        (0, None, None, None, None)
    ]
    said = " ".join(prof.summary()["findings"]["evidence"].to_list())
    assert "does not say which GPU ran them" in said and "sm_90" not in said
    # rows that agree, one of them lacking a value: the value of the other
    same = craft(
        tmp_path / "same.sqlite",
        "INSERT INTO TARGET_INFO_GPU (vmId, id, name, smCount) SELECT vmId, id, name, smCount FROM TARGET_INFO_GPU",
    )
    assert nsysql.load(same, cache=False).sql("SELECT name, compute_capability FROM devices").rows() == [
        ("NVIDIA H200", "9.0")
    ]


def test_a_loop_of_ranges_all_ending_before_they_start_is_not_said_unannotated(tmp_path):
    """train_small with every NVTX push/pop range ending before it starts (a clock gone wrong): the load leaves
    them all out, and `iterations` said the export had no push/pop ranges and to annotate the code with NVTX,
    which it was. It says the ranges were left out as flawed, how many, and where to read why."""
    path = craft(tmp_path / "back.sqlite", 'UPDATE NVTX_EVENTS SET "end" = start - 5000000 WHERE eventType = 59')
    ((n,),) = raw(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59")
    want = (
        f"no NVTX push/pop range is left to find iterations in: the load left out the export's {n:,} flawed NVTX "
        "ranges (`nsysql info` says why, under data quality)"
    )
    res = _cli("--cache-dir", tmp_path / "cache", "iterations", path)
    assert res.exit_code == 2 and res.stderr.strip().splitlines() == [f"nsysql: error: {path}: {want}"], res.output
    res = _cli("--cache-dir", tmp_path / "cache", "info", "-f", "json", path)
    rows = json.loads(res.stdout)
    assert {"section": "commands", "item": "iterations", "value": f"no: {want}"} in rows, rows


def test_a_summary_without_copies_titles_its_memory_section_by_what_it_holds(tmp_path):
    """mem_growth (traced with --cuda-memory-usage, no copy or memset): summary's table titled the section of
    copies and memsets `memory` and said "no memory" of a profile that allocated hundreds of MB on the GPU. It is
    `memory operations` in the table, as the report titles it; -f json keeps the key `memory`."""
    src = fixture("mem_growth")
    ((allocated,),) = raw(src, "SELECT sum(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 0")
    assert allocated > 100e6  # the profile holds GPU memory events
    cache = built_cache(tmp_path / "cache", src)
    text = _cli("--cache-dir", cache, "summary", src).stdout
    assert "== memory operations ==\nno memory operations\n" in text and "no memory\n" not in text
    assert json.loads(_cli("--cache-dir", cache, "summary", "-f", "json", src).stdout)["memory"] == []
