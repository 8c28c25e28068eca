"""How `nsysql metrics` prints a gpu_metrics() answer: clocks in the unit their header says, and the graphics
counters a compute program never moves left out unless asked. Presentation only: the Python API keeps the values
as nsys wrote them, as `nsys recipe gpu_metric_util_sum` does."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

# counters of the graphics pipeline's stages: 0 throughout in a compute program (the rows `metrics` leaves out
# unless asked, see printed)
GRAPHICS = re.compile(r"\b(Pixel|Vertex|Tess|Geometry|Raster)\b")
_VALUES = ("mean", "min", "p50", "p90", "max")
HZ_NOTE = "nsys wrote Hz under [MHz]: shown in MHz (divided by 10^6)"


def printed(df: pl.DataFrame, graphics: bool = False) -> tuple[pl.DataFrame, list[str]]:
    """A gpu_metrics() answer as `nsysql metrics` prints it, and the metrics it left out. Clocks whose values hold
    Hz under an `MHz` unit (the rule of gpu_metrics.sql's note: above 10^6 MHz, 1 THz, on that device) are
    divided by 10^6. Graphics counters (GRAPHICS) that are 0 in every row of their device are left out unless
    `graphics`: a compute program never runs that pipeline."""
    import polars as pl

    vals = [c for c in _VALUES if c in df.columns]
    if not df.height or not vals:
        return df, []
    key = ["device_id", "metric"]
    top = pl.max_horizontal([pl.col(c).abs() for c in vals]).max().over(key)
    flags = df.select(
        hz=(pl.col("unit") == "MHz") & (top > 1e6), idle=pl.col("metric").str.contains(GRAPHICS.pattern) & (top == 0)
    )
    hz, idle = flags["hz"], flags["idle"]
    df = df.with_columns(pl.when(hz).then(pl.col(c) / 1e6).otherwise(pl.col(c)).alias(c) for c in vals)
    if "note" in df.columns:
        df = df.with_columns(pl.when(hz).then(pl.lit(HZ_NOTE)).otherwise(pl.col("note")).alias("note"))
    if graphics:
        return df, []
    left = df.filter(idle)["metric"].unique(maintain_order=True).to_list()
    return df.filter(~idle), left
