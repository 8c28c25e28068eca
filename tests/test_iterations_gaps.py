"""Iterations and idle gaps: facts true by construction of the workloads, and nsys recipe gpu_gaps."""

from __future__ import annotations

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, built_cache, craft, fixture, h200, loaded, public_exports, raw
from conftest import PUBLIC as SHARED_PUBLIC

from nsysql.analyses.gaps import parse_duration
from nsysql.cli import main
from nsysql.errors import NsysqlError


def slow_gaps(prof, its, min_ns=20_000_000):
    g = prof.gaps(min_ns=min_ns)
    return g.filter(pl.col("iteration").is_in(its))


def test_train_osrt_iterations():
    prof = loaded(str(h200("train_osrt.sqlite")))
    df = prof.iterations(range="Batch")
    assert df.height == 60
    assert df["name"].to_list() == [f"Batch{i}" for i in range(60)]
    assert df.filter(pl.col("iteration") == 0)["warmup"][0]
    assert df.filter(pl.col("outlier"))["iteration"].to_list() == [9, 19, 29, 39, 49, 59]
    # each slow batch holds a >= 20 ms gap whose cause is the sleep in Load data
    g = prof.gaps(range="Batch", min_ns="20ms")
    for i in (9, 19, 29, 39, 49, 59):
        mine = g.filter(pl.col("iteration") == i)
        assert mine.height >= 1 and (mine["cause"] == "host:Load data").all(), mine
        assert (mine["os_call"] == "clock_nanosleep").all()
    # process attribution: Backward Pass gets the backward kernels (nsys's rule credits only the grad fill)
    steady = df.filter(~pl.col("warmup"))
    assert (steady["Backward Pass gpu_ns"] > steady["Forward Pass gpu_ns"]).all()
    stats = prof.iteration_stats(range="Batch").row(0, named=True)
    assert stats["outlier_pattern"].startswith("iterations 9, 19, 29, 39, 49, 59 (every 10th)")


def test_train_osrt_idle_by_cause_ranks_load_data_first():
    prof = loaded(str(h200("train_osrt.sqlite")))
    by = prof.gaps(range="Batch", by="cause")
    assert by["cause"][0] == "host:Load data"
    assert by["counted"][0] == "steady-state iterations"
    # warm-up left out by default: the first steps' one-off initialisation shows only with --include-warmup
    everything = prof.gaps(range="Batch", by="cause", include_warmup=True)
    assert everything["idle_ns"].sum() > by["idle_ns"].sum()
    assert "host:Forward Pass" in everything["cause"].to_list()


def test_gaps_in_nested_ranges_are_counted_once():
    """A pattern naming a range and the ranges nested in it (`Load data` runs inside each `BatchN`): every idle
    stretch is one gap, inside the outermost instance, so the gaps, their totals and the span are those of
    `Batch` alone, and no share passes 100%."""
    prof = loaded(str(fixture("train_small")))
    nested, outer = "^(Batch[0-9]+|Load data)$", "Batch"
    assert prof.gaps(range=nested, min_ns=0).equals(prof.gaps(range=outer, min_ns=0))
    for warmup in (False, True):
        a = prof.gaps(range=nested, by="cause", include_warmup=warmup)
        b = prof.gaps(range=outer, by="cause", include_warmup=warmup)
        assert a.drop("counted").equals(b.drop("counted")), (a, b)
        assert a["pct_of_span"].sum() <= 100 and a["pct_of_idle"].sum() == pytest.approx(100)


@pytest.mark.parametrize("name,every,first", [("train_small", 5, 4), ("loop_before", 10, 9)])
def test_own_fixtures_slow_steps_by_construction(name, every, first):
    """train_small sleeps 20 ms in `Load data` at i % 5 == 4; loop_before 25 ms in `batch_to_device` at
    i % 10 == 9 (fixtures/README.md)."""
    prof = loaded(str(fixture(name)))
    df = prof.iterations()
    slow = list(range(first, df.height, every))
    assert set(slow) <= set(df.filter(pl.col("outlier"))["iteration"].to_list())
    g = slow_gaps(prof, slow)
    phase = "Load data" if name == "train_small" else "batch_to_device"
    assert sorted(g["iteration"].unique().to_list()) == slow
    assert (g["cause"] == f"host:{phase}").all()


def test_big_step_by_construction():
    """big_step: 4 steps, step 2 sleeps 20 ms in `Load data`; steady steps launch the same kernels each."""
    prof = loaded(str(fixture("big_step")))
    df = prof.iterations()
    assert df["name"].to_list() == ["Batch0", "Batch1", "Batch2", "Batch3"]
    steady = df.filter(~pl.col("warmup"))
    assert steady["kernels"].n_unique() == 1 and steady["kernels"][0] > 1000
    g = slow_gaps(prof, [2])
    assert g.height == 1 and g["cause"][0] == "host:Load data" and g["os_call"][0] == "clock_nanosleep"
    assert g["duration_ns"][0] >= 20_000_000


def test_delimiter_detection_without_wrapper_range():
    prof = loaded(str(fixture("loop_before")))
    st = prof.iteration_stats().row(0, named=True)
    assert st["range"] == "batch_to_device" and st["mode"] == "delimiter" and st["iterations"] == 30
    df = prof.iterations()
    # consecutive windows tile the loop: each iteration ends where the next begins
    assert (df["end_ns"].head(29) == df["start_ns"].tail(29)).all()
    assert {"forward cpu_ns", "backward gpu_ns", "optimizer_step cpu_ns"} <= set(df.columns)


def test_wrapper_detection_and_ddp_straggler_steps():
    prof = loaded(str(FIXTURES / "ddp_pair" / "rank1.sqlite"))
    st = prof.iteration_stats().row(0, named=True)
    assert st["range"] == "step" and st["mode"] == "wrapper"
    out = prof.iterations().filter(pl.col("outlier"))["iteration"].to_list()
    assert {2, 7, 12, 17} <= set(out)  # rank 1 sleeps 30 ms in `data` at i % 5 == 2


REF = [(n, FIXTURES / n / f"{n}.sqlite") for n in ("train_small", "loop_before", "loop_after", "big_step")] + [
    (r, FIXTURES / "ddp_pair" / f"{r}.sqlite") for r in ("rank0", "rank1")
]


@pytest.mark.parametrize("name,path", REF, ids=[r[0] for r in REF])
@pytest.mark.parametrize("suffix,min_", [("gpu_gaps_analysis", "500ms"), ("gpu_gaps_min1ms_analysis", "1ms")])
def test_gaps_equal_nsys_recipe_gpu_gaps(name, path, suffix, min_):
    ref = pl.read_csv(path.parent / "reference" / f"{name}_{suffix}.csv")
    got = loaded(str(path)).gaps(min_ns=min_)
    assert sorted(zip(ref["Start"], ref["Duration"])) == sorted(zip(got["start_ns"], got["duration_ns"]))
    assert set(ref["PID"]) == set(got["pid"])


@pytest.mark.parametrize("name", ["graph_whole.sqlite", "graph_node.sqlite"])
def test_no_gap_while_a_graph_runs(name):
    prof = loaded(str(h200(name)))
    g = prof.gaps(range="graph_step", min_ns=0)
    graph_work = prof.sql("SELECT start_ns, end_ns FROM gpu_ops WHERE kind = 'graph' OR graph_node_id IS NOT NULL")
    assert graph_work.height >= 30
    overlapping = g.join(graph_work, how="cross").filter(
        (pl.col("start_ns") < pl.col("end_ns_right")) & (pl.col("end_ns") > pl.col("start_ns_right"))
    )
    assert overlapping.height == 0


def test_gaps_are_device_wide_not_per_stream():
    prof = loaded(str(h200("threads.sqlite")))
    streams = prof.sql("SELECT DISTINCT stream_id, api_tid FROM gpu_ops_named WHERE kind = 'kernel'")
    assert streams["stream_id"].n_unique() >= 2 and streams["api_tid"].n_unique() >= 2
    g = prof.gaps(min_ns=0)
    ops = prof.sql("SELECT start_ns, end_ns FROM gpu_ops")
    hit = g.join(ops, how="cross").filter(
        (pl.col("start_ns") < pl.col("end_ns_right")) & (pl.col("end_ns") > pl.col("start_ns_right"))
    )
    assert hit.height == 0  # a gap on one stream while the other stream runs is not a gap
    assert g["device_id"].n_unique() == 1


PUBLIC = public_exports()


@pytest.mark.skipif(not PUBLIC, reason="public exports absent")
@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.name[:40])
@pytest.mark.parametrize("cmd", [["iterations"], ["gaps"], ["gaps", "--by", "cause"]])
def test_public_iterations_and_gaps_work_or_say_why(path, cmd):
    res = CliRunner().invoke(main, [cmd[0], str(path), *cmd[1:]], catch_exceptions=False)
    assert "Traceback" not in res.output
    if res.exit_code:
        assert res.exit_code == 2
        assert len(res.stderr.strip().splitlines()) == 1
        assert any(w in res.stderr for w in ("no NVTX", "no GPU work", "no repeating loop found")), res.stderr


def test_durations():
    assert parse_duration("500us") == 500_000
    assert parse_duration("2ms") == 2_000_000
    assert parse_duration("1s") == 1_000_000_000
    assert parse_duration("1.5ms") == 1_500_000
    assert parse_duration("750ns") == parse_duration(750) == 750
    assert parse_duration("0") == 0
    with pytest.raises(Exception):
        parse_duration("fast")


def test_gaps_without_file_uses_nsysql_profile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache = built_cache(tmp_path / "cache", fixture("train_small"))  # of its own: no profile analysed last
    env = {"NSYSQL_PROFILE": str(fixture("train_small")), "NSYSQL_CACHE_DIR": str(cache)}
    res = CliRunner(env=env).invoke(main, ["gaps", "--range", "Batch", "--by", "cause", "-f", "csv"])
    assert res.exit_code == 0 and "NSYSQL_PROFILE" in res.stderr
    assert res.stdout.splitlines()[1].startswith("host:Load data,")


def test_range_span_counts_only_the_processes_with_gpu_work(tmp_path):
    """`gaps --range` explains the idle time of the processes that own a GPU: the span it counts is their
    instances of the range, never those of a process without GPU work (here a copy of train_small's NVTX ranges
    in pid 4242, which launches nothing), so the answer is train_small's own."""
    src = fixture("train_small")
    shift = (4242 - 1157) << 24  # globalTid = 2^48 + pid << 24 + tid
    cols = [r[1] for r in raw(src, "PRAGMA table_info(NVTX_EVENTS)")]
    sel = [f"{c} + {shift}" if c in ("globalTid", "endGlobalTid") else c for c in cols]
    path = craft(
        tmp_path / "gpuless.sqlite",
        f"INSERT INTO NVTX_EVENTS ({', '.join(cols)}) SELECT {', '.join(sel)} FROM NVTX_EVENTS",
        f"INSERT INTO PROCESSES (globalPid, pid, name) SELECT globalPid + {shift}, 4242, 'loader' FROM PROCESSES "
        "WHERE pid = 1157",
    )
    own = raw(
        src,
        "SELECT sum(e.end - e.start) FROM NVTX_EVENTS e WHERE e.eventType = 59 "
        "AND coalesce(e.text, (SELECT value FROM StringIds WHERE id = e.textId)) GLOB 'Batch[0-9]*'",
    )[0][0]
    import nsysql

    prof = nsysql.load(path, cache_dir=tmp_path / "cache")
    by = prof.gaps(range="Batch", by="cause", include_warmup=True)
    prof.close()
    assert by["counted"][0] == "instances of Batch"
    assert by["span_ns"][0] == own


@pytest.mark.parametrize("name", ["train_small", "big_step", "loop_before"])
@pytest.mark.parametrize("skip", [None, 2])
def test_spans_are_the_iterations_windows_and_flags(name, skip):
    """What gaps are indexed by when no iterations answer exists yet (analyses.iterations.spans): the same
    iteration, name, start_ns, end_ns, wall_ns, warmup and outlier as iterations() computes with the GPU work."""
    from nsysql.analyses import iterations as it

    prof = loaded(str(fixture(name)))  # the session's entry: the tables as any load builds them
    full = it.iterations(prof.con, skip=skip)
    spans = it.spans(prof.con, skip=skip)
    assert spans.height >= 3
    assert spans.equals(full.select(spans.columns))
    assert spans.columns == ["iteration", "name", "start_ns", "end_ns", "wall_ns", "warmup", "outlier"]


@pytest.mark.parametrize("name", ["graph_node.sqlite", "graph_whole.sqlite", "threads.sqlite", "train_osrt.sqlite"])
def test_gpu_busy_pct_is_the_busy_share_of_the_iteration_windows(name):
    """GPU busy % is the share of each step the device ran something: at most 100% even where the GPU work
    launched in an iteration runs after its window (graph_step ranges time only the graph launches: those
    steps are timed on the GPU, step_ns, and their idle is the GPU step's time its ops left uncovered)."""
    prof = loaded(str(h200(name)))
    df = prof.iterations()
    steady = df.filter(~pl.col("warmup"))
    expected = ((steady["step_ns"] - steady["step_idle_ns"]) / steady["step_ns"] * 100).median()
    got = prof.iteration_stats()["median_gpu_busy_pct"][0]
    assert 0 <= got <= 100 and got == pytest.approx(expected)
    assert (df["idle_ns"] >= 0).all() and (df["idle_ns"] <= df["wall_ns"]).all()


@pytest.mark.parametrize(
    "name,after",
    [("graph_node.sqlite", "eager_step"), ("graph_whole.sqlite", "eager_step"), ("threads.sqlite", "main/startend")],
)
def test_last_delimiter_iteration_ends_with_its_loop(name, after):
    """Delimiter ranges (no children): the last iteration runs over the siblings that followed the step before
    it, not over the ranges the program opens after the loop (10 `eager_step`s after 30 `graph_step`s)."""
    prof = loaded(str(h200(name)))
    df = prof.iterations()
    assert prof.iteration_stats()["mode"][0] == "delimiter"
    later = prof.sql(f"SELECT min(start_ns) AS t FROM nvtx_ranges WHERE name = '{after}'")["t"][0]
    assert df["start_ns"][-1] < later and df["end_ns"][-1] <= later
    assert not df["outlier"][-1]


def test_last_delimiter_iteration_keeps_its_phases():
    """loop_after: every step is batch_to_device, forward, backward, optimizer_step; the last keeps all four."""
    prof = loaded(str(fixture("loop_after")))
    last = prof.iterations().row(-1, named=True)
    opt = prof.sql("SELECT max(end_ns) AS e FROM nvtx_ranges WHERE name = 'optimizer_step'")["e"][0]
    assert last["end_ns"] == opt
    assert all(last[f"{p} cpu_ns"] > 0 for p in ("forward", "backward", "optimizer_step"))


def test_operator_ids_are_not_iteration_numbers():
    """PyTorch emit_nvtx names each operator call `aten::mul, op_id = N`: the ids are not a counter, so no
    such family is taken as the iteration (that 1 s capture has no step range at all)."""
    path = SHARED_PUBLIC / "GindaChen__nsys-ai__h100_2gpu_1s.sqlite"
    if not path.exists():
        pytest.skip("public export absent")
    prof = loaded(str(path))
    assert prof.sql("SELECT count(*) AS n FROM nvtx_ranges WHERE name LIKE 'aten::mul, op_id = %'")["n"][0] >= 3
    with pytest.raises(NsysqlError, match="repeats"):
        prof.iterations()


def test_iteration_family_with_gpu_work_wins_a_tie():
    """pipit saxpy: `MPI_Send` (10) and `saxpy` (5) repeat at depth 0; the MPI_Send windows mostly launch no
    kernel, each saxpy window launches the saxpy kernel."""
    path = SHARED_PUBLIC / "hpcgroup__pipit__saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
    if not path.exists():
        pytest.skip("public export absent")
    prof = loaded(str(path))
    st = prof.iteration_stats().row(0, named=True)
    df = prof.iterations()
    assert st["range"] == "saxpy" and df.height == 5 and (df["kernels"] >= 1).all()
    assert "repeats 5 times at depth 0" in st["detected"]


@pytest.mark.parametrize("name", ["train_small", "loop_before", "big_step"])
def test_an_api_call_at_the_edge_of_a_gap_is_not_its_cause(name):
    """The seconds before training (imports, model set-up) end with one short cudaMemcpy: that copy covers
    almost none of the gap, so the gap is not `memcpy`."""
    prof = loaded(str(fixture(name)))
    g = prof.gaps().sort("duration_ns", descending=True).row(0, named=True)
    assert g["duration_ns"] > 1_000_000_000 and g["api_cover_pct"] < 20
    assert g["cause"] not in ("alloc", "launch", "memcpy", "sync")


def test_pageable_copy_finding_needs_real_volume():
    """train_small copies each batch (40 MiB in all) from pageable memory: a finding. Jorgedavyd's report4
    copies a few scalars that way: not worth one."""

    def findings(path):
        return loaded(str(path)).summary()["findings"]["finding"].to_list()

    assert "pageable host-to-device copies" in findings(fixture("train_small"))
    small = SHARED_PUBLIC / "Jorgedavyd__cuda__report4.sqlite"
    if small.exists():
        pc = loaded(str(small)).sql(
            "SELECT count(*) AS n, sum(bytes) AS b FROM gpu_ops WHERE kind = 'memcpy' AND src_kind = 'Pageable'"
        )
        assert pc["n"][0] >= 1 and pc["b"][0] < 2**20
        assert "pageable host-to-device copies" not in findings(small)


def test_steady_state_sentence_is_the_same_everywhere(tmp_path):
    """The steady-state figures, computed here from the iterations table (the non-warm-up rows), read the same in
    `nsysql iterations`, in the summary's iterations fact and in the HTML report's Iterations note."""
    path = fixture("train_small")
    prof = loaded(str(path))
    df = prof.iterations()
    steady = df.filter(~pl.col("warmup"))
    t = steady["wall_ns"].cast(pl.Float64)
    busy = ((steady["wall_ns"] - steady["idle_ns"]) / steady["wall_ns"] * 100).median()
    sentence = (
        f"steady state ({steady.height} of {df.height}): median {t.median() / 1e6:.2f} ms, "
        f"mean {t.mean() / 1e6:.2f} ms, p90 {t.quantile(0.9, 'linear') / 1e6:.2f} ms, "
        f"max {t.max() / 1e6:.2f} ms, CV {t.std() / t.mean():.2f}, GPU busy {busy:.0f}% of a step (median)"
    )
    cli = CliRunner().invoke(main, ["iterations", str(path)])
    assert cli.exit_code == 0 and f"\n{sentence}\n" in cli.output, cli.output
    facts = dict(prof.summary()["facts"].select("key", "value").iter_rows())
    assert facts["iterations"].endswith(f"warm-up; {sentence}"), facts["iterations"]
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(path), "-o", str(out)])
    assert r.exit_code == 0 and f"(shaded); {sentence}. " in out.read_text(), r.output
