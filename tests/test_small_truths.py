"""Small sentences that must be true on profiles unlike ours: GPU activity recorded but all left out as flawed,
NVTX ranges without a name, MPI rank numbers no MPI rank can be, a data-loader thread name in the process that
owns the GPU, NVTX without GPU activity. Each on a crafted copy of a small fixture, built once."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import craft, fixture, loaded, raw, seeded
from test_ranks_one_file import PID, _named

import nsysql
from nsysql.cli import main

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


@pytest.fixture(scope="module")
def flawed_gpu(tmp_path_factory):
    """train_small with every kernel and copy ending before it starts: recorded, and all left out."""
    d = tmp_path_factory.mktemp("flawed")
    path = craft(d / "flawed.sqlite", *(f'UPDATE {t} SET "end" = "start" - 1' for t in GPU_TABLES[:2]))
    prof = nsysql.load(path, cache_dir=d / "cache")
    yield path, prof
    prof.close()


def test_gpu_activity_all_left_out_is_not_said_untraced(flawed_gpu):
    path, prof = flawed_gpu
    recorded = sum(raw(path, f'SELECT count(*) FROM {t} WHERE "end" < "start"')[0][0] for t in GPU_TABLES[:2])
    assert recorded > 0
    facts = {k: v for k, _, v in prof.summary()["facts"].iter_rows()}
    said = f"the export's {recorded:,} rows of GPU activity were all left out"
    for key in ("gpus", "step"):
        assert said in facts[key] and "no GPU activity" not in facts[key], facts[key]
        assert "traced" not in facts[key], facts[key]
    cards = {label: (value, detail) for label, value, detail in prof.report()["cards"].iter_rows()}
    value, detail = cards["GPUs"]
    assert value == "none usable" and said in detail, cards["GPUs"]


def test_report_says_why_it_shows_no_idle_time_as_summary_does(flawed_gpu):
    path, prof = flawed_gpu
    facts = {k: v for k, _, v in prof.summary()["facts"].iter_rows()}
    value, _, why = facts["gpus"].partition(": ")
    assert value == "none usable" and why.startswith("the export's "), facts["gpus"]
    notes = dict(prof.report()["notes"].iter_rows())
    # the HTML report's idle section says this note (nsysql.report.html), where it said "no GPU work traced"
    assert notes["idle_why"] == f"Nothing to show: no usable GPU work: {why}.", notes["idle_why"]


def _cli(*args):
    res = CliRunner().invoke(main, list(map(str, args)))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory):
    """train_small with its loop's ranges (`BatchN`) pushed without a message (NULL text) and its data-loading
    ranges (`Load data`) with an empty one."""
    d = tmp_path_factory.mktemp("unnamed")
    path = craft(
        d / "unnamed.sqlite",
        "UPDATE NVTX_EVENTS SET text = NULL WHERE text LIKE 'Batch%'",
        "UPDATE NVTX_EVENTS SET text = '' WHERE text = 'Load data'",
    )
    return path


def test_a_range_without_a_name_is_said_unnamed_not_an_empty_quote(unnamed):
    ((nulls,),) = raw(unnamed, "SELECT count(*) FROM NVTX_EVENTS WHERE text IS NULL AND eventType = 59")
    ((empties,),) = raw(unnamed, "SELECT count(*) FROM NVTX_EVENTS WHERE text = ''")
    assert nulls == 20 and empties == 20  # train_small's 20 `BatchN` and 20 `Load data` ranges (COMMAND.md)
    said = []
    seeded(fixture("train_small"))  # diff's BASE: the run's one build of it
    for args in (("iterations",), ("iterations", "--range", ""), ("summary",), ("diff", fixture("train_small"))):
        res = _cli(*args, unnamed)
        assert res.exit_code == 0, res.output
        said.append(res.output)
    loop, named, summ, diff = said
    # a loop without a name is a guess: passed over, and said so, for the next family that passes the tests
    # (`Copy to device`, the first of the named children of each `BatchN`: a delimiter, one per step)
    assert "range: `Copy to device` repeats 20 times at depth 1" in loop, loop
    assert "passed over before it: (unnamed range) (20 instances at depth 0 on thread 1157" in loop, loop
    assert "--range '' takes them as the loop" in loop, loop
    # ... and taken when named: the 20 NULL-text wrappers at depth 0, the outermost of the 40 without a name
    assert "range: --range '' selects 1 range name (exact match), 20 instances on thread 1157 at depth 0" in named
    assert "(unnamed range) (wrapper)" not in summ and "20 x `Copy to device` (delimiter)" in summ, summ
    assert "a step is in (unnamed range) (+" in summ, summ  # the slow steps' extra time: in `Load data`'s copies
    assert "iterations are `Batch` in train_small.sqlite but `Copy to device` in unnamed.sqlite" in diff, diff
    for out in said:
        assert "``" not in out and "`(unnamed range)`" not in out, out


def test_a_loop_of_ranges_without_a_name_is_not_guessed(tmp_path):
    path = craft(tmp_path / "nameless.sqlite", "UPDATE NVTX_EVENTS SET text = NULL WHERE eventType = 59")
    assert raw(path, "SELECT count(*), count(text) FROM NVTX_EVENTS WHERE eventType = 59") == [(120, 0)]
    res = _cli("iterations", path)
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()  # `BatchN` (20 at depth 0) first, then its 100 children at depth 1
    assert line.startswith(f"nsysql: error: {path}: no repeating loop found: (unnamed range) (20 instances at depth 0")
    assert "its ranges have no name, and a loop is not guessed without one (--range '' takes them" in line, line
    # the children, also without a name, were passed over as it was, not tried and failed
    assert "; 1 other family without a name passed over;" in line and "failed too" not in line, line
    # `--range ''` names the ranges without a name, and only those: on a profile with none, it selects nothing
    seeded(fixture("train_small"))
    res = _cli("iterations", "--range", "", fixture("train_small"))
    assert res.exit_code == 2 and not res.stdout, res.output
    assert res.stderr.strip().endswith(": --range '' selects the NVTX ranges without a name, and the profile has none")
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# the ranges the unnamed fixture leaves without a name, selected by their names on train_small itself
UNNAMED_BY_NAME = r"^(Batch[0-9]+|Load data)$"


def test_a_range_pattern_of_nothing_selects_the_ranges_without_a_name_as_iterations_does(unnamed):
    """`--range ''` selects the ranges without a name in kernels-by-range and gaps, as in iterations: the same
    ranges, so the same kernels and gaps, as a pattern naming them selects in train_small; not every range (read
    before as no --range)."""
    base, prof = loaded(fixture("train_small")), nsysql.load(unnamed)
    try:
        kernels, named = prof.kernels_by_range(range=""), base.kernels_by_range(range=UNNAMED_BY_NAME)
        assert set(kernels["range"]) == {""}, set(kernels["range"])
        assert kernels["count"].sum() == named["count"].sum() == 632  # every kernel runs in a `BatchN` (README.md)
        gaps, named = prof.gaps(range=""), base.gaps(range=UNNAMED_BY_NAME)
        assert gaps.select("start_ns", "end_ns").equals(named.select("start_ns", "end_ns"))
        counted = prof.gaps(range="", by="cause", include_warmup=True)["counted"].unique().to_list()
        assert counted == ["instances of (unnamed range)"], counted
    finally:
        prof.close()


def test_every_range_option_says_what_a_pattern_of_nothing_selects():
    """Every command's --range takes '' as the ranges without a name (resolve_range): its help says so, as each
    command prints it."""
    commands = [n for n, c in main.commands.items() if any("--range" in getattr(p, "opts", ()) for p in c.params)]
    assert {"iterations", "gaps", "kernels-by-range", "gpu-memory", "metrics"} <= set(commands), commands
    for name in commands:
        res = _cli(name, "--help")
        option = re.search(r"--range PATTERN\s+(.*?)\n  -", res.stdout, re.S).group(1)
        assert "'' for the ranges without a name" in " ".join(option.split()), (name, option)


def test_gpu_memory_by_range_of_nothing_is_the_ranges_without_a_name(tmp_path):
    """mem_growth with its `step 0..2` ranges pushed without a message: `gpu-memory --by range --range ''` is
    those three instances, each holding what it held in mem_growth, not every range."""
    path = craft(
        tmp_path / "mem.sqlite",
        "UPDATE NVTX_EVENTS SET text = NULL WHERE text IN ('step 0', 'step 1', 'step 2')",
        source="mem_growth",
    )
    steps = (
        loaded(fixture("mem_growth"))
        .gpu_memory(by="range")
        .filter(pl.col("name").is_in(["step 0", "step 1", "step 2"]))
    )
    with nsysql.load(path, cache_dir=tmp_path / "cache") as prof:
        got = prof.gpu_memory(by="range", range="")
    assert got["name"].to_list() == [""] and got["instances"].to_list() == [3], got
    assert got["peak_bytes"][0] == steps["peak_bytes"].max()
    assert got["growth_total_bytes"][0] == steps["growth_total_bytes"].sum()


# MPI ranks are C ints: nsys's `MPI Rank N` names a rank only for N in 0 .. 2^31-1; beyond, no rank, whatever N's size
@pytest.mark.parametrize(
    "number, rank",
    [("2147483647", 2147483647), ("2147483648", None), ("9223372036854775807", None), ("99999999999999999999", None)],
)
def test_an_mpi_rank_thread_beyond_a_c_int_names_no_rank(tmp_path, number, rank):
    path = craft(tmp_path / "rank.sqlite", *_named(PID, PID, f"MPI Rank {number}"))
    named = raw(path, "SELECT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE s.value GLOB 'MPI*'")
    assert named == [(f"MPI Rank {number}",)]
    f = _ranked(path, rank)
    if rank is not None:
        assert f"MPI Rank {number}" in f["rank_source"], f


def _ranked(path, rank: int | None) -> dict:
    """`ranks`' row of the one file `path`: rank `rank`, or, where None (no rank named), numbered by its name, as
    any file without a rank."""
    res = _cli("ranks", "-f", "json", path)
    assert res.exit_code == 0, res.output
    (f,) = json.loads(res.stdout)["files"]
    if rank is None:
        assert f["rank"] == 0 and f["rank_source"] == "sorted file name", f
    else:
        assert f["rank"] == rank, f
    return f


# ... and so is the RANK of the captured environment (or OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID after it): a
# value beyond a C int names no rank, as if the variable were absent
@pytest.mark.parametrize(
    "env, rank",
    [
        ({"RANK": "2147483647"}, 2147483647),
        ({"RANK": "2147483648"}, None),
        ({"RANK": "99999999999999999999"}, None),
        ({"RANK": "4294967296", "OMPI_COMM_WORLD_RANK": "3"}, 3),
    ],
)
def test_a_rank_in_the_environment_beyond_a_c_int_names_no_rank(tmp_path, env, rank):
    insert = "INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)"
    path = craft(tmp_path / "rank.sqlite", *((insert, (f'{k}="{v}"',)) for k, v in env.items()))
    got = raw(path, "SELECT value FROM META_DATA_CAPTURE WHERE value GLOB '*RANK=*'")
    assert sorted(got) == sorted((f'{k}="{v}"',) for k, v in env.items())  # train_small's own environment has none
    f = _ranked(path, rank)
    if rank is not None:
        assert f["rank_source"] == "process environment (META_DATA_CAPTURE)", f


def test_a_gpu_owning_process_named_pt_data_worker_keeps_its_threads_roles(tmp_path):
    # train_small's one process owns its GPU; its own thread (tid = pid) renamed as PyTorch names a DataLoader
    # worker's, and one of its `python3` threads named as NCCL names its proxy thread
    nccl = 1187
    path = craft(tmp_path / "worker.sqlite", *_named(PID, PID, "pt_data_worker"), *_named(PID, nccl, "NCCL Progress"))
    names = dict(
        raw(
            path,
            "SELECT t.globalTid & 16777215, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
            f"WHERE (t.globalTid >> 24) & 16777215 = {PID}",
        )
    )
    assert names[PID] == "pt_data_worker" and names[nccl] == "NCCL Progress"
    assert "cuda-EvtHandlr" in names.values()

    def expected(tid: int, name: str) -> str:  # 67_thread_roles.sql's rules, for a process that owns a GPU
        if re.match(r"\[NSys|NSys |CUPTI worker|\*[0-9]", name):
            return "profiler"
        if tid == PID:  # the thread that launched every kernel (train_small's one launching thread)
            return "main"
        if name.startswith("pt_autograd"):
            return "autograd"
        return {"NCCL Progress": "nccl", "cuda-EvtHandlr": "cuda_event_handler"}.get(name, "other")

    with nsysql.load(path, cache_dir=tmp_path / "cache") as prof:
        roles = dict(prof.sql(f"SELECT tid, role FROM thread_roles WHERE pid = {PID}").iter_rows())
    assert roles == {tid: expected(tid, name) for tid, name in names.items()}


@pytest.fixture(scope="module")
def no_gpu(tmp_path_factory):
    """train_small without its GPU activity (its CUDA calls and NVTX ranges kept): as an export captured without
    CUPTI's activity tables."""
    d = tmp_path_factory.mktemp("nogpu")
    return craft(d / "nogpu.sqlite", *(f"DROP TABLE IF EXISTS {t}" for t in GPU_TABLES))


# iterations' parts of the wall time on the device, which diff compares
PARTS = ("compute_ns", "exposed_comm_ns", "copy_ns", "idle_ns", "comm_ns", "overlapped_ns")


def test_iterations_without_gpu_activity_have_unknown_gpu_parts(no_gpu):
    have = {t for (t,) in raw(no_gpu, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not have & set(GPU_TABLES)  # no GPU op recorded: whether the GPU computed cannot be told
    seeded(fixture("train_small"))  # the run's cache, which diff below reads too: one build of each export
    with nsysql.load(no_gpu) as prof:
        its, rg = prof.iterations(), prof.ranges()
    # the ranges' GPU figures (nvtx_gpu_proj_sum's) are unknown too, their CPU figures known
    assert rg.height == len(set(raw(no_gpu, "SELECT coalesce(text, '') FROM NVTX_EVENTS WHERE eventType = 59")))
    assert rg["total_ns"].null_count() == 0
    for c in ("gpu_proj_ns", "gpu_time_ns", "gpu_ops"):
        assert rg[c].null_count() == rg.height, (c, rg[c].to_list())
    assert its.height == 20  # train_small's 20 `BatchN` ranges
    for c in PARTS:
        assert its[c].null_count() == its.height, (c, its[c].to_list())
    res = _cli("diff", "-f", "json", fixture("train_small"), no_gpu)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    said = {r["item"]: r["value"] for r in out["verdict"]}
    assert "largest part change" not in said, said  # a part known on one side only does not compare
    rows = {r["metric"]: r for r in out["iteration time"]}
    for metric in ("compute in an iteration, mean", "copy only in an iteration, mean"):
        assert rows[metric]["new"] is None and rows[metric]["delta"] is None, rows[metric]


def test_a_loop_of_ranges_named_by_a_number_alone_is_not_said_unnamed(tmp_path):
    """train_small's `Batch0` ... `Batch19` renamed `0` ... `19`: the family of a name of digits is '' (family_name
    strips the number), yet these ranges have names. The loop is found as before and named by its ranges, where
    summary and iterations called it "(unnamed range)"."""
    path = craft(tmp_path / "numbers.sqlite", "UPDATE NVTX_EVENTS SET text = substr(text, 6) WHERE text GLOB 'Batch*'")
    assert raw(path, "SELECT min(text), count(*) FROM NVTX_EVENTS WHERE text GLOB '[0-9]*'") == [("0", 20)]
    summ, its = _cli("summary", path), _cli("iterations", path)
    assert summ.exit_code == 0 and its.exit_code == 0, summ.output + its.output
    assert "20 x ranges named by a number alone (`0`, ...) (wrapper)" in summ.stdout, summ.stdout
    assert "range: ranges named by a number alone (`0`, ...) repeats 20 times at depth 0" in its.stdout, its.stdout
    for out in (summ.stdout, its.stdout):
        assert "(unnamed range)" not in out, out
