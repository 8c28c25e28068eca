"""PyTorch operators (ranges of torch.autograd.profiler.emit_nvtx, or of `nsys profile --pytorch=autograd-nvtx`,
which names them alike): calls (a re-entry of the same operator is not one), CPU time, and the GPU time of their
kernels, forward and backward, each kernel counted once (rules in queries/v1/analyses/ops.sql)."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from ._sql import run
from .advice import switch

NO_OPS = (
    f"the export has no PyTorch operator ranges (aten::...); record them with {switch('op_ranges')}, or by running "
    "the workload inside `with torch.autograd.profiler.emit_nvtx():` under `nsys profile -t cuda,nvtx`"
)


# where nothing in the export shows PyTorch (profile_facts' framework rule: no torch library, module or range
# name), the switch that records operator ranges is no advice: the program is not a PyTorch one
NOT_PYTORCH = (
    "the export has no PyTorch operator ranges (aten::...), and nothing in it shows PyTorch (no torch library, "
    "module or range name): `ops` answers about PyTorch programs only"
)


def ops(con, shapes: bool = False) -> pl.DataFrame:
    """Per operator name (and input sizes when `shapes`): calls, cpu_ns, fwd_gpu_ns, bwd_gpu_ns, kernels,
    top_kernel."""
    if why := refusal(con):
        raise NsysqlError(why)
    df = run(con, "ops", shapes=bool(shapes))
    if df.height == 0:  # every operator range is an operator call: not reached where refusal found one
        raise NsysqlError(NO_OPS)
    return df if shapes else df.drop("sizes")


def refusal(con) -> str | None:
    """Why `ops` has nothing to answer (no PyTorch operator range: op_ranges_any.sql), or None."""
    ops_, torch = run(con, "op_ranges_any").row(0)
    return None if ops_ else NO_OPS if torch else NOT_PYTORCH
