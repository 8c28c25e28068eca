"""One export that holds several ranks (one `nsys profile` over a whole mpirun or torchrun job): what summary says
the other ranks did during the loop's idle gaps, and what `ranks` says of such a file."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import craft, fixture, raw
from test_audit_processes import PID, TWIN, _columns, _twin_copy

from nsysql.cli import main


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """train_small with every GPU op, CUDA call and NVTX range copied into a second process (pid TWIN) on GPU 1:
    two ranks of one job running the same loop at the same time, each in its own `Load data` while its GPU
    idles."""
    path = tmp_path_factory.mktemp("ranks_one_file") / "two.sqlite"
    return craft(
        path,
        _twin_copy("CUPTI_ACTIVITY_KIND_KERNEL", _columns("CUPTI_ACTIVITY_KIND_KERNEL"), "globalPid", device=True),
        _twin_copy("CUPTI_ACTIVITY_KIND_MEMCPY", _columns("CUPTI_ACTIVITY_KIND_MEMCPY"), "globalPid", device=True),
        _twin_copy("CUPTI_ACTIVITY_KIND_RUNTIME", _columns("CUPTI_ACTIVITY_KIND_RUNTIME"), "", ("globalTid",)),
        _twin_copy("NVTX_EVENTS", _columns("NVTX_EVENTS"), "", ("globalTid", "endGlobalTid")),
        f"INSERT INTO PROCESSES (globalPid, pid, name) SELECT globalPid + {(TWIN - PID) << 24}, {TWIN}, name "
        f"FROM PROCESSES WHERE pid = {PID}",
    )


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
    facts, _ = _summary(fixture("train_small"))
    assert "GPU of its own" not in facts["meanwhile"], facts["meanwhile"]
    assert facts["meanwhile"].startswith("during host:Load data: no other thread or process"), facts["meanwhile"]
