"""One screen about a profile: facts, GPU busy time, iterations, idle causes, findings, top kernels and ranges."""

from __future__ import annotations

import polars as pl

from ..errors import NsysqlError
from . import advice as _advice
from . import cpu as _cpu
from . import gaps as _gaps
from . import headroom as _headroom
from . import iterations as _iter
from ._names import said_ns
from ._sql import facts, run
from .findings import Thresholds, findings, tensor_metric
from .findings import tables as findings_tables

FACTS_SCHEMA = ["key", "item", "value"]
"""The facts section: `key`, a stable identifier to read a fact by (fix_first, step, file, nsys_version, span,
gpus, gpu_N_busy, iterations, outliers, idle, lacks, ranges); `item`, its label for display; `value`, the text."""


def tables(con, limits: Thresholds = Thresholds()) -> dict[str, pl.DataFrame]:
    """The small tables summary reads besides its main answers (Profile.summary asks them on a thread of their
    own, beside iterations and gaps, so that they fill a core instead of following them)."""
    gpus = run(con, "gpu_utilization")
    return {
        "gpus": gpus,
        # where no GPU op is left, how many the load dropped as flawed (none traced, or none usable)
        "gpu_ops_dropped": (
            run(con, "dropped_rows", canonical="gpu_ops") if gpus.is_empty() else pl.DataFrame({"rows": [0]})
        ),
        "memory": run(con, "memory"),
        **findings_tables(con, limits.empty_queue_ns),
        **_headroom.tables(con),
    }


def gpus(con) -> pl.DataFrame:
    """Per device: its busy time, share of its active span and of the profile span (gpu_utilization.sql)."""
    return run(con, "gpu_utilization")


def summary(
    con,
    *,
    loop: tuple[pl.DataFrame, pl.DataFrame] | NsysqlError,
    gaps_df: pl.DataFrame | NsysqlError,
    kernels_df: pl.DataFrame,
    ranges_df: pl.DataFrame,
    read: dict[str, pl.DataFrame],
    top: int = 10,
    work: pl.DataFrame | None = None,
    limits: Thresholds = Thresholds(),
    path: str | None = None,
) -> dict[str, pl.DataFrame]:
    """Sections as DataFrames: facts, gpus, findings, idle (by cause), kernels (top), ranges (top), memory.

    From the answers the caller gathered (Profile.summary: stored answers, asked side by side): `loop`, the
    iterations and their stats, or why there are none; `gaps_df`, the gaps indexed by those iterations, or why
    there are none (raised if the profile has GPUs: then it had to have gaps to count); `kernels_df`, the top
    kernels; `ranges_df`, all ranges; `read`, what tables(con) returns; `work`, the loop's per-iteration work
    that findings' headroom reads (headroom.work), None without a loop; `limits`, the findings' thresholds
    (`read` made with the same); `path`: the export as the user named it, for the `file` fact (None: the file
    it was loaded from, which a link resolves to). Only facts and idle time by cause are read here."""
    its, st = loop if not isinstance(loop, NsysqlError) else (None, None)
    f = facts(con)
    gpus = read["gpus"]
    if not isinstance(gaps_df, NsysqlError):
        gaps_df = _loop_gaps(gaps_df, st, gpus)
    rows = _profile_facts(
        f, gpus, st, its, gaps_df, read["gpu_ops_dropped"].item(), path
    )  # (key, label, value): front ends read a fact by its key
    rows += _loop_facts(loop, its, read.get("activity_names"))
    causes, activity, loader, on_cpu = None, None, False, None
    if gpus.height:
        if isinstance(gaps_df, NsysqlError):
            raise gaps_df
        causes = _gaps.by_cause(con, gaps_df, its=its)
        if causes.height:
            idle_rows, activity, loader, on_cpu = _idle_facts(con, f, causes, gaps_df, gpus, loop=st is not None)
            rows += idle_rows
    for msg in f.get("missing", []):
        rows.append(("lacks", "lacks", msg))
    out = {"facts": pl.DataFrame(rows, schema=FACTS_SCHEMA, orient="row"), "gpus": gpus}
    slow = _slow_step_story(con, gaps_df, its) if causes is not None and causes.height else None
    found = findings(
        con, st, causes, read, activity=activity, its=its, limits=limits, loader=loader, slow=slow, on_cpu=on_cpu
    )
    out["findings"], first = _ranked_findings(found, its, gaps_df, causes, work, read)
    if first:
        lead = pl.DataFrame([("fix_first", *first)], schema=FACTS_SCHEMA, orient="row")
        out["facts"] = pl.concat([lead, out["facts"]])
    if causes is not None:
        out["idle by cause"] = causes.select("cause", "gaps", "idle_ns", "pct_of_idle", "pct_of_span")
    out["kernels"] = kernels_df
    out["ranges"], note = _top_ranges(ranges_df, top)
    if note:
        out["facts"] = pl.concat(
            [out["facts"], pl.DataFrame([("ranges", "ranges", note)], schema=FACTS_SCHEMA, orient="row")]
        )
    out["memory"] = read["memory"]
    return out


def with_kernels_note(out: dict[str, pl.DataFrame], note: str | None) -> dict[str, pl.DataFrame]:
    """`out` (summary's sections) with `note`, the line under its kernel table (what it leaves out: CUDA graphs
    traced whole, kernels.whole_graph_note), as the fact `kernels_note`, which the table and Markdown show under
    the kernels section (render.summary_text); `out` as it is where there is no note."""
    if not note:
        return out
    row = pl.DataFrame([("kernels_note", "kernels", note)], schema=FACTS_SCHEMA, orient="row")
    return {**out, "facts": pl.concat([out["facts"], row])}


def _profile_facts(
    f: dict,
    gpus: pl.DataFrame,
    st: pl.DataFrame | None,
    its: pl.DataFrame | None,
    gaps_df: pl.DataFrame | NsysqlError,
    dropped: int = 0,
    path: str | None = None,
) -> list[tuple[str, str, str]]:
    """The facts that open the section: the headline (where there is a loop), the file, nsys's version, the
    span, the GPUs and each one's busy share of the whole profile. `dropped`: the GPU ops the load left out as
    flawed (untraced_gpu)."""
    one = lambda k, d=None: (f.get(k) or [d])[0]  # noqa: E731
    span_ns = int(one("span_ns") or 0)
    rows = []
    untraced = None if gpus.height else untraced_gpu(one("span_from") or "", dropped)
    if st is not None:  # the headline: the steady-state step, its GPU busy share and where the rest went
        gaps_ok = None if isinstance(gaps_df, NsysqlError) else gaps_df
        h = headline(st, its, gaps_ok)
        why = untraced and f"no {'usable GPU work' if dropped else 'GPU work traced'}: {untraced}"
        rows.append(("step", "steady-state step", step_sentence(h, why, _loop_gpu(h, gpus))))
    rows += [
        ("file", "file", path or one("source_path")),
        ("nsys_version", "nsys version", one("nsys_version", "unknown")),
        ("span", "span", f"{span_ns / 1e9:.3f} s" if span_ns else "unknown (no timed events)"),
        (
            "gpus",
            "GPUs",
            ", ".join(f"{r['device_id']}: {r['device'] or 'unnamed'}" for r in gpus.iter_rows(named=True))
            or f"none {'usable' if dropped else 'traced'}: {untraced}",
        ),
    ]
    for r in gpus.iter_rows(named=True):
        rows.append((f"gpu_{r['device_id']}_busy", f"GPU {r['device_id']} busy (whole profile)", device_busy(r)))
    return rows


def _loop_facts(
    loop: tuple[pl.DataFrame, pl.DataFrame] | NsysqlError, its: pl.DataFrame | None, names: pl.DataFrame | None = None
) -> list[tuple[str, str, str]]:
    """The iterations fact (or why there are none), then the outliers, SM / tensor activity and exposed
    communication where the loop has them. `names`: the metrics' names per device (activity_names.sql), so that
    the tensor counter is called what the loop's device sampled."""
    if isinstance(loop, NsysqlError):  # no loop detected (summary's --range names one)
        return [("iterations", "iterations", f"none: {loop}")]
    s = loop[1].row(0, named=True)
    line = f"{s['iterations']} x {s['range_said']} ({s['mode']}), {s['warmup']} warm-up; " + _iter.steady_sentence(s)
    rows = [("iterations", "iterations", line)]
    if s["outlier_pattern"]:
        rows.append(("outliers", "outliers", s["outlier_pattern"]))
    hw = _activity_line(its, tensor_metric(names, s["device_id"]))
    if hw:
        rows.append(("sm_tensor_active", "SM / tensor active", hw))
    if s.get("exposed_comm_pct") is not None:
        rows.append(("exposed_comm", "exposed communication", _iter.exposed_sentence(s)))
    return rows


def _idle_facts(
    con, f: dict, causes: pl.DataFrame, gaps_df: pl.DataFrame, gpus: pl.DataFrame, loop: bool
) -> tuple[list[tuple[str, str, str]], str | None, bool, float | None]:
    """The idle fact and what happened elsewhere meanwhile, from the idle causes (at least one row), with the
    sentence naming the work elsewhere during the top cause's gaps (gaps.top_activity, else what the CPU did:
    cpu.story) that findings reads, whether that sentence names the data loader as what the GPU waited for, and
    the share of those gaps the main thread spent on a CPU (cpu.story's; None where it was not read)."""
    idle = causes["idle_ns"].sum()
    c = causes.row(0, named=True)
    top3 = ", ".join(f"{r['cause']} {r['pct_of_idle']:.0f}%" for r in causes.head(3).iter_rows(named=True))
    top3 = f"top causes (% of the idle time in gaps >= 1 ms): {top3}" + _other_causes(causes, c)
    # what the other threads and processes did during the top cause's gaps: NVTX ranges and OS calls only
    # (CUDA API calls, most of a large export's rows, would make every summary pay for `gaps --explain`)
    top_gaps = gaps_df.filter(pl.col("cause") == c["cause"])
    elsewhere = _gaps.explain_by_cause(con, top_gaps, top=None, cuda=False, cpu=False)  # the CPU: cpu.story
    elsewhere, beside = _peer_work(con, elsewhere)
    activity = _gaps.top_activity(elsewhere)
    n_gaps = int(causes["gaps"].sum())
    on = _gaps_devices(gaps_df, gpus, loop)
    rows = [("idle", "idle", _idle_line(c, idle, n_gaps, top3, gpus, loop=loop, on=on))]
    said, loader, on_cpu = activity, False, None
    if not said:  # no traced work elsewhere explains it: what the CPU did, where scheduling events say
        steady = _gaps.steady_only(top_gaps)  # the same gaps as the cause's idle time (gaps.by_cause)
        said, loader, on_cpu = _cpu.story(con, top_gaps.filter(~pl.col("warmup")) if steady else top_gaps)
        activity = said
    if not said:
        # said only when nothing traced explains the gaps; the other ranks' own work is said apart (beside)
        who = "other thread or process" if beside is None else "other thread, nor process without a GPU of its own,"
        said = _gaps.idle_elsewhere(elsewhere, cuda=False, who=who)
        if said:  # where the answer would have been: the capture that records what the CPU ran
            said += _advice.cpu_capture_hint(con, f)
    if (
        not said and beside is None and c["cause"] == "unknown"
    ):  # no call or range names the gaps' cause, nothing traced overlaps
        # them: say so, and what would have recorded it, rather than leave `unknown` unexplained
        said = "no OS call or NVTX range overlaps these gaps, and no CPU sample tells what the CPU did then" + (
            _advice.cpu_capture_hint(
                con, f, osrt=any(m.split(":")[0].endswith(" OSRT_API") for m in f.get("missing", []))
            )
        )
    if beside is not None:
        said = f"{said}; {beside}" if said else beside
    if said:
        rows.append(("meanwhile", "meanwhile", f"during {c['cause']}: {said}"))
    return rows, activity, loader, on_cpu


def _peer_work(con, elsewhere: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """The work elsewhere during the gaps (explain_by_cause rows) less that of the other processes that drive a
    GPU of their own (process_devices: the other ranks of a job profiled in one export), and the sentence that
    names the largest of theirs, or None. Another rank runs its own loop beside this one, the same ranges at
    the same time: its `Load data` overlapping this process's idle gaps is no evidence that this process waited
    on it (a rank waits on another inside a collective, which `nsysql ranks` reads over one export per rank), so
    it is never named as the work the gaps waited on, only said apart as what ran beside them."""
    gpu = run(con, "process_devices").select("pid", "device_id")
    peer = pl.col("other_process") & pl.col("pid").is_in(gpu["pid"].implode())
    theirs = elsewhere.filter(peer)
    said = _gaps.top_activity(theirs) if theirs.height else None
    if said is None:
        return elsewhere.filter(~peer), None
    top = theirs.filter(~pl.col("waiting") & (pl.col("kind") != "cpu"))["pid"][0]
    devs = ", ".join(str(d) for d in sorted(gpu.filter(pl.col("pid") == top)["device_id"]))
    return elsewhere.filter(~peer), (
        f"in a process that drives a GPU of its own (GPU {devs}: another rank of the job, running its own work "
        f"beside this one), {said}; nothing in this export shows that the idle GPU's process waited on it (`nsysql "
        "ranks` over one export per rank tells which rank the others waited for)"
    )


def _slow_step_story(con, gaps_df: pl.DataFrame, its: pl.DataFrame | None) -> str | None:
    """What the CPU did during the GPU's idle gaps of the outlier steps, where that names the data loader as
    what the GPU waited for (cpu.story's rule, applied to those steps' gaps alone); None otherwise (no outliers,
    no scheduling events in their gaps, or the story names no loader)."""
    if its is None or "outlier" not in its.columns or not its["outlier"].any():
        return None
    slow = its.filter(pl.col("outlier") & ~pl.col("warmup"))["iteration"]
    gaps = gaps_df.filter(pl.col("iteration").is_in(slow.implode()))
    if not gaps.height:
        return None
    said, loader, _ = _cpu.story(con, gaps)
    return said if loader else None


def _ranked_findings(
    found: pl.DataFrame,
    its: pl.DataFrame | None,
    gaps_df: pl.DataFrame | NsysqlError,
    causes: pl.DataFrame | None,
    work: pl.DataFrame | None,
    read: dict[str, pl.DataFrame],
) -> tuple[pl.DataFrame, tuple[str, str] | None]:
    """Each finding with the time it would give back per iteration, ranked (headroom.rank), and the fix_first
    fact's (label, value) that leads the summary, or None (headroom.top_line)."""
    step = _headroom.step(its, work)
    facts_row = read["headroom_facts"].row(0, named=True) if "headroom_facts" in read else None
    g = None if isinstance(gaps_df, NsysqlError) or its is None else gaps_df
    inputs = _headroom.Inputs(step, its, g, causes, work, facts_row)
    ranked = _headroom.rank(found, inputs)
    return ranked, _headroom.top_line(ranked, step)


def _top_ranges(rg: pl.DataFrame, top: int) -> tuple[pl.DataFrame, str | None]:
    """The `top` ranges with most GPU time; where no range encloses GPU work (an NVTX-only profile), those with
    most CPU time, with the note that says so."""
    on_gpu = rg.filter(pl.col("gpu_ops") > 0)
    if on_gpu.height or rg.height == 0:
        return on_gpu.sort("gpu_proj_ns", descending=True).head(min(top, rg.height)), None
    ranges = rg.sort(["total_ns", "name"], descending=[True, False]).head(min(top, rg.height))
    note = f"no NVTX range encloses GPU work, so `ranges` lists the {ranges.height} of {rg.height} with most CPU time"
    return ranges, note


def idle_in_gaps(gaps_df: pl.DataFrame, its: pl.DataFrame, device_id: int | None) -> int:
    """The idle time of `device_id` in the gaps of `gaps_df` (those of at least gaps' min_ns, 1 ms in a
    summary) that lies inside the steady-state steps of `its` on their clock (step_clock): each gap clipped to
    the steps, so the figure is part of the steps' idle time (stats' steady_idle_ns) by construction. A CPU
    step is its window [start_ns, end_ns); a GPU step [gpu_start_ns, gpu_start_ns + step_ns)."""
    steady = its.filter(~pl.col("warmup"))
    if not steady.height or device_id is None:
        return 0
    gpu = "step_clock" in steady.columns and steady["step_clock"][0] == "gpu"
    start = pl.coalesce("gpu_start_ns", "start_ns") if gpu else pl.col("start_ns")
    end = start + pl.col("step_ns") if gpu else pl.col("end_ns")
    w = steady.select(start.alias("s"), end.alias("e")).sort("s").rows()
    g = gaps_df.filter(pl.col("device_id") == device_id).select("start_ns", "end_ns").sort("start_ns").rows()
    total, i = 0, 0
    for gs, ge in g:  # windows are disjoint and sorted: one sweep
        while i < len(w) and w[i][1] <= gs:
            i += 1
        j = i
        while j < len(w) and w[j][0] < ge:
            total += max(0, min(ge, w[j][1]) - max(gs, w[j][0]))
            j += 1
    return int(total)


def headline(st: pl.DataFrame, its: pl.DataFrame | None, gaps_df: pl.DataFrame | None) -> dict:
    """The figures of the headline, from iteration stats (one row), the iterations and the gaps (>= 1 ms):
    stats' row plus `idle_gaps_1ms_ns`, the part of steady_idle_ns in gaps >= 1 ms (idle_in_gaps; null when
    the gaps are not known). Every share of the headline is of steady_ns, the steady-state steps' time."""
    s = st.row(0, named=True)
    s["idle_gaps_1ms_ns"] = (
        idle_in_gaps(gaps_df, its, s.get("device_id"))
        if gaps_df is not None and its is not None and s.get("steady_idle_ns") is not None
        else None
    )
    return s


def untraced_gpu(span_from: str, dropped: int = 0) -> str:
    """advice.untraced_gpu from the timed sources the profile holds (profile_facts span_from) and the GPU ops
    the load left out as flawed (`dropped`)."""
    return _advice.untraced_gpu("CUDA API calls" in span_from, dropped)


def _loop_gpu(h: dict, gpus: pl.DataFrame) -> str:
    """Which GPU the headline's busy and idle shares are of: 'the GPU' where the profile has one, else the loop's
    device by number (its process's main device: `nsysql iterations` names the process), as the others' time
    is not in them."""
    if gpus.height < 2 or h.get("device_id") is None:
        return "the GPU"
    others = "the other GPU" if gpus.height == 2 else f"the other {gpus.height - 1} GPUs"
    return f"GPU {h['device_id']} (the loop's process's; {others} not counted)"


def step_sentence(h: dict, untraced: str | None = None, gpu: str = "the GPU") -> str:
    """The headline sentence: the median steady-state step (on its clock), and over the steady-state steps'
    time, the GPU's busy share and its idle share, all idle, with the part in gaps >= 1 ms apart. `untraced`:
    the clause that says the profile has no GPU op at all and why (untraced_gpu), None where it has some; `gpu`: the device they are
    of, in words (_loop_gpu)."""
    if not h["steady"]:
        return f"none: all {h['iterations']} iterations are warm-up"
    n, total = h["steady"], h["steady_ns"]
    clock = _iter.clock_clause(h)
    text = f"{_iter.duration(h['median_ns'])} (median of {n} step{'s' if n != 1 else ''}" + (
        f"; {clock})" if clock else ")"
    )
    idle = h.get("steady_idle_ns")
    if idle is None or not total:
        return text + (f"; {untraced}" if untraced else "; no GPU work traced in the process")
    text += (
        f"; over their {_dur(total)} {gpu} was busy {100 * (total - idle) / total:.1f}% and idle "
        f"{100 * idle / total:.1f}% ({_dur(idle)})"
    )
    big = h.get("idle_gaps_1ms_ns")
    if big is None:
        return text
    if not big:
        return text + ", none of it in gaps >= 1 ms"
    return (
        text + f": {100 * big / total:.1f}% in gaps >= 1 ms ({_dur(big)}), {100 * (idle - big) / total:.1f}% in "
        f"shorter gaps ({_dur(idle - big)})"
    )


def _loop_gaps(gaps_df: pl.DataFrame, st: pl.DataFrame | None, gpus: pl.DataFrame) -> pl.DataFrame:
    """The gaps whose idle time summary's causes, idle line and findings count: with a loop, those of its device
    alone where the profile has several GPUs (another process's GPU, or another GPU of the process, idles in
    parallel: its idle time is no time a step of this loop could give back, and the headline's shares are of
    the loop's device); else every device's."""
    dev = st["device_id"][0] if st is not None and "device_id" in st.columns else None
    if dev is None or gpus.height < 2:
        return gaps_df
    mine = gaps_df.filter(pl.col("device_id") == dev)
    # without a gap in its steady-state steps, by_cause counts the devices' active span: every device's, then
    return mine if _gaps.steady_only(mine) else gaps_df


def _gaps_devices(gaps_df: pl.DataFrame, gpus: pl.DataFrame, loop: bool) -> str:
    """Where the gaps that idle time by cause counts lie, in words ('' on a profile of one GPU): the loop's
    device (_loop_gaps), else every device's together (gaps.by_cause: the steady-state steps' gaps where they
    hold any, else all)."""
    if gpus.height < 2:
        return ""
    if loop and gaps_df["device_id"].n_unique() == 1:
        return f" on GPU {gaps_df['device_id'][0]} (the loop's; `nsysql gaps` lists every GPU's)"
    steady = _gaps.steady_only(gaps_df)
    counted = gaps_df.filter(pl.col("iteration").is_not_null() & ~pl.col("warmup")) if steady else gaps_df
    n = counted["device_id"].n_unique()
    return f" on {n} GPUs together" if n > 1 else ""


def _other_causes(causes: pl.DataFrame, top: dict) -> str:
    """Where the causes past the three named hold more idle time than the first (ranges named anew in each
    step, say: a cause per name), how many they are and their share, as a clause: the three alone would read as
    the story. Empty otherwise."""
    others = causes.slice(3)
    if not others.height or others["idle_ns"].sum() <= top["idle_ns"]:
        return ""
    n, pct = others.height, 100 * others["idle_ns"].sum() / causes["idle_ns"].sum()
    return (
        f"; {n:,} other cause{'s' if n != 1 else ''} {pct:.0f}% together, none over {others['pct_of_idle'].max():.0f}%"
    )


def _idle_line(c: dict, idle: int, gaps: int, top3: str, gpus: pl.DataFrame, loop: bool, on: str = "") -> str:
    """The idle fact: the causes of the idle time in gaps >= 1 ms; where no steady-state step holds such a gap,
    that time over the devices' active span (start-up included), beside all the idle time there. `on`: where
    those gaps lie, in words, where the profile has several GPUs (_gaps_devices)."""
    if c["counted"] == "steady-state iterations":  # the amounts are the headline's (step)
        return f"{gaps} gap{'s' if gaps != 1 else ''} >= 1 ms{on} in the steady-state steps; {top3}"
    if not c["span_ns"]:
        return f"{_dur(idle)} in gaps >= 1 ms{on}; {top3}"
    where = c["counted"]
    # several GPUs' idle time together can exceed the profile's span: `on` says whose it is
    text = f"{_dur(idle)} in gaps >= 1 ms{on} = {100 * idle / c['span_ns']:.1f}% of {where}"
    if where == "devices' active span":
        all_idle = int((gpus["active_ns"] - gpus["busy_ns"]).sum())
        text += (
            f" (first to last GPU op, start-up included{'; none in the steady-state steps' if loop else ''}; all "
            f"idle there: {_dur(all_idle)} = {100 * all_idle / c['span_ns']:.1f}%)"
        )
    return f"{text}; {top3}"


def _activity_line(its: pl.DataFrame, tensor: str = "Tensor Active") -> str | None:
    """SMs Active and Tensor Active per steady-state iteration (GPU metrics, time-weighted over each iteration's
    GPU-projected window: iterations' sm_active_pct and tensor_active_pct), where the export sampled them;
    `tensor`: what the device's tensor counter is called (Turing's counts the fp16 pipe too: findings.tensor_metric)."""
    if "sm_active_pct" not in its.columns:
        return None
    steady = its.filter(~pl.col("warmup"))
    parts = []
    for col, label in (("sm_active_pct", "SMs Active"), ("tensor_active_pct", tensor)):
        v = steady[col].drop_nulls()
        if v.len():
            parts.append(f"{label} median {v.median():.1f}% ({v.min():.1f}-{v.max():.1f}%)")
    if not parts:
        return None
    # the iterations the values come from: those a sample covers (a sampling that stopped covers fewer)
    n = steady.filter(pl.col("sm_active_pct").is_not_null() | pl.col("tensor_active_pct").is_not_null()).height
    of = f"{n} iterations" if n == steady.height else f"{n} of the {steady.height} iterations, the others unsampled"
    return ", ".join(parts) + f" per steady-state iteration (GPU metrics, {of})"


MIN_ACTIVE_NS = 1_000_000  # a busy share of a shorter active span (one memset, say) says nothing


def device_busy(r: dict) -> str:
    """The GPU-busy sentence of one device: no share where there is no GPU time, or too little to share."""
    if not r["busy_ns"]:
        return f"no GPU time ({r['ops']} ops of no duration)"
    if r["active_ns"] < MIN_ACTIVE_NS:
        return (
            f"{_dur(r['busy_ns'])} of GPU time in {r['ops']} op{'s' if r['ops'] != 1 else ''}: too little for "
            f"a busy share (active span {_dur(r['active_ns'])})"
        )
    return (
        f"{r['busy_pct_active']:.1f}% of its active span (first to last GPU op, start-up included: "
        f"{_dur(r['busy_ns'])} of {_dur(r['active_ns'])}), {r['busy_pct_span']:.1f}% of the profile span"
    )


def all_devices_busy(gpus: pl.DataFrame) -> str:
    """The busy share of all devices together (the PR snippet's one line), under the rule of device_busy: no
    share from less than MIN_ACTIVE_NS of active span."""
    active, busy = gpus["active_ns"].sum(), gpus["busy_ns"].sum()
    if active < MIN_ACTIVE_NS:
        return f"{busy / 1e3:.1f} us in all, too little for a share"
    return f"{100 * busy / max(active, 1):.1f}% of the active span"


def _dur(ns: int) -> str:
    return said_ns(ns)
