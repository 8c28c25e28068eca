"""Audit of what `cpu`, `launches` and `api` say on profiles unlike the project's own: each claim checked against
the raw rows of the export (counted here with sqlite3) or what is true by construction of a fixture."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, raw

from nsysql.cli import main

JULIA = PUBLIC / "D-W-Chiang__JACC.jl__cg_trace.sqlite"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_refusal(res):
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.skipif(not JULIA.exists(), reason="the public exports (../shared) are absent")
def test_python_sampling_is_not_advised_for_a_julia_program():
    # the export names every process of the machine: a python3 of another user is among them, but nsys sampled
    # and scheduled only the Julia process tree (its samples are of `julia` threads)
    assert raw(JULIA, "SELECT count(*) FROM PROCESSES WHERE name = 'python3'")[0][0] >= 1
    sampled = raw(
        JULIA,
        "SELECT DISTINCT p.name FROM COMPOSITE_EVENTS c JOIN PROCESSES p ON p.pid = (c.globalTid >> 24) & 16777215",
    )
    assert [n for (n,) in sampled if n] == ["julia"]
    line = _one_line_refusal(_cli("cpu", JULIA, "--by", "python"))
    assert "--python-sampling" not in line and "nothing in it shows a Python program" in line


def test_python_sampling_is_advised_for_a_python_program_with_its_evidence():
    path = fixture("train_small")
    (pid,) = raw(path, "SELECT pid FROM PROCESSES WHERE name = 'python3'")[0]
    line = _one_line_refusal(_cli("cpu", path, "--by", "python"))
    assert "`nsys profile --python-sampling=true`" in line and f"process `python3`, pid {pid}" in line


def test_python_sampled_but_exported_without_blobs_says_how_to_export(tmp_path):
    # the report's Python samples are NVTX payloads: an export without --include-blobs has the marks, no frames
    path = craft(tmp_path / "noblobs.sqlite", "UPDATE NVTX_EVENTS SET binaryData = NULL", source="loader_cpu_before")
    assert (
        raw(
            path,
            "SELECT count(*) FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE s.value = 'NSys PySampling'",
        )[0][0]
        == 1
    )
    line = _one_line_refusal(_cli("cpu", path, "--by", "python"))
    assert "--include-blobs=true" in line and "--python-sampling" not in line


FUSER = PUBLIC / "NVIDIA__Fuser__report1.sqlite"


def _running_in(path, windows) -> dict[tuple[int, int], int]:
    """Each thread's time on a CPU inside `windows`, ns, from the raw scheduling events: from a thread's
    sched-in to its next event when that is a sched-out."""
    rows = raw(path, "SELECT globalTid, start, isSchedIn FROM SCHED_EVENTS ORDER BY globalTid, start, isSchedIn")
    out: dict[tuple[int, int], int] = {}
    for (g, s, i), (g2, s2, i2) in zip(rows, rows[1:]):
        if g == g2 and i and not i2:
            ov = sum(max(0, min(s2, e) - max(s, a)) for a, e in windows)
            if ov:
                key = ((g >> 24) & 0xFFFFFF, g & 0xFFFFFF)
                out[key] = out.get(key, 0) + ov
    return out


def _cause_story(path, cause):
    """The gaps of `cause` the story reads (steady state where gaps carry iterations), the roles, the story."""
    import polars as pl
    from conftest import loaded

    p = loaded(str(path))
    g = p.gaps()
    if g["iteration"].is_not_null().any():
        g = g.filter(pl.col("iteration").is_not_null() & ~pl.col("warmup"))
    g = g.filter(pl.col("cause") == cause)
    roles = {(a, b): r for a, b, r in p.sql("SELECT pid, tid, role FROM thread_roles").iter_rows()}
    said = p.cpu(by="cause").filter(pl.col("cause") == cause)["meanwhile"][0]
    return list(zip(g["start_ns"].to_list(), g["end_ns"].to_list())), roles, said


def test_one_worker_process_with_two_threads_is_told_as_one_process():
    path = fixture("loader_cpu_before")
    wins, roles, said = _cause_story(path, "load")
    on = {k: v for k, v in _running_in(path, wins).items() if roles.get(k) == "data_loader"}
    procs, threads = {pid for pid, _ in on}, len(on)
    assert (len(procs), threads) == (1, 2)  # what the sentence must say, counted from the raw events
    assert "a data-loader worker process (pt_data_worker, 2 threads) was on a CPU" in said


@pytest.mark.skipif(not FUSER.exists(), reason="the public exports (../shared) are absent")
def test_other_threads_of_many_processes_are_counted_as_such():
    wins, roles, said = _cause_story(FUSER, "unknown")
    on = {k: v for k, v in _running_in(FUSER, wins).items() if roles.get(k, "other") == "other"}
    procs = {pid for pid, _ in on}
    assert len(procs) > 1
    assert f"{len(on)} other threads in {len(procs)} processes (" in said


CUTLASS = PUBLIC / "wenscarl__cutlass_benchmark__report1.sqlite"


@pytest.mark.skipif(not CUTLASS.exists(), reason="the public exports (../shared) are absent")
def test_call_operators_and_members_of_template_classes_keep_their_names():
    import io

    import polars as pl

    def leaf(like):  # samples whose leaf frame's demangled name is like this, counted in the raw rows
        return raw(
            CUTLASS,
            "SELECT count(*) FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON s.id = c.symbol "
            "WHERE c.stackDepth = 0 AND s.value LIKE ?",
            like,
        )[0][0]

    res = CliRunner().invoke(main, ["cpu", str(CUTLASS), "-f", "csv"])
    assert res.exit_code == 0, res.output
    got = dict(pl.read_csv(io.StringIO(res.stdout)).select("function", "samples").iter_rows())
    # `A<float>::param_type::a() const` is a member of a template class, not a template wrapping `param_type::a`
    a = leaf("std::uniform_real_distribution<float>::param_type::a() const")
    assert a > 0 and got["std::uniform_real_distribution::param_type::a"] == a
    call = leaf("float std::uniform_real_distribution<float>::operator()<%")
    assert call > 0 and got["std::uniform_real_distribution::operator()"] == call
    assert "std::uniform_real_distribution::operator" not in got


SAXPY = PUBLIC / "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
EXGPU = PUBLIC / "extra-p__extrap__ex-gpu.s10.sqlite"


@pytest.mark.parametrize("path", [SAXPY, EXGPU], ids=["saxpy", "ex-gpu"])
def test_cuda_backtrace_records_are_not_counted_as_calls(path):
    # --cudabacktrace writes a second RUNTIME row per call it took a backtrace of (eventClass 67, `CUDA
    # backtrace` in nsys's ENUM_NSYS_EVENT_CLASS), named as the call and enclosing it: not a call of its own
    import re

    import polars as pl

    if not path.exists():
        pytest.skip("the public exports (../shared) are absent")
    rows = raw(
        path,
        'SELECT s.value, r.eventClass, r."end" - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r '
        "JOIN StringIds s ON s.id = r.nameId",
    )
    assert any(c == 67 for _, c, _ in rows)
    want: dict[str, list[int]] = {}
    for name, cls, d in rows:
        if cls != 67:
            want.setdefault(re.sub(r"_v\d{4}$", "", name), []).append(d)
    from conftest import loaded

    got = loaded(str(path)).api()
    assert sorted(got["name"].to_list()) == sorted(want)
    for r in got.iter_rows(named=True):
        assert (r["count"], r["total_ns"]) == (len(want[r["name"]]), sum(want[r["name"]])), r["name"]
    total = sum(sum(v) for v in want.values())
    assert got.select((pl.col("pct") - 100.0 * pl.col("total_ns") / total).abs().max()).item() < 1e-9


def test_the_main_thread_of_another_gpu_process_is_not_the_one_that_waited(tmp_path):
    # the busier DataLoader worker made a second GPU process: its first 100 kernels and their launch calls moved to it.
    # The gaps belong to the process that owns the GPU (most ops); the worker, now a process with GPU work but not
    # the GPU's owner (its thread a data loader's, 67_thread_roles.sql), computes while that process's main thread
    # waits in poll
    src = fixture("loader_cpu_before")
    (tid,) = raw(
        src,
        "SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE s.value = 'pt_data_worker' "
        "AND (t.globalTid & 16777215) = ((t.globalTid >> 24) & 16777215) ORDER BY (SELECT count(*) FROM COMPOSITE_EVENTS c "
        "WHERE (c.globalTid >> 24) = (t.globalTid >> 24)) DESC LIMIT 1",
    )[0]
    first = "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 100"
    path = craft(
        tmp_path / "two_gpu_processes.sqlite",
        (f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = ? WHERE correlationId IN ({first})", (tid,)),
        (
            f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = ? WHERE correlationId IN ({first})",
            (tid - (tid & 0xFFFFFF),),
        ),
        source="loader_cpu_before",
    )
    wins, roles, said = _cause_story(path, "host:train step*")
    worker = ((tid >> 24) & 0xFFFFFF, tid & 0xFFFFFF)
    assert roles[worker] == "data_loader"
    idle = sum(e - s for s, e in wins)
    on = _running_in(path, wins)
    assert on[worker] >= 0.5 * idle  # the worker computed through the gaps
    waiter = next(k for k, r in roles.items() if r == "main" and k != worker)
    main_part, _, rest = said.partition(";")
    assert main_part.startswith("the main thread waited in `poll`") and "on a CPU" not in main_part
    loaders = {k: v for k, v in on.items() if roles.get(k) == "data_loader"}  # the worker among them
    procs = {pid for pid, _ in loaders}
    assert worker in loaders and len(procs) > 1
    share = 100 * sum(loaders.values()) / idle
    assert f"{len(procs)} data-loader worker processes (pt_data_worker) were on a CPU for {share:.0f}%" in said
    assert on.get(waiter, 0) < 0.2 * idle  # and the waiting thread's own time on a CPU is too short to be told


def test_without_scheduling_events_the_cpu_samples_in_the_gaps_are_read(tmp_path):
    # the same profile without its scheduling events: the CPU samples still say the workers ran in the gaps
    import re

    path = craft(tmp_path / "no_sched.sqlite", "DROP TABLE SCHED_EVENTS", source="loader_cpu_before")
    wins, roles, said = _cause_story(path, "host:train step*")
    names = dict(raw(path, "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"))
    profiler = re.compile(r"^(\[NSys|NSys |CUPTI worker|\*[0-9])")
    workers = {g >> 24 for g, n in names.items() if n == "pt_data_worker" and (g & 0xFFFFFF) == ((g >> 24) & 0xFFFFFF)}
    total = loader = 0
    for g, ts in raw(path, "SELECT globalTid, start FROM COMPOSITE_EVENTS"):
        if any(a <= ts < e for a, e in wins) and not profiler.match(names.get(g, "")):
            total += 1
            loader += (g >> 24) in workers
    assert loader >= 0.5 * total > 0
    assert f"of the {total:,} CPU samples taken then (no scheduling events" in said
    assert f"2 data-loader worker processes (pt_data_worker) had {loader:,} ({100 * loader / total:.0f}%)" in said
    assert said.startswith("the main thread waited in `poll`")  # from the OS runtime calls, measured


def test_a_python_program_renamed_by_pytorch_is_still_python(tmp_path):
    # a script run through its shebang (torchrun) has the script's name, and PyTorch names its main thread
    # pt_main_thread: no `python` name is left, PyTorch's own thread name still shows the program is Python
    path = craft(
        tmp_path / "renamed.sqlite",
        "UPDATE StringIds SET value = 'pt_main_thread' WHERE value = 'python3'",
        "UPDATE PROCESSES SET name = 'torchrun' WHERE name = 'python3'",
    )
    assert not raw(path, "SELECT 1 FROM StringIds WHERE value LIKE 'python%'")
    line = _one_line_refusal(_cli("cpu", path, "--by", "python"))
    assert "`nsys profile --python-sampling=true`" in line and "thread `pt_main_thread`" in line


def test_a_process_whose_own_thread_left_no_trace_keeps_its_name_and_role(tmp_path):
    # a DataLoader worker whose own thread (tid = pid) has no name, sample or scheduling event: its other
    # threads, named pt_data_worker, were sampled; the process is still named (PROCESSES) and a data loader
    src = fixture("loader_cpu_before")
    pid, name = raw(src, "SELECT pid, name FROM PROCESSES WHERE name = 'pt_data_worker' ORDER BY pid LIMIT 1")[0]
    own = f"globalTid & 16777215 = {pid} AND (globalTid >> 24) & 16777215 = {pid}"
    path = craft(
        tmp_path / "no_own_thread.sqlite",
        f"DELETE FROM ThreadNames WHERE {own}",
        f"DELETE FROM SAMPLING_CALLCHAINS WHERE id IN (SELECT id FROM COMPOSITE_EVENTS WHERE {own})",
        f"DELETE FROM COMPOSITE_EVENTS WHERE {own}",
        f"DELETE FROM SCHED_EVENTS WHERE {own}",
        source="loader_cpu_before",
    )
    most = raw(
        path,
        "SELECT s.value FROM COMPOSITE_EVENTS c JOIN ThreadNames t ON t.globalTid = c.globalTid "
        f"JOIN StringIds s ON s.id = t.nameId WHERE (c.globalTid >> 24) & 16777215 = {pid} "
        "GROUP BY c.globalTid ORDER BY count(*) DESC LIMIT 1",
    )
    assert most == [("pt_data_worker",)]  # the process's most sampled thread
    from conftest import loaded

    row = loaded(str(path)).cpu(by="process").filter(pl.col("pid") == pid).row(0, named=True)
    assert (row["process"], row["role"]) == (name, "data_loader")
