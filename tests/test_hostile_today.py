"""Hostile inputs against the code paths of the backtrace, thread-role, MPI-rank, whole-graph, collectives-by-name
and diff changes: each command answers (exit 0, true output) or refuses in one line on stderr naming the file
(exit 2), never a traceback, a failed query, or a write into the export."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner
from conftest import CUDA_CALLCHAINS, craft, fixture, raw, seeded
from test_ranks_one_file import PID, _named

from nsysql.cli import main

CALLS = "CUPTI_ACTIVITY_KIND_RUNTIME"
# a row nsysql takes for a CUDA backtrace: eventClass one of ENUM_NSYS_EVENT_CLASS's
# TRACE_PROCESS_EVENT_CUDABACKTRACE(_START, _FINISH) codes, a whole number (25_calls.sql)
BACKTRACE = "typeof(eventClass) = 'integer' AND eventClass IN (67, 68, 69)"


def _cli(*args):
    res = CliRunner().invoke(main, list(map(str, args)))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def _relaxed(decl: str, value: str) -> list[str]:
    """Statements that rebuild the runtime table with eventClass declared `decl` and set to `value` (SQL over
    the old row), its other columns as they were."""
    cols = '"start", "end", globalTid, correlationId, nameId, returnValue, callchainId'
    return [
        f'CREATE TABLE rt2 ("start" INTEGER, "end" INTEGER, eventClass {decl}, globalTid INTEGER, '
        "correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER)",
        f"INSERT INTO rt2 (eventClass, {cols}) SELECT {value}, {cols} FROM {CALLS}",
        f"DROP TABLE {CALLS}",
        f"ALTER TABLE rt2 RENAME TO {CALLS}",
    ]


# eventClass values no nsys writes: text, a real between codes (67.5: no backtrace, whatever a cast to a whole
# number makes of it), a blob, a column declared TEXT; each on some rows, the others keep their codes (0 and 1)
HOSTILE_CLASSES = {
    "text": [f"UPDATE {CALLS} SET eventClass = 'CUDABACKTRACE' WHERE rowid % 3 = 0"],
    "real": [f"UPDATE {CALLS} SET eventClass = 67.5 WHERE rowid % 3 = 0"],
    "blob": [f"UPDATE {CALLS} SET eventClass = x'43' WHERE rowid % 2 = 0"],
    "text column": _relaxed("TEXT", "CASE eventClass WHEN 0 THEN 'runtime' ELSE '67' END"),
}


@pytest.mark.parametrize("case", list(HOSTILE_CLASSES))
def test_an_event_class_that_is_no_whole_number_is_no_backtrace(tmp_path, case):
    path = craft(tmp_path / "cls.sqlite", CUDA_CALLCHAINS, *HOSTILE_CLASSES[case])
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    ((calls,),) = raw(path, f"SELECT count(*) FROM {CALLS} WHERE NOT coalesce({BACKTRACE}, 0)")
    ((odd,),) = raw(path, f"SELECT count(*) FROM {CALLS} WHERE typeof(eventClass) <> 'integer'")
    assert odd > 0 and calls == raw(path, f"SELECT count(*) FROM {CALLS}")[0][0]  # no row is a backtrace
    res = _cli("api", "-f", "json", path)
    assert res.exit_code == 0, res.output
    assert sum(r["count"] for r in json.loads(res.stdout)) == calls
    res = _cli("info", "-f", "json", path)
    assert res.exit_code == 0 and "CUDA backtrace" not in res.stdout, res.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_ranks_refuses_in_one_line(tmp_path):
    # no NVTX range: no loop, so no rank has iterations to compare
    path = craft(tmp_path / "no_nvtx.sqlite", "DELETE FROM NVTX_EVENTS")
    for fmt in ([], ["-f", "json"]):
        res = _cli("ranks", *fmt, path)
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and "no rank has iterations" in lines[0], lines


def test_ranks_of_a_good_file_still_says_its_numbering_and_rule():
    seeded(fixture("train_small"))  # the run's entry
    res = _cli("ranks", fixture("train_small"))
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("nsysql: 1 rank;") and lines[1].startswith("nsysql: straggler rule:"), lines


def test_ranks_says_a_rank_two_files_name_alike_is_numbered_by_file_name(tmp_path):
    # two exports whose threads both name `MPI Rank 0` (two jobs' rank 0, or one file copied): the ranks are
    # numbered by sorted file name, and the files table says so, not the thread name as where a number came from
    paths = [craft(tmp_path / f"{n}.sqlite", *_named(PID, PID, "MPI Rank 0")) for n in ("a", "b")]
    assert all(raw(p, "SELECT count(*) FROM StringIds WHERE value = 'MPI Rank 0'") == [(1,)] for p in paths)
    res = _cli("ranks", "-f", "json", *paths)
    assert res.exit_code == 0, res.output
    assert "ranks numbered by sorted file name" in res.stderr.splitlines()[0], res.stderr
    files = json.loads(res.stdout)["files"]
    assert [(f["rank"], f["path"]) for f in files] == [(0, str(paths[0])), (1, str(paths[1]))]
    for f in files:
        assert f["rank_source"].startswith("sorted file name (the file names rank 0, from its thread named"), f


def _whole_graphs(tmp_path, *drop: str):
    """graph_loop as `--cuda-graph-trace=graph` records it (test_graphs_said.whole_graphs_of: one
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per replay, none of its kernels), less the columns `drop`."""
    table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
    return craft(
        tmp_path / "whole.sqlite",
        f"CREATE TABLE {table} (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, "
        "globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL)",
        f"INSERT INTO {table} SELECT min(start), max(end), min(deviceId), min(contextId), NULL, min(streamId), "
        "correlationId, min(globalPid), 1, 1 FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL "
        "GROUP BY correlationId",
        f"DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (SELECT correlationId FROM {table})",
        *(f"ALTER TABLE {table} DROP COLUMN {c}" for c in drop),
        source="graph_loop",
    )


# a GPU table without the column that names its device, or its process: the ops are kept (gpu_ops' device_id or
# pid NULL), and the trace draws them on a track of their own rather than fail
@pytest.mark.parametrize("drop", [("deviceId",), ("globalPid", "streamId")], ids=["no device", "no process"])
def test_trace_draws_graph_launches_whose_device_or_process_is_unnamed(tmp_path, drop):
    path = _whole_graphs(tmp_path, *drop)
    ((launches, gpu_ns),) = raw(path, 'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE')
    assert launches == 30
    out = tmp_path / "t.json"
    res = _cli("trace", "-o", out, path)
    assert res.exit_code == 0, res.output
    events = json.loads(out.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    graphs = [e for e in events if e.get("ph") == "X" and e.get("cat") == "graph"]
    assert len(graphs) == launches and all(e["pid"] is not None and e["tid"] is not None for e in graphs)
    assert round(sum(e["dur"] for e in graphs) * 1000) == gpu_ns


# an export with NVTX ranges but no GPU activity traced: its iterations have no GPU busy or idle time (NULL)
NO_GPU = ["DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL", "DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY"]


def test_diff_of_profiles_without_gpu_activity_compares_their_iterations(tmp_path):
    path = craft(tmp_path / "nogpu.sqlite", *NO_GPU)
    ops = [
        raw(path, f"SELECT count(*) FROM {t}")[0][0]
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
    ]
    assert ops == [0, 0]
    for pair in ((path, path), (fixture("train_small"), path)):
        res = _cli("diff", "-f", "json", *pair)
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        said = {r["item"]: r["value"] for r in out["verdict"]}
        # the 20 `Batch` iterations (19 steady) are there with or without GPU work: their times compare
        assert said["median"].startswith("4.08 -> 4.08 ms"), said
        rows = {r["metric"]: r for r in out["iteration time"]}
        busy = rows["GPU busy in an iteration, mean"]
        assert busy["new"] is None and busy["delta"] is None and busy["significant"] is None, busy
        assert "GPU busy" not in said, said  # no busy share to compare
        # no GPU op recorded: whether its iterations ran kernels cannot be told, so it is not said they ran none
        warned = [r["value"] for r in out["verdict"] if r["item"] == "warning"]
        assert f"{path.name} records no GPU activity at all" in " ".join(warned), warned
        assert not any("runs no kernel" in w for w in warned), warned


# every row of a table in the export left out by the load: every GPU op flawed (its end before its start), or
# every CUDA runtime row a backtrace (no call of its own). The refusal says so, not that nothing was recorded
ALL_LEFT_OUT = {
    "GPU ops flawed": (
        [
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1",
            "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = start - 1",
        ],
        "kernels",
        "SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY)",
        "gpu_ops",
    ),
    "calls all backtraces": (
        [CUDA_CALLCHAINS, f"UPDATE {CALLS} SET eventClass = 67"],
        "api",
        f"SELECT count(*) FROM {CALLS}",
        "api_calls",
    ),
}


@pytest.mark.parametrize("case", list(ALL_LEFT_OUT))
def test_a_table_whose_rows_were_all_left_out_is_not_said_unrecorded(tmp_path, case):
    stmts, cmd, count, table = ALL_LEFT_OUT[case]
    path = craft(tmp_path / "left_out.sqlite", *stmts)
    ((rows,),) = raw(path, count)
    res = _cli(cmd, path)
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.splitlines()
    assert str(path) in line and f"{table} is empty; the export's {rows:,} rows for it were all left out" in line
    assert "recorded" not in line and "without -t cuda" not in line, line


def test_ranks_counts_no_process_for_gpu_ops_whose_process_is_unnamed(tmp_path):
    # the whole-graph launches without globalPid: GPU ops of no named process, beside process 743's own
    path = _whole_graphs(tmp_path, "globalPid")
    pids = raw(path, "SELECT DISTINCT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert pids == [(743,)]
    res = _cli("ranks", path)
    assert res.exit_code == 0, res.output
    first = res.stderr.splitlines()[0]
    assert "processes with GPU work" not in first and "None" not in first, first
