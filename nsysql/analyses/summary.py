"""One screen about a profile: facts, GPU busy time, top kernels, top ranges, memory operations."""

from __future__ import annotations

import polars as pl

from ._sql import facts, run
from .kernels import kernels
from .ranges import DEFAULT_ATTRIBUTION, ranges


def summary(con, attribution: str = DEFAULT_ATTRIBUTION, top: int = 10) -> dict[str, pl.DataFrame]:
    """Sections as DataFrames: `facts`, `gpus`, `kernels` (top), `ranges` (top by GPU time), `memory`."""
    f = facts(con)
    one = lambda k, d=None: (f.get(k) or [d])[0]  # noqa: E731
    gpus = run(con, "gpu_utilization")
    span_ns = int(one("span_ns") or 0)
    fact_rows = [
        ("file", one("source_path")),
        ("nsys version", one("nsys_version", "unknown")),
        ("span", f"{span_ns / 1e9:.3f} s"),
        ("GPUs", ", ".join(f"{r['device_id']}: {r['device'] or 'unnamed'}" for r in gpus.iter_rows(named=True))
         or "none used"),
    ]
    for r in gpus.iter_rows(named=True):
        fact_rows.append(
            (f"GPU {r['device_id']} busy",
             f"{r['busy_pct_active']:.1f}% of its active span ({r['busy_ns'] / 1e6:.1f} ms of "
             f"{r['active_ns'] / 1e6:.1f} ms), {r['busy_pct_span']:.1f}% of the profile span")
        )
    for msg in f.get("missing", []):
        fact_rows.append(("lacks", msg))
    out = {"facts": pl.DataFrame(fact_rows, schema=["item", "value"], orient="row"), "gpus": gpus}
    out["kernels"] = kernels(con, top=top)
    rg = ranges(con, attribution=attribution)
    out["ranges"] = rg.filter(pl.col("gpu_ops") > 0).sort("gpu_total_ns", descending=True).head(top)
    out["memory"] = run(con, "memory")
    return out
