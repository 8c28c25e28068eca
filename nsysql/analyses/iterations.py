"""Per-iteration breakdown of a training or inference loop, with warm-up and outlier flags.

Which range is the iteration (`detect`):
- With a pattern, the ranges it selects (a numbered family like Batch0..Batch59 is one range), on the thread
  that has most of them.
- Without one, on the thread whose NVTX ranges enclose the most GPU work, the outermost depth at which a range
  family repeats (>= 3 instances); there, among the families whose ranges enclose GPU work if any do, the one
  with most instances, the earliest on a tie. A family's trailing numbers must count (Batch0..Batch59);
  PyTorch's `aten::mul, op_id = 314339` names are each their own range (iteration_candidates.sql).
- The range is a *wrapper* when its instances enclose child ranges: each instance is one iteration. Otherwise
  it is a *delimiter* (DLProf's key-node rule): an iteration runs from the start of one instance to the start
  of the next, e.g. `batch_to_device` in a loop of sibling `batch_to_device`, `forward`, `backward`,
  `optimizer_step` ranges; the last one over the siblings that follow it as they followed the one before
  (iteration_windows.sql).

Flags (`flag`):
- `warmup`: the first `skip` iterations. By default (skip=None) the first iteration, extended over the
  iterations right after it that are still outliers by the rule below, up to max(2, 10% of the iterations)
  in all (one-off initialisation often spills into the second step: optimizer state, allocator growth). An
  explicit `skip` is taken as given.
- `outlier`: a steady-state iteration slower than median + max(3 x 1.4826 x MAD, 25% of the median), where MAD
  is the median absolute deviation of steady-state iteration times (1.4826 x MAD estimates the standard
  deviation of normal noise; the 25% floor keeps very regular loops from flagging
  jitter).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ..errors import NsysqlError
from .. import queries
from ._sql import run
from .patterns import resolve_range

MIN_REPEATS = 3
MAD_SIGMA = 1.4826
OUTLIER_SIGMAS = 3.0
OUTLIER_FLOOR = 0.25
MAX_AUTO_WARMUP_FRACTION = 0.10


@dataclass
class IterationRange:
    """The range chosen as the iteration, and why."""

    names: list[str]
    family: str
    pid: int
    tid: int
    device_id: int
    delimiter: bool
    why: str
    instances: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return "delimiter" if self.delimiter else "wrapper"


def detect(con, range: str | None = None) -> IterationRange:
    cands = run(con, "iteration_candidates")
    procs = run(con, "process_devices")
    if cands.height == 0:
        raise NsysqlError("no NVTX push/pop ranges, so iterations cannot be found (profile with -t nvtx)")
    if procs.height == 0:
        raise NsysqlError("no GPU work in this profile, so there are no iterations to break down")
    if range:
        names, how = resolve_range(con, range)
        sel = cands.filter(pl.col("names").list.eval(pl.element().is_in(names)).list.any())
        if sel.height == 0:
            raise NsysqlError(f"--range {range!r} selects only start/end ranges; iterations need push/pop ranges")
        by_thread = sel.group_by(["pid", "tid"]).agg(pl.col("instances").sum(), pl.col("with_children").sum(),
                                                     pl.col("family").first(), pl.col("depth").min())
        best = by_thread.sort(["instances", "tid"], descending=[True, False]).row(0, named=True)
        pid, tid = best["pid"], best["tid"]
        # the selected names' own instances (a candidate family's count includes names the pattern left out)
        family, n = (range if how != "exact" else names[0]), run(con, "range_count", pid=pid, tid=tid,
                                                                  names=names)["n"][0]
        delimiter = best["with_children"] == 0
        why = f"--range {range!r} selects {len(names)} range name(s) ({how} match), {n} instances on thread {tid}"
    else:
        top = cands.row(0, named=True)
        pid, tid = top["pid"], top["tid"]
        mine = cands.filter((pl.col("pid") == pid) & (pl.col("tid") == tid) & (pl.col("instances") >= MIN_REPEATS))
        if mine.height == 0:
            raise NsysqlError(
                f"no NVTX range repeats {MIN_REPEATS}+ times on thread {tid}; name the iteration with --range")
        depth = mine["depth"].min()
        level = mine.filter(pl.col("depth") == depth)
        if level.height > 1:  # families that enclose GPU work come first
            names = level["names"].explode().to_list()
            ops = dict(run(con, "iteration_family_ops", pid=pid, tid=tid, names=names).iter_rows())
            level = level.with_columns(
                gpu=pl.col("names").map_elements(lambda ns: sum(ops.get(n, 0) for n in ns) > 0,
                                                 return_dtype=pl.Boolean))
        else:
            level = level.with_columns(gpu=pl.lit(True))
        level = level.sort(["gpu", "instances", "first_start_ns"], descending=[True, True, False])
        best = level.row(0, named=True)
        names, family, n = best["names"], best["family"], best["instances"]
        delimiter = best["with_children"] == 0
        why = (f"`{family}` repeats {n} times at depth {depth} on thread {tid}, the thread whose NVTX ranges "
               f"enclose the most GPU work")
        if level.height > 1:
            how = "encloses GPU work and " if best["gpu"] and not level["gpu"].all() else ""
            why += f" ({level.height} range families repeat at that depth; `{family}` {how}comes first)"
    why += ("; its instances hold no child ranges, so each iteration runs from one start to the next"
            if delimiter else "; each instance is one iteration")
    dev = procs.filter(pl.col("pid") == pid)
    device = dev["device_id"][0] if dev.height else procs["device_id"][0]
    return IterationRange(list(names), family, pid, tid, device, delimiter, why, n)


def windows(con, it: IterationRange) -> None:
    """(Re)build the temp table _iterations for `it`."""
    con.execute(queries.read("analyses/iteration_windows.sql"),
                {"pid": it.pid, "tid": it.tid, "names": it.names, "delimiter": it.delimiter})


def iterations(con, range: str | None = None, skip: int | None = None, it: IterationRange | None = None) -> pl.DataFrame:
    """One row per iteration: times, GPU busy/idle, per-kind GPU time, flags, and per child range CPU/GPU time."""
    it = it or detect(con, range)
    windows(con, it)
    df = run(con, "iterations", pid=it.pid, device=it.device_id)
    phases = run(con, "iteration_phases", delimiter=it.delimiter)
    df = flag(df, skip)
    if phases.height:
        order = phases.group_by("phase", maintain_order=True).agg(pl.col("cpu_ns").sum())["phase"].to_list()
        wide = phases.pivot(on="phase", index="iteration", values=["cpu_ns", "gpu_ns"], aggregate_function="sum")
        cols = []
        for p in order:
            for v in ("cpu_ns", "gpu_ns"):
                src = f"{v}_{p}" if f"{v}_{p}" in wide.columns else p
                cols.append(pl.col(src).fill_null(0).alias(f"{p} {v}"))
        df = df.join(wide.select("iteration", *cols), on="iteration", how="left")
    return df


def spans(con, range: str | None = None, skip: int | None = None, it: IterationRange | None = None) -> pl.DataFrame:
    """The iteration windows with their flags, without the GPU work per iteration: iteration, name, start_ns,
    end_ns, cpu_ns, warmup and outlier, the same as in `iterations()` (the flags read cpu_ns only). Enough to
    index gaps by iteration, for ~0.25 CPU s less than `iterations()` at 500k kernels."""
    it = it or detect(con, range)
    windows(con, it)
    return flag(run(con, "iteration_spans"), skip)


def flag(df: pl.DataFrame, skip: int | None) -> pl.DataFrame:
    if skip is not None and skip < 0:
        raise NsysqlError(f"--skip must be 0 or more, not {skip}")
    n = 1 if skip is None else skip
    steady = df.filter(pl.col("iteration") >= n)["cpu_ns"]
    if steady.len() == 0:
        return df.with_columns(warmup=pl.col("iteration") < n, outlier=pl.lit(False))
    thr = outlier_threshold(steady)
    if skip is None:
        times = df.sort("iteration")["cpu_ns"].to_list()
        cap = max(2, int(MAX_AUTO_WARMUP_FRACTION * len(times)))
        while n < min(cap, len(times) - 1) and times[n] > thr:
            n += 1
        thr = outlier_threshold(df.filter(pl.col("iteration") >= n)["cpu_ns"])
    df = df.with_columns(warmup=pl.col("iteration") < n)
    return df.with_columns(outlier=(~pl.col("warmup")) & (pl.col("cpu_ns") > thr))


def outlier_threshold(times: pl.Series) -> float:
    med = float(times.median())
    mad = float((times - med).abs().median())
    return med + max(OUTLIER_SIGMAS * MAD_SIGMA * mad, OUTLIER_FLOOR * med)


def stats(df: pl.DataFrame, it: IterationRange) -> pl.DataFrame:
    """Steady-state summary: count, median, p90, max, CV of iteration time, median GPU busy %, outlier pattern."""
    steady = df.filter(~pl.col("warmup"))
    t = steady["cpu_ns"].cast(pl.Float64)
    row = {
        "range": it.family,
        "mode": it.mode,
        "iterations": df.height,
        "warmup": int(df["warmup"].sum()),
        "steady": steady.height,
        "median_ns": float(t.median()) if steady.height else None,
        "mean_ns": float(t.mean()) if steady.height else None,
        "p90_ns": float(t.quantile(0.9, "linear")) if steady.height else None,
        "max_ns": float(t.max()) if steady.height else None,
        "cv": float(t.std() / t.mean()) if steady.height > 1 and t.mean() else None,
        # the share of each iteration's window in which the device ran something (so at most 100%), not
        # gpu_busy_ns / cpu_ns: work launched in an iteration may run after its window ends (e.g. a window
        # that only times the launches of a CUDA graph)
        "median_gpu_busy_pct": float(((steady["cpu_ns"] - steady["idle_ns"]) / steady["cpu_ns"] * 100).median())
        if steady.height else None,
        "outliers": int(steady["outlier"].sum()),
        "outlier_pattern": pattern(df),
        "detected": it.why,
    }
    return pl.DataFrame([row])


def pattern(df: pl.DataFrame) -> str | None:
    """"iterations 9, 19, 29, … (every 10th) are 9.2x slower than the median", or None.

    The period is the step d for which the most outliers fall in one residue class (index mod d), provided that
    class holds at least 3 outliers, most of the outliers, and nearly every d-th iteration across its span.
    """
    steady = df.filter(~pl.col("warmup"))
    out = steady.filter(pl.col("outlier"))
    if out.height == 0:
        return None
    med = float(steady.filter(~pl.col("outlier"))["cpu_ns"].median() or steady["cpu_ns"].median())
    idx = out["iteration"].to_list()
    cpu = dict(zip(idx, out["cpu_ns"].to_list()))
    period, members = periodic(idx)
    main = members or idx
    ratio = sorted(cpu[i] for i in main)[len(main) // 2] / med if med else float("nan")
    shown = ", ".join(map(str, main[:6])) + (", …" if len(main) > 6 else "")
    noun, verb = ("iteration", "is") if len(main) == 1 else ("iterations", "are")
    every = f" (every {_ordinal(period)})" if period else ""
    text = f"{noun} {shown}{every} {verb} {ratio:.1f}x slower than the median"
    others = [i for i in idx if i not in main]
    if others:
        text += f"; also slow: {', '.join(map(str, others[:6]))}" + (", …" if len(others) > 6 else "")
    return text


def periodic(idx: list[int]) -> tuple[int | None, list[int]]:
    """The period of outlier indices and the outliers on it, or (None, [])."""
    if len(idx) < 3:
        return None, []
    diffs = [b - a for a, b in zip(idx, idx[1:])]
    common = sorted(set(diffs), key=lambda d: (-diffs.count(d), d))[:5]
    cands = {k for d in common for k in range(2, d + 1) if d % k == 0 and k <= 10_000}
    best: tuple[int, int, list[int]] | None = None
    for d in sorted(cands):
        classes: dict[int, list[int]] = {}
        for i in idx:
            classes.setdefault(i % d, []).append(i)
        cls = max(classes.values(), key=len)
        span = (cls[-1] - cls[0]) // d + 1
        if len(cls) >= 3 and len(cls) >= 0.6 * len(idx) and len(cls) >= 0.75 * span:
            if best is None or len(cls) > best[1] or (len(cls) == best[1] and d > best[0]):
                best = (d, len(cls), cls)
    return (best[0], best[2]) if best else (None, [])


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
