"""GPU idle gaps, each with its cause read from the CPU side, and idle time by cause.

The rules (what a gap is, how its cause is chosen, in which order) are written at the top of
queries/v1/analyses/gaps.sql. Here: which device/process/thread to read, iteration indices, and totals.
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import NsysqlError
from ._sql import run
from .patterns import resolve_range

DEFAULT_MIN_NS = 1_000_000
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
MAX_NS = 2**63 - 1


def parse_duration(text: str | int) -> int:
    """'500us', '2ms', '1s', '1.5ms' or a number of ns -> ns."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise NsysqlError(f"a duration is 0 or more, not {text} ns")
        ns = text
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*", str(text))
        if not m:
            raise NsysqlError(f"cannot read duration {text!r}: use e.g. 500us, 2ms, 1s")
        ns = float(m.group(1)) * _UNITS[m.group(2) or "ns"]  # inf for a number too long for a float
    if ns > MAX_NS:  # the export's clock is a 64-bit count of ns: no gap can be longer
        raise NsysqlError(f"duration {str(text)[:40]!r} is longer than any gap can be (at most {MAX_NS} ns, 292 years)")
    return int(round(ns))


def gaps(con, its: pl.DataFrame | None, range: str | None = None, min_ns: int = DEFAULT_MIN_NS) -> pl.DataFrame:
    """One row per idle gap of at least `min_ns`: device, pid, start/end/duration, iteration, cause and evidence.

    `its`: the iterations frame to index gaps by (None: no iterations, so a null iteration column).
    """
    return with_iterations(find(con, range=range, min_ns=min_ns), its)


def find(con, range: str | None = None, min_ns: int = DEFAULT_MIN_NS) -> pl.DataFrame:
    """The gaps with their causes, not yet indexed by iteration (`with_iterations` does that)."""
    procs = run(con, "process_devices")
    if procs.height == 0:
        raise NsysqlError("no GPU work in this profile, so it has no GPU idle gaps to report")
    names = resolve_range(con, range)[0] if range else None
    frames = []
    for dev in procs["device_id"].unique().sort().to_list():
        owner = procs.filter(pl.col("device_id") == dev).row(0, named=True)
        frames.append(run(con, "gaps", device=dev, pid=owner["pid"], tid=owner["main_tid"], min_ns=min_ns, names=names))
    return pl.concat(frames)


def with_iterations(gaps_df: pl.DataFrame, its: pl.DataFrame | None) -> pl.DataFrame:
    """The gaps of `find` indexed by the iterations frame `its` (None: no iterations, so null iteration and
    warmup), in the columns `gaps` returns."""
    if its is not None and gaps_df.height:
        out = _index_by_iteration(gaps_df, its.select("iteration", "start_ns", "end_ns", "warmup"))
    else:
        out = gaps_df.with_columns(iteration=pl.lit(None, pl.Int64), warmup=pl.lit(None, pl.Boolean))
    return out.select(
        "device_id",
        "pid",
        "start_ns",
        "end_ns",
        "duration_ns",
        "iteration",
        "warmup",
        "cause",
        "range",
        "api_call",
        "api_cover_pct",
        "os_call",
    )


def _index_by_iteration(gaps_df: pl.DataFrame, its: pl.DataFrame) -> pl.DataFrame:
    """The iteration whose window holds the middle of the gap (null when outside every iteration)."""
    mid = gaps_df.with_columns(((pl.col("start_ns") + pl.col("end_ns")) // 2).alias("_mid")).sort("_mid")
    w = its.sort("start_ns").rename({"start_ns": "_ws", "end_ns": "_we"})
    j = mid.join_asof(w, left_on="_mid", right_on="_ws", strategy="backward")
    inside = pl.col("_mid") < pl.col("_we")
    return (
        j.with_columns(
            iteration=pl.when(inside).then(pl.col("iteration")),
            warmup=pl.when(inside).then(pl.col("warmup")),
        )
        .drop("_mid", "_ws", "_we")
        .sort("start_ns")
    )


def by_cause(
    con, gaps_df: pl.DataFrame, range: str | None = None, include_warmup: bool = False, its: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Idle time per cause, largest first: ns, % of the idle time counted, % of the time span counted.

    When the gaps carry iterations (those of `its`, the frame they were indexed by), only gaps inside
    steady-state iterations count unless `include_warmup`, and the span is the summed steady-state iteration
    time. Otherwise the span is the devices' active spans (or,
    with `range`, the summed instances of that range). The `counted` column says which.
    """
    g = gaps_df
    if steady_only(g, include_warmup):
        g = g.filter(pl.col("iteration").is_not_null() & ~pl.col("warmup"))
        span, counted = int(its.filter(~pl.col("warmup"))["wall_ns"].sum()), "steady-state iterations"
    elif range:
        names = resolve_range(con, range)[0]
        span, counted = int(run(con, "range_time", names=names)["ns"][0] or 0), f"instances of {range}"
    else:
        span, counted = _device_span(con), "devices' active span"
    total = g["duration_ns"].sum()
    out = (
        g.group_by("cause")
        .agg(pl.len().alias("gaps"), pl.col("duration_ns").sum().alias("idle_ns"))
        .sort(["idle_ns", "cause"], descending=[True, False])
    )
    return out.with_columns(
        pct_of_idle=(100.0 * pl.col("idle_ns") / total) if total else pl.lit(0.0),
        pct_of_span=(100.0 * pl.col("idle_ns") / span) if span else pl.lit(None, pl.Float64),
        span_ns=pl.lit(span, pl.Int64),
        counted=pl.lit(counted),
    )


def steady_only(gaps_df: pl.DataFrame, include_warmup: bool = False) -> bool:
    """Whether `by_cause` counts only the gaps inside steady-state iterations (then, given the iterations
    frame, it reads no table)."""
    return not include_warmup and bool(gaps_df["iteration"].is_not_null().any())


def _device_span(con) -> int:
    total = 0
    for dev in run(con, "process_devices")["device_id"].unique().to_list():
        s = run(con, "device_span", device=dev).row(0)
        total += (s[1] - s[0]) if s[0] is not None else 0
    return total
