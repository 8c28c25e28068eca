"""One export that holds several processes driving GPUs (one `nsys profile` over mpirun or torchrun): what
iterations and ranks say about whose loop they read, and gpu-memory against CUDA_GPU_MEMORY_USAGE_EVENTS."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, raw

from nsysql.cli import main

PID, TWIN = 1157, 2000  # train_small's process, and the pid of its copy
_SHIFT = (TWIN - PID) << 24  # globalPid = 2^48 + pid << 24; globalTid = globalPid + tid
_TID = TWIN - PID  # the copy's threads: tid + 843, so that no thread number is shared


def _twin_copy(table: str, cols: str, pid_col: str, tid_cols: tuple[str, ...] = (), device: bool = False) -> str:
    """INSERT the rows of `table` again as if a second process (pid TWIN, on GPU 1) had made them."""
    names = [c.strip() for c in cols.split(",")]
    sel = []
    for c in names:
        if c == pid_col:
            sel.append(f"{c} + {_SHIFT}")
        elif c in tid_cols:
            sel.append(f"CASE WHEN {c} IS NULL THEN NULL ELSE {c} + {_SHIFT + _TID} END")
        elif device and c == "deviceId":
            sel.append("deviceId + 1")
        else:
            sel.append(c)
    return f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(sel)} FROM {table}"


def _columns(table: str) -> str:
    con = sqlite3.connect(f"file:{fixture('train_small')}?mode=ro", uri=True)
    try:
        return ", ".join(r[1] for r in con.execute(f"PRAGMA table_info({table})"))
    finally:
        con.close()


def twin_statements() -> list[str]:
    """Statements that copy every GPU op, CUDA call and NVTX range of train_small into a second process (pid TWIN)
    on GPU 1: the two processes of one job in one export, running the same loop (`Batch`, 20 instances each) at
    the same time."""
    return [
        _twin_copy("CUPTI_ACTIVITY_KIND_KERNEL", _columns("CUPTI_ACTIVITY_KIND_KERNEL"), "globalPid", device=True),
        _twin_copy("CUPTI_ACTIVITY_KIND_MEMCPY", _columns("CUPTI_ACTIVITY_KIND_MEMCPY"), "globalPid", device=True),
        _twin_copy("CUPTI_ACTIVITY_KIND_RUNTIME", _columns("CUPTI_ACTIVITY_KIND_RUNTIME"), "", ("globalTid",)),
        _twin_copy("NVTX_EVENTS", _columns("NVTX_EVENTS"), "", ("globalTid", "endGlobalTid")),
        f"INSERT INTO PROCESSES (globalPid, pid, name) SELECT globalPid + {_SHIFT}, {TWIN}, name FROM PROCESSES "
        f"WHERE pid = {PID}",
    ]


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """train_small and its twin process (twin_statements)."""
    return craft(tmp_path_factory.mktemp("procs") / "two.sqlite", *twin_statements())


def _raw_gpu_processes(path) -> dict[int, set[int]]:
    """pid -> devices, of the processes whose kernels the export holds, counted straight from it."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out: dict[int, set[int]] = {}
        for gpid, dev in con.execute("SELECT DISTINCT globalPid, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL"):
            out.setdefault((gpid >> 24) & 0xFFFFFF, set()).add(dev)
        return out
    finally:
        con.close()


def _run(*args):
    res = CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def test_iterations_names_the_process_whose_loop_it_reads(two_processes):
    procs = _raw_gpu_processes(two_processes)
    assert procs == {PID: {0}, TWIN: {1}}
    st = json.loads(_run("iterations", "-f", "json", two_processes).stdout)["steady state"][0]
    # both processes run the same 20-step loop; the sentence says which one the table is, and that the other
    # (on the other GPU) is left out
    assert "holds 2 processes with GPU work" in st["detected"], st["detected"]
    chosen = PID if f"process {PID} (GPU 0)'s alone" in st["detected"] else TWIN
    other = TWIN if chosen == PID else PID
    assert f"process {other} (GPU {min(procs[other])}) is left out" in st["detected"], st["detected"]
    assert st["device_id"] == min(procs[chosen])


def test_iterations_with_range_says_the_other_process_has_as_many(two_processes):
    st = json.loads(_run("iterations", "--range", "Batch", "-f", "json", two_processes).stdout)["steady state"][0]
    con = sqlite3.connect(f"file:{two_processes}?mode=ro", uri=True)
    per_pid = dict(
        con.execute(
            "SELECT (e.globalTid >> 24) & 16777215, count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE coalesce(e.text, s.value) GLOB 'Batch*' AND e.eventType = 59 GROUP BY 1"
        ).fetchall()
    )
    con.close()
    assert per_pid[PID] == per_pid[TWIN] == 20
    assert "holds 2 processes with GPU work" in st["detected"]
    assert f"{per_pid[TWIN]} instances of the range" in st["detected"], st["detected"]


def test_iterations_of_one_process_says_nothing_of_others(two_processes):
    st = json.loads(_run("iterations", "-f", "json", fixture("train_small")).stdout)["steady state"][0]
    assert "processes with GPU work" not in st["detected"]


def test_ranks_on_one_file_of_several_processes_says_so(two_processes):
    res = CliRunner().invoke(main, ["ranks", str(two_processes)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    # "1 rank" is the file; the file holds two ranks' processes, and ranks must say it compares neither
    assert f"holds 2 processes with GPU work (process {PID} on GPU 0, process {TWIN} on GPU 1)" in res.stderr or (
        f"holds 2 processes with GPU work (process {TWIN} on GPU 1, process {PID} on GPU 0)" in res.stderr
    ), res.stderr
    assert "profile each rank to its own file" in res.stderr


def test_ranks_of_one_process_per_file_adds_nothing():
    res = CliRunner().invoke(main, ["ranks", str(fixture("train_small"))], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "processes with GPU work" not in res.stderr


H100_2GPU = PUBLIC / "GindaChen__nsys-ai__h100_2gpu_1s.sqlite"


@pytest.mark.skipif(not H100_2GPU.is_file(), reason="../shared public exports absent")
def test_ranks_on_a_real_two_gpu_export_says_it_holds_two_processes():
    procs = _raw_gpu_processes(H100_2GPU)
    assert len(procs) == 2
    res = CliRunner().invoke(main, ["ranks", str(H100_2GPU)], catch_exceptions=False)
    # no loop of its own in this 1 s window: refused, but the file's two processes are said first
    assert "holds 2 processes with GPU work" in res.stderr, res.stderr
    for pid, devs in procs.items():
        assert f"process {pid} on GPU {min(devs)}" in res.stderr


def _facts(path) -> dict[str, str]:
    out = json.loads(_run("summary", "-f", "json", path).stdout)["facts"]
    return {r["item"]: r["value"] for r in out}


def test_summary_counts_the_loop_gpu_alone_where_there_are_several(two_processes):
    one, two = _facts(fixture("train_small")), _facts(two_processes)
    st = json.loads(_run("iterations", "-f", "json", two_processes).stdout)["steady state"][0]
    # the headline's shares are of the loop's device alone: by construction the copy's are the same figures
    assert "the GPU was busy" in one["steady-state step"]
    assert (
        f"GPU {st['device_id']} (the loop's process's; the other GPU not counted) was busy" in two["steady-state step"]
    )
    assert one["steady-state step"].split(" was busy ")[1] == two["steady-state step"].split(" was busy ")[1]
    # so are the idle line's gaps: the other GPU idles in parallel, no time a step of this loop gives back
    n = one["idle"].split(" gaps")[0]
    assert two["idle"].startswith(f"{n} gaps >= 1 ms on GPU {st['device_id']} (the loop's;"), two["idle"]
    assert " on " not in one["idle"].split(";")[0]


def test_summary_findings_give_back_what_the_loop_gpu_idles(two_processes):
    def headroom(path):
        found = json.loads(_run("summary", "-f", "json", path).stdout)["findings"]
        return {r["finding"]: r["headroom_ms"] for r in found}

    one, two = headroom(fixture("train_small")), headroom(two_processes)
    # a copy of the process on another GPU idles at the same instants: a step gives back no more for it
    assert one["data-loader bound"] > 0
    assert two["data-loader bound"] == one["data-loader bound"]


MEM = fixture("mem_growth")


def _raw_held(path) -> tuple[list[tuple], callable, callable]:
    """CUDA_GPU_MEMORY_USAGE_EVENTS replayed here: (start, pid, allocation?, bytes, memKind) rows, what the
    process held on the device before time t (device memory: host kinds 0 and 1 take none), and its peak in
    [s, e) (at least what it held at s)."""
    ev = raw(
        path,
        "SELECT start, (globalPid >> 24) & 16777215, memoryOperationType = 0, bytes, memKind "
        "FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start",
    )
    dev = [(t, b if alloc else -b) for t, _, alloc, b, kind in ev if kind not in (0, 1)]

    def held(t):
        return sum(d for s, d in dev if s < t)

    def peak(s0, e0):
        h = best = held(s0)
        for s, d in dev:
            if s0 <= s < e0:
                h += d
                best = max(best, h)
        return best

    return ev, held, peak


def test_gpu_memory_per_range_replays_the_raw_events_and_takes_range():
    ev, held, peak = _raw_held(MEM)
    steps = raw(
        MEM,
        "SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.eventType = 59 AND coalesce(e.text, s.value) = 'step 3'",
    )
    assert len(steps) == 1
    _, s, e = steps[0]
    rows = json.loads(_run("gpu-memory", "--by", "range", "--range", "step 3", "-f", "json", MEM).stdout)
    # --range selects the ranges listed: only `step 3`, not every range of the export
    assert [r["name"] for r in rows] == ["step 3"], rows
    assert rows[0]["peak_bytes"] == peak(s, e)
    assert rows[0]["growth_total_bytes"] == held(e) - held(s) == 2 * 2**20  # by construction: 2 MiB kept a step


def test_gpu_memory_per_iteration_names_the_process_whose_memory_it_is():
    ev, held, peak = _raw_held(MEM)
    rows = json.loads(_run("gpu-memory", "--by", "iteration", "-f", "json", MEM).stdout)
    its = json.loads(_run("iterations", "-f", "json", MEM).stdout)["iterations"]
    assert {r["pid"] for r in rows} == {p for _, p, *_ in ev}
    assert len(rows) == len(its) == 20
    for r, it in zip(rows, its):
        s, e = it["start_ns"], it["end_ns"]
        assert (r["start_bytes"], r["peak_bytes"], r["end_bytes"]) == (held(s), peak(s, e), held(e)), it


def test_ranks_counts_idle_causes_on_the_loop_gpu_of_a_file_of_several(two_processes):
    def per_rank(path):
        res = CliRunner().invoke(main, ["ranks", "-f", "json", str(path)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["per rank"][0]

    one, two = per_rank(fixture("train_small")), per_rank(two_processes)
    # the copy on GPU 1 idles at the same instants as the loop's GPU: a rank's top cause is of its own GPU
    assert two["top_idle_cause"] == one["top_idle_cause"]
    assert two["top_idle_cause_ns"] == one["top_idle_cause_ns"] <= one["idle_ns"]


def test_info_counts_the_processes_with_gpu_work_apart_from_every_process(two_processes):
    """`processes` counts every process the export lists; `processes with GPU work` those whose kernels, copies
    or memsets it holds (counted here from the raw rows)."""
    ops = " UNION ".join(
        f"SELECT (globalPid >> 24) & 16777215 FROM {t}"
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
    )
    for path in (fixture("train_small"), two_processes):
        want = len(raw(path, ops))
        res = CliRunner().invoke(main, ["info", str(path), "-f", "json"])
        assert res.exit_code == 0, res.output
        got = {r["item"]: r["value"] for r in json.loads(res.stdout) if r["section"] == "contents"}
        assert got["processes with GPU work"] == str(want) and got["processes"] == str(
            len(raw(path, "SELECT 1 FROM PROCESSES"))
        )
    assert want == 2


def test_gpu_memory_range_without_by_is_refused_in_one_line():
    res = CliRunner().invoke(main, ["gpu-memory", str(MEM), "--range", "step"])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert "--range selects the loop of --by iteration or the ranges of --by range" in res.stderr


def test_gaps_of_another_process_are_in_none_of_the_loops_steps(two_processes):
    """The twin's GPU idles exactly as the loop process's: its gaps are listed, in no iteration (its steps are
    not the loop's), and idle time by cause counts the loop's steady steps alone, as on train_small itself."""
    gaps = json.loads(_run("gaps", two_processes, "-f", "json").stdout)
    twin = [g for g in gaps if g["pid"] == TWIN]
    assert twin and all(g["iteration"] is None for g in twin)
    assert any(g["iteration"] is not None for g in gaps if g["pid"] == PID)
    alone = json.loads(_run("gaps", fixture("train_small"), "--by", "cause", "-f", "json").stdout)
    both = json.loads(_run("gaps", two_processes, "--by", "cause", "-f", "json").stdout)
    assert both == alone and all(c["pct_of_span"] <= 100 for c in both)
