"""GPU busy time over the profile, binned for a timeline strip (the report draws it; see timeline.sql)."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run

DEFAULT_BINS = 1500


def timeline(
    con,
    bins: int = DEFAULT_BINS,
    start_ns: int | None = None,
    end_ns: int | None = None,
    devices: list[int] | None = None,
) -> pl.DataFrame:
    """Per device (every one, or those in `devices`) and bin: start/end (ns), busy ns and busy % of the bin, over
    each device's active span (or over [start_ns, end_ns) when given).

    The cost is O(bins) ASOF lookups per device, whatever the number of GPU ops, so big profiles stay cheap.
    """
    if not isinstance(bins, int) or bins < 1:
        raise NsysqlError(f"bins is a whole number of 1 or more, not {bins!r}")
    if (start_ns is None) != (end_ns is None) or (start_ns is not None and end_ns <= start_ns):
        raise NsysqlError(f"give start_ns and end_ns together, end after start (got {start_ns!r}, {end_ns!r})")
    frames = []
    for dev in run(con, "gpu_utilization")["device_id"].to_list():
        if devices is not None and dev not in devices:
            continue
        t0, t1 = run(con, "device_span", device=dev).row(0)
        if start_ns is not None and end_ns is not None:
            t0, t1 = start_ns, end_ns
        if t0 is None or t1 <= t0:
            continue
        n = max(1, min(bins, t1 - t0))
        frames.append(
            run(con, "timeline", device=dev, t0=t0, t1=t1, bins=n).with_columns(device_id=pl.lit(dev, pl.Int64))
        )
    if not frames:
        return pl.DataFrame(
            schema={
                "device_id": pl.Int64,
                "bin": pl.Int64,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "busy_ns": pl.Int64,
                "busy_pct": pl.Float64,
            }
        )
    return pl.concat(frames).select("device_id", "bin", "start_ns", "end_ns", "busy_ns", "busy_pct")
