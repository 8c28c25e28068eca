"""Top kernels, as `nsys stats -r cuda_gpu_kern_sum`."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run
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
        return run(con, "kernels_by_category")
    if name not in NAME_KINDS:
        raise NsysqlError(f"`name` must be one of {', '.join(NAME_KINDS)}, not {name!r}", option="name")
    return run(con, "kernels", name_kind=name, top=top)


def categories_per_iteration(windows, pid: int) -> pl.DataFrame:
    """Per iteration (`windows`: iterations.Windows of process `pid`), category and tensor_cores: count,
    total_ns, pct of the iteration's kernel time and evidence (iteration_categories.sql)."""
    return windows.run("iteration_categories", pid=pid)


def categories_per_range(con, attribution: str) -> pl.DataFrame:
    """Per NVTX range (domain, name), category and tensor_cores: count, total_ns, pct of the range's kernel time
    and evidence; a kernel counts in every range open around its launch (range_categories.sql)."""
    return run(con, "range_categories", attribution=check_attribution(attribution))
