"""Iteration detection states its evidence or abstains: real exports whose repeating ranges are not a loop
(public corpus, rows 22-25 of its INDEX.md), and the loops that must still be found."""

from __future__ import annotations

import re

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, h200_exports, loaded, own_exports

import nsysql
from nsysql.cli import main
from nsysql.errors import NsysqlError

MEMFUSION = PUBLIC / "LeiWang1999__memfusion_artifact__report1.sqlite"
DLPROF = PUBLIC / "MohanadOdema__DLProf__nsys_profile.sqlite"
FUSER = PUBLIC / "NVIDIA__Fuser__report1.sqlite"
POOLFORMER = PUBLIC / "YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite"

# the funcStack of the model's .cuda() parameter copies (a regex over DLProf's range names)
CUDA_COPIES = "funcStack': '/<module>/dummy_network::cuda/"
# findings that rest on iterations (nsysql.analyses.findings)
ITERATION_FINDINGS = {"slow iterations", "periodic slow iterations", "launch bound", "GPU mostly idle"}


def public(path):
    if not path.exists():
        pytest.skip(f"{path.name} not present")
    return loaded(str(path))


def one_line_exit_2(args):
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output
    return res.stderr


@pytest.mark.parametrize("path", [MEMFUSION, DLPROF], ids=["tensorrt", "dlprof"])
def test_one_pass_of_a_model_is_no_loop(path):
    """memfusion: one `ExecutionContext::execute` of a ResNet-18 engine; DLProf: one forward pass of a small
    CNN. Neither holds a loop, so nothing is said about iterations: no table, no iteration line, no finding
    built on iterations."""
    prof = public(path)
    execute = prof.sql("SELECT count(*) AS n FROM nvtx_ranges WHERE name = 'ExecutionContext::execute'")["n"][0]
    forward = prof.sql("SELECT count(*) AS n FROM nvtx_ranges WHERE name LIKE '%''op'': ''linear''%'")["n"][0]
    assert (execute, forward) in ((1, 0), (0, 3))  # memfusion's one execute; DLProf's 3 linear layers, once each
    with pytest.raises(NsysqlError, match="no repeating loop found"):
        prof.iterations()
    err = one_line_exit_2(["iterations", str(path)])
    assert "no repeating loop found" in err and "--range" in err
    summ = prof.summary()
    facts = dict(summ["facts"].select("key", "value").iter_rows())
    assert facts["iterations"].startswith("none: no repeating loop found")
    assert "outliers" not in facts
    assert not ITERATION_FINDINGS & set(summ["findings"]["finding"].to_list())
    from nsysql.report import snippet

    line = next(x for x in snippet(prof).splitlines() if x.startswith("- **iterations**: "))  # `report -f markdown`
    assert re.match(r"- \*\*iterations\*\*: `+ ?none: no repeating loop found", line), line  # a code span


def test_dlprof_cuda_copies_launch_no_kernel():
    """The family the detector used to take (10 `.cuda()` parameter copies at depth 0) launches memcpys and not
    one kernel, while the forward pass after it launches 59: the reason it is rejected, and no launch-bound
    finding may come of it."""
    prof = public(DLPROF)
    with pytest.raises(NsysqlError) as err:
        prof.iterations()
    assert "(10 instances at depth 0" in str(err.value) and "0 of its 10 iterations launch kernels" in str(err.value)
    copies = prof.iterations(range=CUDA_COPIES)
    assert copies.height == 10 and copies["kernels"].sum() == 0 and (copies["memcpy_ns"] > 0).all()
    assert prof.sql("SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'")["n"][0] == 59
    assert "launch bound" not in prof.summary()["findings"]["finding"].to_list()


def test_fuser_host_helper_is_not_the_loop():
    """nvFuser: `python_frontend::define_vector_fn` repeats 12 times at depth 1 (and 7 more nested at depth 2)
    but encloses no GPU work in a profile that has some. The chosen family, if any, launches kernels in most
    of its iterations; the sentence counts exactly the rows of the table."""
    prof = public(FUSER)
    assert prof.sql("SELECT count(*) AS n FROM gpu_ops WHERE kind = 'kernel'")["n"][0] > 0
    try:
        df, st = prof.iterations(), prof.iteration_stats().row(0, named=True)
    except NsysqlError as e:
        assert "no repeating loop found" in str(e) and "define_vector_fn" in str(e)
    else:
        assert (df["kernels"] > 0).sum() >= df.height / 2
        assert f"repeats {df.height} times" in st["detected"]
    # named with --range: one depth, the most common; the sentence says what was left out
    depths = prof.sql(
        "SELECT depth, count(*) AS n FROM nvtx_ranges WHERE name = 'python_frontend::define_vector_fn'"
        " GROUP BY depth ORDER BY depth"
    )
    assert depths.rows() == [(1, 12), (2, 7)]
    df = prof.iterations(range="python_frontend::define_vector_fn")
    why = prof.iteration_stats(range="python_frontend::define_vector_fn")["detected"][0]
    assert df.height == 12 and "12 instances" in why and "at depth 1 (of its 19; the 7 at other depths" in why


def test_nvtx_only_profile_range_and_summary():
    """poolformer: NVTX and no CUDA tables; 188 frames of `reader`, `poolformer_forward`, ... follow each other
    on one thread. --range gives the 188 frames with the CPU time per sibling range and empty GPU columns;
    summary's ranges are the ranges with most CPU time, and it says so."""
    prof = public(POOLFORMER)
    assert prof.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0] == 0
    assert prof.sql("SELECT count(*) AS n FROM nvtx_ranges WHERE name = 'poolformer_forward'")["n"][0] == 188
    df = prof.iterations(range="poolformer_forward")
    assert df.height == 188 and (df["name"] == "poolformer_forward").all()
    for col in ("gpu_busy_ns", "idle_ns", "kernels", "kernel_ns"):
        assert df[col].null_count() == 188, col
    assert df["bbox_head cpu_ns"].min() > 0 and df["bbox_head gpu_ns"].null_count() == 188
    # the sibling push/pop ranges of a frame fit in it (the myelin start/end ranges are no phase)
    phases = pl.sum_horizontal(pl.col(c) for c in df.columns if c.endswith(" cpu_ns"))
    assert df.select((phases <= pl.col("wall_ns")).all()).item()
    # each window runs from one poolformer_forward to the next: they tile the frames
    assert (df["end_ns"].head(187) == df["start_ns"].tail(187)).all()
    assert prof.iteration_stats(range="poolformer_forward")["median_gpu_busy_pct"][0] is None
    res = CliRunner().invoke(
        main, ["iterations", str(POOLFORMER), "--range", "poolformer_forward", "-f", "csv"], catch_exceptions=False
    )
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 189
    summ = prof.summary()
    rg, every = summ["ranges"], prof.ranges()
    assert rg.height == 10 and rg["total_ns"].to_list() == every["total_ns"].sort(descending=True).head(10).to_list()
    assert "no NVTX range encloses GPU work" in dict(summ["facts"].select("key", "value").iter_rows())["ranges"]


def test_iteration_chart_with_more_phases_than_it_draws():
    """DLProf's 10 `.cuda()` wrappers each hold one child range with its own name (the tensor's shape): 10
    phases, more than the chart's 8 colours (`nsysql report` raised on this). The phases past the 8th join the
    grey bar, and each iteration's bars still add up to its time."""
    from nsysql.report import charts

    df = public(DLPROF).iterations(range=CUDA_COPIES)
    phases = [c for c in df.columns if c.endswith(" cpu_ns")]
    assert len(phases) == 10 > charts.MAX_PHASES
    fig, _ = charts.iterations_chart(df)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == charts.MAX_PHASES + 1
    heights = [sum(b.y[i] for b in bars) for i in range(df.height)]
    assert heights == pytest.approx((df["wall_ns"] / 1e6).to_list(), rel=1e-9)


LOOPS = own_exports() + h200_exports()


@pytest.mark.parametrize("path", LOOPS, ids=lambda p: p.stem)
def test_loops_are_found_and_the_sentence_counts_the_rows(path):
    """Every loop we made is still found, with its evidence: most iterations launch kernels, and the
    sentence's count is the number of rows."""
    prof = loaded(str(path))
    df, st = prof.iterations(), prof.iteration_stats().row(0, named=True)
    assert f"repeats {df.height} times at depth" in st["detected"] and "taken as the loop because" in st["detected"]
    assert ((df["kernels"] > 0) | (df["graph_ns"] > 0)).sum() >= df.height / 2  # graph_whole launches graphs
    assert df["start_ns"].is_sorted() and (df["end_ns"] > df["start_ns"]).all()


def test_a_loop_on_a_second_thread_is_not_called_the_main_thread(tmp_path):
    """train_small's `Batch` ranges moved to another thread of its process (tid 1194, whose globalTid ends 762;
    its main thread, tid = pid = 1157, keeps launching the kernels): the loop is found there, and said to run on
    the thread whose ranges hold the process's GPU work, not on "the main thread of its process", which 1194 is
    not. On the fixture as recorded, the loop runs on the main thread and is said so."""
    path = craft(tmp_path / "thread.sqlite", "UPDATE NVTX_EVENTS SET globalTid = 281494387950762")
    why = loaded(str(path)).iteration_stats()["detected"][0]
    assert "on thread 1194, the thread of its process whose NVTX ranges hold most of its GPU work;" in why
    assert "main thread" not in why
    main = loaded(str(fixture("train_small"))).iteration_stats()["detected"][0]
    assert "on thread 1157, the main thread of its process;" in main


def test_a_loop_of_epochs_says_the_batches_inside_and_how_to_take_them(tmp_path):
    """train_small with an `epoch N` range around each 5 of its 20 `Batch` ranges: the outermost family that
    repeats is the loop (4 epochs), and the sentence saying why names the family inside it, 5 per epoch, and the
    command that takes it; that command gives the 20 batches. train_small itself holds no such family."""
    import sqlite3

    path = tmp_path / "epochs.sqlite"
    craft(path)
    with sqlite3.connect(path) as c:
        batches = c.execute(
            "SELECT start, \"end\", globalTid FROM NVTX_EVENTS WHERE eventType = 59 AND text LIKE 'Batch%' "
            "ORDER BY start"
        ).fetchall()
        for e in range(4):
            first, last = batches[5 * e], batches[5 * e + 4]
            c.execute(
                'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) '
                "VALUES (?, ?, 59, ?, ?, 0)",
                (first[0] - 1, last[1] + 1, f"epoch {e}", first[2]),
            )
    prof = nsysql.load(str(path), cache_dir=str(tmp_path / "c"))
    said = prof.iteration_stats()["detected"][0]
    assert prof.iterations().height == 4 and said.startswith("`epoch` repeats 4 times at depth 0"), said
    assert "each iteration holds 5 `Batch` ranges on average (20 in all): `nsysql iterations --range Batch`" in said
    assert prof.iterations(range="Batch").height == len(batches) == 20
    assert "each iteration holds" not in loaded(str(fixture("train_small"))).iteration_stats()["detected"][0]
