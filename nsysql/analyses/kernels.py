"""Top kernels, as `nsys stats -r cuda_gpu_kern_sum`."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run
from .advice import NVTX_HINT
from .ranges import check_attribution

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
