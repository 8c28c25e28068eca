"""CUDA-graph kernels credited to the code that captured them (issue 34).

fixtures/graph_loop (COMMAND.md, fixtures/workloads/graph_loop.py): four layers, each in its own range `layer i`
while the graph is captured (a matmul: cuBLAS `Kernel2` + `splitKreduce_kernel`, then tanh, relu, sigmoid, gelu),
run eagerly 3 times in `warm-up` first, then the graph replayed once in each of 30 ranges `step <i>` with
--cuda-graph-trace=node. The expected sets are read here from the export's raw rows with Python's sqlite3."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import polars as pl
from conftest import craft, fixture, h200, loaded, reference_csv

GRAPH_LOOP = fixture("graph_loop")
STEPS = 30  # graph_loop.py --steps default: one replay per `step <i>`
WARMUP = 3  # eager runs of the layers in `warm-up`
PER_LAYER = 3  # kernels of one layer: Kernel2, splitKreduce_kernel, its activation's elementwise kernel
ACTIVATION = {"layer 0": "tanh", "layer 1": "clamp", "layer 2": "sigmoid", "layer 3": "Gelu"}  # relu is a clamp


def raw(path: Path, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        return db.execute(sql, args).fetchall()


def layer_ranges(path: Path) -> list[tuple[str, int, int, int]]:
    """(name, start, end, globalTid) of every `layer i` range."""
    return raw(path, "SELECT text, start, end, globalTid FROM NVTX_EVENTS WHERE text LIKE 'layer %' AND eventType = 59")


def replayed_by_layer(path: Path) -> dict[str, set[int]]:
    """Per layer: the rowids of the kernels replayed from graph nodes whose original node was created while that
    layer's range was open on the creating thread (instantiated node -> originalGraphNodeId -> its creation row)."""
    original = dict(
        raw(path, "SELECT graphNodeId, originalGraphNodeId FROM CUDA_GRAPH_NODE_EVENTS WHERE originalGraphNodeId > 0")
    )
    created = {
        n: (t, tid)
        for n, t, tid in raw(
            path, "SELECT graphNodeId, start, globalTid FROM CUDA_GRAPH_NODE_EVENTS WHERE originalGraphNodeId IS NULL"
        )
    }
    ranges = layer_ranges(path)
    out: dict[str, set[int]] = defaultdict(set)
    for rowid, node in raw(path, "SELECT rowid, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId > 0"):
        t, tid = created[original[node]]
        (name,) = [n for n, s, e, g in ranges if g == tid and s <= t < e]
        out[name].add(rowid)
    return dict(out)


def launched_in(path: Path, name_like: str) -> dict[tuple[str, int], set[int]]:
    """Per range instance (name, start) matching `name_like`: the rowids of the kernels whose launching runtime call
    started inside it on its thread (nsys's rule)."""
    rows = raw(
        path,
        "SELECT n.text, n.start, k.rowid FROM NVTX_EVENTS n JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.globalTid = n.globalTid AND r.start >= n.start AND r.start < n.end "
        "JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId "
        "WHERE n.text LIKE ? AND n.eventType = 59",
        name_like,
    )
    out: dict[tuple[str, int], set[int]] = defaultdict(set)
    for name, start, rowid in rows:
        out[(name, start)].add(rowid)
    return dict(out)


def kernel_rows(path: Path) -> dict[int, tuple[int, int, int]]:
    """rowid -> (start, end, correlationId) of every kernel."""
    return {r[0]: r[1:] for r in raw(path, "SELECT rowid, start, end, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL")}


def test_each_layer_gets_the_kernels_it_captured():
    """Each `layer i` is credited with exactly the replayed kernels whose nodes it captured: 3 kernels x 30 replays,
    its own activation's among them and no other layer's; `step i` keeps its replay (launch rule)."""
    prof = loaded(str(GRAPH_LOOP))
    want = replayed_by_layer(GRAPH_LOOP)
    assert sorted(want) == sorted(ACTIVATION) and all(len(v) == PER_LAYER * STEPS for v in want.values())
    got = prof.sql(
        "SELECT r.name, list(x.op_id ORDER BY x.op_id) AS ops FROM op_ranges x JOIN nvtx_ranges r USING (range_id) "
        "WHERE x.via = 'capture' AND r.name LIKE 'layer %' GROUP BY r.name"
    )
    assert {n: set(ops) for n, ops in got.iter_rows()} == want
    kbr = prof.kernels_by_range(range="layer")
    for layer, act in ACTIVATION.items():
        mine = kbr.filter(pl.col("range") == layer)
        assert mine["count"].sum() == PER_LAYER * (WARMUP + STEPS)
        acts = mine.filter(pl.col("kernel").str.contains("elementwise"))
        assert acts.height == 1 and act in acts["kernel"][0] and acts["count"][0] == WARMUP + STEPS
    # nsys's rule (thread) credits the layers with their eager warm-up kernels only
    thread = prof.kernels_by_range(range="layer", attribution="thread")
    assert thread.group_by("range").agg(pl.col("count").sum())["count"].to_list() == [PER_LAYER * WARMUP] * 4


def test_ranges_project_captured_kernels_per_replay():
    """`ranges`: a layer's GPU ops are nsys's (its warm-up instances, nvtx_gpu_proj_sum) plus its replayed kernels,
    and its projected time adds, per replay, the span of its own kernels in that replay (from the raw rows); the
    `step i` ranges keep their 12 kernels and nsys's projected time to the ns."""
    prof = loaded(str(GRAPH_LOOP))
    ref = pl.read_csv(reference_csv(GRAPH_LOOP, "nvtx_gpu_proj_sum"), infer_schema_length=0)
    nsys = {
        r["Range"][1:]: (int(r["Total Proj Time (ns)"]), int(r["Total GPU Ops"])) for r in ref.iter_rows(named=True)
    }
    rows = {r["name"]: r for r in prof.ranges().iter_rows(named=True)}
    kernels = kernel_rows(GRAPH_LOOP)
    for layer, ops in replayed_by_layer(GRAPH_LOOP).items():
        spans: dict[int, list[int]] = {}
        for op in ops:
            start, end, corr = kernels[op]
            s = spans.setdefault(corr, [start, end])
            s[0], s[1] = min(s[0], start), max(s[1], end)
        assert len(spans) == STEPS
        assert rows[layer]["gpu_ops"] == nsys[layer][1] + len(ops)
        assert rows[layer]["gpu_proj_ns"] == nsys[layer][0] + sum(e - s for s, e in spans.values())
    steps = launched_in(GRAPH_LOOP, "step %")
    assert len(steps) == STEPS
    for (name, _), ops in steps.items():
        assert len(ops) == 4 * PER_LAYER and rows[name]["gpu_ops"] == len(ops)
        assert rows[name]["gpu_proj_ns"] == nsys[name][0]


def test_iterations_of_step_keep_their_kernels():
    """The per-iteration table of `step i` holds the kernels its graph launch ran (counted from the raw rows),
    however the layers that captured them are credited."""
    df = loaded(str(GRAPH_LOOP)).iterations()
    kernels = kernel_rows(GRAPH_LOOP)
    steps = {name: ops for (name, _), ops in launched_in(GRAPH_LOOP, "step %").items()}
    assert df.height == STEPS
    for r in df.iter_rows(named=True):
        ops = steps[r["name"]]
        assert r["kernels"] == len(ops) == 4 * PER_LAYER
        assert r["kernel_ns"] == sum(kernels[o][1] - kernels[o][0] for o in ops)


def test_the_capturing_iteration_gets_no_replayed_time(tmp_path):
    """With the capture itself an iteration (`capture` renamed `step 30`, so `layer i` are its phases), its `layer`
    phase holds the GPU time of the kernels launched inside its layers (none: a captured kernel does not run), not
    that of the 30 later replays the capture rule credits to those ranges; each replaying step keeps its own."""
    path = craft(
        tmp_path / "capturing.sqlite",
        "UPDATE NVTX_EVENTS SET text = 'step 30' WHERE text = 'capture'",
        source="graph_loop",
    )
    df = loaded(str(path)).iterations()
    (cap,) = raw(path, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'step 30'")
    kernels = kernel_rows(path)
    launched = {o for (_, start), ops in launched_in(path, "layer %").items() if cap[0] <= start < cap[1] for o in ops}
    row = df.filter(pl.col("name") == "step 30").row(0, named=True)
    assert row["layer gpu_ns"] == sum(kernels[o][1] - kernels[o][0] for o in launched)
    assert df.filter(pl.col("name") != "step 30")["kernels"].to_list() == [4 * PER_LAYER] * STEPS


def test_ops_credit_the_operator_that_captured_the_kernel(tmp_path):
    """With the layers named as PyTorch operators (`aten::layerI`), `ops` gives each operator the kernels launched in
    its eager calls and the replayed kernels of the nodes it captured, each kernel once."""
    path = craft(
        tmp_path / "ops.sqlite",
        "UPDATE NVTX_EVENTS SET text = 'aten::layer' || substr(text, 7) WHERE text LIKE 'layer %'",
        source="graph_loop",
    )
    ops = {r["op"]: r for r in loaded(str(path)).ops().iter_rows(named=True)}
    kernels = kernel_rows(GRAPH_LOOP)
    eager = launched_in(GRAPH_LOOP, "layer %")
    for layer, replayed in replayed_by_layer(GRAPH_LOOP).items():
        mine = replayed | set().union(*(v for (n, _), v in eager.items() if n == layer))
        row = ops["aten::layer" + layer[6:]]
        assert row["calls"] == WARMUP + 1 and row["kernels"] == len(mine) == PER_LAYER * (WARMUP + STEPS)
        assert row["fwd_gpu_ns"] == sum(kernels[o][1] - kernels[o][0] for o in mine) and row["bwd_gpu_ns"] == 0


def cannot_answer(path) -> list[str]:
    df = loaded(str(path)).info()
    return df.filter(pl.col("section") == "cannot answer")["value"].to_list()


def test_info_says_how_to_record_graph_kernels(tmp_path):
    """`info`: one line naming `--cuda-graph-trace=node` where graphs were traced whole (graph_whole) or their node
    kernels cannot be traced to their capture (graph_loop without CUDA_GRAPH_NODE_EVENTS); none where they can,
    nor for a profile without graphs. Without the node events the layers keep nsys's rule."""
    switch = "`nsys profile --cuda-graph-trace=node`"
    assert not [v for v in cannot_answer(GRAPH_LOOP) if switch in v]
    assert not [v for v in cannot_answer(fixture("train_small")) if switch in v]
    stripped = craft(tmp_path / "no_nodes.sqlite", "DELETE FROM CUDA_GRAPH_NODE_EVENTS", source="graph_loop")
    (line,) = [v for v in cannot_answer(stripped) if switch in v]
    assert "CUDA_GRAPH_NODE_EVENTS" in line
    kbr = loaded(str(stripped)).kernels_by_range(range="layer")
    assert kbr["count"].sum() == 4 * PER_LAYER * WARMUP
    whole = h200("graph_whole.sqlite")
    (line,) = [v for v in cannot_answer(whole) if switch in v]
    assert "traced whole" in line
    # graph-level replays keep today's rule: the capture rule adds nothing to any range
    prof = loaded(str(whole))
    assert prof.sql("SELECT count(*) FROM op_ranges WHERE via = 'capture'").item() == 0
    assert (
        prof.ranges()
        .select("name", "gpu_ops", "gpu_proj_ns")
        .sort("name")
        .equals(prof.ranges(attribution="thread").select("name", "gpu_ops", "gpu_proj_ns").sort("name"))
    )


def test_a_cycle_of_original_nodes_credits_no_capture(tmp_path):
    """A broken export whose captured nodes name their own copies as originals (a cycle) loads, and its kernels
    keep the ranges of their launch only."""
    path = craft(
        tmp_path / "cycle.sqlite",
        "UPDATE CUDA_GRAPH_NODE_EVENTS SET originalGraphNodeId = graphNodeId + 4294967296 "
        "WHERE originalGraphNodeId IS NULL AND graphNodeId < 8589934592",
        source="graph_loop",
    )
    prof = loaded(str(path))
    assert prof.sql("SELECT count(*) FROM op_ranges WHERE via = 'capture'").item() == 0
    assert prof.sql("SELECT count(*) FROM graph_nodes WHERE created_id IS NOT NULL").item() > 0  # the plain nodes
    rows = {r["name"]: r["gpu_ops"] for r in prof.ranges().iter_rows(named=True)}
    assert rows["layer 0"] == PER_LAYER * WARMUP and rows["step 0"] == 4 * PER_LAYER


def test_ranges_open_at_capture_and_replay_count_each_kernel_once(tmp_path):
    """A push/pop range and a start/end range around the whole program, open both where the graph was captured
    and where it was replayed: each holds every GPU op once (no (op, range) pair twice), under both rules."""
    span = "(SELECT min(start) - 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME), (SELECT max(end) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME)"
    tid = "(SELECT globalTid FROM NVTX_EVENTS WHERE text = 'capture')"
    path = craft(
        tmp_path / "outer.sqlite",
        f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) SELECT {span}, 59, 'run', {tid}",
        f"INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) SELECT {span}, 60, 'job', {tid}",
        source="graph_loop",
    )
    prof = loaded(str(path))
    launched = prof.sql("SELECT count(*) FROM gpu_ops_named WHERE api_start_ns IS NOT NULL").item()
    assert (
        launched
        == len(kernel_rows(path))
        + raw(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]
        + (raw(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0][0])
    )
    for attribution in ("process", "thread"):
        rows = {r["name"]: r["gpu_ops"] for r in prof.ranges(attribution=attribution).iter_rows(named=True)}
        assert rows["run"] == rows["job"] == launched
        dup = prof.sql(
            "SELECT count(*) FROM (SELECT op_id, range_id FROM op_ranges "
            f"WHERE via = 'thread' OR '{attribution}' = 'process' GROUP BY ALL HAVING count(*) > 1)"
        )
        assert dup.item() == 0
    assert prof.sql("SELECT count(DISTINCT op_id) FROM op_ranges WHERE via = 'capture'").item() == 4 * PER_LAYER * STEPS
