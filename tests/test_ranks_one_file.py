"""One export that holds several ranks (one `nsys profile` over a whole mpirun or torchrun job): what summary says
the other ranks did during the loop's idle gaps, and what `ranks` says of such a file."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import PUBLIC, ROOT, craft, fixture, raw, seeded
from test_audit_processes import PID, TWIN, twin_statements

from nsysql.cli import main


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return craft(tmp_path_factory.mktemp("ranks_one_file") / "two.sqlite", *twin_statements())


def _run(*args):
    res = CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def _summary(path) -> tuple[dict[str, str], dict[str, str]]:
    out = json.loads(_run("summary", "-f", "json", path).stdout)
    return {r["item"]: r["value"] for r in out["facts"]}, {r["finding"]: r["evidence"] for r in out["findings"]}


def test_another_ranks_own_loop_range_is_not_what_the_loop_waited_on(two_ranks):
    # by construction both processes open `Load data` at the same instants: the other rank's range overlaps every
    # idle gap of the loop's GPU, and is that rank's own loop, not something the loop's process waited on
    per_pid = dict(
        raw(
            two_ranks,
            "SELECT (e.globalTid >> 24) & 16777215, count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
            "ON s.id = e.textId WHERE coalesce(e.text, s.value) = 'Load data' GROUP BY 1",
        )
    )
    assert per_pid[PID] == per_pid[TWIN] > 0
    facts, found = _summary(two_ranks)
    assert "host:Load data" in facts["idle"], facts["idle"]
    loop_gpu = 0 if "on GPU 0 (the loop's" in facts["idle"] else 1
    other, other_gpu = (TWIN, 1) if loop_gpu == 0 else (PID, 0)
    said = facts["meanwhile"]
    # the other rank's range is said apart, with its GPU, never as the work the gaps waited on
    assert f"`Load data` (NVTX range) ran in process {other}" in said, said
    assert f"in a process that drives a GPU of its own (GPU {other_gpu}: another rank" in said, said
    assert "nothing in this export shows that the idle GPU's process waited on it" in said, said
    assert not said.startswith("during host:Load data: `Load data` (NVTX range) ran in process"), said
    # the data-loader finding names no other rank's range as what happened meanwhile
    loader = found.get("data-loader bound") or found.get("host bound")
    assert loader is not None and f"process {other}" not in loader, found


def test_one_process_summary_says_nothing_of_other_ranks():
    seeded(fixture("train_small"))  # the run's entry
    facts, _ = _summary(fixture("train_small"))
    assert "GPU of its own" not in facts["meanwhile"], facts["meanwhile"]
    assert facts["meanwhile"].startswith("during host:Load data: no other thread or process"), facts["meanwhile"]


def _named(pid: int, tid: int, name: str) -> list[str]:
    """Statements that name the thread `tid` of process `pid` `name` (its only name), as nsys's MPI trace names a
    rank's thread `MPI Rank N`."""
    gtid = (1 << 48) + (pid << 24) + tid  # train_small's host bits (2^48) and nsys's packing
    return [
        f"INSERT INTO StringIds (id, value) SELECT max(id) + 1, '{name}' FROM StringIds",
        f"DELETE FROM ThreadNames WHERE globalTid = {gtid}",
        f"INSERT INTO ThreadNames (nameId, priority, globalTid) SELECT max(id), 0, {gtid} FROM StringIds",
    ]


def _ranks(path, *args):
    res = _run("ranks", *args, path)
    return res.stderr.splitlines()[0], json.loads(_run("ranks", "-f", "json", *args, path).stdout)


def test_ranks_names_the_mpi_rank_of_each_process_of_one_file(tmp_path):
    path = craft(
        tmp_path / "mpi.sqlite", *twin_statements(), *_named(PID, PID, "MPI Rank 0"), *_named(TWIN, TWIN, "MPI Rank 1")
    )
    named = raw(
        path,
        "SELECT (t.globalTid >> 24) & 16777215, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
        "WHERE s.value GLOB 'MPI Rank *'",
    )
    assert sorted(named) == [(PID, "MPI Rank 0"), (TWIN, "MPI Rank 1")]
    line, _ = _ranks(path)
    assert "holds 2 processes with GPU work" in line, line
    assert f"process {PID} (MPI rank 0) on GPU 0" in line and f"process {TWIN} (MPI rank 1) on GPU 1" in line, line


def test_ranks_says_a_file_holds_several_processes_even_where_it_names_a_rank(tmp_path):
    # nsys captures the environment of the process it starts (PROCESS_0): over a whole job, that of mpirun or of
    # an srun task, whose RANK (or SLURM_PROCID) names one rank while the file holds every rank's process
    env = "INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', 'RANK=\"0\"')"
    path = craft(tmp_path / "env.sqlite", *twin_statements(), env)
    assert raw(path, "SELECT count(*) FROM META_DATA_CAPTURE WHERE value = 'RANK=\"0\"'") == [(1,)]
    line, out = _ranks(path)
    assert line.startswith("nsysql: 1 rank; ranks from RANK in each file"), line
    assert f"holds 2 processes with GPU work (process {PID} on GPU 0, process {TWIN} on GPU 1)" in line, line
    assert out["files"][0]["rank"] == 0


def test_ranks_numbers_a_file_of_one_process_by_its_mpi_rank_thread(tmp_path):
    path = craft(tmp_path / "rank3.sqlite", *_named(PID, PID, "MPI Rank 3"))
    line, out = _ranks(path)
    assert out["files"][0]["rank"] == 3, out["files"]
    assert "MPI Rank 3" in out["files"][0]["rank_source"], out["files"]
    assert "processes with GPU work" not in line, line


SAXPY = PUBLIC / "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


@pytest.mark.skipif(not SAXPY.is_file(), reason="../shared public exports absent")
def test_ranks_reads_the_rank_of_a_real_mpi_export_from_its_thread():
    named = raw(
        SAXPY,
        "SELECT DISTINCT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE s.value GLOB 'MPI Rank *'",
    )
    assert named == [("MPI Rank 0",)]
    seeded(SAXPY)  # the run's entry
    _, out = _ranks(SAXPY)
    assert out["files"][0]["rank"] == 0
    assert "MPI Rank 0" in out["files"][0]["rank_source"], out["files"]


def _raw_idle(path, min_ns: int = 1_000_000) -> tuple[int, int]:
    """The idle time in gaps >= min_ns between the GPU ops of every device, summed over the devices, and the sum
    of the devices' active spans (first to last op), counted straight from the export."""
    ops: dict[int, list[tuple[int, int]]] = {}
    have = {r[0] for r in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    for t in ("KERNEL", "MEMCPY", "MEMSET"):
        if f"CUPTI_ACTIVITY_KIND_{t}" not in have:
            continue
        for dev, s, e in raw(path, f"SELECT deviceId, start, [end] FROM CUPTI_ACTIVITY_KIND_{t}"):
            ops.setdefault(dev, []).append((s, e))
    idle = span = 0
    for iv in ops.values():
        iv.sort()
        end = iv[0][1]
        for s, e in iv[1:]:
            idle += s - end if s - end >= min_ns else 0
            end = max(end, e)
        span += end - iv[0][0]
    return idle, span


def test_idle_of_several_gpus_without_a_loop_says_it_is_theirs_together(tmp_path):
    # no NVTX: no loop, so the idle fact counts both processes' GPUs; their idle time together (about twice
    # train_small's) exceeds the profile's span, and the sentence must say whose it is
    path = craft(tmp_path / "noloop.sqlite", *twin_statements(), "DELETE FROM NVTX_EVENTS")
    idle, span = _raw_idle(path)
    facts, _ = _summary(path)
    line = facts["idle"]
    assert line.startswith(f"{idle / 1e6:,.1f} ms in gaps >= 1 ms on 2 GPUs together = "), (line, idle)
    assert f"= {100 * idle / span:.1f}% of devices' active span" in line, (line, idle, span)


@pytest.mark.parametrize("args", [(), ("--range", "Batch")])
def test_ranks_names_the_process_whose_loop_it_reads_in_a_file_of_several(two_ranks, args):
    detected = json.loads(_run("iterations", "-f", "json", *args, two_ranks).stdout)["steady state"][0]["detected"]
    chosen = PID if f"process {PID} (GPU 0)'s alone" in detected else TWIN
    assert f"process {chosen} (GPU" in detected, detected
    line, _ = _ranks(two_ranks, *args)
    assert f"of which it reads process {chosen}'s loop" in line, line


def test_a_file_named_twice_is_one_rank_and_said_to_be(tmp_path, monkeypatch):
    """ddp_pair's rank 0 named as `rank0.sqlite` and `./rank0.sqlite`, and matched again by the glob `rank*.sqlite`
    with rank 1: two ranks, and the first line says which file was named more than once and how often; it said
    "2 ranks" alone, so that a user who named three files could not tell which went missing."""
    pair = ROOT / "fixtures" / "ddp_pair"
    seeded(pair / "rank0.sqlite", pair / "rank1.sqlite")  # the run's entries: copies of a file share its entry
    for name in ("rank0.sqlite", "rank1.sqlite"):
        (tmp_path / name).write_bytes((pair / name).read_bytes())
    monkeypatch.chdir(tmp_path)
    res = _run("ranks", "-f", "json", "rank0.sqlite", "./rank0.sqlite", "rank*.sqlite")
    assert [r["rank"] for r in json.loads(res.stdout)["per rank"]] == [0, 1]
    first = res.stderr.splitlines()[0]
    assert first.startswith("nsysql: 2 ranks; ") and first.endswith(
        "named more than once, read once: rank0.sqlite (3 times)"
    )
