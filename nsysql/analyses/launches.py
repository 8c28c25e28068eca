"""Launch latency per kernel, as `nsys stats -r cuda_kern_exec_sum`: the launch call, the queue, the kernel."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run

GROUPINGS = ("launch", "kernel")
KEYS = ("pid", "tid", "device_id", "api_name")


def launches(con, by: str = "launch") -> pl.DataFrame:
    """Per (pid, tid, device_id, api_name, kernel_name): count, queue_count and avg/med/min/max/stddev of the
    total, api, queue and kernel times (`{total,api,queue,kernel}_{avg,med,min,max,stddev}_ns`).
    by="kernel": the same figures per kernel name, over every process, thread, device and launching call."""
    if by not in GROUPINGS:
        raise NsysqlError(f"`by` must be one of {', '.join(GROUPINGS)}, not {by!r}", option="by")
    df = run(con, "launches", by=by)
    return df.drop(KEYS) if by == "kernel" else df
