"""Communication hidden or exposed: per device, the time in communication kernels, the part of it overlapped by
compute kernels on the same device and the exposed rest (queries/v1/analyses/overlap.sql)."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run

GROUPINGS = ("device", "iteration")
COLUMNS = ("device_id", "comm_ns", "overlapped_ns", "exposed_ns", "compute_ns")
NOT_APPLICABLE = (
    "no communication kernels (NCCL or other collectives: kernel category `communication`), so nothing to overlap"
)
UNTRACED = (
    "no GPU activity was recorded at all, so whether communication kernels ran cannot be told (they need "
    "`nsys profile -t cuda`)"
)


def overlap(con) -> pl.DataFrame:
    """Per device with communication kernels: `device_id, comm_ns, overlapped_ns, exposed_ns, compute_ns`."""
    if why := refusal(con):
        raise NsysqlError(why)
    df = run(con, "overlap")
    if not df.height:
        raise NsysqlError(NOT_APPLICABLE)
    return df


def refusal(con) -> str | None:
    """Why `overlap` has nothing to answer (no communication kernel, or no GPU op recorded at all:
    comm_kernels_any.sql), or None."""
    comm, traced = run(con, "comm_kernels_any").row(0)
    return None if comm else NOT_APPLICABLE if traced else UNTRACED


def by_iteration(iterations: pl.DataFrame, device_id: int | None) -> pl.DataFrame:
    """The same per iteration, from the columns of `iterations` (measured on the loop's device)."""
    if not (iterations["comm_ns"] > 0).any():
        raise NsysqlError(NOT_APPLICABLE.replace("kernels", "kernels in the iterations", 1))
    return iterations.select(
        "iteration",
        pl.lit(device_id, dtype=pl.Int32).alias("device_id"),
        "comm_ns",
        "overlapped_ns",
        pl.col("exposed_comm_ns").alias("exposed_ns"),
        "compute_ns",
    )
