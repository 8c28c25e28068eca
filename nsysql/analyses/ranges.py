"""NVTX ranges with CPU-side stats (`nvtx_sum`) and GPU projection (`nvtx_gpu_proj_sum`)."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from . import scratch
from ._sql import run

ATTRIBUTIONS = ("thread", "process")
DEFAULT_ATTRIBUTION = "process"


def check_attribution(attribution: str) -> str:
    if attribution not in ATTRIBUTIONS:
        raise NsysqlError(f"attribution must be 'thread' or 'process', not {attribution!r}")
    return attribution


def group_ops_default(attribution: str, group_ops: bool | None) -> bool:
    """Whether PyTorch's ranges are grouped by operator (range_op_name) when `group_ops` is None: under the
    process rule, nsysql's own view, yes (one row per operator, not one per call: under emit_nvtx or
    `nsys profile --pytorch=autograd-nvtx` every call's name is its own); under the thread rule, which is there
    to reproduce `nsys stats`, no (one row per full name, as nvtx_sum and nvtx_kern_sum)."""
    return check_attribution(attribution) == "process" if group_ops is None else bool(group_ops)


def ranges(
    con, attribution: str = DEFAULT_ATTRIBUTION, group_ops: bool | None = None, families: bool = False
) -> pl.DataFrame:
    """Per (domain, name, style): instances, duration stats (ns), GPU-projected time, GPU time and GPU op count.
    `group_ops`: PyTorch emit_nvtx names without their per-call arguments (one row per operator); None: as
    group_ops_default says. `families`: a numbered family's names (`Batch0..Batch59`) as one row, `Batch*`,
    with `names`, how many it folds (ranges.sql)."""
    group_ops = group_ops_default(attribution, group_ops)
    totals = range_totals(con, check_attribution(attribution))
    got = run(con, "ranges", totals=totals, group_ops=group_ops, families=bool(families))
    return got if families else got.drop("names")


def range_totals(con, attribution: str) -> str:
    """The table of each range's GPU op totals by rule `attribution` (range_totals.sql), made once per DuckDB
    for every query that reads it (scratch.table)."""
    return scratch.table(con, "_range_totals_", "range_totals", {"attribution": attribution})
