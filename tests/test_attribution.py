"""Where nsysql deliberately differs from nsys, and the facts true by construction of the workloads."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import fixture, h200, loaded, reference_csv


def kernels_in(prof, range_name, attribution):
    return prof.kernels_by_range(range=range_name, attribution=attribution).filter(pl.col("range") == range_name)


@pytest.mark.parametrize("path", [lambda: h200("train_osrt.sqlite"), lambda: fixture("train_small")])
def test_process_attribution_puts_backward_kernels_in_backward_pass(path):
    path = path()
    prof = loaded(str(path))
    # Under nsys's rule Backward Pass gets only what the main thread launched (the grad fill)...
    thread = kernels_in(prof, "Backward Pass", "thread")
    nsys = pl.read_csv(reference_csv(path, "nvtx_kern_sum"), infer_schema_length=0).filter(
        pl.col("NVTX Range") == ":Backward Pass"
    )
    assert thread["count"].sum() == nsys["Kern Inst"].cast(pl.Int64).sum()
    # ...while the backward GEMMs run on the autograd thread, under no range on their own thread.
    autograd = prof.sql("""
        SELECT count(*) AS n FROM gpu_ops_named o
        WHERE kind = 'kernel' AND api_tid <> (SELECT tid FROM nvtx_ranges WHERE name = 'Backward Pass' LIMIT 1)
          AND NOT EXISTS (SELECT 1 FROM op_ranges x WHERE x.op_id = o.op_id AND x.via = 'thread')""")["n"][0]
    assert autograd > 0
    process = kernels_in(prof, "Backward Pass", "process")
    assert process["count"].sum() == thread["count"].sum() + autograd
    assert process["kernel"].str.contains("gemm|Kernel2").any()


def test_cross_thread_start_end_range_is_kept():
    prof = loaded(str(h200("threads.sqlite")))
    r = prof.sql("SELECT * FROM nvtx_ranges WHERE end_tid <> tid")
    assert r.height == 1 and r["style"][0] == "StartEnd"
    want = pl.read_csv(reference_csv(h200("threads.sqlite"), "nvtx_sum"), infer_schema_length=0)
    want = want.filter(pl.col("Range") == ":cross_thread_phase")
    assert r["duration_ns"][0] == int(want["Total Time (ns)"][0])
    # nsys's GPU projection drops it; nsysql credits it with the GPU work launched on either thread inside it
    proj = pl.read_csv(reference_csv(h200("threads.sqlite"), "nvtx_gpu_proj_sum"), infer_schema_length=0)
    assert ":cross_thread_phase" not in proj["Range"].to_list()
    got = prof.ranges(attribution="thread").filter(pl.col("name") == "cross_thread_phase")
    assert got["gpu_ops"][0] > 0


def test_whole_graph_replays_are_gpu_work():
    prof = loaded(str(h200("graph_whole.sqlite")))
    graphs = prof.sql("SELECT count(*) AS n, min(duration_ns) AS d FROM gpu_ops WHERE kind = 'graph'")
    assert graphs["n"][0] == 30 and graphs["d"][0] > 50_000
    # nsys's nvtx_gpu_proj_sum has no graph_step row at all; nsysql credits each replay to its range
    proj = pl.read_csv(reference_csv(h200("graph_whole.sqlite"), "nvtx_gpu_proj_sum"), infer_schema_length=0)
    assert ":graph_step" not in proj["Range"].to_list()
    row = prof.ranges(attribution="thread").filter(pl.col("name") == "graph_step")
    assert row["gpu_ops"][0] == 30
    assert row["gpu_proj_ns"][0] >= graphs["d"][0] * 30


def test_graph_node_kernels_each_count_as_an_op():
    prof = loaded(str(h200("graph_node.sqlite")))
    proj = pl.read_csv(reference_csv(h200("graph_node.sqlite"), "nvtx_gpu_proj_sum"), infer_schema_length=0)
    nsys = proj.filter(pl.col("Range") == ":graph_step")
    row = prof.ranges(attribution="thread").filter(pl.col("name") == "graph_step")
    assert row["gpu_proj_ns"][0] == int(nsys["Total Proj Time (ns)"][0])  # same projection
    node_kernels = prof.sql("SELECT count(*) AS n FROM gpu_ops WHERE graph_node_id IS NOT NULL AND kind='kernel'")
    assert int(nsys["Total GPU Ops"][0]) == 30  # nsys: one op per cudaGraphLaunch
    assert row["gpu_ops"][0] == node_kernels["n"][0] == 720  # nsysql: every node kernel


def test_correlation_ids_join_per_process():
    """Each launched op matches its API call in the same process (correlation ids repeat across processes)."""
    for rank in ("rank0", "rank1"):
        prof = loaded(str(fixture("ddp_pair").parent / f"{rank}.sqlite"))
        bad = prof.sql("""SELECT count(*) AS n FROM gpu_ops_named o JOIN api_calls a ON a.call_id = o.api_call_id
                          WHERE a.pid <> o.pid OR a.correlation_id <> o.correlation_id
                             OR a.start_ns > o.start_ns""")
        assert bad["n"][0] == 0
        assert (
            prof.sql("SELECT count(*) AS n FROM gpu_ops_named WHERE api_call_id IS NULL AND kind='kernel'")["n"][0] == 0
        )


def test_innermost_counts_each_kernel_once():
    prof = loaded(str(fixture("train_small")))
    all_ = prof.kernels_by_range(attribution="process")
    inner = prof.kernels_by_range(innermost=True, attribution="process")
    n_attributed = prof.sql(
        "SELECT count(DISTINCT op_id) AS n FROM op_ranges x JOIN gpu_ops o USING (op_id) WHERE o.kind = 'kernel'"
    )["n"][0]
    assert inner["count"].sum() == n_attributed
    assert all_["count"].sum() > inner["count"].sum()  # nested Batch > Forward Pass double counts
    batch = prof.kernels_by_range(range="Batch", innermost=True)
    assert set(batch["range"]) == {f"Batch{i}" for i in range(20)}
    assert batch["count"].sum() == n_attributed  # every kernel of the loop is inside some Batch<i>


def test_range_pattern_forms():
    prof = loaded(str(fixture("train_small")))
    assert prof.resolve_range("Forward Pass") == ["Forward Pass"]
    assert len(prof.resolve_range("Batch")) == 20
    assert set(prof.resolve_range("Batch1")) == {"Batch1"}
    assert set(prof.resolve_range("^(Forward|Backward) Pass$")) == {"Forward Pass", "Backward Pass"}


def _with_ranges(tmp_path, ranges):
    """train_small with extra NVTX push/pop ranges on the autograd thread, each enclosing the launch of one backward
    kernel of Batch5: `ranges` is a list of (name, domain or None). Returns the copy's path and, per added range,
    the correlation id of the kernel whose launch it encloses (read here with Python's sqlite3)."""
    import shutil
    import sqlite3

    path = tmp_path / "train_small_ranges.sqlite"
    shutil.copyfile(fixture("train_small"), path)
    db = sqlite3.connect(path)
    main_tid, bstart, bend = db.execute(
        "SELECT globalTid, start, \"end\" FROM NVTX_EVENTS WHERE text = 'Backward Pass' ORDER BY start LIMIT 1 OFFSET 5"
    ).fetchone()
    launches = db.execute(
        'SELECT r.globalTid, r.start, r."end", r.correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r '
        "JOIN CUPTI_ACTIVITY_KIND_KERNEL k USING (correlationId) "
        "WHERE r.globalTid <> ? AND r.start >= ? AND r.start < ? ORDER BY r.start",
        (main_tid, bstart, bend),
    ).fetchall()
    assert len(launches) >= len(ranges)
    out = []
    for i, ((name, domain), (tid, start, end, corr)) in enumerate(zip(ranges, launches[::2])):
        dom = 0
        if domain:
            dom = 100 + i
            db.execute(
                "INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (?, 75, ?, ?, ?)",
                (bstart, domain, tid, dom),
            )
        db.execute(
            'INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, ?)',
            (start - 1, end + 1, name, tid, dom),
        )
        out.append(corr)
    db.commit()
    db.close()
    return path, out


def _credited(prof, corr):
    return dict(
        prof.sql(f"""SELECT r.name, x.via::VARCHAR AS via FROM op_ranges x JOIN gpu_ops o USING (op_id)
                             JOIN nvtx_ranges r USING (range_id) WHERE o.correlation_id = {corr}""").rows()
    )


def test_library_range_on_the_launching_thread_keeps_the_main_threads_ranges(tmp_path):
    """A kernel the autograd thread launches inside a library's range (CCCL, NCCL) is credited to that range (its
    own thread's) and, under the process rule, to the user's `Backward Pass` and `Batch5` open on the main thread;
    a range of the user's own (default domain) on the autograd thread stands for the user's phase there instead."""
    import nsysql

    path, (lib, nccl, user) = _with_ranges(
        tmp_path, [("cub::DeviceRadixSort::SortPairs", "CCCL"), ("ncclAllReduce", "NCCL"), ("my_helper", None)]
    )
    prof, base = nsysql.load(path, cache=False), loaded(str(fixture("train_small")))
    assert _credited(prof, lib) == {
        "cub::DeviceRadixSort::SortPairs": "thread",
        "Backward Pass": "process",
        "Batch5": "process",
    }
    assert _credited(prof, nccl) == {"ncclAllReduce": "thread", "Backward Pass": "process", "Batch5": "process"}
    assert _credited(prof, user) == {"my_helper": "thread"}
    # kernels-by-range, ranges and iterations read the same op_ranges: Backward Pass and Batch5 lose only the
    # kernel under the user's own range
    for attribution, lost in (("process", 1), ("thread", 0)):
        got, was = (kernels_in(p, "Backward Pass", attribution)["count"].sum() for p in (prof, base))
        assert got == was - lost
        got, was = (
            p.ranges(attribution=attribution).filter(pl.col("name") == "Batch5")["gpu_ops"][0] for p in (prof, base)
        )
        assert got == was - lost
    assert kernels_in(prof, "cub::DeviceRadixSort::SortPairs", "thread")["count"].sum() == 1
    # iterations: a kernel belongs to the step it was launched in, whatever its thread; the per-phase GPU time
    # reads op_ranges, so `Backward Pass` of Batch5 loses the one kernel under the user's own range
    dur = prof.sql(f"SELECT duration_ns FROM gpu_ops WHERE correlation_id = {user}")["duration_ns"][0]
    got, was = (p.iterations().filter(pl.col("name") == "Batch5").row(0, named=True) for p in (prof, base))
    assert got["kernels"] == was["kernels"]
    assert got["Backward Pass gpu_ns"] == was["Backward Pass gpu_ns"] - dur
