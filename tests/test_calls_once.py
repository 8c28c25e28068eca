"""One row per CUDA API call in every answer: the CUDA backtraces that nsys 2020-2022 wrote with `--cudabacktrace` as
a second row of the call they were taken for (eventClass 67 in CUPTI_ACTIVITY_KIND_RUNTIME, around the call, of its
process, thread and correlation id) are no call (queries/v1/canonical/25_calls.sql). And the role of a DataLoader
worker's thread that launched GPU work (queries/v1/canonical/67_thread_roles.sql)."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import CUDA_CALLCHAINS, PUBLIC, craft, fixture, loaded, raw

import nsysql

SAXPY = PUBLIC / "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
EXGPU = PUBLIC / "extra-p__extrap__ex-gpu.s10.sqlite"
WITH_BACKTRACES = pytest.mark.parametrize("path", [SAXPY, EXGPU], ids=["saxpy", "ex-gpu"])
CALLS = "CUPTI_ACTIVITY_KIND_RUNTIME"
BACKTRACE = "eventClass IN (67, 68, 69)"  # TRACE_PROCESS_EVENT_CUDABACKTRACE(_START, _FINISH): ENUM_NSYS_EVENT_CLASS
SPAN = "SELECT key, value FROM profile_facts WHERE key IN ('span_start_ns', 'span_end_ns') ORDER BY key"


def _public(path):
    if not path.exists():
        pytest.skip("the public exports (../shared) are absent")


@WITH_BACKTRACES
def test_a_kernel_is_launched_by_its_call_not_by_the_backtrace_around_it(path):
    _public(path)
    launch = (
        f'SELECT k.correlationId, r.start, r."end" FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN {CALLS} r '
        "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24) WHERE r.{}"
    )
    calls = raw(path, launch.format("eventClass NOT IN (67, 68, 69)"))
    backtraces = {c: (s, e) for c, s, e in raw(path, launch.format(BACKTRACE))}
    # every kernel's call has a backtrace row of its id that starts before it and ends after it (the row an op
    # took as its launch while both were calls: the outer of two calls of one id)
    assert calls and all(backtraces[c][0] < s and backtraces[c][1] > e for c, s, e in calls)
    p = loaded(str(path))  # the run's entry: the tables under test are as a first load built them
    got = p.sql(
        "SELECT o.correlation_id, l.api_start_ns, l.api_end_ns FROM gpu_ops o JOIN op_launch l USING (op_id) "
        "WHERE o.kind = 'kernel'"
    ).rows()
    assert sorted(got) == sorted(calls)
    durations = [e - s for _, s, e in calls]
    figures = p.launches()
    assert figures["count"].sum() == len(calls)
    assert (figures["api_min_ns"].min(), figures["api_max_ns"].max()) == (min(durations), max(durations))


@WITH_BACKTRACES
def test_backtraces_are_no_calls_and_the_load_says_how_many_it_left_out(path):
    _public(path)
    ((calls,),) = raw(path, f"SELECT count(*) FROM {CALLS} WHERE NOT {BACKTRACE}")
    ((backtraces,),) = raw(path, f"SELECT count(*) FROM {CALLS} WHERE {BACKTRACE}")
    assert backtraces > 0
    p = loaded(str(path))  # the run's entry, with the data_quality rows its build wrote
    assert p.sql("SELECT count(*) FROM api_calls").item() == calls
    assert p.api()["count"].sum() == calls
    said = p.sql(f"SELECT \"rows\" FROM data_quality WHERE source = '{CALLS}' AND problem LIKE 'CUDA backtrace%'")
    assert said.rows() == [(backtraces,)]
    # no id is left shared by several calls: each kernel is tied to its own call, by id alone
    assert not p.sql("SELECT * FROM data_quality WHERE problem LIKE 'correlationId shared%'").height


def _with_backtrace_and_driver_call(tmp_path):
    """train_small with, around its first cudaLaunchKernel call, a backtrace row of it that starts a second before
    anything else and ends a second after (wider than any real one, so the span would show it), and inside the
    call, under its id, the driver call it makes (another name, eventClass 1): a call. Returns the path and the
    call's (rowid, name)."""
    first = (
        f"SELECT r.rowid FROM {CALLS} r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaLaunchKernel%' ORDER BY r.start LIMIT 1"
    )
    ((rowid, name),) = raw(
        fixture("train_small"),
        f"SELECT r.rowid, s.value FROM {CALLS} r JOIN StringIds s ON s.id = r.nameId WHERE r.rowid = ({first})",
    )
    new_name = "INSERT INTO StringIds (id, value) VALUES ((SELECT max(id) + 1 FROM StringIds), ?)"
    row = (
        f'INSERT INTO {CALLS} (start, "end", eventClass, globalTid, correlationId, nameId, returnValue) '
        f"SELECT {{}}, {{}}, {{}}, globalTid, correlationId, (SELECT max(id) FROM StringIds), 0 FROM {CALLS} "
        f"WHERE rowid = {rowid}"
    )
    path = craft(
        tmp_path / "backtrace.sqlite",
        CUDA_CALLCHAINS,
        (new_name, ("cudaLaunchKernel",)),
        row.format(
            "(SELECT min(start) FROM NVTX_EVENTS) - 1000000000", '(SELECT max("end") FROM NVTX_EVENTS) + 1000000000', 67
        ),
        (new_name, ("cuLaunchKernel",)),
        row.format("start + 1", '"end" - 1', 1),
    )
    return path, rowid, name


@pytest.mark.parametrize("lazy", ["0", "1000000"], ids=["span-from-sqlite", "span-from-the-calls-read"])
def test_a_backtrace_row_counts_nowhere_and_a_driver_call_under_the_same_id_counts(tmp_path, monkeypatch, lazy):
    # lazy 0: a cold `kernels` reads no call, and takes the calls' extent from SQLite; else the load reads every
    # table, and the extent is taken from the calls it read. Both must leave the backtrace out
    path, rowid, name = _with_backtrace_and_driver_call(tmp_path)
    monkeypatch.setenv("NSYSQL_LAZY_MIN_MB", lazy)
    base = loaded(str(fixture("train_small")))  # the export it is made from, as the run built it
    span, before = base.sql(SPAN).rows(), dict(base.api().select("name", "count").rows())
    with nsysql.load(path, cache_dir=tmp_path / "cache") as p:
        p.kernels()
        assert p.sql(SPAN).rows() == span
        after = dict(p.api().select("name", "count").rows())
    assert after == {**before, "cuLaunchKernel": before.get("cuLaunchKernel", 0) + 1}


def test_without_an_event_class_every_row_is_a_call(tmp_path):
    path = craft(tmp_path / "no_class.sqlite", f"ALTER TABLE {CALLS} DROP COLUMN eventClass")
    ((rows,),) = raw(path, f"SELECT count(*) FROM {CALLS}")
    with nsysql.load(path, cache=False) as p:
        assert p.sql("SELECT count(*) FROM api_calls").item() == rows


# Thread roles (queries/v1/canonical/67_thread_roles.sql): a PyTorch DataLoader worker process that launches GPU work
# has a main thread (its own, tid = pid, which PyTorch names `pt_data_worker`: the worker's loop runs there), but
# it is the job's `main`, where gaps are read, only where that process owns a GPU.
WORKER = (
    "SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE s.value = 'pt_data_worker' "
    "AND (t.globalTid & 16777215) = ((t.globalTid >> 24) & 16777215) ORDER BY t.globalTid LIMIT 1"
)
FIRST_100 = "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 100"


def _worker_launches(tmp_path, device_of_its_ops: str = "deviceId"):
    """loader_cpu_before with its first 100 kernels launched by a DataLoader worker process's own thread (calls
    and kernels moved to it), on the device `device_of_its_ops` names. Returns the path and the worker's
    (pid, tid)."""
    ((gtid,),) = raw(fixture("loader_cpu_before"), WORKER)
    path = craft(
        tmp_path / "worker_launches.sqlite",
        (f"UPDATE {CALLS} SET globalTid = ? WHERE correlationId IN ({FIRST_100})", (gtid,)),
        (
            f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = ?, deviceId = {device_of_its_ops} "
            f"WHERE correlationId IN ({FIRST_100})",
            (gtid - (gtid & 0xFFFFFF),),
        ),
        source="loader_cpu_before",
    )
    return path, ((gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF)


def _ops_by_process_and_device(path) -> dict[tuple[int, int], int]:
    rows = raw(
        path, "SELECT (globalPid >> 24) & 16777215, deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1, 2"
    )
    return {(p, d): n for p, d, n in rows}


def test_a_data_loader_worker_that_launched_a_share_of_the_gpu_work_is_a_data_loader(tmp_path):
    path, worker = _worker_launches(tmp_path)
    ops = _ops_by_process_and_device(path)
    # by construction: the worker launched 100 kernels on the device where another process launched more
    assert ops[(worker[0], 0)] == 100 and max(n for (p, d), n in ops.items() if d == 0 and p != worker[0]) > 100
    with nsysql.load(path, cache=False) as p:
        roles = dict(((a, b), r) for a, b, r in p.sql("SELECT pid, tid, role FROM thread_roles").rows())
        story = p.cpu(by="cause").filter(pl.col("cause") == "host:train step*").row(0, named=True)
    assert roles[worker] == "data_loader"
    trainer = next(p for (p, d), n in ops.items() if d == 0 and p != worker[0])
    mains = [t for t, r in roles.items() if r == "main"]
    assert mains and all(pid == trainer for pid, _ in mains)  # the main thread of the process that owns the GPU
    # the loop waited for a batch while the workers made it: told so, with the worker among them, not as the main
    # thread of another process
    assert story["data_loader"] and "data-loader worker processes (pt_data_worker)" in story["meanwhile"]
    assert "main thread of another process" not in story["meanwhile"]


def test_a_data_loader_worker_that_owns_a_gpu_keeps_its_main_thread(tmp_path):
    # its GPU's gaps are read on that process's main thread (gaps.py: the process with the most ops of the device)
    path, worker = _worker_launches(tmp_path, device_of_its_ops="1")
    ops = _ops_by_process_and_device(path)
    assert [p for (p, d) in ops if d == 1] == [worker[0]]
    with nsysql.load(path, cache=False) as p:
        roles = dict(((a, b), r) for a, b, r in p.sql("SELECT pid, tid, role FROM thread_roles").rows())
    assert roles[worker] == "main"


def test_a_backtrace_class_without_callchains_is_a_call(tmp_path):
    """nsys writes CUDA backtraces' frames into CUDA_CALLCHAINS: without that table no row is a backtrace, and the
    calls' eventClass is not read (a column of every call): a row of class 67 there counts as a call; beside the
    table it does not."""
    path, _, _ = _with_backtrace_and_driver_call(tmp_path)
    bare = craft(tmp_path / "bare.sqlite", "DROP TABLE CUDA_CALLCHAINS", source=path)
    ((rows,),) = raw(bare, f"SELECT count(*) FROM {CALLS}")
    ((marked,),) = raw(bare, f"SELECT count(*) FROM {CALLS} WHERE {BACKTRACE}")
    assert marked == 1
    for export, calls in ((bare, rows), (path, rows - marked)):
        with nsysql.load(export, cache_dir=tmp_path / "cache") as p:
            assert p.api()["count"].sum() == calls, export
