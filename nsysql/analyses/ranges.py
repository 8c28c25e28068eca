"""NVTX ranges with CPU-side stats (`nvtx_sum`) and GPU projection (`nvtx_gpu_proj_sum`)."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run

ATTRIBUTIONS = ("thread", "process")
DEFAULT_ATTRIBUTION = "process"


def check_attribution(attribution: str) -> str:
    if attribution not in ATTRIBUTIONS:
        raise NsysqlError(f"attribution must be 'thread' or 'process', not {attribution!r}")
    return attribution


def ranges(con, attribution: str = DEFAULT_ATTRIBUTION, group_ops: bool = False) -> pl.DataFrame:
    """Per (domain, name, style): instances, duration stats (ns), GPU-projected time and GPU op count.
    `group_ops`: PyTorch emit_nvtx names without their per-call arguments (one row per operator)."""
    return run(con, "ranges", attribution=check_attribution(attribution), group_ops=bool(group_ops))
