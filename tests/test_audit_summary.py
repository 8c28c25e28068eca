"""What `summary` and `info` say on exports unlike the team's own (old nsys versions, pre-Ampere GPUs, exports
without GPU activity, profiles without a loop): every sentence rests on what the export holds, read here with
Python's sqlite3 or true by construction of a fixture (fixtures/*/COMMAND.md)."""

from __future__ import annotations

import re

import polars as pl
import pytest
from conftest import PUBLIC, craft, fixture, h200, loaded, raw

import nsysql

TENSOR = "matrix math without tensor cores"
IDLE_FINDINGS = ("data-loader bound", "host bound", "synchronization bound", "allocation stalls", "copy bound")


def public(name: str):
    p = PUBLIC / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def tables(path) -> set[str]:
    return {r[0] for r in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def rows_in(path, table: str) -> int:
    return raw(path, f"SELECT count(*) FROM {table}")[0][0] if table in tables(path) else 0


def facts(prof) -> dict[str, str]:
    return dict(prof.summary()["facts"].select("key", "value").iter_rows())


def findings(prof) -> dict[str, str]:
    return dict(prof.summary()["findings"].select("finding", "evidence").iter_rows())


def switches(prof) -> str:
    df = prof.info()
    return "\n".join(df.filter(pl.col("section") == "cannot answer")["value"].to_list())


# -- GPUs without tensor cores: no capture advice about tensor cores ---------------------------------------------


@pytest.mark.parametrize("name", ["extra-p__extrap__con_kernel.sqlite", "extra-p__extrap__profile1.sqlite"])
def test_no_gpu_metrics_switch_for_tensor_cores_on_pascal(name):
    """The Extra-P exports ran their kernels on a GTX 1060 (TARGET_INFO_GPU: compute capability 6.1, no tensor
    cores) and sampled no GPU metrics: whether the kernels used tensor cores is answered (no), so `info` does not
    send the user to `--gpu-metrics-devices` to learn it."""
    path = public(name)
    ran = "SELECT DISTINCT g.computeMajor, g.computeMinor FROM CUPTI_ACTIVITY_KIND_KERNEL k "
    assert raw(path, ran + "JOIN TARGET_INFO_GPU g ON g.id = k.deviceId") == [(6, 1)]
    assert rows_in(path, "CUPTI_ACTIVITY_KIND_KERNEL") > 0 and rows_in(path, "GPU_METRICS") == 0
    assert "--gpu-metrics-devices=all" not in switches(loaded(str(path)))


def test_gpu_metrics_switch_stays_where_the_gpu_has_tensor_cores():
    """A Tesla T4 (compute capability 7.5: fp16 tensor cores) whose kernels ran without GPU metrics: the switch is
    still named."""
    path = public("Lianhang666__gpu4__report2.sqlite")
    assert raw(path, "SELECT DISTINCT computeMajor, computeMinor FROM TARGET_INFO_GPU") == [(7, 5)]
    assert rows_in(path, "CUPTI_ACTIVITY_KIND_KERNEL") > 0 and rows_in(path, "GPU_METRICS") == 0
    assert "--gpu-metrics-devices=all" in switches(loaded(str(path)))


@pytest.mark.parametrize("major, minor, named", [(6, 1, False), (7, 0, False), (7, 5, True), (9, 0, True)])
def test_gpu_metrics_switch_follows_the_compute_capability(tmp_path, major, minor, named):
    """train_small (kernels, no GPU metrics) with its GPU said to be compute capability major.minor: the switch
    that would tell tensor-core use is named only where the GPU has tensor cores (sm_70 and later) and nsys can
    sample its metrics (Turing, sm_75, and later: not Volta); 9.0 is the fixture as recorded (an H200)."""
    src = fixture("train_small")
    assert raw(src, "SELECT DISTINCT computeMajor, computeMinor FROM TARGET_INFO_GPU") == [(9, 0)]
    path = src
    if (major, minor) != (9, 0):
        set_cc = ("UPDATE TARGET_INFO_GPU SET computeMajor = ?, computeMinor = ?", (major, minor))
        path = craft(tmp_path / "cc.sqlite", set_cc)
    assert rows_in(path, "GPU_METRICS") == 0
    assert ("--gpu-metrics-devices=all" in switches(loaded(str(path)))) is named


# -- the tensor-core advice names the architecture it read -------------------------------------------------------


@pytest.mark.parametrize("major, minor", [(9, 0), (8, 6)])
def test_tensor_core_advice_names_the_architecture(tmp_path, major, minor):
    """graph_loop's cuBLAS SIMT GEMMs (TF32 off by construction) on a GPU of compute capability major.minor
    (TARGET_INFO_GPU, 9.0 as recorded): the TF32 advice of a PyTorch program says which architecture it rests on."""
    src = fixture("graph_loop")
    assert raw(src, "SELECT DISTINCT computeMajor, computeMinor FROM TARGET_INFO_GPU") == [(9, 0)]
    path = src if (major, minor) == (9, 0) else tmp_path / "cc.sqlite"
    if path != src:
        craft(
            path,
            ("UPDATE TARGET_INFO_GPU SET computeMajor = ?, computeMinor = ?", (major, minor)),
            source="graph_loop",
        )
    ev = findings(nsysql.load(str(path)))[TENSOR]
    assert f"sm_{major}{minor} has TF32 and bf16 tensor cores: TF32 (" in ev


# -- no GPU activity in the export is not "no GPU used" -----------------------------------------------------------


def test_nvtx_only_export_says_gpu_work_was_not_traced():
    """poolformer: NVTX ranges only (no CUDA table), among them TensorRT's `ExecutionContext::execute`, which
    runs a TensorRT engine on the GPU: the export cannot say the GPU went unused, only that nothing was traced."""
    path = public("YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite")
    assert not {t for t in tables(path) if t.startswith("CUPTI_ACTIVITY_KIND_")}
    held = raw(path, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'ExecutionContext::execute'")
    held += raw(
        path,
        "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId "
        "WHERE s.value = 'ExecutionContext::execute'",
    )
    assert sum(n for (n,) in held) > 0
    f = facts(loaded(str(path)))
    assert f["gpus"].startswith("none traced: ") and "no CUDA trace" in f["gpus"]
    assert "no GPU work traced" in f["step"] and "no GPU work in the process" not in f["step"]


def test_iterations_of_an_nvtx_only_export_say_gpu_work_was_not_traced():
    """poolformer again (TensorRT's `ExecutionContext::execute` ran a GPU engine, CUDA was not traced):
    `iterations` said "in a profile without GPU work" and "no GPU work in the process"; only what was traced
    can be said."""
    from click.testing import CliRunner

    from nsysql.cli import main

    path = public("YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite")
    assert not {t for t in tables(path) if t.startswith("CUPTI_ACTIVITY_KIND_")}
    res = CliRunner().invoke(main, ["iterations", str(path)])
    assert res.exit_code == 0, res.stderr
    assert "no GPU work traced in the process" in res.stdout and "with no GPU work traced" in res.stdout
    assert "without GPU work" not in res.stdout and "no GPU work in the process" not in res.stdout


def test_cuda_calls_without_gpu_activity_are_not_no_gpu_used():
    """qcu (c8a5c5de): the program called cudaLaunchKernel hundreds of times, but the export has no KERNEL, MEMCPY
    or MEMSET table: its GPU work was not recorded, so summary says so instead of `none used`."""
    path = public("ZhangXin8069__qcu__report1-c8a5c5de.sqlite")
    launches = raw(
        path,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaLaunchKernel%'",
    )[0][0]
    assert launches > 0
    assert not {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"} & tables(path)
    gpus = facts(loaded(str(path)))["gpus"]
    assert gpus.startswith("none traced: ") and "CUDA API calls but no GPU activity" in gpus


@pytest.mark.parametrize("drop_runtime", [False, True], ids=["api_calls_kept", "no_cuda_trace"])
def test_gpu_fact_without_gpu_tables(tmp_path, drop_runtime):
    """train_small with its GPU activity tables dropped (and its CUDA API calls too): no GPU op, so the GPUs fact
    says what the export lacks, never that no GPU was used."""
    drops = [f"DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_{t}" for t in ("KERNEL", "MEMCPY", "MEMSET")]
    if drop_runtime:
        drops.append("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
    path = craft(tmp_path / "no_gpu.sqlite", *drops)
    gpus = facts(nsysql.load(str(path)))["gpus"]
    want = "no CUDA trace" if drop_runtime else "CUDA API calls but no GPU activity"
    assert gpus.startswith("none traced: ") and want in gpus


# -- the busy line keeps its digits -------------------------------------------------------------------------------


def test_busy_line_of_a_gpu_busy_under_a_millisecond():
    """ex-gpu.s10: six kernels, 34 us of GPU time in a 3.1 ms active span: the busy line gives the time in us (a
    figure of `0.0 ms` would say the GPU did nothing). Busy time: the union of the kernels' intervals, merged here."""
    path = public("extra-p__extrap__ex-gpu.s10.sqlite")
    ops = sorted(raw(path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    busy, (cs, ce) = 0, ops[0]
    for s, e in ops[1:]:
        if s > ce:
            busy, cs, ce = busy + ce - cs, s, e
        else:
            ce = max(ce, e)
    busy += ce - cs
    active = max(e for _, e in ops) - ops[0][0]
    assert busy < 1_000_000 <= active
    line = facts(loaded(str(path)))["gpu_0_busy"]
    assert f"start-up included: {busy / 1e3:.1f} us of {active / 1e6:.1f} ms)" in line


# -- idle-time findings: where the idle time is, and what the advice can say --------------------------------------


def test_allocation_advice_without_a_loop_names_no_loop():
    """Extra-P profile1: no repeating range is a loop (iterations abstain with the `--range` hint), and its two
    gaps >= 1 ms are spent in cudaMalloc/cudaHostAlloc/cudaFree/cudaFreeHost calls: the allocation finding says
    so without a loop it does not have."""
    path = public("extra-p__extrap__profile1.sqlite")
    calls = raw(
        path,
        "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaMalloc%' OR s.value LIKE 'cudaFree%' OR s.value LIKE 'cudaHostAlloc%'",
    )
    assert calls
    prof = loaded(str(path))
    f = facts(prof)
    assert f["iterations"].startswith("none: ") and "--range PATTERN" in f["iterations"]
    ev = findings(prof)["allocation stalls"]
    assert "inside the loop" not in ev and "cudaMalloc/cudaFree between the GPU work" in ev


def test_no_idle_finding_about_time_outside_the_loop():
    """graph_loop: the 30 replays of the graph keep the GPU busy with no synchronisation (fixtures/graph_loop/
    COMMAND.md), so no gap >= 1 ms falls in a steady-state step; the long gaps are the eager warm-up and the
    capture. The idle-by-cause table still shows them, but no idle-time finding is made of them: no step waits
    on that time."""
    prof = loaded(str(fixture("graph_loop")))
    summ = prof.summary()
    f = dict(summ["facts"].select("key", "value").iter_rows())
    assert f["iterations"].startswith("30 x `step`")
    assert f["step"].endswith("none of it in gaps >= 1 ms")
    assert summ["idle by cause"].height > 0
    assert not set(summ["findings"]["finding"].to_list()) & set(IDLE_FINDINGS)


def test_idle_findings_stay_where_the_loop_waits():
    """train_small (by construction: every step loads its batch on the CPU in `Load data` while the GPU idles)
    keeps its data-loader finding: the rule above removes only idle time outside the steps."""
    src = fixture("train_small")
    assert raw(src, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'Load data'") == [(20,)]
    assert "data-loader bound" in findings(loaded(str(src)))


# -- the headline says an upper bound as one ----------------------------------------------------------------------


def test_an_upper_bound_is_said_as_one_and_a_measure_is_not():
    """pipit saxpy (MPI + CUDA): its 250 MiB host-to-device copies are pageable and no pinned copy >= 1 MiB
    measures the pinned rate (nsys numbering: srcKind 1 is pinned), so their headroom is their whole GPU time,
    an upper bound, which its basis says; the host work its main thread does between the `saxpy` marks gives
    back more, measured (test_verdict_facts.py), and leads without `up to`."""
    path = public("hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    assert raw(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND srcKind = 0") == [(10,)]
    pinned = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND srcKind = 1 AND bytes >= 1048576"
    assert raw(path, pinned) == [(0,)]
    prof = loaded(str(path))
    pageable = prof.findings().filter(pl.col("finding") == "pageable host-to-device copies")
    assert "an upper bound" in pageable["headroom_basis"].item()
    first = facts(prof)["fix_first"]
    assert first.startswith("host bound: ") and "up to" not in first.split(" — ")[0]


def test_fix_first_launch_bound_says_up_to():
    """ops_mlp is launch bound (its 2 us kernels wait behind 9 us launches: test_verdict_headline.py): removing
    the launches leaves the kernels, so what the fix gives back is at most the idle between them."""
    first = facts(loaded(str(fixture("ops_mlp"))))["fix_first"]
    assert first.startswith("launch bound: up to ")


# -- an unknown idle cause says what would have told it -----------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["lockfuehrer__beast_ressoruces__report2.sqlite", "martisu1631998__kmeans-parallel__report2.sqlite"]
)
def test_unknown_idle_without_cpu_evidence_names_the_capture(name):
    """nsys 2020.3 / HPC SDK 21.2 exports: CUDA and nothing else (no OSRT_API, NVTX_EVENTS, COMPOSITE_EVENTS or
    SCHED_EVENTS), and idle gaps no CUDA call explains (`unknown`). The summary says nothing recorded what the CPU
    did then and which capture would have, instead of leaving `unknown` bare."""
    path = public(name)
    assert not {"OSRT_API", "NVTX_EVENTS", "COMPOSITE_EVENTS", "SCHED_EVENTS"} & tables(path)
    prof = loaded(str(path))
    causes = prof.summary()["idle by cause"]
    assert causes["cause"][0] == "unknown"
    line = facts(prof)["meanwhile"]
    assert line.startswith("during unknown: no OS call or NVTX range overlaps these gaps")
    assert "`nsys profile -t cuda,nvtx,osrt -s process-tree --cpuctxsw=process-tree`" in line


def test_a_named_idle_cause_gets_no_such_line():
    """Extra-P profile1: its gaps are spent in allocation calls (cause `alloc`, a traced CUDA call): no line says
    the CPU's time there is unrecorded."""
    f = facts(loaded(str(public("extra-p__extrap__profile1.sqlite"))))
    assert "top causes (% of the idle time in gaps >= 1 ms): alloc 100%" in f["idle"]
    assert "meanwhile" not in f


# -- the slow-iteration finding names the median its ratio is of ------------------------------------------------


def test_slow_iteration_ratio_and_its_median_agree():
    """loader_cpu_before: `train step 0` is the warm-up, steps 7, 15, 23, 31 (every 8th, 384x384 images by
    construction) and 29 are the outliers the finding names. Its ratios are of the median of the other 26 steps,
    and the median it quotes is that one, not the median of all 31 (read here from the NVTX ranges' raw
    durations): every `N.Nx` it says is an outlier's step over the median it quotes."""
    path = fixture("loader_cpu_before")
    walls = {
        int(name.rsplit(" ", 1)[1]): end - start
        for name, start, end in raw(path, "SELECT text, start, end FROM NVTX_EVENTS WHERE text LIKE 'train step %'")
    }
    assert len(walls) == 32
    ev = findings(loaded(str(path)))["periodic slow iterations"]
    assert ev.startswith("iterations 7, 15, 23, 31 (every 8th) are ") and "; also slow: 29" in ev
    outliers = [7, 15, 23, 29, 31]
    typical = sorted(w for i, w in walls.items() if i and i not in outliers)
    med = (typical[12] + typical[13]) / 2  # 26 steps
    assert f"; that median is {med / 1e6:.1f} ms (of the 26 steps that are not outliers)" in ev
    said = re.findall(r"(\d+\.\d)x", ev.split("; that median is")[0])
    ratios = {f"{walls[i] / med:.1f}" for i in outliers}
    assert said and set(said) <= ratios


# -- CUDA graphs traced whole: a kernel headroom the export cannot measure ---------------------------------------


def test_tensor_core_headroom_of_graphs_traced_whole_is_not_zero():
    """h200 graph_whole (w_graph.py): each `graph_step` replays a graph captured from the same fp32 Linear layers
    whose eager runs are the SIMT GEMMs of the finding, traced whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows, no
    kernel of theirs). The export cannot count the GEMMs of a step, so the finding has no headroom, says why,
    and the first line never says that no finding gives back time in the steps."""
    path = h200("graph_whole.sqlite")
    assert raw(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")[0][0] >= 30
    prof = loaded(str(path))
    summ = prof.summary()
    r = summ["findings"].filter(pl.col("finding") == TENSOR).row(0, named=True)
    assert r["headroom_ms"] is None and "`nsys profile --cuda-graph-trace=node`" in r["headroom_basis"]
    lead = dict(summ["facts"].select("key", "value").iter_rows())["fix_first"]
    assert "none giving back time" not in lead and f"{TENSOR} cannot be measured" in lead


def test_tensor_core_headroom_of_graphs_traced_by_node_is_measured():
    """h200 graph_node, the same workload recorded with --cuda-graph-trace=node: the replayed GEMMs are kernels
    of the steps, and the finding gives back time."""
    found = loaded(str(h200("graph_node.sqlite"))).summary()["findings"]
    r = found.filter(pl.col("finding") == TENSOR).row(0, named=True)
    assert r["headroom_ms"] and r["headroom_ms"] > 0


def as_operators(loop: str) -> str:
    """SQL renaming every push/pop range as a PyTorch operator's: the ranges of the family `loop` (`Batch<i>`) as
    `aten::step`, each other `X Y` as `aten::x_y`, so that no range of the program's own is left to take as the
    loop."""
    return (
        f"UPDATE NVTX_EVENTS SET text = CASE WHEN text LIKE '{loop}%' THEN 'aten::step' ELSE 'aten::' || "
        "replace(lower(text), ' ', '_') END, textId = NULL WHERE eventType IN (59, 60)"
    )


def test_summary_and_report_take_the_loop_that_was_not_found(tmp_path):
    """train_small with every push/pop range renamed as a PyTorch operator's (`Batch<i>` -> `aten::step`, `Load
    data` -> `aten::load_data`, ...): no range of the program's own is left, so no loop is detected, and the
    summary says to name it with --range. Named (`--range aten::step`), the loop is the same 20 ranges as the
    fixture's detected `Batch` loop, so the summary's step, fix-first line, findings' headroom and the Markdown
    snippet's step say the same figures as the fixture's own."""
    from click.testing import CliRunner

    from nsysql.cli import main

    path = craft(tmp_path / "aten.sqlite", as_operators("Batch"))
    prof = nsysql.load(str(path), cache_dir=str(tmp_path / "c"))
    said = facts(prof)["iterations"]
    assert said.startswith(
        "none: no repeating loop found: all 120 push/pop ranges are PyTorch's own"
    ) and said.endswith("name the loop with --range PATTERN"), said
    mine, theirs = (
        dict(s["facts"].select("key", "value").iter_rows())
        for s in (prof.summary(range="aten::step"), loaded(str(fixture("train_small"))).summary())
    )
    assert mine["step"] == theirs["step"]
    assert mine["fix_first"] == theirs["fix_first"].replace("`Load data`", "`aten::load_data`")
    assert mine["iterations"].startswith("20 x `aten::step` (wrapper), 1 warm-up")
    headroom = lambda p, **kw: p.summary(**kw)["findings"]["headroom_ms"].to_list()  # noqa: E731
    assert headroom(prof, range="aten::step") == headroom(loaded(str(fixture("train_small"))))
    cache = ["--cache-dir", str(tmp_path / "c")]
    md = CliRunner().invoke(main, [*cache, "report", "-f", "markdown", "--range", "aten::step", str(path)])
    assert md.exit_code == 0 and theirs["step"].split(";")[0] in md.stdout, md.output
    wrong = CliRunner().invoke(main, [*cache, "summary", "--range", "Nope", str(path)])
    assert wrong.exit_code != 0 and "no NVTX range matches 'Nope'" in wrong.stderr


def test_every_command_that_finds_the_loop_takes_the_one_not_found(tmp_path):
    """As summary above: on train_small renamed as operators (no loop detected), each other command that finds
    the loop refuses with `name the loop with --range PATTERN` and, given `--range aten::step` (the same 20 ranges
    as the fixture's detected `Batch` loop), answers as the fixture does (names aside): kernels per iteration,
    trace's iterations and gaps, diff of the export against itself (the loop named in BASE and NEW) and its
    report --baseline, stats' loop reports (gaps indexed by the loop, not only the idle time inside it: its
    kernels-by-range, whose --range is a filter, is not given it), and cpu during iterations on
    loader_cpu_before so renamed (`train step <i>` -> `aten::step`)."""
    import json

    from click.testing import CliRunner

    from nsysql.cli import main

    path = craft(tmp_path / "aten.sqlite", as_operators("Batch"))
    prof, theirs = nsysql.load(str(path), cache_dir=str(tmp_path / "c")), loaded(str(fixture("train_small")))
    own = re.compile("Load data|Copy to device|Forward Pass|Backward Pass|Optimizer step")

    def renamed(df: pl.DataFrame) -> list[tuple]:
        """The fixture's rows with its range names as as_operators renames them."""

        def one(v):
            if not isinstance(v, str):
                return v
            v = "aten::step" if re.fullmatch(r"Batch\d*", v) else v
            return own.sub(lambda m: "aten::" + m.group(0).lower().replace(" ", "_"), v)

        return [tuple(map(one, r)) for r in df.rows()]

    run = lambda *args: CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), *args])  # noqa: E731
    refused = run("kernels", "--by", "category", "--per", "iteration", str(path))
    assert refused.exit_code == 2 and refused.stderr.rstrip().endswith("name the loop with --range PATTERN")
    per = dict(by="category", per="iteration")
    assert prof.kernels(**per, range="aten::step").equals(theirs.kernels(**per))
    mine, want = prof.trace(iterations="1:3", range="aten::step"), theirs.trace(iterations="1:3")
    assert mine["iterations"].rows() == renamed(want["iterations"])
    assert mine["gaps"].rows() == renamed(want["gaps"])
    got, same = prof.diff(prof, range="aten::step"), theirs.diff(theirs)
    assert got.iteration_time.equals(same.iteration_time) and got.headline == same.headline
    assert got.idle.rows() == renamed(same.idle)
    md = run("report", "-f", "markdown", "--baseline", str(path), "--range", "aten::step", str(path))
    assert md.exit_code == 0 and same.headline in md.stdout, md.output
    stats = run("stats", "-r", "gaps,gaps-by-cause,kernels-by-range", "-f", "json", "--range", "aten::step", str(path))
    assert stats.exit_code == 0, stats.output
    got = {k: pl.DataFrame(v) for k, v in json.loads(stats.stdout).items()}
    keys = ["start_ns", "duration_ns", "iteration", "warmup", "cause"]
    assert got["gaps"].select(keys).rows() == renamed(theirs.gaps().select(keys))
    keys = ["cause", "gaps", "idle_ns", "counted"]
    assert got["gaps-by-cause"].select(keys).rows() == renamed(theirs.gaps(by="cause").select(keys))
    assert "aten::forward_pass" in got["kernels-by-range"]["range"].to_list()  # every range: no filter given
    cpu = craft(tmp_path / "cpu.sqlite", as_operators("train step"), source="loader_cpu_before")
    during = "iterations 1:3"
    assert (
        nsysql.load(str(cpu), cache_dir=str(tmp_path / "c"))
        .cpu(during=during, range="aten::step")
        .equals(loaded(str(fixture("loader_cpu_before"))).cpu(during=during))
    )
