"""Top kernels, as `nsys stats -r cuda_gpu_kern_sum`."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run

NAME_KINDS = ("demangled", "short", "mangled")


def kernels(con, name: str = "demangled", top: int | None = None) -> pl.DataFrame:
    """Per kernel name: count, total/avg/median/min/max/stddev duration (ns) and % of all kernel time."""
    if name not in NAME_KINDS:
        raise NsysqlError(f"--name must be one of {', '.join(NAME_KINDS)}, not {name!r}")
    return run(con, "kernels", name_kind=name, top=top)
