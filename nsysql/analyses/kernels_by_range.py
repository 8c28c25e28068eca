"""Kernels per NVTX range, as `nsys stats -r nvtx_kern_sum`, with --innermost and process attribution."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run
from .advice import NVTX_HINT
from .patterns import resolve_range
from .ranges import DEFAULT_ATTRIBUTION, check_attribution, group_ops_default


def kernels_by_range(
    con,
    range: str | None = None,
    innermost: bool = False,
    attribution: str = DEFAULT_ATTRIBUTION,
    group_ops: bool | None = None,
) -> pl.DataFrame:
    """Per (range, kernel): range instances, kernel count and duration stats (ns). `group_ops`: PyTorch emit_nvtx
    names without their per-call arguments; None: as ranges.group_ops_default says."""
    names = resolve_range(con, range)[0] if range is not None else None  # '': the ranges without a name
    got = run(
        con,
        "kernels_by_range",
        attribution=check_attribution(attribution),
        names=names,
        innermost=innermost,
        group_ops=group_ops_default(attribution, group_ops),
    )
    # an empty answer says "no kernels in these ranges": without a range in the profile there are none to name
    # (a --range that matches nothing was refused above, by resolve_range)
    if not got.height and (why := refusal(con)):
        raise NsysqlError(why)
    return got


def refusal(con) -> str | None:
    """Why no kernel runs in a range, whatever the options (no NVTX range at all), or None."""
    if con.execute("SELECT EXISTS (SELECT 1 FROM nvtx_ranges)").fetchall()[0][0]:
        return None
    return f"no NVTX ranges in this profile, so no kernel runs in one ({NVTX_HINT})"
