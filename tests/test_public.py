"""Every real public export, nsys 2020.3 to 2026.2: info and summary exit 0 and say what is missing."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import PUBLIC, gpu_busy_by_construction, h200_exports, loaded, own_exports, public_exports, raw

from nsysql.cli import main

FILES = public_exports()
pytestmark = pytest.mark.skipif(not FILES, reason=f"{PUBLIC} not present")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
@pytest.mark.parametrize("cmd", ["info", "summary"])
def test_info_and_summary_work(path, cmd):
    res = CliRunner().invoke(main, [cmd, str(path)], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert "Traceback" not in res.output


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_gpu_busy_is_the_union_of_gpu_ops_with_busy_time_before(path):
    """Whatever the export holds (memsets, graphs, several devices, 2020 to 2026 schemas), gpu_busy is the union of
    gpu_ops' intervals per device, each stretch with the busy time before it and the previous stretch's end,
    though the two tables are built side by side from the staging tables."""
    prof = loaded(str(path))
    busy = prof.sql(
        "SELECT device_id, start_ns, end_ns, busy_before_ns, prev_end_ns FROM gpu_busy "
        "ORDER BY device_id NULLS FIRST, start_ns"
    )
    assert list(busy.iter_rows()) == gpu_busy_by_construction(prof)


def facts(path):
    return loaded(str(path)).info()


def item(df, section, name):
    rows = df.filter((df["section"] == section) & (df["item"] == name))
    return rows["value"][0] if rows.height else None


def test_versions_come_from_metadata_or_install_paths():
    by_name = {p.name: p for p in FILES}
    old = facts(by_name["lockfuehrer__beast_ressoruces__report2.sqlite"])  # 2020.3.4, no metadata table
    assert item(old, "file", "nsys version").startswith("2020.3.4")
    assert "StringIds" in item(old, "file", "nsys version")
    win = facts(by_name["extra-p__extrap__con_kernel.sqlite"])  # EXPORT_META_DATA with Latin-1 bytes
    assert item(win, "file", "nsys version").startswith("2022.1.1")
    new = facts(by_name["GindaChen__nsys-ai__h100_2gpu_1s.sqlite"])
    assert item(new, "file", "nsys version").startswith("2026.2.1")
    cardiac = facts(by_name["mabdullahsoyturk__cardiac-simulation__report1.sqlite"])  # TargetInstallDir
    assert item(cardiac, "file", "nsys version").startswith("2021.3.3")


def test_missing_tables_are_said_plainly():
    by_name = {p.name: p for p in FILES}
    qcu = facts(by_name["ZhangXin8069__qcu__report1-c8a5c5de.sqlite"])  # runtime calls, no kernels
    lacks = qcu.filter(qcu["section"] == "lacks")["item"].to_list()
    assert "no CUPTI_ACTIVITY_KIND_KERNEL" in lacks and "no NVTX_EVENTS" in lacks
    assert item(qcu, "commands", "kernels").startswith("no")
    assert int(item(qcu, "contents", "CUDA API calls")) == 688
    nothing = facts(by_name["mabdullahsoyturk__cardiac-simulation__report1.sqlite"])
    assert item(nothing, "contents", "kernels") == "0"


def test_counts_match_index():
    """Kernel and API call counts agree with public/INDEX.md (counted there with Python sqlite3)."""
    import re

    index = (PUBLIC / "INDEX.md").read_text()
    checked = 0
    for row in index.splitlines():
        m = re.match(r"\| \d+ \| `([^`]+)` \|.*?\| (—|\d+) \| (—|\d+) \| (—|\d+) \| (—|\d+) \| \d+ \| \d+ \|", row)
        if not m or not (PUBLIC / m.group(1)).exists():
            continue
        df = facts(PUBLIC / m.group(1))
        want_k = 0 if m.group(2) == "—" else int(m.group(2))
        want_r = 0 if m.group(3) == "—" else int(m.group(3))
        assert int(item(df, "contents", "kernels")) == want_k, m.group(1)
        # less the CUDA backtraces some hold as a second row of a call (eventClass 67: no call, test_calls_once.py)
        calls = "CUPTI_ACTIVITY_KIND_RUNTIME"
        if want_r:
            want_r -= raw(PUBLIC / m.group(1), f"SELECT count(*) FROM {calls} WHERE eventClass IN (67, 68, 69)")[0][0]
        assert int(item(df, "contents", "CUDA API calls")) == want_r, m.group(1)
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_each_gpu_op_is_one_row_with_its_earliest_launching_call(path):
    """Two of these exports (extra-p ex-gpu.s10: 6 ops, pipit saxpy-mpi: 20 ops) hold two runtime rows under one
    (process, correlation id): the call and, around it, a CUDA backtrace (eventClass 67), which is no call. Each op
    is still one row of gpu_ops, launched by the call. Counted here with Python's sqlite3, straight from the
    export."""
    import sqlite3

    prof = loaded(str(path))
    rows, ops, launched_at = prof.sql(
        "SELECT count(*), count(DISTINCT op_id), sum(api_start_ns) FROM gpu_ops_named"
    ).row(0)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    want_ops = want_launched_at = 0
    for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    ):
        if t not in tables:
            continue
        valid = f'SELECT correlationId, globalPid FROM {t} WHERE start IS NOT NULL AND "end" IS NOT NULL'
        want_ops += con.execute(f"SELECT count(*) FROM ({valid})").fetchone()[0]
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            want_launched_at += con.execute(
                f"SELECT coalesce(sum(first), 0) FROM ({valid}) o JOIN (SELECT globalTid >> 24 AS p, correlationId, "
                "min(start) AS first FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass NOT IN (67, 68, 69) GROUP BY 1, 2) r "
                "ON r.p = o.globalPid >> 24 AND r.correlationId = o.correlationId"
            ).fetchone()[0]
    assert rows == ops == want_ops
    assert (launched_at or 0) == want_launched_at


@pytest.mark.parametrize("path", FILES + h200_exports() + own_exports(), ids=lambda p: p.name[:40])
def test_main_thread_encloses_the_most_gpu_ops(path):
    """process_roles.main_tid is the thread whose NVTX ranges (push/pop or start/end) enclose the most distinct
    GPU ops of the process (ties: the lowest tid), counted here plainly from op_ranges; the launching thread
    when no range encloses any. The h200 `threads` export has start/end ranges too."""
    prof = loaded(str(path))
    want = prof.sql("""
        WITH ranged AS (
          SELECT r.pid, r.tid, count(DISTINCT x.op_id) AS n FROM op_ranges x JOIN nvtx_ranges r USING (range_id)
          GROUP BY ALL
        ), launcher AS (SELECT pid, api_tid AS tid, count(*) AS n FROM gpu_ops_named WHERE api_tid IS NOT NULL GROUP BY ALL)
        SELECT pid, tid FROM (SELECT *, 1 AS pri FROM ranged UNION ALL SELECT *, 2 FROM launcher)
        QUALIFY row_number() OVER (PARTITION BY pid ORDER BY pri, n DESC, tid) = 1 ORDER BY pid""")
    got = prof.sql("SELECT pid, main_tid AS tid FROM process_roles WHERE main_tid IS NOT NULL ORDER BY pid")
    assert got.rows() == want.filter(want["pid"].is_in(got["pid"].to_list())).rows()


OLD_GPU_TABLES = [p for p in FILES if p.name.startswith(("martisu", "extra-p__extrap__ex-gpu"))]


@pytest.mark.parametrize("path", OLD_GPU_TABLES, ids=lambda p: p.name[:40])
def test_devices_take_sms_memory_and_capability_from_target_info_cuda_gpu(path):
    """2020-2021 exports have a five-column TARGET_INFO_GPU (id, name, bus) beside TARGET_INFO_CUDA_GPU, which
    alone holds the SM count, memory and compute capability: devices has them as the file gives them."""
    import sqlite3

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        want = {
            r[0]: (r[1], r[2], f"{r[3]}.{r[4]}")
            for r in db.execute(
                "SELECT deviceId, numMultiprocessors, globalMemorySize, computeCapabilityMajor, computeCapabilityMinor "
                "FROM TARGET_INFO_CUDA_GPU"
            )
        }
    got = loaded(str(path)).sql("SELECT * FROM devices")
    assert (
        want
        and {
            r["device_id"]: (r["sm_count"], r["memory_bytes"], r["compute_capability"])
            for r in got.iter_rows(named=True)
        }
        == want
    )


def test_devices_leave_out_adapters_that_are_not_cuda_gpus():
    """extra-p con_kernel (Windows): TARGET_INFO_GPU lists the GTX 1060 and, with no SMs or compute capability,
    the Intel iGPU and `Microsoft Basic Render Driver`; only the GTX 1060 ran kernels."""
    path = PUBLIC / "extra-p__extrap__con_kernel.sqlite"
    if not path.exists():
        pytest.skip("export absent")
    got = loaded(str(path)).sql("SELECT name, compute_capability FROM devices")
    assert got.rows() == [("GeForce GTX 1060 with Max-Q Design", "6.1")]


def test_span_of_an_export_without_timed_events_is_unknown_not_zero():
    """cardiac-simulation's export holds only string and target tables: no event has a time."""
    path = PUBLIC / "mabdullahsoyturk__cardiac-simulation__report1.sqlite"
    if not path.exists():
        pytest.skip("export absent")
    facts = dict(loaded(str(path)).summary()["facts"].select("key", "value").iter_rows())
    assert facts["span"].startswith("unknown")


def _extent(path, tables: dict[str, tuple[str, str]]) -> tuple[int, int]:
    """min(start) and max(end) over the export's rows of `tables` (name -> start column, end column), read here with
    Python's sqlite3: the span by construction."""
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    ext = [
        db.execute(f'SELECT min("{a}"), max("{b}") FROM "{t}"').fetchone() for t, (a, b) in tables.items() if t in have
    ]
    return min(r[0] for r in ext if r[0] is not None), max(r[1] for r in ext if r[1] is not None)


def test_span_of_a_cpu_only_capture_is_its_scheduling_and_sample_events():
    """JACC.jl cg_trace: no CUDA, no NVTX range, but 11k scheduling events and CPU samples: those are its span."""
    path = PUBLIC / "D-W-Chiang__JACC.jl__cg_trace.sqlite"
    if not path.exists():
        pytest.skip("export absent")
    prof = loaded(str(path))
    start, end = _extent(path, {"SCHED_EVENTS": ("start", "start"), "COMPOSITE_EVENTS": ("start", "start")})
    assert int(prof.facts["span_start_ns"][0]) == start and int(prof.facts["span_end_ns"][0]) == end
    assert prof.facts["span_from"] == ["scheduling events, CPU samples"]
    facts = dict(prof.summary()["facts"].select("key", "value").iter_rows())
    assert facts["span"] == f"{(end - start) / 1e9:.3f} s"
    assert "SCHED_EVENTS" in prof.facts["tables_read"][0].split(",")


def test_no_busy_share_of_a_gpu_that_ran_one_memset():
    """WeatherBench2: one 1.5 us memset is all the GPU work; the span is every timed table's extent."""
    path = PUBLIC / "frasertajima__WeatherBench2__report1.sqlite"
    if not path.exists():
        pytest.skip("export absent")
    prof = loaded(str(path))
    timed = {t: ("start", "end") for t in ("CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API")}
    start, end = _extent(path, {**timed, "SCHED_EVENTS": ("start", "start"), "COMPOSITE_EVENTS": ("start", "start")})
    assert (int(prof.facts["span_start_ns"][0]), int(prof.facts["span_end_ns"][0])) == (start, end)
    busy = dict(prof.summary()["facts"].select("key", "value").iter_rows())["gpu_0_busy"]
    assert "%" not in busy and busy.startswith("1.5 us of GPU time in 1 op: too little for a busy share")
    md = CliRunner().invoke(main, ["report", "-f", "markdown", str(path)])
    assert md.exit_code == 0 and "**GPU busy (whole profile)** 1.5 us in all, too little for a share" in md.stdout
