"""What gaps, iterations and ranges say, checked against the raw rows of real exports (read here with sqlite3)
and against facts true by construction of crafted copies of the fixtures."""

from __future__ import annotations

import pytest
from conftest import fixture, h200, loaded, raw

# gaps.sql's API kinds by name, in its order of precedence (the first that matches)
KINDS = (
    ("sync", ("synchronize", "waitevent", "eventquery", "streamquery")),
    ("memcpy", ("memcpy",)),
    ("alloc", ("malloc", "free", "hostalloc", "hostregister", "memalloc", "memcreate", "memmap")),
    ("load", ("moduleload", "libraryload", "moduleunload", "libraryunload")),
    ("launch", ("launch",)),
)


def _kind(name: str) -> str | None:
    low = name.lower()
    return next((k for k, words in KINDS if any(w in low for w in words)), None)


def _union_in(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """The length of the union of `intervals` inside [lo, hi)."""
    total, end = 0, lo
    for s, e in sorted(intervals):
        s, e = max(s, end), min(e, hi)
        if e > s:
            total += e - s
            end = e
    return total


def _calls_by_kind(path, pid: int) -> dict[str, list[tuple[int, int]]]:
    rows = raw(
        path,
        "SELECT r.start, r.end, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE r.globalTid / 16777216 % 16777216 = ?",
        pid,
    )
    out: dict[str, list[tuple[int, int]]] = {}
    for s, e, name in rows:
        if (k := _kind(name)) is not None:
            out.setdefault(k, []).append((s, e))
    return out


@pytest.mark.parametrize("name", ["threads.sqlite", "train_osrt.sqlite"])
def test_gap_api_cover_is_the_union_of_the_calls_not_their_sum(name):
    """api_cover_pct is the share of the gap in which the process was in calls of the leading kind. Calls on
    several threads at once cover the same stretch once: on `threads` (two worker threads launching side by side)
    the sum of the calls gave 86.4% for a gap that launches covered 43.3% of."""
    path = h200(name)
    gaps = loaded(str(path)).gaps()
    assert gaps.height
    by_kind: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for g in gaps.iter_rows(named=True):
        calls = by_kind.setdefault(g["pid"], _calls_by_kind(path, g["pid"]))
        cover = max((_union_in(iv, g["start_ns"], g["end_ns"]) for iv in calls.values()), default=0)
        assert g["api_cover_pct"] == pytest.approx(round(100.0 * cover / g["duration_ns"], 1), abs=0.051), g
        assert g["api_cover_pct"] <= 100.0


def test_a_second_thread_in_the_same_calls_changes_no_gap(tmp_path):
    """A copy of train_small in which a second thread of the process makes every CUDA API call again, at the same
    times: the process was in those calls no longer than before, so every gap keeps its cause and api_cover_pct.
    Summed per thread, the cover doubled, and a gap the main thread spent in `Forward Pass` became `launch`."""
    from conftest import craft

    import nsysql

    path = craft(
        tmp_path / "twice.sqlite",
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
        "returnValue, callchainId) SELECT start, end, eventClass, globalTid + 100, correlationId + 1000000000, "
        "nameId, returnValue, NULL FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    )
    cols = ["start_ns", "end_ns", "cause", "api_cover_pct"]
    want = loaded(str(fixture("train_small"))).gaps().select(cols)
    got = nsysql.load(path, cache_dir=tmp_path / "cache").gaps().select(cols)
    assert want.height and got.equals(want)


def _cli(*args):
    from click.testing import CliRunner

    from nsysql.cli import main

    return CliRunner().invoke(main, list(map(str, args)))


def test_kernels_by_range_without_nvtx_says_so_in_one_line(tmp_path):
    """A profile with kernels and no NVTX range (train_small with its NVTX rows removed) printed `no kernels in
    these ranges`, as if it had ranges: it now refuses in one line that names the file and how to record them."""
    from conftest import craft

    path = craft(tmp_path / "no_nvtx.sqlite", "DELETE FROM NVTX_EVENTS")
    assert raw(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] > 0
    res = _cli("--cache-dir", tmp_path / "cache", "kernels-by-range", path)
    assert res.exit_code != 0 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"nsysql: error: {path}: no NVTX ranges in this profile, so no kernel runs in one (annotate the code with "
        "NVTX ranges (nvtxRangePush/nvtxRangePop, or the NVTX API of its language or framework) and profile with "
        "-t nvtx)"
    ]


def test_kernels_by_range_on_a_public_cuda_only_export():
    """Baardrw/SIGMA (nsys 2024.6.2): 22 kernels, no NVTX_EVENTS table."""
    from conftest import PUBLIC

    path = PUBLIC / "Baardrw__SIGMA__report2.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present")
    assert raw(path, "SELECT count(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'") == [(0,)]
    res = _cli("kernels-by-range", path)
    assert res.exit_code != 0 and "no NVTX ranges in this profile" in res.stderr


def test_gaps_in_a_worker_threads_range_are_explained_on_that_thread():
    """threads (h200): `worker0/iter` is opened by the worker thread only. `gaps --range worker0/iter` keeps the
    parts of gaps inside its instances, so the range that explains each one is open on that worker thread at the
    gap's middle; it named the main thread's `main/step` for the 137 ms gap of the first iteration."""
    path = h200("threads.sqlite")
    rows = raw(
        path,
        "SELECT n.start, n.end, coalesce(n.text, s.value), n.globalTid % 16777216 FROM NVTX_EVENTS n "
        "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59",
    )
    (worker,) = {tid for _, _, name, tid in rows if name == "worker0/iter"}
    gaps = loaded(str(path)).gaps(range="worker0/iter", min_ns=100_000)
    assert gaps.height and gaps["range"].null_count() == 0
    for g in gaps.iter_rows(named=True):
        mid = (g["start_ns"] + g["end_ns"]) // 2
        open_on_worker = {name for s, e, name, tid in rows if tid == worker and s <= mid < e}
        assert g["range"] in open_on_worker, g
    longest = gaps.sort("duration_ns").row(-1, named=True)
    assert longest["range"] == "worker0/iter" and longest["cause"] == "host:worker0/iter"


def test_iterations_table_shows_the_time_of_whole_cuda_graphs():
    """graph_whole (h200, --cuda-graph-trace=graph, nsys's default): each step replays a graph that the export
    records as one graph op and no kernel. The table said `kernel_us 0.0` and `kernels 0` and left out the
    column that holds the step's GPU work; it now shows graph_us, the graph ops launched in each step."""
    path = h200("graph_whole.sqlite")
    steps = raw(
        path,
        "SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 59 AND coalesce(n.text, s.value) = 'graph_step' ORDER BY n.start",
    )
    graphs = raw(
        path,
        "SELECT r.start, g.end - g.start FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId",
    )
    want = [sum(d for t, d in graphs if s <= t < e) for s, e in steps]
    assert len(want) == 30 and all(want)
    res = _cli("iterations", path, "--unit", "us")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    col = lines[0].split().index("graph_us")
    got = [float(line.split()[col].replace(",", "")) for line in lines[2 : 2 + len(want)]]
    assert got == [round(ns / 1000, 1) for ns in want]


def test_a_single_named_iteration_is_counted_and_its_warm_up_explained():
    """LeiWang1999/memfusion (TensorRT, nsys 2023.1): one `ExecutionContext::execute`. `iterations --range
    ExecutionContext` said `1 instances` and `all 1 iterations are warm-up`, without saying how to count it."""
    from conftest import PUBLIC

    path = PUBLIC / "LeiWang1999__memfusion_artifact__report1.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present")
    n = raw(
        path,
        "SELECT count(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType = 59 AND coalesce(n.text, s.value) LIKE 'ExecutionContext%'",
    )[0][0]
    assert n == 1
    res = _cli("iterations", path, "--range", "ExecutionContext")
    assert res.exit_code == 0, res.stderr
    assert "selects 1 range name (prefix match), 1 instance on thread" in res.stdout
    assert "steady state: none (the only iteration is warm-up; --skip N" in res.stdout
    assert "steady state (1 of 1)" in _cli("iterations", path, "--range", "ExecutionContext", "--skip", "0").stdout


def test_an_outlier_is_not_said_to_be_as_slow_as_the_others():
    """loop_before: steps 9, 19, 29 sleep 25 ms in `batch_to_device` by construction (loop_transform.py
    --slow-every 10); step 18 is an outlier by a smaller margin (its window, from its `batch_to_device` to the next,
    is twice the median). `iterations 9, 18, 19, 29 are 7.3x slower than the median` said 18 was 7.3x slower."""
    import re

    path = fixture("loop_before")
    starts = [
        s
        for (s,) in raw(
            path,
            "SELECT n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            "WHERE n.eventType = 59 AND coalesce(n.text, s.value) = 'batch_to_device' ORDER BY n.start",
        )
    ]
    walls = [b - a for a, b in zip(starts, starts[1:])]  # iterations 0..28 of the delimiter loop
    typical = sorted(walls[2:])[len(walls[2:]) // 2]
    res = _cli("iterations", path)
    line = next(x for x in res.stdout.splitlines() if x.startswith("outliers: "))
    m = re.fullmatch(
        r"outliers: iterations 9, 19, 29 are ([\d.]+)x slower than the median; also slow: 18 \(([\d.]+)x\)", line
    )
    assert m, line
    assert float(m.group(1)) > 3 * float(m.group(2))  # not within the one figure's band
    assert float(m.group(2)) == pytest.approx(walls[18] / typical, abs=0.15)


def test_no_gaps_says_the_shortest_gap_it_looked_for():
    """An empty gaps answer printed `no gaps`, though shorter gaps may be there: it names its threshold.
    train_small's longest gap (nsys recipe gpu_gaps at 1 ms, reference/) is under 5 s, so none is of 5s or more;
    at the gap's own length there is one."""
    import csv

    rows = list(
        csv.DictReader(open(fixture("train_small").parent / "reference" / "train_small_gpu_gaps_min1ms_analysis.csv"))
    )
    longest = max(int(r["Duration"]) for r in rows)
    assert longest < 5_000_000_000
    res = _cli("gaps", fixture("train_small"), "--min", "5s")
    assert res.exit_code == 0 and res.stdout == "no gaps of at least 5s (--min sets the shortest)\n"
    res = _cli("gaps", fixture("train_small"), "--min", f"{longest // 1000}us", "-f", "csv")
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 2


def test_explain_without_activity_elsewhere_does_not_say_there_are_no_gaps():
    """compile_infer (fixtures/compile_infer/COMMAND.md): one thread launches 4 kernels per `infer <i>` step and
    the GPU idles between them, so gaps of 50 us or more are there, with no other thread or process traced during
    them. `gaps --explain` printed `no gaps of at least 50us`, though `gaps` lists them: it says what it lists."""
    path = fixture("compile_infer")
    gaps = raw(
        path,
        'SELECT count(*) FROM (SELECT start - lag("end") OVER (ORDER BY start) AS g '
        "FROM CUPTI_ACTIVITY_KIND_KERNEL) WHERE g >= 50000",
    )[0][0]
    assert gaps > 0
    res = _cli("gaps", path, "--min", "50us", "-f", "csv")
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 1 + gaps
    res = _cli("gaps", path, "--min", "50us", "--explain")
    assert res.exit_code == 0
    assert res.stdout == (
        "no activity of other threads or processes during GPU gaps of at least 50us (--min sets the shortest)\n"
    )


def test_a_gap_spent_loading_gpu_code_is_caused_by_load():
    """PyTorch's first steps load each kernel's module at its first launch (CUDA's lazy loading:
    cuLibraryLoadData, cuModuleLoadData): pytorch_nvtx's warm-up gaps in which such calls cover at least half the
    gap (and more than calls of any other kind) are of cause `load`, counted here from the raw calls; they were
    put down to the operator's range or to `launch`."""
    path = fixture("pytorch_nvtx")
    gaps = loaded(str(path)).gaps(include_warmup=True)
    calls: dict[int, dict[str, list[tuple[int, int]]]] = {}
    loading = 0
    for g in gaps.iter_rows(named=True):
        kinds = calls.setdefault(g["pid"], _calls_by_kind(path, g["pid"]))
        cover = {k: _union_in(iv, g["start_ns"], g["end_ns"]) for k, iv in kinds.items()}
        top = max(cover.values(), default=0)
        if cover.get("load", 0) * 2 >= g["duration_ns"] and cover["load"] == top:
            loading += 1
            assert g["cause"] == "load", g
        elif cover.get("load", 0) * 5 < g["duration_ns"]:  # under a fifth: never the cause
            assert g["cause"] != "load", g
    assert loading >= 3
