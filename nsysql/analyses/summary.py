"""One screen about a profile: facts, GPU busy time, iterations, idle causes, findings, top kernels and ranges."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from . import gaps as _gaps
from . import iterations as _iter
from ._sql import facts, run
from .findings import findings
from .findings import tables as findings_tables
from .kernels import kernels
from .ranges import DEFAULT_ATTRIBUTION, ranges


def tables(con) -> dict[str, pl.DataFrame]:
    """The small tables summary reads besides its main answers (Profile.summary asks them on a thread of their
    own, beside iterations and gaps, so that they fill a core instead of following them)."""
    return {"gpus": run(con, "gpu_utilization"), "memory": run(con, "memory"), **findings_tables(con)}


def summary(con, attribution: str = DEFAULT_ATTRIBUTION, top: int = 10, *, its: pl.DataFrame | None = None,
            st: pl.DataFrame | None = None, gaps_df: pl.DataFrame | None = None,
            kernels_df: pl.DataFrame | None = None, ranges_df: pl.DataFrame | None = None,
            read: dict[str, pl.DataFrame] | None = None) -> dict[str, pl.DataFrame]:
    """Sections as DataFrames: facts, gpus, findings, idle (by cause), kernels (top), ranges (top), memory.

    `its`, `st`, `gaps_df`, `kernels_df` and `ranges_df` (iterations, their stats, gaps, the top kernels and all
    ranges) and `read` (what tables(con) returns), when the caller already has them, are used as they are
    instead of being computed again."""
    read = read or tables(con)
    f = facts(con)
    one = lambda k, d=None: (f.get(k) or [d])[0]  # noqa: E731
    gpus = read["gpus"]
    span_ns = int(one("span_ns") or 0)
    rows = [
        ("file", one("source_path")),
        ("nsys version", one("nsys_version", "unknown")),
        ("span", f"{span_ns / 1e9:.3f} s" if span_ns else "unknown (no timed events)"),
        ("GPUs", ", ".join(f"{r['device_id']}: {r['device'] or 'unnamed'}" for r in gpus.iter_rows(named=True))
         or "none used"),
    ]
    for r in gpus.iter_rows(named=True):
        rows.append((f"GPU {r['device_id']} busy", _device_busy(r)))
    causes = None
    try:
        if its is None or st is None:
            it = _iter.detect(con)
            its = _iter.iterations(con, it=it)
            st = _iter.stats(its, it)
        s = st.row(0, named=True)
        line = f"{s['iterations']} x `{s['range']}` ({s['mode']}), {s['warmup']} warm-up; " + _iter.steady_sentence(s)
        rows.append(("iterations", line))
        if s["outlier_pattern"]:
            rows.append(("outliers", s["outlier_pattern"]))
    except NsysqlError as e:
        rows.append(("iterations", f"none: {e}"))
    if gpus.height:
        g = gaps_df if gaps_df is not None else _gaps.gaps(con, its=its if its is not None else False)
        causes = _gaps.by_cause(con, g, its=its)
        if causes.height:
            idle = causes["idle_ns"].sum()
            c = causes.row(0, named=True)
            top3 = ", ".join(f"{r['cause']} {r['pct_of_idle']:.0f}%" for r in causes.head(3).iter_rows(named=True))
            rows.append(("idle (gaps >= 1 ms)",
                         f"{idle / 1e6:.1f} ms = {100 * idle / c['span_ns']:.1f}% of {c['counted']}; top causes "
                         f"(% of that idle time): {top3}" if c["span_ns"] else f"{idle / 1e6:.1f} ms"))
    for msg in f.get("missing", []):
        rows.append(("lacks", msg))
    out = {"facts": pl.DataFrame(rows, schema=["item", "value"], orient="row"), "gpus": gpus}
    out["findings"] = findings(con, st, causes, read)
    if causes is not None:
        out["idle by cause"] = causes.select("cause", "gaps", "idle_ns", "pct_of_idle", "pct_of_span")
    out["kernels"] = kernels_df if kernels_df is not None else kernels(con, top=top)
    rg = ranges_df if ranges_df is not None else ranges(con, attribution=attribution)
    on_gpu = rg.filter(pl.col("gpu_ops") > 0)
    if on_gpu.height or rg.height == 0:
        out["ranges"] = on_gpu.sort("gpu_total_ns", descending=True).head(min(top, rg.height))
    else:  # NVTX without GPU work under it (an NVTX-only profile): the ranges that took the CPU's time
        out["ranges"] = rg.sort(["total_ns", "name"], descending=[True, False]).head(min(top, rg.height))
        note = ("no NVTX range encloses GPU work, so `ranges` lists the "
                f"{out['ranges'].height} of {rg.height} with most CPU time")
        out["facts"] = pl.concat([out["facts"], pl.DataFrame([("ranges", note)], schema=["item", "value"],
                                                              orient="row")])
    out["memory"] = read["memory"]
    return out


MIN_ACTIVE_NS = 1_000_000  # a busy share of a shorter active span (one memset, say) says nothing


def _device_busy(r: dict) -> str:
    """The GPU-busy sentence of one device: no share where there is no GPU time, or too little to share."""
    if not r["busy_ns"]:
        return f"no GPU time ({r['ops']} ops of no duration)"
    if r["active_ns"] < MIN_ACTIVE_NS:
        return (f"{_dur(r['busy_ns'])} of GPU time in {r['ops']} op{'s' if r['ops'] != 1 else ''}: too little for "
                f"a busy share (active span {_dur(r['active_ns'])})")
    return (f"{r['busy_pct_active']:.1f}% of its active span ({r['busy_ns'] / 1e6:.1f} ms of "
            f"{r['active_ns'] / 1e6:.1f} ms), {r['busy_pct_span']:.1f}% of the profile span")


def _dur(ns: int) -> str:
    return f"{ns / 1e3:.1f} us" if ns < 1_000_000 else f"{ns / 1e6:.1f} ms"
