"""What `cpu` says from thread scheduling alone (SCHED_EVENTS without CPU samples), which threads thread_roles
knows, and whose process the summary's findings count: each figure checked against the raw rows of the export
(summed here with sqlite3) or a fixture's own answer."""

from __future__ import annotations

import io
import sqlite3
from collections import Counter

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, loaded, raw

from nsysql.cli import main

FUSER = PUBLIC / "NVIDIA__Fuser__report1.sqlite"
NO_SAMPLES = ("DELETE FROM COMPOSITE_EVENTS", "DELETE FROM SAMPLING_CALLCHAINS")


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _on_cpu(path, by: str = "thread", window: tuple[int, int] | None = None) -> dict[tuple[int, ...], int]:
    """Each thread's (process's) time on a CPU, ns, summed here from the raw SCHED_EVENTS: from a thread's being
    put on a CPU to its next event, where that takes it off (within `window` where given)."""
    rows = raw(
        path,
        "SELECT globalTid, start, isSchedIn FROM SCHED_EVENTS WHERE globalTid IS NOT NULL AND start IS NOT NULL "
        "AND isSchedIn IS NOT NULL ORDER BY globalTid, start, isSchedIn",
    )
    out: Counter = Counter()
    last: dict[int, tuple[int, int]] = {}
    for g, t, into in rows:
        prev = last.get(g)
        if prev and prev[1] and not into:
            a, b = prev[0], t
            if window:
                a, b = max(a, window[0]), min(b, window[1])
            if b > a:
                key = ((g >> 24) & 0xFFFFFF, g & 0xFFFFFF)
                out[key if by == "thread" else key[:1]] += b - a
        last[g] = (t, into)
    return dict(out)


@pytest.fixture(scope="module")
def unsampled(tmp_path_factory):
    """loader_cpu_before (scheduling events and CPU samples) without its CPU samples."""
    return craft(tmp_path_factory.mktemp("sched") / "unsampled.sqlite", *NO_SAMPLES, source="loader_cpu_before")


@pytest.mark.parametrize("by", ["thread", "process"])
def test_time_on_a_cpu_without_samples_is_the_raw_scheduling_sum(unsampled, by):
    res = _cli("cpu", unsampled, "--by", by, "-f", "csv")
    assert res.exit_code == 0, res.output
    got = pl.read_csv(io.StringIO(res.stdout))
    keys = ["pid", "tid"] if by == "thread" else ["pid"]
    assert {tuple(r[:-1]): r[-1] for r in got.select(*keys, "on_cpu_ns").rows()} == _on_cpu(unsampled, by)
    # nothing tells which functions ran: no sample count, share or function is made up
    assert got["samples"].null_count() == got["pct"].null_count() == got["top_function"].null_count() == got.height
    (note,) = res.stderr.strip().splitlines()
    assert "no CPU samples" in note and "scheduling events" in note and "-s process-tree" in note, note


def test_roles_without_samples_are_those_with_them(unsampled):
    # the same threads, so the same roles: the data-loader workers' processes and the training process
    before = _cli("cpu", fixture("loader_cpu_before"), "--by", "process", "-f", "csv")
    after = _cli("cpu", unsampled, "--by", "process", "-f", "csv")
    roles = [dict(pl.read_csv(io.StringIO(r.stdout)).select("pid", "role").rows()) for r in (before, after)]
    assert roles[0] == roles[1] and sorted(set(roles[1].values())) == ["data_loader", "main"]


def test_plain_cpu_without_samples_answers_per_thread_and_says_why(unsampled):
    """`cpu` with no --by answers what the capture allows: per thread from scheduling events, as `--by thread`
    does, with one line saying why it is not per function (no CPU samples), as `info` says it."""
    plain, per_thread = _cli("cpu", unsampled, "-f", "csv"), _cli("cpu", unsampled, "--by", "thread", "-f", "csv")
    assert plain.exit_code == 0, plain.output
    assert plain.stdout == per_thread.stdout
    got = pl.read_csv(io.StringIO(plain.stdout))
    assert {(p, t): n for p, t, n in got.select("pid", "tid", "on_cpu_ns").rows()} == _on_cpu(unsampled)
    (note,) = plain.stderr.strip().splitlines()
    assert "no CPU samples" in note and "per thread, not per function" in note and "-s process-tree" in note, note
    info = pl.read_csv(io.StringIO(_cli("info", unsampled, "-f", "csv").stdout))
    said = info.filter((pl.col("section") == "commands") & (pl.col("item") == "cpu"))["value"][0]
    assert "plain `cpu` answers per thread" in said, said


def test_functions_without_samples_are_refused_naming_what_scheduling_answers(unsampled):
    for args in (["cpu", "--by", "function"], ["cpu", "--by", "module"], ["cpu", "-f", "folded"]):
        res = _cli(args[0], unsampled, *args[1:])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        (line,) = res.stderr.strip().splitlines()
        assert "no CPU samples" in line and "-s process-tree" in line and "--by thread" in line, line


def test_info_says_cpu_applies_per_thread_without_samples(unsampled):
    res = _cli("info", unsampled, "-f", "csv")
    assert res.exit_code == 0, res.output
    rows = pl.read_csv(io.StringIO(res.stdout)).filter((pl.col("section") == "commands") & (pl.col("item") == "cpu"))
    said = rows["value"][0]
    assert said.startswith("yes: per thread and process only, from scheduling events") and "-s process-tree" in said


def test_during_an_iteration_counts_the_scheduled_time_in_its_window(unsampled):
    # iteration 7's window (the train step range of loader_cpu_before's COMMAND.md)
    (a, b) = raw(
        unsampled,
        'SELECT n.start, n."end" FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId '
        "WHERE coalesce(n.text, s.value) = 'train step 7'",
    )[0]
    res = _cli("cpu", unsampled, "--during", "iterations 7:7", "--by", "thread", "-f", "csv")
    assert res.exit_code == 0, res.output
    got = pl.read_csv(io.StringIO(res.stdout))
    assert dict(((p, t), n) for p, t, n in got.select("pid", "tid", "on_cpu_ns").rows()) == _on_cpu(
        unsampled, "thread", (a, b)
    )


@pytest.mark.skipif(not FUSER.exists(), reason="the public exports (../shared) are absent")
def test_a_real_export_scheduled_but_never_sampled_answers_per_thread():
    try:
        assert not raw(FUSER, "SELECT count(*) FROM COMPOSITE_EVENTS")[0][0]
    except sqlite3.OperationalError:  # no such table: not sampled either
        pass
    res = _cli("cpu", FUSER, "--by", "thread", "-f", "csv")
    assert res.exit_code == 0, res.output
    got = pl.read_csv(io.StringIO(res.stdout))
    assert {(p, t): n for p, t, n in got.select("pid", "tid", "on_cpu_ns").rows()} == _on_cpu(FUSER)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """train_small with its GPU work, CUDA calls and NVTX ranges copied into a second process on GPU 1
    (test_audit_processes' copy)."""
    from test_audit_processes import _SHIFT, PID, TWIN, _columns, _twin_copy

    copies = [
        _twin_copy(t, _columns(t), "globalPid", device=True)
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
    ]
    return craft(
        tmp_path_factory.mktemp("procs") / "two.sqlite",
        *copies,
        _twin_copy("CUPTI_ACTIVITY_KIND_RUNTIME", _columns("CUPTI_ACTIVITY_KIND_RUNTIME"), "", ("globalTid",)),
        _twin_copy("NVTX_EVENTS", _columns("NVTX_EVENTS"), "", ("globalTid", "endGlobalTid")),
        f"INSERT INTO PROCESSES (globalPid, pid, name) SELECT globalPid + {_SHIFT}, {TWIN}, name FROM PROCESSES "
        f"WHERE pid = {PID}",
    )


def _findings(path) -> dict[str, str]:
    import json

    res = _cli("summary", "-f", "json", path)
    assert res.exit_code == 0, res.output
    return {r["finding"]: r["evidence"] for r in json.loads(res.stdout)["findings"]}


def test_findings_count_the_loop_gpu_where_another_process_copies_it(two_processes):
    one, two = _findings(fixture("train_small")), _findings(two_processes)
    # the copy's GPU work doubles every whole-profile figure; the loop's GPU holds train_small's own
    page, tc = "pageable host-to-device copies", "matrix math without tensor cores"
    assert one[page].split(" on ")[0] == two[page].split(" on ")[0], two[page]
    assert two[page].split(" on ")[1].startswith("GPU 0, the loop's (the other GPU not counted)"), two[page]
    n = raw(
        fixture("train_small"),
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEM_KIND k ON k.id = m.srcKind "
        "JOIN ENUM_CUDA_MEMCPY_OPER c ON c.id = m.copyKind WHERE k.label = 'Pageable' AND c.label = 'Host-to-Device'",
    )[0][0]
    assert two[page].startswith(f"{n:,} copies, "), two[page]
    said, counted = two[tc].split(", counted on ")  # the share and its kernels, then whose GPU and the advice
    assert one[tc].split(";")[0] == said, two[tc]
    assert counted.startswith("GPU 0, the loop's (the other GPU not counted); "), two[tc]
    # the advice is of the loop's GPU (sm_90), not of the copy's, whose capability the export does not give
    assert "sm_90" in two[tc] and "does not say which GPU" not in two[tc], two[tc]


def _thread_roles(path) -> dict[tuple[int, int], str]:
    import nsysql

    with nsysql.load(path, cache=False) as p:
        return {(pid, tid): role for pid, tid, role in p.sql("SELECT pid, tid, role FROM thread_roles").rows()}


def _raw_callers(path) -> set[tuple[int, int]]:
    return {
        ((g >> 24) & 0xFFFFFF, g & 0xFFFFFF)
        for (g,) in raw(path, "SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid IS NOT NULL")
    }


def test_a_thread_never_named_that_launched_gpu_work_has_a_role(tmp_path):
    # train_small without its thread names (nor samples or scheduling): its two CUDA-calling threads are known
    # from their calls, the main thread (1157, which launched most) as main, autograd's as another launcher
    path = craft(tmp_path / "unnamed.sqlite", "DELETE FROM ThreadNames")
    roles = _thread_roles(path)
    assert _raw_callers(path) <= set(roles), roles
    assert roles[(1157, 1157)] == "main" and roles[(1157, 1194)] == "launcher", roles


@pytest.mark.skipif(not (PUBLIC / "extra-p__extrap__con_kernel.sqlite").exists(), reason="no public exports")
def test_the_main_thread_of_a_windows_export_is_known():
    path = PUBLIC / "extra-p__extrap__con_kernel.sqlite"
    roles = _thread_roles(path)
    (caller,) = _raw_callers(path)  # one thread made every CUDA call; nsys named only its own threads
    assert roles[caller] == "main", roles


def test_transfer_finding_counts_the_loop_gpu_where_another_process_copies_it(two_processes):
    """The transfer-bound finding (at a threshold train_small's copies reach) counts the loop's GPU alone, says
    so, and gives the figures train_small gives on its one GPU."""
    from nsysql.analyses.findings import Thresholds

    limits = Thresholds(host_copy_share=0.1)
    one = loaded(str(fixture("train_small"))).findings(limits)
    two = loaded(str(two_processes)).findings(limits)
    said = [dict(two.select("finding", "evidence").rows())["transfer bound"]]
    alone = dict(one.select("finding", "evidence").rows())["transfer bound"]
    share, rest = alone.removeprefix("copies between host and device memory fill ").split(" of the GPU's busy time")
    assert said == [
        f"copies between host and device memory fill {share} of the busy time of GPU 0, the loop's (the "
        f"other GPU not counted){rest}"
    ]
