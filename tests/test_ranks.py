"""Many ranks: the DDP pair's straggler is named, and the local and Dask engines agree."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest
from conftest import FIXTURES, ROOT, built_cache, fixture, seeded
from polars.testing import assert_frame_equal

import nsysql
from nsysql import many

PAIR = str(FIXTURES / "ddp_pair" / "rank*.sqlite")


def test_ddp_pair_straggler_named_with_cause_and_wait(tmp_path):
    # the entries a first load builds, built once in the run (conftest.built_cache): the loads make the per-rank
    # frames from them (the cold build is tested elsewhere)
    cache = built_cache(tmp_path, *sorted(FIXTURES.glob("ddp_pair/rank*.sqlite")))
    ranks = nsysql.load_many([PAIR], cache_dir=cache)
    assert ranks.numbering.startswith("ranks from RANK in each file")
    assert ranks.files["rank"].to_list() == [0, 1]
    s = ranks.stragglers()
    # by construction rank 1 sleeps 30 ms in `data` at steps 2, 7, 12, 17 (fixtures/README.md)
    assert set(s["rank"]) == {1}
    assert s["iteration"].to_list() == [2, 7, 12, 17]
    assert (s["top_cause"] == "host:data").all() and (s["os_call"] == "clock_nanosleep").all()
    assert (s["waiting_rank"] == 0).all()
    assert (s["wait_ns"] > 20e6).all()  # rank 0 sits inside AllReduce about as long as rank 1 slept
    sentence = ranks.findings()["sentence"][0]
    assert sentence.startswith("rank 1 straggles in iterations 2, 7, 12, 17") and "host:data" in sentence
    per = ranks.per_rank()
    assert per.filter(pl.col("rank") == 0)["collective_pct"][0] > per.filter(pl.col("rank") == 1)["collective_pct"][0]
    assert (per["nccl_ranges"] > 0).all()  # NCCL's own NVTX domain is read
    slow = ranks.by_iteration().filter(pl.col("iteration").is_in([2, 7, 12, 17]))
    assert (slow["waited_for_rank"] == 1).all() and (slow["others_waited_ns"] > 20e6).all()


def test_a_step_within_its_own_noise_names_no_straggler(tmp_path):
    """ddp_pair with rank 1's first all-reduce of step 3 made 2.5 ms longer: rank 0's GPU idled 3.9 ms more than
    usual in step 2 (its `data` copy waits) and rank 1 then spends 2.5 ms more in a collective, yet rank 0's step 2
    is no longer than its usual steps (within a few MADs of its median). Only rank 1, whose four 30 ms sleeps make
    its steps tens of MADs longer, is named; its sentence states what it cost the job."""
    import shutil
    import sqlite3

    for r in (0, 1):
        shutil.copyfile(FIXTURES / "ddp_pair" / f"rank{r}.sqlite", tmp_path / f"rank{r}.sqlite")
    db = sqlite3.connect(tmp_path / "rank1.sqlite")
    ((start, end),) = db.execute(
        'SELECT start, "end" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId '
        "WHERE coalesce(n.text, s.value) = 'step' ORDER BY start LIMIT 1 OFFSET 3"
    ).fetchall()
    n = db.execute(
        """UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "end" + 2500000 WHERE rowid = (
        SELECT k.rowid FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        WHERE s.value LIKE 'ncclDevKernel_AllReduce%' AND r.start >= ? AND r.start < ? ORDER BY k.start LIMIT 1)""",
        (start, end),
    ).rowcount
    db.commit()
    db.close()
    assert n == 1
    # one process (workers=1): the rule reads the per-rank frames, made by the same job in a pool or here (a pool's
    # are checked in test_ddp_pair_straggler_named_with_cause_and_wait)
    ranks = nsysql.load_many([str(tmp_path / "rank*.sqlite")], cache_dir=tmp_path / "cache", workers=1)
    its = ranks.iterations().filter(~pl.col("warmup"))
    r0 = its.filter(pl.col("rank") == 0)
    idle_med, step_med = r0["idle_ns"].median(), r0["wall_ns"].median()
    step2 = r0.filter(pl.col("iteration") == 2).row(0, named=True)
    assert step2["idle_ns"] - idle_med > 3e6  # rank 0 did idle more than usual in step 2...
    r1 = its.filter(pl.col("rank") == 1)
    coll3 = r1.filter(pl.col("iteration") == 3)["collective_ns"][0]
    assert coll3 - r1["collective_ns"].median() > 2.4e6  # ...and rank 1 then spent 2.5 ms more in a collective
    mad = (r0["wall_ns"] - step_med).abs().median()
    assert step2["wall_ns"] - step_med < 5 * mad  # but rank 0's step 2 is within its own noise
    s = ranks.stragglers()
    assert set(s["rank"]) == {1} and s["iteration"].to_list() == [2, 7, 12, 17]
    f = ranks.findings()
    assert f["rank"].to_list() == [1]
    cost = s.group_by("iteration").agg(pl.col("wait_ns").max())["wait_ns"].sum()
    assert f["cost_ns"][0] == int(cost) and f["sentence"][0].startswith(
        f"rank 1 straggles in iterations 2, 7, 12, 17 (costing the job about {cost / 1e6:.1f} ms)"
    )


def test_rank_numbering_falls_back_to_file_names(tmp_path):
    a, b = fixture("loop_before"), fixture("loop_after")
    cache = built_cache(tmp_path / "cache", a, b)  # the entries a first load builds, no frames stored
    ranks = nsysql.load_many([str(b), str(a)], cache_dir=cache, workers=1)  # numbered here, from the frames
    assert ranks.numbering.startswith("ranks numbered by sorted file name")
    files = ranks.files
    assert files.filter(pl.col("rank") == 0)["path"][0].endswith("loop_after.sqlite")


def test_rank_numbering_by_file_name_reads_numbers_in_names_as_numbers(tmp_path):
    """A job's files named r2 and r10 (links to two fixtures, without RANK): rank 0 is r2, rank 1 r10, as the
    names count; by plain string order r10 came first."""
    a, b = fixture("loop_before"), fixture("loop_after")
    r2, r10 = tmp_path / "r2.sqlite", tmp_path / "r10.sqlite"
    r2.symlink_to(a)
    r10.symlink_to(b)
    cache = built_cache(tmp_path / "cache", a, b)
    ranks = nsysql.load_many([str(r10), str(r2)], cache_dir=cache, workers=1)
    assert ranks.numbering.startswith("ranks numbered by sorted file name")
    files = ranks.files.sort("rank")
    assert [p.rsplit("/", 1)[-1] for p in files["path"]] == ["r2.sqlite", "r10.sqlite"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Four ranks made from a real export with per-rank jitter (benchmarks/gen_scaled.py)."""
    d = tmp_path_factory.mktemp("ranks")
    for r in range(4):
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "gen_scaled.py"),
                str(fixture("train_small")),
                str(d / f"rank{r}.sqlite"),
                "--kernels",
                "2000",
                "--jitter",
                "5",
                "--rank",
                str(r),
                "--seed",
                str(r),
            ],
            check=True,
            capture_output=True,
        )
    return d


@pytest.mark.long
def test_local_and_dask_engines_agree(synthetic, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    # a pool of 2 processes, whatever the cores (on 2, load_many's default loads in this process: pool_size)
    local = nsysql.load_many([str(synthetic / "rank*.sqlite")], cache_dir=tmp_path / "local", workers=2)
    assert sorted(local.files["rank"].to_list()) == [0, 1, 2, 3]
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = nsysql.load_many([str(synthetic / "rank*.sqlite")], cache_dir=tmp_path / "dask", client=client)
    assert_frame_equal(local.per_rank(), remote.per_rank(), rel_tol=1e-9)
    assert_frame_equal(local.by_iteration(), remote.by_iteration(), rel_tol=1e-9)
    assert_frame_equal(local.stragglers(), remote.stragglers())
    assert_frame_equal(local.iterations(), remote.iterations())
    # the per-rank loads wrote the cache on the workers, with each rank's frames beside its entry
    assert len(list((tmp_path / "dask").glob("*.duckdb"))) == 4
    assert len(list((tmp_path / "dask").glob("*.info.parquet"))) == 4
    # warm: the cached frames give the same answers
    again = nsysql.load_many([str(synthetic / "rank*.sqlite")], cache_dir=tmp_path / "dask")
    assert_frame_equal(again.per_rank(), remote.per_rank(), rel_tol=1e-9)


def test_ranks_command_and_multi_file_commands():
    """On the run's cache: the ranks' entries as the run built them once (seeded: the idle findings test reads
    them too), and their frames as an earlier command of the run left them, or made here (the pool's cold build,
    on a cache of its own, is test_ddp_pair_straggler_named_with_cause_and_wait's)."""
    from click.testing import CliRunner

    from nsysql.cli import main

    files = [str(FIXTURES / "ddp_pair" / f"rank{i}.sqlite") for i in (0, 1)]
    seeded(*files)
    r = CliRunner()
    res = r.invoke(main, ["ranks", PAIR, "--workers", "1", "-f", "json"])  # in this process: not about the pool
    assert res.exit_code == 0, res.stderr
    assert "ranks from RANK in each file" in res.stderr
    import json

    doc = json.loads(res.stdout)
    assert {k: v.to_dicts() for k, v in nsysql.load_many([PAIR], workers=1).shown().items()} == doc  # the same
    assert doc["stragglers"][0]["rank"] == 1
    assert "iterations 2, 7, 12, 17" in doc["stragglers"][0]["sentence"]
    for cmd in (["kernels", "--top", "3"], ["iterations"], ["gaps", "--by", "cause"]):
        res = r.invoke(main, [cmd[0], *files, *cmd[1:], "-f", "csv"])
        assert res.exit_code == 0, res.stderr
        df = pl.read_csv(res.stdout.encode())
        assert df.columns[0] == "rank" and set(df["rank"]) == {0, 1}
    summ = r.invoke(main, ["summary", *files, "-f", "json"])
    assert summ.exit_code == 0 and "per rank" in json.loads(summ.stdout)


def test_idle_findings_need_idle_time_worth_one():
    """ddp_pair: rank 1 sleeps in `data` (data-loader bound); rank 0 is busy ~90% of its steps and its few ms of
    idle also fall in `data`: not a data-loader finding there."""
    from conftest import loaded

    def found(rank):
        return loaded(str(FIXTURES / "ddp_pair" / f"{rank}.sqlite")).summary()["findings"]["finding"].to_list()

    assert "data-loader bound" in found("rank1")
    assert "data-loader bound" not in found("rank0")


def test_the_pool_is_half_the_cores_and_none_on_two():
    """load_many's default pool (benchmarks/device_ranks.sh, BENCHMARKS.md "Many ranks"): on 2 cores loading the
    exports in turn beats a pool of 2 at every size measured, so it starts none; on 16 cores 8 workers are as fast
    as 16."""
    assert [many.pool_size(c) for c in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 8]
