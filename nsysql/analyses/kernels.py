"""Top kernels, as `nsys stats -r cuda_gpu_kern_sum`."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._names import quoted
from ._sql import run
from .advice import NVTX_HINT
from .ranges import check_attribution, group_ops_default

NAME_KINDS = ("demangled", "short", "mangled")
GROUPINGS = ("name", "category")


def kernels(con, name: str = "demangled", top: int | None = None, by: str = "name") -> pl.DataFrame:
    """Per kernel name: count, total/avg/median/min/max/stddev duration (ns), % of all kernel time, category
    and tensor_cores (queries/v1/canonical/44_kernel_rules.sql). by="category": per category and tensor_cores,
    count, total_ns and pct (`name` and `top` do not apply)."""
    if by not in GROUPINGS:
        raise NsysqlError(f"`by` must be one of {', '.join(GROUPINGS)}, not {by!r}", option="by")
    if by == "category":
        return run(con, "kernels_by_category", device_id=None)
    if name not in NAME_KINDS:
        raise NsysqlError(f"`name` must be one of {', '.join(NAME_KINDS)}, not {name!r}", option="name")
    return run(con, "kernels", name_kind=name, top=top)


def categories_per_iteration(windows, pid: int) -> pl.DataFrame:
    """Per iteration (`windows`: iterations.Windows of process `pid`), category and tensor_cores: count,
    total_ns, pct of the iteration's kernel time and evidence (iteration_categories.sql). No row: why, in one
    line (the iterations' GPU work is CUDA graphs traced whole, or holds no kernel)."""
    got = windows.run("iteration_categories", pid=pid)
    if got.height:
        return got
    kinds = {r["kind"]: r for r in windows.run("iteration_op_kinds", pid=pid).iter_rows(named=True)}
    graphs = kinds.get("graph")
    if graphs:
        raise NsysqlError(
            f"no kernel recorded in the iterations: their GPU work includes {graphs['count']:,} CUDA graph launches "
            f"traced whole ({graphs['total_ns'] / 1e6:.3g} ms of GPU time), whose kernels nsys does not record one "
            "by one; profile with --cuda-graph-trace=node to see them"
        )
    held = ", ".join(f"{r['count']:,} {k}" for k, r in kinds.items()) or "no GPU op"
    raise NsysqlError(f"no kernel launched in the iterations (they launched {held})")


def categories_per_range(con, attribution: str) -> pl.DataFrame:
    """Per NVTX range (domain, name), category and tensor_cores: count, total_ns, pct of the range's kernel time
    and evidence; a kernel counts in every range open around its launch (range_categories.sql). No row: why, in
    one line (the profile has no NVTX range, or no kernel was launched inside one)."""
    got = run(con, "range_categories", attribution=check_attribution(attribution))
    # no kernel at all: `no kernels` is the answer
    if got.height or not run(con, "kernels_by_category", device_id=None).height:
        return got
    if not run(con, "range_names").height:
        raise NsysqlError(f"no NVTX ranges in this profile, so no kernel runs in one ({NVTX_HINT})")
    raise NsysqlError(
        f"no kernel was launched inside an NVTX range (attribution {attribution!r}): every kernel ran outside them"
    )


# why a kernel table leaves a whole graph's kernels out, and how to see them
GRAPH_WHY = "nsys recorded each launch as one span on the GPU, not its kernels"
GRAPH_NODE_HINT = "record them one by one with `nsys profile --cuda-graph-trace=node`"


def whole_graphs(con) -> pl.DataFrame:
    """CUDA graph launches traced whole (kernels_whole_graphs.sql), one row: launches, their GPU time (total_ns)
    and the kernels' GPU time (kernel_ns)."""
    return run(con, "kernels_whole_graphs")


def whole_graphs_by_range(
    con, attribution: str, group_ops: bool | None, names: list[str] | None = None, innermost: bool = False
) -> pl.DataFrame:
    """CUDA graph launches traced whole per NVTX range open around them under `attribution`, named as
    kernels_by_range names them (`group_ops`); `names`: only the ranges of these names (None: all); `innermost`:
    each launch only in the deepest of them (kernels_whole_graphs_ranges.sql)."""
    return run(
        con,
        "kernels_whole_graphs_ranges",
        attribution=check_attribution(attribution),
        group_ops=group_ops_default(attribution, group_ops),
        innermost=bool(innermost),
        names=names,
    )


def whole_graph_note(whole: pl.DataFrame, shown: str = "table") -> str | None:
    """The line under a kernel table (or the chart `shown`): the CUDA graph launches traced whole that it leaves
    out (whole_graphs), with their GPU time; None where there are none."""
    w = whole.row(0, named=True)
    if not w["launches"]:
        return None
    both = w["total_ns"] + w["kernel_ns"]
    share = f", {100.0 * w['total_ns'] / both:.0f}% of the GPU time of kernels and graph launches" if both else ""
    return f"not in this {shown}: {_graphs(w)} traced whole ({_ms(w)}{share}): {GRAPH_WHY}; {GRAPH_NODE_HINT}"


def range_graph_note(per: pl.DataFrame) -> str | None:
    """The line under a kernel table per NVTX range: the CUDA graph launches traced whole inside its ranges
    (whole_graphs_by_range), named by range (the three with most GPU time); None where there are none."""
    if not per.height:
        return None
    where = "; ".join(f"{quoted(r['range'])}: {_graphs(r)}, {_ms(r)}" for r in per.head(3).iter_rows(named=True))
    more = f"; {per.height - 3} more ranges" if per.height > 3 else ""
    return (
        f"not in this table: CUDA graph launches traced whole inside these ranges ({where}{more}): {GRAPH_WHY}; "
        f"{GRAPH_NODE_HINT}"
    )


def iteration_graph_note(windows, pid: int) -> str | None:
    """The line under the kernel categories per iteration (`windows`: iterations.Windows of process `pid`): the
    CUDA graph launches traced whole in the iterations, which it leaves out; None where there are none."""
    got = windows.run("iteration_op_kinds", pid=pid).filter(pl.col("kind") == "graph")
    if not got.height:
        return None
    r = got.row(0, named=True)
    r = {"launches": r["count"], "total_ns": r["total_ns"]}
    return f"not in this table: {_graphs(r)} traced whole in the iterations ({_ms(r)}): {GRAPH_WHY}; {GRAPH_NODE_HINT}"


def _graphs(r: dict) -> str:
    n = r["launches"]
    return f"{n:,} CUDA graph launch{'es' if n != 1 else ''}"


def _ms(r: dict) -> str:
    return f"{r['total_ns'] / 1e6:.3g} ms on the GPU"
