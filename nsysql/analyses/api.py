"""CUDA API calls by function, as `nsys stats -r cuda_api_sum`: where the CPU spends its time inside CUDA."""

from __future__ import annotations

import polars as pl

from ._sql import run


def api(con) -> pl.DataFrame:
    """Per API function: calls, total/avg/median/min/max/stddev time inside them (ns) and % of all API time."""
    return run(con, "api", top=None)
