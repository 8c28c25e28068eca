"""GPU metrics sampled by `nsys profile --gpu-metrics-devices=...` (gpu_metric_samples).

- Whole capture (`gpu_metrics.sql`): per device and metric, samples, mean, min, p50, p90, max: the count, mean,
  min and max of `nsys recipe gpu_metric_util_sum`. Values are kept as nsys wrote them; counters whose values
  do not fit their unit get a `note` saying so and which value to read instead (rules in gpu_metrics.sql):
  `[Avg]` warps counters that are sums over a sample's cycles, `[MHz]` clocks that hold Hz, percentages
  outside 0-100.
- Per iteration and per NVTX range: the time-weighted mean over each instance's GPU-projected window (first to
  last GPU op launched inside it): iteration_metrics.sql, range_metrics.sql.
- An export without samples: one line, raised as NsysqlError: how to sample them (`NO_METRICS`), or that nsys
  cannot where every GPU that ran GPU work is older than Turing (sm_75); where the export does not say which GPU
  ran it (no compute capability, and none stated at sm_75 or later), the switch with that condition.
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import NsysqlError
from ._names import some_of
from ._sql import run
from .advice import METRICS_CC, NVTX_HINT, switch
from .ranges import DEFAULT_ATTRIBUTION, check_attribution

GROUPINGS = ("iteration", "range")
# counters of the graphics pipeline's stages: 0 throughout in a compute program (the rows `shown` leaves out
# unless asked)
GRAPHICS = re.compile(r"\b(Pixel|Vertex|Tess|Geometry|Raster)\b")
_VALUES = ("mean", "min", "p50", "p90", "max")
HZ_NOTE = "nsys wrote Hz under [MHz]: shown in MHz (divided by 10^6)"
NO_METRICS = (
    f"this export has no GPU metrics: profile with {switch('gpu_metrics')} (or a list of devices) to sample them"
)


def has_metrics(con) -> bool:
    return con.execute("SELECT EXISTS (SELECT 1 FROM gpu_metric_samples)").fetchall()[0][0]


def unsampled(con, caps: list[str | None] | None = None) -> str | None:
    """Why nsys could not have sampled this profile's GPUs (every GPU that ran GPU work states a compute
    capability below sm_75), or None where one of them may be sampled. `caps`: metrics_capabilities.sql's
    compute capabilities, where the caller read them."""
    caps = run(con, "metrics_capabilities")["compute_capability"].to_list() if caps is None else caps
    if caps and None not in caps and max(float(c) for c in caps) < METRICS_CC:
        arch = ", ".join(sorted({"sm_" + c.replace(".", "") for c in caps}))
        return f"nsys samples them only on Turing (sm_75) and later GPUs: its GPU work ran on {arch}"
    return None


def refusal(con) -> str | None:
    """Why `gpu_metrics` has nothing to answer (no_metrics), or None: read from gpu_metric_counts, which has a
    row exactly where gpu_metric_samples has samples (counted as the export is read: the samples are not)."""
    return None if con.execute("SELECT EXISTS (SELECT 1 FROM gpu_metric_counts)").fetchall()[0][0] else no_metrics(con)


def no_metrics(con) -> str:
    """Why there are no GPU metrics to show: the profile's GPUs cannot be sampled (unsampled), else how to
    sample them; where no GPU that ran GPU work states a compute capability at or above sm_75 and some state
    none, that the switch holds only there (the export cannot say whether they are older)."""
    caps = run(con, "metrics_capabilities")["compute_capability"].to_list()
    why = unsampled(con, caps)
    if why:
        return f"this export has no GPU metrics, and {why}"
    if None in caps and not any(c is not None and float(c) >= METRICS_CC for c in caps):
        return (
            f"{NO_METRICS}, where the GPU is Turing (sm_75) or later (nsys samples no older one): the export does "
            "not say which GPU ran its work"
        )
    return NO_METRICS


def gpu_metrics(
    con,
    by: str | None = None,
    windows=None,
    pid: int | None = None,
    attribution: str = DEFAULT_ATTRIBUTION,
    names: list[str] | None = None,
) -> pl.DataFrame:
    """Per device and metric over the capture; by="iteration" (`windows`: iterations.Windows of process `pid`)
    or by="range" (`names`: the ranges kept, None for all): the time-weighted mean per instance's GPU-projected
    window; by="iteration", an iteration whose GPU work no sample covers (a gap in the sampling) is one row per
    device with metric, unit and mean null. An empty answer per iteration or range is said in one line
    (NsysqlError): the export has metrics."""
    if by is not None and by not in GROUPINGS:
        raise NsysqlError(f"`by` must be one of {', '.join(GROUPINGS)}, not {by!r}", option="by")
    if not has_metrics(con):
        raise NsysqlError(no_metrics(con))
    if by is None:
        return run(con, "gpu_metrics")
    if by == "range":
        got = run(con, "range_metrics", attribution=check_attribution(attribution), names=names)
        if not got.height and not run(con, "range_names").height:
            raise NsysqlError(f"no NVTX ranges in this profile, so no range has GPU metrics ({NVTX_HINT})")
        if not got.height:
            _untraced(con, "NVTX range")
            raise NsysqlError(f"no {'selected ' if names else ''}NVTX range launched GPU work that the metrics sampled")
        return got
    got = windows.run("iteration_metrics", pid=pid, metrics=None)
    if not got.filter(pl.col("metric").is_not_null()).height:
        _untraced(con, "iteration")
        raise NsysqlError("no iteration launched GPU work that the metrics sampled")
    return got


def _untraced(con, what: str) -> None:
    """Raise why no `what` has metrics where the export holds no GPU work at all: an instance's metrics are read
    over the GPU work it launched (its GPU-projected window), so without any, no window is known."""
    if not con.sql("SELECT 1 FROM gpu_ops LIMIT 1").fetchall():
        raise NsysqlError(
            f"no GPU work traced (no kernel, copy or memset in the export), so no {what}'s time on the GPU is known "
            "to read the metrics over; `nsysql metrics` gives them over the whole capture"
        )


def activity(windows, pid: int, device_id: int | None) -> pl.DataFrame | None:
    """Per iteration: `sm_active_pct` and `tensor_active_pct` on the iteration's device (time-weighted over its
    GPU-projected window), or None when the export has no such samples."""
    if device_id is None or not run(windows.con, "activity_sampled", device=device_id).item():
        return None
    # those two metrics' samples alone, in a percent unit, one name of each per device (gpu_activity_names)
    df = windows.run("iteration_activity", pid=pid)
    df = df.filter(pl.col("device_id") == device_id)
    if not df.height:
        return None
    return df.select("iteration", "sm_active_pct", "tensor_active_pct")


def timeline(con, start_ns: int, end_ns: int, bins: int = 1500) -> pl.DataFrame:
    """SMs Active and Tensor Active per device in `bins` equal bins of [start_ns, end_ns): device_id, metric,
    bin, start_ns, mean (metrics_timeline.sql); empty without GPU metrics."""
    if not isinstance(bins, int) or bins < 1 or end_ns <= start_ns:
        raise NsysqlError(
            f"bins is a whole number of 1 or more and end after start, not {bins!r}, {start_ns!r}-{end_ns!r}"
        )
    return run(con, "metrics_timeline", t0=start_ns, t1=end_ns, bins=min(bins, end_ns - start_ns))


def shown(df: pl.DataFrame, graphics: bool = False) -> dict[str, pl.DataFrame]:
    """A gpu_metrics() answer as `nsysql metrics` shows it: `table`, where clocks whose values hold Hz under an
    `MHz` unit (the rule of gpu_metrics.sql's note: above 10^6 MHz, 1 THz, on that device) are divided by 10^6
    and noted so, and graphics counters (GRAPHICS) that are 0 in every row of their device are left out unless
    `graphics` (a compute program never runs that pipeline); `left`, the names of those left out (`metric`, in
    order), and `said`, one row: the sentence naming them (null where none is left out). Per iteration, the
    iterations no sample covers are left out of `table` and named in `unsampled` (one row, null where none)."""
    unsampled = None
    if "iteration" in df.columns:  # the rows of iterations no sample covers (gpu_metrics), said, not shown
        gaps = df.filter(pl.col("metric").is_null())
        df = df.filter(pl.col("metric").is_not_null())
        sampled = set(df["iteration"].unique().to_list())
        # an iteration sampled on another of its devices is not said to be unsampled
        its = sorted(set(gaps["iteration"].to_list()) - sampled)
        if its:
            n = len(sampled) + len(its)
            unsampled = (
                f"no GPU metrics sample covers the GPU work of iteration{'s' if len(its) > 1 else ''} "
                f"{some_of([str(i) for i in its], note=f'of the {n:,} with GPU work')}: "
                f"{'they are' if len(its) > 1 else 'it is'} left out"
            )
    vals = [c for c in _VALUES if c in df.columns]
    left: list[str] = []
    if df.height and vals:
        key = ["device_id", "metric"]
        top = pl.max_horizontal([pl.col(c).abs() for c in vals]).max().over(key)
        flags = df.select(
            hz=(pl.col("unit") == "MHz") & (top > 1e6),
            idle=pl.col("metric").str.contains(GRAPHICS.pattern) & (top == 0),
        )
        hz, idle = flags["hz"], flags["idle"]
        df = df.with_columns(pl.when(hz).then(pl.col(c) / 1e6).otherwise(pl.col(c)).alias(c) for c in vals)
        if "note" in df.columns:
            df = df.with_columns(pl.when(hz).then(pl.lit(HZ_NOTE)).otherwise(pl.col("note")).alias("note"))
        if not graphics:
            left = df.filter(idle)["metric"].unique(maintain_order=True).to_list()
            df = df.filter(~idle)
    said = f"left out {len(left)} graphics counters at 0 throughout ({', '.join(left)})" if left else None
    return {
        "table": df,
        "left": pl.DataFrame({"metric": left}, schema={"metric": pl.String}),
        "said": pl.DataFrame({"said": [said]}, schema={"said": pl.String}),
        "unsampled": pl.DataFrame({"said": [unsampled]}, schema={"said": pl.String}),
    }
