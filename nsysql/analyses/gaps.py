"""GPU idle gaps, each with its cause read from the CPU side, and idle time by cause.

The rules (what a gap is, how its cause is chosen, in which order) are written at the top of
queries/v1/analyses/gaps.sql. Here: which device/process/thread to read, iteration indices, and totals.
"""

from __future__ import annotations

import re

import polars as pl

from ..errors import NsysqlError
from ._names import quoted, titled
from ._sql import run
from .advice import unusable_gpu
from .cpu import gap_rows
from .patterns import resolve_range

DEFAULT_MIN_NS = 1_000_000
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
MAX_NS = 2**63 - 1
# past any duration worth writing (`9223372036854775807ns` is 21 characters; a number of a few hundred digits is
# still read, and said to be longer than any gap): longer text is not matched at all
MAX_DURATION_CHARS = 1000
# digits, an optional fraction, then a unit: no two parts can share a digit (`[0-9]*\.?[0-9]+` could, so a long
# run of digits that did not match tried every split: quadratic time)
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*", re.ASCII)


def parse_duration(text: str | int) -> int:
    """'500us', '2ms', '1s', '1.5ms' (text names its unit; only 0 may go without) or an int of ns -> ns."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise NsysqlError(f"a duration is 0 or more, not {text} ns")
        ns = text
    else:
        text = str(text)
        # the length is capped before any matching (the value may come from someone else: a service's
        # Profile.gaps(min_ns=...)); the pattern splits a number one way only, so a failed match is linear
        m = _DURATION.fullmatch(text) if len(text) <= MAX_DURATION_CHARS else None
        if not m:
            if len(text) > MAX_DURATION_CHARS:
                raise NsysqlError(
                    f"cannot read duration {text[:20]!r}... ({len(text)} characters, at most {MAX_DURATION_CHARS}): "
                    "use e.g. 500us, 2ms, 1s"
                )
            raise NsysqlError(f"cannot read duration {text[:60]!r}: use e.g. 500us, 2ms, 1s")
        ns = float(m.group(1)) * _UNITS[m.group(2) or "ns"]  # inf for a number too long for a float
    if ns > MAX_NS:  # the export's clock is a 64-bit count of ns: no gap can be longer
        raise NsysqlError(f"duration {str(text)[:40]!r} is longer than any gap can be (at most {MAX_NS} ns, 292 years)")
    if isinstance(text, str) and not m.group(2) and ns:  # `--min 5`: 5 what? ns would surprise most who type it
        num = m.group(1)
        raise NsysqlError(f"duration {text.strip()!r} has no unit: write {num}ms, {num}us, {num}s or {num}ns")
    return int(round(ns))


def gaps(con, its: pl.DataFrame | None, range: str | None = None, min_ns: int = DEFAULT_MIN_NS) -> pl.DataFrame:
    """One row per idle gap of at least `min_ns`: device, pid, start/end/duration, iteration, cause and evidence.

    `its`: the iterations frame to index gaps by (None: no iterations, so a null iteration column).
    """
    return with_iterations(find(con, range=range, min_ns=min_ns), its)


def refusal(con) -> str | None:
    """Why there are no gaps to find, whatever the options (no process with GPU work), or None."""
    if run(con, "process_devices").height:
        return None
    unusable = unusable_gpu(con)  # GPU activity recorded and all left out as flawed: not "none traced"
    if unusable:
        return f"no usable GPU work in this profile: {unusable}, so it has no GPU idle gaps to report"
    return "no GPU work traced in this profile, so it has no GPU idle gaps to report"


def find(con, range: str | None = None, min_ns: int = DEFAULT_MIN_NS) -> pl.DataFrame:
    """The gaps with their causes, not yet indexed by iteration (`with_iterations` does that)."""
    if why := refusal(con):
        raise NsysqlError(why)
    names = resolve_range(con, range)[0] if range is not None else None  # '': the ranges without a name
    threads = range_threads(con, names) if names is not None else {}
    frames = []
    for dev, owner in owners(con).items():
        tid = threads.get(owner["pid"], owner["main_tid"])
        frames.append(run(con, "gaps", device=dev, pid=owner["pid"], tid=tid, min_ns=min_ns, names=names))
    return pl.concat(frames)


def owners(con) -> dict[int, dict]:
    """Per device, in device order, the process that owns it (most GPU ops: process_devices' first row), as a
    dict with its pid and main_tid: the processes whose idle GPU time gaps finds and explains."""
    procs = run(con, "process_devices")
    out = {}
    for dev in procs["device_id"].unique().sort().to_list():
        out[dev] = procs.filter(pl.col("device_id") == dev).row(0, named=True)
    return out


def range_threads(con, names: list[str]) -> dict[int, int]:
    """Per process, the thread that holds most push/pop instances of the ranges `names` (as iterations --range
    takes its thread): with --range, the gaps are the parts inside those ranges, so the range and OS call that
    explain a gap are read on that thread, not on the process's main thread, which may never open them (a worker
    thread's `worker0/iter`)."""
    found = run(con, "range_count", names=names)  # per pid, tid and depth, most instances first
    per = found.group_by("pid", "tid", maintain_order=True).agg(pl.col("n").sum())
    best = per.sort("n", descending=True, maintain_order=True).unique("pid", keep="first", maintain_order=True)
    return dict(zip(best["pid"].to_list(), best["tid"].to_list()))


def with_iterations(gaps_df: pl.DataFrame, its: pl.DataFrame | None, pid: int | None = None) -> pl.DataFrame:
    """The gaps of `find` indexed by the iterations frame `its` (None: no iterations, so null iteration and
    warmup), in the columns `gaps` returns. `pid`: the process whose loop `its` holds; a gap of another process
    (another rank's GPU, in an export of a whole job) is in none of its steps, and keeps a null iteration."""
    if its is not None and gaps_df.height:
        out = _index_by_iteration(gaps_df, its.select("iteration", "start_ns", "end_ns", "warmup"))
        if pid is not None:
            mine = pl.col("pid") == pid
            out = out.with_columns(
                iteration=pl.when(mine).then(pl.col("iteration")), warmup=pl.when(mine).then(pl.col("warmup"))
            )
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
    elif range is not None:  # '' too: the ranges without a name
        names = resolve_range(con, range)[0]
        pids = sorted({o["pid"] for o in owners(con).values()})  # the processes whose gaps these are
        ns = run(con, "range_time", names=names, pids=pids)["ns"][0]
        span, counted = int(ns or 0), f"instances of {titled(range)}"
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


# An activity elsewhere is named as what the idle time waited on only when it overlaps at least this share of
# that idle time (as gaps.sql's third rule: a call that only touches the edge of the idle time explains nothing)
ACTIVITY_MIN_SHARE = 0.20
_KIND_ORDER = {"nvtx": 0, "cuda": 1, "os": 2, "cpu": 3}
_ACTIVITY_COLS = ["pid", "process", "tid", "thread", "other_process", "kind", "domain", "activity", "waiting"]


def activity(con, gaps_df: pl.DataFrame, cuda: bool = True, cpu: bool = True) -> pl.DataFrame:
    """Per gap of `gaps_df` (a `gaps` frame) and activity of another thread or process during it: the time
    they overlap (rules in queries/v1/analyses/gap_activity.sql). Unranked; `explain` and `explain_by_cause`
    rank it. `cuda=False` leaves CUDA API calls out (NVTX ranges and OS calls only: the cheap part). Rows of kind
    `cpu` (cpu.gap_rows, where the export has scheduling events; `cpu=False` leaves them out): each thread's
    time on a CPU with its top function (domain: the thread's role), and the waiting thread's time blocked in
    each OS call."""
    g = gaps_df.with_row_index("gap_id")
    if g.height == 0:
        return _empty_activity(g)
    tids = run(con, "process_devices").select("pid", pl.col("main_tid").alias("tid")).unique("pid")
    g = g.join(tids, on="pid", how="left")
    waiters = g.select("pid", pl.col("tid").fill_null(-1)).unique()
    skip = waiters.row(0) if waiters.height == 1 else (-1, -1)
    acts = run(
        con,
        "gap_activity",
        gap_ids=g["gap_id"].cast(pl.Int64).to_list(),
        starts=g["start_ns"].to_list(),
        ends=g["end_ns"].to_list(),
        pids=g["pid"].to_list(),
        tids=g["tid"].fill_null(-1).to_list(),
        devices=g["device_id"].to_list(),
        skip_pid=skip[0],
        skip_tid=skip[1],
        cuda=cuda,
    )
    acts = acts.with_columns(pl.col("gap_id").cast(pl.Int64))
    if cpu:
        acts = pl.concat([acts, gap_rows(con, gaps_df, g.select("pid", "tid"))])
    gpid = g.select(pl.col("gap_id").cast(pl.Int64), pl.col("pid").alias("_gpid"))
    return (
        acts.join(gpid, on="gap_id")
        .with_columns(other_process=pl.col("pid") != pl.col("_gpid"))
        .drop("_gpid")
        .rename({"name": "activity"})
    )


def _empty_activity(g: pl.DataFrame) -> pl.DataFrame:
    schema = {"gap_id": pl.Int64, "pid": pl.Int64, "process": pl.String, "tid": pl.Int64, "thread": pl.String}
    schema |= {"other_process": pl.Boolean, "kind": pl.String, "domain": pl.String, "activity": pl.String}
    return pl.DataFrame(schema=schema | {"waiting": pl.Boolean, "overlap_ns": pl.Int64})


def _ranked(acts: pl.DataFrame, by: str, top: int | None) -> pl.DataFrame:
    """Rank the activities within each `by` group (`place` 1, 2, ...): work before waiting, then by overlap,
    largest first; ties in overlap go to NVTX ranges before CUDA calls before OS calls, then by domain, name,
    pid and tid, so every run ranks alike and tied rows still get distinct places. (Not `rank`: stacked
    per-rank answers already have that column.)"""
    out = (
        acts.with_columns(_k=pl.col("kind").replace_strict(_KIND_ORDER, default=3))
        .sort(
            [by, "waiting", "overlap_ns", "_k", "domain", "activity", "pid", "tid"],
            descending=[False, False, True] + [False] * 5,
        )
        .with_columns(place=pl.int_range(1, pl.len() + 1).over(by))
        .drop("_k")
    )
    return out.filter(pl.col("place") <= top) if top is not None else out


def explain(con, gaps_df: pl.DataFrame, top: int | None = None) -> pl.DataFrame:
    """One row per gap of `gaps_df` and activity elsewhere during it, ranked per gap (at most `top` per gap):
    the gap (start, duration, iteration, cause), then where the activity ran and for how long (pct_of_gap)."""
    acts = activity(con, gaps_df)
    g = gaps_df.with_row_index("gap_id").select(
        pl.col("gap_id").cast(pl.Int64), "device_id", "start_ns", "duration_ns", "iteration", "cause"
    )
    out = _ranked(acts.join(g, on="gap_id"), "gap_id", top)
    return out.select(
        "device_id",
        "start_ns",
        "duration_ns",
        "iteration",
        "cause",
        "place",
        *_ACTIVITY_COLS,
        "overlap_ns",
        pct_of_gap=(100.0 * pl.col("overlap_ns") / pl.col("duration_ns")).round(1),
    ).sort(["start_ns", "place"])


def explain_by_cause(
    con,
    gaps_df: pl.DataFrame,
    include_warmup: bool = False,
    top: int | None = None,
    cuda: bool = True,
    cpu: bool = True,
) -> pl.DataFrame:
    """Per cause group of `by_cause` (the same gaps: steady-state ones when the gaps carry iterations, unless
    `include_warmup`): the activities elsewhere during the group's gaps, overlaps summed over its gaps, ranked
    per cause (at most `top` per cause). pct_of_idle: share of the group's idle time; `gaps`: how many of the
    group's gaps the activity touches."""
    g = gaps_df
    if steady_only(g, include_warmup):
        g = g.filter(pl.col("iteration").is_not_null() & ~pl.col("warmup"))
    acts = activity(con, g, cuda=cuda, cpu=cpu)
    gi = g.with_row_index("gap_id").select(pl.col("gap_id").cast(pl.Int64), "cause", "duration_ns")
    idle = gi.group_by("cause").agg(pl.col("duration_ns").sum().alias("idle_ns"))
    summed = (
        acts.join(gi.drop("duration_ns"), on="gap_id")
        .group_by("cause", *_ACTIVITY_COLS)
        .agg(pl.col("overlap_ns").sum(), pl.col("gap_id").n_unique().alias("gaps"))
        .join(idle, on="cause")
    )
    order = idle.sort(["idle_ns", "cause"], descending=[True, False]).with_row_index("_c")
    out = _ranked(summed.join(order.drop("idle_ns"), on="cause"), "_c", top)
    return out.sort(["_c", "place"]).select(
        "cause",
        "idle_ns",
        "place",
        *_ACTIVITY_COLS,
        "gaps",
        "overlap_ns",
        pct_of_idle=(100.0 * pl.col("overlap_ns") / pl.col("idle_ns")).round(1),
    )


def idle_elsewhere(ranked: pl.DataFrame, cuda: bool = True, who: str = "other thread or process") -> str | None:
    """When no work elsewhere explains a cause group's idle time (top_activity is None) but other threads
    were traced during it: the sentence saying so, with what they waited in; None when nothing was traced
    (then there is no evidence either way). `cuda`: whether `ranked` includes CUDA API calls; `who`: whose work
    `ranked` holds, in words."""
    ranked = ranked.filter(pl.col("kind") != "cpu")  # told by cpu.story
    if ranked.height == 0 or top_activity(ranked) is not None:
        return None
    waits = ranked.filter(pl.col("waiting"))["activity"].unique(maintain_order=True).head(3).to_list()
    what = "worked" if cuda else "was in an NVTX range or a working OS call"
    return (
        f"no {who} {what} for >= {ACTIVITY_MIN_SHARE:.0%} of that time"
        + (f" (the others waited: {', '.join(waits)})" if waits else "")
        + ": nothing traced elsewhere explains it"
    )


def top_activity(ranked: pl.DataFrame) -> str | None:
    """The sentence naming the work elsewhere that overlapped the most of a cause group's idle time (rows of
    `explain_by_cause` for one cause), or None when no work overlapped at least ACTIVITY_MIN_SHARE of it
    (waiting in poll or a condition variable is not what the idle time waited on)."""
    work = ranked.filter(~pl.col("waiting") & (pl.col("kind") != "cpu"))  # CPU rows: told by cpu.story
    if work.height == 0 or work["overlap_ns"][0] < ACTIVITY_MIN_SHARE * work["idle_ns"][0]:
        return None
    r = work.row(0, named=True)
    same = work.filter(
        (pl.col("kind") == r["kind"])
        & (pl.col("domain") == r["domain"])
        & (pl.col("activity") == r["activity"])
        & (pl.col("overlap_ns") >= ACTIVITY_MIN_SHARE * r["idle_ns"])
    )
    what = {"nvtx": "NVTX range", "cuda": "CUDA call", "os": "OS call"}[r["kind"]]
    dom = f", domain `{r['domain']}`" if r["domain"] else ""
    also = ", ".join(f"{_where(o)} {o['pct_of_idle']:.0f}%" for o in same.slice(1, 3).iter_rows(named=True))
    more = f" and {same.height - 4} more" if same.height > 4 else ""
    name = quoted(r["activity"]) if r["kind"] == "nvtx" else f"`{r['activity']}`"  # a call always has a name
    said = f"{name} ({what}{dom}) ran in {_where(r)} for {r['pct_of_idle']:.0f}% of that time"
    return said + (f" (also: {also}{more})" if also else "")


def _where(r: dict) -> str:
    thread = f"thread {r['thread']}" if r["thread"] else f"tid {r['tid']}"
    if r["other_process"]:
        return f"process {r['pid']} ({r['process']}, {thread})" if r["process"] else f"process {r['pid']} ({thread})"
    return f"{thread} (tid {r['tid']}) of the same process"


def activity_label(kind: pl.Expr, domain: pl.Expr, name: pl.Expr, other_process: pl.Expr) -> pl.Expr:
    """An activity as diff matches it across two profiles, whose pids differ: `domain:name` (NVTX) or
    `name (os|cuda)`, and where: in other processes or in other threads of the waiting process."""
    what = (
        pl.when(kind == "cpu")
        .then(pl.format("{} threads on a CPU (cpu)", domain))
        .when(kind != "nvtx")
        .then(pl.format("{} ({})", name, kind))
        .when(domain != "")
        .then(pl.format("{}:{}", domain, name))
        .otherwise(name)
    )
    where = (
        pl.when((kind == "cpu") & (domain == "main"))
        .then(pl.lit("the waiting thread"))
        .when(other_process)
        .then(pl.lit("other processes"))
        .otherwise(pl.lit("other threads"))
    )
    return pl.format("{} [{}]", what, where)
