"""`nsysql ops` / Profile.ops(): PyTorch operators from emit_nvtx ranges, against facts true by construction of
fixtures/workloads/ops_mlp.py and the nsys stats CSVs of fixtures/ops_mlp/reference."""

from __future__ import annotations

import io

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, fixture, loaded, reference_csv

from nsysql.cli import main

OPS_MLP = fixture("ops_mlp")
STEPS = 6
# which backward nodes autograd makes for the workload's outermost forward ops (linear = t + addmm;
# cross_entropy = log_softmax + nll_loss): known from PyTorch, not from the export
BACKWARD_OF = {
    "AddmmBackward0": "aten::linear",
    "TBackward0": "aten::linear",
    "ReluBackward0": "aten::relu",
    "LogSoftmaxBackward0": "aten::cross_entropy_loss",
    "NllLossBackward0": "aten::cross_entropy_loss",
}
WRAPPER = "autograd::engine::evaluate_function: "


@pytest.fixture(scope="module")
def prof():
    return loaded(str(OPS_MLP))


@pytest.fixture(scope="module")
def ops(prof):
    return {r["op"]: r for r in prof.ops().iter_rows(named=True)}


def ref(report: str) -> pl.DataFrame:
    return pl.read_csv(reference_csv(OPS_MLP, report), infer_schema_length=0)


def bare(full: str) -> str:
    """nsys's `:name` without the domain colon, and the op without its arguments (the test's own parse)."""
    return full[1:].split(", ")[0]


def kernel_ns(prof, where: str) -> int:
    return prof.sql(
        f"SELECT coalesce(sum(duration_ns), 0)::BIGINT AS t FROM gpu_ops WHERE kind = 'kernel' AND {where}"
    )["t"][0]


def test_columns_and_calls_by_construction(prof, ops):
    assert prof.ops().columns == ["op", "calls", "cpu_ns", "fwd_gpu_ns", "bwd_gpu_ns", "kernels", "top_kernel"]
    assert ops["aten::linear"]["calls"] == 3 * STEPS
    assert ops["aten::addmm"]["calls"] == 3 * STEPS  # one inside each linear
    assert ops["aten::relu"]["calls"] == 2 * STEPS
    assert not any(op.startswith(("Optimizer", "autograd::", "torch::autograd", "AddmmBackward")) for op in ops)


def test_forward_and_backward_gpu_time(ops):
    for op in ("aten::linear", "aten::relu", "aten::cross_entropy_loss"):
        assert ops[op]["fwd_gpu_ns"] > 0 and ops[op]["bwd_gpu_ns"] > 0, op
    # addmm runs inside linear: its kernels (and those of its AddmmBackward0 node) are linear's, counted once
    assert ops["aten::addmm"]["fwd_gpu_ns"] == ops["aten::addmm"]["bwd_gpu_ns"] == 0
    assert "gemm" in ops["aten::linear"]["top_kernel"]
    assert ops["aten::_foreach_add_"]["bwd_gpu_ns"] == 0  # the optimizer step has no backward


def test_no_double_counting(prof, ops):
    total = sum(r["fwd_gpu_ns"] + r["bwd_gpu_ns"] for r in ops.values())
    in_aten = kernel_ns(
        prof,
        "op_id IN (SELECT op_id FROM op_ranges JOIN nvtx_ranges USING (range_id) "
        "WHERE via = 'thread' AND name LIKE 'aten::%')",
    )
    assert total == in_aten
    assert total <= kernel_ns(prof, "true")
    assert (
        sum(r["kernels"] for r in ops.values())
        == prof.sql(
            "SELECT count(DISTINCT op_id) AS n FROM op_ranges JOIN nvtx_ranges USING (range_id) JOIN gpu_ops USING "
            "(op_id) WHERE via = 'thread' AND kind = 'kernel' AND name LIKE 'aten::%'"
        )["n"][0]
    )


def test_calls_and_cpu_time_match_nvtx_sum(ops):
    want: dict[str, list[int]] = {}
    for r in ref("nvtx_sum").iter_rows(named=True):
        if r["Range"].startswith(":aten::"):
            w = want.setdefault(bare(r["Range"]), [0, 0])
            w[0] += int(r["Instances"])
            w[1] += int(r["Total Time (ns)"])
    assert set(want) == set(ops)
    for op, (calls, cpu) in want.items():
        assert (ops[op]["calls"], ops[op]["cpu_ns"]) == (calls, cpu), op


def test_gpu_time_matches_nvtx_kern_sum(ops):
    """Forward: the kernels nsys puts in the outermost ops' ranges (they nest in no other op); backward: those
    in the evaluate_function ranges of each op's backward nodes."""
    fwd: dict[str, int] = {}
    bwd: dict[str, int] = {}
    for r in ref("nvtx_kern_sum").iter_rows(named=True):
        name, t = bare(r["NVTX Range"] or ":"), int(r["Total Time (ns)"])
        if name in ("aten::linear", "aten::relu", "aten::cross_entropy_loss", "aten::_foreach_add_"):
            fwd[name] = fwd.get(name, 0) + t
        elif name.startswith(WRAPPER):
            op = BACKWARD_OF[name[len(WRAPPER) :]]  # every backward node with kernels is one of those
            bwd[op] = bwd.get(op, 0) + t
    for op, t in fwd.items():
        assert ops[op]["fwd_gpu_ns"] == t, op
    for op, t in bwd.items():
        assert ops[op]["bwd_gpu_ns"] == t, op
    assert sum(r["bwd_gpu_ns"] for r in ops.values()) == sum(bwd.values())


def test_one_kernel_op_matches_nvtx_gpu_proj_sum(ops):
    """The optimizer's foreach op launches one kernel per call: its GPU projection is that kernel's time."""
    rows = [r for r in ref("nvtx_gpu_proj_sum").iter_rows(named=True) if bare(r["Range"]) == "aten::_foreach_add_"]
    assert sum(int(r["Range Instances"]) for r in rows) == STEPS
    assert ops["aten::_foreach_add_"]["kernels"] == sum(int(r["Total GPU Ops"]) for r in rows) == STEPS
    assert ops["aten::_foreach_add_"]["fwd_gpu_ns"] == sum(int(r["Total Proj Time (ns)"]) for r in rows)


def test_shapes_split_linear_by_layer(prof, ops):
    df = prof.ops(shapes=True)
    assert df.columns[:2] == ["op", "sizes"]
    lin = df.filter(pl.col("op") == "aten::linear")
    assert sorted(lin["sizes"].to_list()) == [
        "[[64, 128], [256, 128], [256]]",
        "[[64, 256], [10, 256], [10]]",
        "[[64, 256], [256, 256], [256]]",
    ]
    assert lin["calls"].to_list() == [STEPS] * 3
    for c in ("calls", "cpu_ns", "fwd_gpu_ns", "bwd_gpu_ns", "kernels"):
        assert lin[c].sum() == ops["aten::linear"][c]


def test_cli_csv_and_no_operator_ranges():
    runner = CliRunner()
    res = runner.invoke(main, ["ops", str(OPS_MLP), "-f", "csv"], catch_exceptions=False)
    assert res.exit_code == 0
    got = pl.read_csv(io.StringIO(res.stdout))
    assert got.equals(loaded(str(OPS_MLP)).ops())
    res = runner.invoke(main, ["ops", str(fixture("train_small"))], catch_exceptions=False)
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "train_small.sqlite" in lines[0] and "emit_nvtx()" in lines[0]


def test_dlprof_dict_reprs_are_not_ops():
    path = PUBLIC / "MohanadOdema__DLProf__nsys_profile.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present")
    p = loaded(str(path))
    ops = {r["op"]: r for r in p.ops().iter_rows(named=True)}
    assert all(op.startswith("aten::") for op in ops)  # not `{'mod': 'Tensor', ...}` nor `{'traceMarker': ...}`
    # the workload's two conv layers and three linear layers, one forward pass, no backward
    assert ops["aten::conv2d"]["calls"] == 2 and ops["aten::linear"]["calls"] == 3
    assert ops["aten::conv2d"]["fwd_gpu_ns"] > 0 and all(r["bwd_gpu_ns"] == 0 for r in ops.values())
    in_aten = kernel_ns(
        p,
        "op_id IN (SELECT op_id FROM op_ranges JOIN nvtx_ranges USING (range_id) "
        "WHERE via = 'thread' AND name LIKE 'aten::%')",
    )
    assert sum(r["fwd_gpu_ns"] for r in ops.values()) == in_aten > 0


def test_ranges_group_ops_match_nvtx_sum(prof):
    """`ranges --group-ops`: one row per operator (and per backward node, record_function scope), its instances
    and CPU time nvtx_sum's summed over the calls' full names."""
    want: dict[str, list[int]] = {}
    for r in ref("nvtx_sum").iter_rows(named=True):
        w = want.setdefault(bare(r["Range"]), [0, 0])
        w[0] += int(r["Instances"])
        w[1] += int(r["Total Time (ns)"])
    got = prof.ranges(group_ops=True)
    assert got.height == len(want) < prof.ranges(group_ops=False).height
    # grouped by default under the process rule; per call under the thread rule, which reproduces nsys stats
    assert prof.ranges().equals(got) and prof.ranges(attribution="thread").height == ref("nvtx_sum").height
    assert {r["name"]: [r["count"], r["total_ns"]] for r in got.iter_rows(named=True)} == want


def test_kernels_by_range_group_ops_match_nvtx_kern_sum(prof):
    want: dict[tuple[str, str], int] = {}
    for r in ref("nvtx_kern_sum").iter_rows(named=True):
        if r["NVTX Range"]:  # nsys lists the kernels outside every range under an empty name
            key = (bare(r["NVTX Range"]), r["Kernel Name"])
            want[key] = want.get(key, 0) + int(r["Total Time (ns)"])
    got = prof.kernels_by_range(attribution="thread", group_ops=True)
    assert {(r["range"], r["kernel"]): r["total_ns"] for r in got.iter_rows(named=True)} == want


def test_markdown_snippet_names_the_top_ops(prof, ops):
    from nsysql.report import snippet

    line = next(x for x in snippet(prof).splitlines() if x.startswith("- **PyTorch ops by GPU time**"))
    lin = ops["aten::linear"]  # the first of ops(): most GPU time (its figures: test_gpu_time_matches_...)
    assert line.split(": ", 1)[1].startswith(
        f"`aten::linear` {(lin['fwd_gpu_ns'] + lin['bwd_gpu_ns']) / 1e6:,.3f} ms (fwd {lin['fwd_gpu_ns'] / 1e6:,.3f}"
    )
    assert "PyTorch ops" not in snippet(loaded(str(fixture("train_small"))))


def test_emit_nvtx_ranges_do_not_hide_the_backward_pass(prof):
    """The autograd thread's operator ranges are PyTorch's, like a library's: its kernels still inherit the main
    thread's `Backward Pass` (process attribution), and the main thread is the one whose loop is found."""
    inside = prof.sql(
        "SELECT count(*) AS n FROM gpu_ops_named g WHERE EXISTS (SELECT 1 FROM nvtx_ranges r WHERE r.name = "
        "'Backward Pass' AND r.pid = g.pid AND g.api_start_ns >= r.start_ns AND g.api_start_ns < r.end_ns)"
    )["n"][0]
    bp = prof.ranges().filter(pl.col("name") == "Backward Pass").row(0, named=True)
    assert bp["gpu_ops"] == inside > STEPS  # more than the one loss-gradient fill per step the main thread launches
    assert prof.iterations().height == STEPS


def test_small_transformer_forward_backward_and_no_double_counting():
    """fixtures/ops_transformer (fixtures/workloads/ops_transformer.py: 2 encoder layers and a head, 4 steps): per
    step, each layer calls linear 4 times (attention in and out projections, two feed-forward layers) and
    layer_norm twice, the head once; every one of them has backward GPU time, and the forward + backward GPU time
    over all ops is the time of the kernels launched inside operator ranges, each counted once."""
    steps, layers = 4, 2
    p = loaded(str(fixture("ops_transformer")))
    ops = {r["op"]: r for r in p.ops().iter_rows(named=True)}
    assert ops["aten::linear"]["calls"] == steps * (4 * layers + 1)
    assert ops["aten::layer_norm"]["calls"] == steps * 2 * layers
    for op in ("aten::linear", "aten::layer_norm", "aten::scaled_dot_product_attention"):
        assert ops[op]["fwd_gpu_ns"] > 0 and ops[op]["bwd_gpu_ns"] > 0, op
    total = sum(r["fwd_gpu_ns"] + r["bwd_gpu_ns"] for r in ops.values())
    in_ops = kernel_ns(
        p,
        "op_id IN (SELECT op_id FROM op_ranges JOIN nvtx_ranges USING (range_id) "
        "WHERE via = 'thread' AND name LIKE 'aten::%')",
    )
    assert total == in_ops <= kernel_ns(p, "true")
