"""Audit of what `ranks`, `collectives` and `overlap` say over several ranks, against the fixtures' construction
(fixtures/README.md, ddp_pair and ddp_blobs: rank 1 sleeps 30 ms in `data` at steps 2, 7, 12, 17; rank 0 never
sleeps, and its next `data` blocks behind the all-reduce that waited for rank 1) and the exports' raw rows."""

from __future__ import annotations

import json
import shutil
import sqlite3

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, PUBLIC, built_cache, raw, seeded

import nsysql
from nsysql.cli import main

SLEPT = [2, 7, 12, 17]  # rank 1's sleeps, by construction
AFTER = [3, 8, 13, 18]  # rank 0's next steps, long on its CPU clock because it waited for rank 1


def _crafted_ranks(tmp_path, pair: str, statement: str) -> list:
    """Copies of fixture `pair`'s two rank exports in tmp_path, `statement` run on each."""
    files = []
    for r in (0, 1):
        files.append(tmp_path / f"rank{r}.sqlite")
        shutil.copy(FIXTURES / pair / f"rank{r}.sqlite", files[-1])
        with sqlite3.connect(files[-1]) as con:
            con.execute(statement)
    return files


@pytest.mark.parametrize("pair", ["ddp_pair", "ddp_blobs"])
def test_per_iteration_names_the_rank_waited_for_not_the_one_that_waited(pair, tmp_path):
    """The rank that waited inside the all-reduce (rank 0) has the longest CPU step in the steps after rank 1's
    sleeps; the table must not call it the slow one there: the rank the others waited for is rank 1."""
    # here and below: the entries a first load builds, read in this process (workers=1); what is under test is
    # what the answers say, not the cold build (test_cache.py) nor the worker pool (test_ranks.py)
    cache = built_cache(tmp_path / "cache", *sorted((FIXTURES / pair).glob("rank*.sqlite")))
    r = nsysql.load_many([str(FIXTURES / pair / "rank*.sqlite")], cache_dir=cache, workers=1)
    t = r.by_iteration()
    slept = t.filter(pl.col("iteration").is_in(SLEPT))
    after = t.filter(pl.col("iteration").is_in(AFTER))
    assert slept["waited_for_rank"].to_list() == [1] * 4
    assert (slept["others_waited_ns"] > 25e6).all()  # rank 0 sat in the all-reduce about as long as rank 1 slept
    assert after["waited_for_rank"].to_list() == [1] * 4
    # what the longest-step column measures, said as such: rank 0's CPU step after each sleep (its `data` blocked)
    assert after["longest_step_rank"].to_list() == [0] * 4 and (after["longer_by_ns"] > 25e6).all()


def test_per_iteration_table_title_says_what_it_names(tmp_path):
    cache = built_cache(tmp_path / "cache", *sorted((FIXTURES / "ddp_pair").glob("rank*.sqlite")))
    files = str(FIXTURES / "ddp_pair" / "rank*.sqlite")
    res = CliRunner().invoke(main, ["--cache-dir", str(cache), "ranks", "--workers", "1", files, "-f", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert not any("slowest" in k for k in out)
    (key,) = [k for k in out if k.startswith("per iteration")]
    rows = {row["iteration"]: row for row in out[key]}
    assert all(rows[i]["waited_for_rank"] == 1 for i in SLEPT + AFTER)


def test_a_rank_without_collectives_is_never_the_one_waited_for(tmp_path):
    """train_small runs no NCCL kernel (fixtures/README.md): beside a DDP rank it took part in no collective, so
    no iteration can name it the rank the others waited for, though its collective time is the least (zero)."""
    files = [FIXTURES / "ddp_pair" / "rank0.sqlite", FIXTURES / "train_small" / "train_small.sqlite"]
    r = nsysql.load_many([str(f) for f in files], cache_dir=built_cache(tmp_path / "cache", *files), workers=1)
    t = r.by_iteration()
    assert t.height > 0 and (t["min_collective_ns"] == 0).all()
    assert t["waited_for_rank"].is_null().all() and t["others_waited_ns"].is_null().all()


def test_ranks_without_a_loop_say_why_per_file(tmp_path):
    """Two copies of ddp_pair's ranks with their NVTX ranges dropped: no rank has a loop. `ranks` refuses in one
    line that names each file and why it has none, rather than a bare 'no rank has iterations'."""
    files = _crafted_ranks(tmp_path, "ddp_pair", "DELETE FROM NVTX_EVENTS")
    res = CliRunner().invoke(
        main, ["--cache-dir", str(tmp_path / "cache"), "ranks", "--workers", "1", *map(str, files)]
    )
    assert res.exit_code != 0 and "Traceback" not in res.output
    (line,) = res.stderr.splitlines()  # the refusal alone: no numbering or rule of an answer that is not given
    for r, f in enumerate(files):
        assert f"rank {r} ({f}): no NVTX" in line


@pytest.fixture(scope="module")
def without_comm_init(tmp_path_factory):
    """ddp_blobs' rank 0 as a capture that began after NCCL's init: its `ncclComm*` ranges (whose payloads give
    the communicator's rank count) dropped, the collectives' own ranges kept. Made once for the two tests that
    read it, each from a copy of its entry (built_cache): its build once, not once a test."""
    path, n = _blobs_nccl_ranges(tmp_path_factory.mktemp("comm"), "DELETE FROM NVTX_EVENTS", "LIKE 'ncclComm%'")
    assert n == 3  # init, finalize, destroy
    return path


def _blobs_nccl_ranges(tmp_path, statement: str, name_test: str):
    """A copy of ddp_blobs' rank 0 with `statement` (an UPDATE or DELETE of NVTX_EVENTS) run on the ranges of
    NCCL's domain whose name passes `name_test`: the copy's path and the rows it changed."""
    path = tmp_path / "rank0.sqlite"
    shutil.copy(FIXTURES / "ddp_blobs" / "rank0.sqlite", path)
    with sqlite3.connect(path) as con:
        n = con.execute(
            f"{statement} WHERE domainId = (SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND "
            f"text = 'NCCL') AND coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) {name_test}"
        ).rowcount
    return path, n


def test_slow_collectives_judged_without_the_communicator_size(without_comm_init, tmp_path):
    """Without the communicator's size there is no bus bandwidth, but the calls of one kind and size share its
    factor: the four AllReduce calls of 16 MiB that waited ~30 ms for rank 1's sleeps (steps 2, 7, 12, 17) are
    still the slow ones, by algorithm bandwidth, and the finding says which bandwidth it used; never 'none'."""
    blobs = FIXTURES / "ddp_blobs" / "rank0.sqlite"
    p = nsysql.load(str(without_comm_init), cache_dir=built_cache(tmp_path / "cache", blobs, without_comm_init))
    calls = p.collectives(by="call")
    assert calls.filter(pl.col("kind") == "AllReduce")["busbw_gbps"].is_null().all()
    f = p.collective_findings().row(0, named=True)
    assert f["slow_calls"] == 4 and f["extra_ms"] > 100
    assert f["evidence"].startswith("4 of 19 AllReduce calls of 16 MiB") and "algorithm bandwidth" in f["evidence"]
    full = nsysql.load(str(blobs), cache_dir=tmp_path / "cache")
    assert f["extra_ms"] == full.collective_findings().row(0, named=True)["extra_ms"]


def test_group_bytes_unknown_not_zero_without_the_communicator_size(without_comm_init, tmp_path):
    """An all-gather's payload gives the per-rank count: its whole is that times the communicator's ranks. Unknown
    ranks leave the group's bytes unknown (the one AllGather of 8 bytes a rank), never 0."""
    p = nsysql.load(str(without_comm_init), cache_dir=built_cache(tmp_path / "cache", without_comm_init))
    for by in ("size", "kind"):
        ag = p.collectives(by=by).filter(pl.col("kind") == "AllGather")
        assert ag["calls"].to_list() == [1] and ag["bytes"].to_list() == [None]


def test_several_files_error_names_only_the_file_it_is_about(tmp_path):
    """ddp_blobs' rank 0 was exported with payload bytes, ddp_pair's rank 1 without (fixtures' COMMAND.md): the
    refusal names ddp_pair's file alone as the one without them, not both as if each lacked them."""
    blobs, pair = FIXTURES / "ddp_blobs" / "rank0.sqlite", FIXTURES / "ddp_pair" / "rank1.sqlite"
    cache = built_cache(tmp_path / "cache", blobs, pair)
    res = CliRunner().invoke(main, ["--cache-dir", str(cache), "collectives", str(blobs), str(pair)])
    assert res.exit_code == 2
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("nsysql: error:")]
    has, lacks = line.split(" but not in ")
    assert "payload bytes" in lacks and str(pair) in lacks and str(blobs) not in lacks and str(blobs) in has


def test_skew_without_session_start_times_uses_gpu_times(tmp_path):
    """ddp_blobs' ranks with TARGET_INFO_SESSION_START_TIME dropped (as exports of nsys before 2021 lack it): each
    counts from its own session's zero, tens of ms apart. A collective ends together on every rank, so the kernels'
    GPU times still tell who arrived last: rank 1, at the all-reduces of its sleeps (steps 2, 7, 12, 17) by 30 ms
    or more, and the totals agree with the UTC clock's within 1%."""
    files = _crafted_ranks(tmp_path, "ddp_blobs", "DROP TABLE TARGET_INFO_SESSION_START_TIME")
    originals = [FIXTURES / "ddp_blobs" / f"rank{r}.sqlite" for r in (0, 1)]
    built_cache(tmp_path / "cache", *originals)  # the crafted copies are built cold beside them

    def across(paths):
        args = ["--cache-dir", str(tmp_path / "cache"), "collectives", "--by", "rank", "-f", "json", *map(str, paths)]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    got, utc = across(files), across(originals)
    assert {s["clock"] for s in got["skew"]} == {"duration"} and {s["clock"] for s in utc["skew"]} == {"utc"}
    slept = [s for s in got["skew"] if s["iteration"] in SLEPT and s["kind"] == "AllReduce"]
    assert slept and all(s["last_rank"] == 1 for s in slept) and max(s["skew_ns"] for s in slept) >= 30e6
    row = {r["rank"]: r for r in got["collectives"]}[1]
    ref = {r["rank"]: r for r in utc["collectives"]}[1]
    assert row["last_arrivals"] == ref["last_arrivals"]
    assert row["held_others_ns"] == pytest.approx(ref["held_others_ns"], rel=0.01)


def test_per_rank_nccl_ranges_are_those_of_the_steady_iterations(tmp_path):
    """The per-rank row is over the steady-state iterations; its NCCL ranges too, not NCCL's set-up and tear-down
    (ncclCommInitRankConfig alone takes hundreds of ms). By construction DDP all-reduces two gradient buckets a
    step from step 1 on (fixtures/README.md): two ncclAllReduce ranges per steady step, and their time is that of
    the raw NVTX rows of NCCL's domain that start inside those steps."""
    cache = built_cache(tmp_path / "cache", *sorted((FIXTURES / "ddp_pair").glob("rank*.sqlite")))
    r = nsysql.load_many([str(FIXTURES / "ddp_pair" / "rank*.sqlite")], cache_dir=cache, workers=1)
    its = r.iterations()
    for row in r.per_rank().iter_rows(named=True):
        steady = its.filter((pl.col("rank") == row["rank"]) & ~pl.col("warmup"))
        assert row["nccl_ranges"] == 2 * steady.height
        ((n, ns),) = raw(
            FIXTURES / "ddp_pair" / f"rank{row['rank']}.sqlite",
            """WITH st AS (SELECT row_number() OVER (ORDER BY n.start) - 1 AS i, n.start AS s, n."end" AS e
                 FROM NVTX_EVENTS n LEFT JOIN StringIds x ON x.id = n.textId
                 WHERE coalesce(n.text, x.value) = 'step')
               SELECT count(*), sum(n."end" - n.start) FROM NVTX_EVENTS n JOIN st ON n.start >= st.s AND n.start < st.e
               WHERE n.domainId = (SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL')
                 AND n.eventType = 59 AND st.i >= ?""",
            steady["iteration"].min(),
        )
        assert (row["nccl_ranges"], row["nccl_range_ns"]) == (n, ns)


def test_collectives_by_iteration_without_a_loop_says_how_to_name_one(tmp_path):
    """ddp_blobs' rank 0 with its own `step` ranges dropped (NCCL's kept): no loop is found, so no call lies in an
    iteration. The refusal says a loop may be missing, and how to name one (--range), in one line."""
    path = tmp_path / "rank0.sqlite"
    shutil.copy(FIXTURES / "ddp_blobs" / "rank0.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM NVTX_EVENTS WHERE domainId = 0")
    args = ["--cache-dir", str(tmp_path / "cache"), "collectives", "--by", "iteration", str(path)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert str(path) in line and "no loop was found" in line and "--range" in line


def test_calls_without_gpu_time_are_said_unjudged_not_fast(tmp_path):
    """ddp_blobs' rank 0 with each ncclAllReduce range cut to 1 ns, as a call made inside ncclGroupStart/End looks
    (its kernel launched later, outside its range): the 40 all-reduces have no GPU time, so the slow rule cannot
    judge them. It says so rather than a bare 'none', and their groups' GPU time is unknown, not 0."""
    path, n = _blobs_nccl_ranges(tmp_path, 'UPDATE NVTX_EVENTS SET "end" = start + 1', "= 'ncclAllReduce'")
    assert n == 40  # by construction: 40 all-reduces a rank (fixtures/README.md)
    res = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "collectives", str(path)])
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.stdout.splitlines() if x.startswith("slow collectives:")]
    assert "40 of 45 calls launched no kernel" in line and line != "slow collectives: none"
    p = nsysql.load(str(path), cache_dir=tmp_path / "cache")
    assert p.collectives(by="kind").filter(pl.col("kind") == "AllReduce")["gpu_ns"].to_list() == [None]


def test_ranks_of_an_export_with_only_pytorch_operator_ranges_says_why(tmp_path):
    """GindaChen's 2-GPU window (public corpus, INDEX.md): its 16,782 NVTX ranges are all PyTorch's own
    (`aten::...`, `FSDP::pre_forward ...`), no step range, so `ranks` has no loop to compare; it says why, naming the file, in one line."""
    path = PUBLIC / "GindaChen__nsys-ai__h100_2gpu_1s.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present")
    (ops,) = raw(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59")[0]  # aten::, FSDP::, ...
    res = CliRunner().invoke(main, ["--cache-dir", str(built_cache(tmp_path / "cache", path)), "ranks", str(path)])
    assert res.exit_code == 2
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("nsysql: error:")]
    assert f"rank 0 ({path})" in line and f"all {ops:,} push/pop ranges are PyTorch's own operator ranges" in line


def test_markdown_keeps_the_straggler_sentence_whole():
    """`ranks -f markdown` is pasted into PRs: its straggler sentence was cut at 100 characters with `…`, as names
    are. Prose columns are whole, as in the table format: the same sentence as the JSON answer's."""
    files = [str(FIXTURES / "ddp_pair" / f"rank{r}.sqlite") for r in (0, 1)]
    seeded(*files)  # the run's entries
    md = CliRunner().invoke(main, ["ranks", "--workers", "1", "-f", "markdown", *files])
    js = CliRunner().invoke(main, ["ranks", "-f", "json", *files])
    assert md.exit_code == 0 and js.exit_code == 0, md.stderr + js.stderr
    sentences = [r["sentence"] for r in json.loads(js.stdout)["stragglers"]]
    assert sentences and all(len(s) > 100 for s in sentences)
    for s in sentences:
        assert f"`{s}`" in md.stdout
