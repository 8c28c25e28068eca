"""Every analysis nsysql answers, declared (nsysql.engine.declare): its parameters, what it needs, its SQL
files and the function that composes its answer from those. Profile's methods and the CLI ask them by name
through the engine (`Engine.run`); the modules beside this one hold the rules each function applies.

A declaration's function gets a Context: `ctx.con` (the calling thread's connection), `ctx.ask(name, ...)` and
`ctx.gather(...)` for the analyses it needs, and nothing else.
"""

from __future__ import annotations

import os

import polars as pl

from ..engine import Engine, Param, analysis
from ..errors import NsysqlError
from . import api as _api
from . import diff as _diff
from . import gaps as _gaps
from . import headroom as _headroom
from . import info as _info
from . import iterations as _iter
from . import kernels as _kernels
from . import kernels_by_range as _kbr
from . import launches as _launches
from . import metrics as _metrics
from . import ops as _ops
from . import overlap as _overlap
from . import ranges as _ranges
from . import ranks as _ranks
from . import summary as _summary
from . import timeline as _timeline
from . import trace as _trace
from ._sql import facts as _facts
from .findings import Thresholds
from .patterns import resolve_range as _resolve_range
from .ranges import ATTRIBUTIONS, DEFAULT_ATTRIBUTION

# parameters several analyses share
OPT_STR = (str, type(None))
OPT_INT = (int, type(None))
OPT_BOOL = (bool, type(None))
RANGE = Param("range", OPT_STR, None, doc="NVTX range pattern of the loop (exact, family, prefix or RE2)")
SKIP = Param("skip", OPT_INT, None, doc="iterations counted as warm-up (None: found from the times)")
ATTRIBUTION = Param("attribution", str, DEFAULT_ATTRIBUTION, ATTRIBUTIONS, doc="which ranges a GPU op belongs to")
GROUP_OPS = Param("group_ops", OPT_BOOL, None, doc="PyTorch operator ranges without their per-call arguments")
TOP = Param("top", OPT_INT, None, doc="the first N rows (None: all)")
MIN_NS = Param(
    "min_ns", (int, str), _gaps.DEFAULT_MIN_NS, normalize=_gaps.parse_duration, doc="shortest gap (ns, or '1ms')"
)
BY_CAUSE = Param("by", OPT_STR, None, (None, "cause"), doc="per cause instead of per gap")


def _sigmas(k) -> float:
    """k of the outlier rule as a float: a number 0 or more."""
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not k >= 0 or k == float("inf"):
        raise NsysqlError(f"outlier_sigmas must be a number 0 or more, not {k!r}")
    return float(k)


OUTLIER_SIGMAS = Param(
    "outlier_sigmas",
    (float, int),
    _iter.OUTLIER_SIGMAS,
    normalize=_sigmas,
    doc="k of the outlier rule: a step is an outlier above median + max(k x 1.4826 x MAD, 25% of it, 50 us)",
)
THRESHOLDS = Param(
    "thresholds", Thresholds, Thresholds(), doc="the findings' limits (nsysql.analyses.findings.Thresholds)"
)
INCLUDE_WARMUP = Param("include_warmup", bool, False, doc="count the warm-up iterations' gaps too")


def _head(whole: pl.DataFrame, top: int) -> pl.DataFrame:
    """The first `top` rows of a whole ranked table (ordered by total time, then name; pct is of the whole), so
    the one stored answer serves summary's top 10, any `top` and everything."""
    if top < 0:
        raise NsysqlError(f"`top` must be 0 or more, not {top}", option="top")
    return whole.head(min(top, whole.height))  # polars takes no count beyond 64 bits: --top 10**30 is all rows


@analysis("facts", keep="none", tables=("profile_facts",), sql=("facts",))
def facts(ctx) -> dict[str, list[str]]:
    """Facts about the profile as a whole (key -> values; a key may repeat)."""
    return _facts(ctx.con)


@analysis(
    "info",
    tables=(
        "api_calls",
        "data_quality",
        "devices",
        "gpu_metric_samples",
        "gpu_ops",
        "nvtx_marks",
        "nvtx_ranges",
        "os_calls",
        "processes",
        "strings",
        "threads",
    ),
    sql=("table_counts", "data_quality", "row_checks", "devices"),
)
def info(ctx) -> pl.DataFrame:
    """What the export holds and lacks, and which analyses apply."""
    return _info.info(ctx.con)


@analysis(
    "iteration_range",
    params=(RANGE,),
    keep="memory",
    needs=("resolve_range",),
    tables=("gpu_ops", "nvtx_ranges", "process_roles"),
    sql=("iteration_candidates", "process_devices", "pytorch_ranges", "iteration_evidence", "range_count"),
)
def iteration_range(ctx, range):
    """The iteration range for `range` (nsysql.analyses.iterations.detect), found once per Profile and its
    workers (iterations and iteration_stats both need it; finding it takes a few queries)."""
    return _iter.detect(ctx.con, range)


@analysis(
    "kernels",
    params=(
        Param("name", str, "demangled", _kernels.NAME_KINDS, doc="which spelling of kernel names"),
        TOP,
        Param("by", str, "name", _kernels.GROUPINGS),
        Param("per", OPT_STR, None, (None, "iteration", "range")),
        ATTRIBUTION,
    ),
    needs=("iteration_range",),
    tables=("gpu_ops", "kernel_classes", "kernel_tensor_use", "nvtx_ranges", "op_ranges", "strings"),
    sql=("kernels", "kernels_by_category", "range_categories", "iteration_categories"),
)
def kernels(ctx, name, top, by, per, attribution) -> pl.DataFrame:
    """Per kernel name (nsys's cuda_gpu_kern_sum, then category and tensor_cores); by category; per iteration or
    NVTX range (see Profile.kernels)."""
    if per is not None:
        if per not in ("iteration", "range") or by != "category":
            raise NsysqlError(f"per='iteration' or 'range' goes with by='category' only, not per={per!r}, by={by!r}")
        if per == "range":
            return _kernels.categories_per_range(ctx.con, attribution)
        it = ctx.ask("iteration_range", range=None)
        return _kernels.categories_per_iteration(_iter.windows(ctx.con, it), it.pid)
    if top is not None:
        return _head(ctx.ask("kernels", name=name, by=by), top)
    return _kernels.kernels(ctx.con, name=name, by=by)


@analysis(
    "gpu_metrics",
    params=(Param("by", OPT_STR, None, (None, *_metrics.GROUPINGS)), RANGE, ATTRIBUTION),
    needs=("iteration_range",),
    tables=("gpu_metric_samples", "gpu_ops", "nvtx_ranges", "op_ranges"),
    sql=("gpu_metrics", "range_metrics", "iteration_metrics"),
)
def gpu_metrics(ctx, by, range, attribution) -> pl.DataFrame:
    """GPU metrics per device and metric, or their time-weighted mean per iteration or range."""
    if by == "iteration":
        it = ctx.ask("iteration_range", range=range)
        return _metrics.gpu_metrics(ctx.con, by=by, windows=_iter.windows(ctx.con, it), pid=it.pid)
    return _metrics.gpu_metrics(ctx.con, by=by, attribution=attribution)


@analysis("api", params=(TOP,), tables=("api_calls", "strings"), sql=("api",))
def api(ctx, top) -> pl.DataFrame:
    """CUDA API calls by function (as `nsys stats -r cuda_api_sum`)."""
    if top is not None:
        return _head(ctx.ask("api"), top)
    return _api.api(ctx.con)


@analysis(
    "launches",
    params=(Param("by", str, "launch", _launches.GROUPINGS),),
    tables=("gpu_ops", "strings"),
    sql=("launches",),
)
def launches(ctx, by) -> pl.DataFrame:
    """Launch latency (as `nsys stats -r cuda_kern_exec_sum`)."""
    return _launches.launches(ctx.con, by=by)


FAMILIES = Param("families", bool, False, doc="numbered families (Batch0..Batch59) as one row, Batch*")


@analysis("ranges", params=(ATTRIBUTION, GROUP_OPS, FAMILIES), tables=("gpu_ops", "nvtx_ranges"), sql=("ranges",))
def ranges(ctx, attribution, group_ops, families) -> pl.DataFrame:
    """NVTX ranges per name (nsys's nvtx_sum and nvtx_gpu_proj_sum)."""
    return _ranges.ranges(ctx.con, attribution=attribution, group_ops=group_ops, families=families)


@analysis(
    "kernels_by_range",
    params=(RANGE, Param("innermost", bool, False), ATTRIBUTION, GROUP_OPS),
    needs=("resolve_range",),
    tables=("gpu_ops", "nvtx_ranges", "op_range_links", "range_chains", "strings"),
    sql=("kernels_by_range",),
)
def kernels_by_range(ctx, range, innermost, attribution, group_ops) -> pl.DataFrame:
    """Kernels per NVTX range (as `nsys stats -r nvtx_kern_sum`)."""
    return _kbr.kernels_by_range(
        ctx.con, range=range, innermost=innermost, attribution=attribution, group_ops=group_ops
    )


@analysis(
    "ops",
    params=(Param("shapes", bool, False),),
    tables=("gpu_ops", "nvtx_ranges", "op_ranges", "strings"),
    sql=("ops",),
)
def ops(ctx, shapes) -> pl.DataFrame:
    """PyTorch operators (emit_nvtx ranges)."""
    return _ops.ops(ctx.con, shapes=shapes)


@analysis(
    "summary_tables",
    params=(THRESHOLDS,),
    keep="none",
    tables=(
        "devices",
        "gpu_busy",
        "gpu_ops",
        "kernel_classes",
        "kernel_tensor_use",
        "nvtx_ranges",
        "profile_facts",
        "strings",
    ),
    sql=(
        "gpu_utilization",
        "memory",
        "launch_figures",
        "pageable_copies",
        "kernels_by_category",
        "advice_facts",
        "range_label_pytorch",
        "headroom_facts",
    ),
)
def summary_tables(ctx, thresholds) -> dict[str, pl.DataFrame]:
    """The small tables summary reads besides its main answers."""
    return _summary.tables(ctx.con, thresholds)


@analysis(
    "summary",
    params=(
        ATTRIBUTION,
        Param("top", int, 10, doc="top kernels and ranges shown"),
        THRESHOLDS,
        Param("families", bool, True, doc="the ranges table folds numbered families (Batch*)"),
    ),
    needs=("iterations", "iteration_stats", "gaps", "kernels", "ranges", "summary_tables", "headroom_work"),
)
def summary(ctx, attribution, top, thresholds, families) -> dict[str, pl.DataFrame]:
    """One screen about the profile; its pieces are asked side by side, and stored, so a report that asks them
    next reuses them. A piece that does not apply (no loop, no GPU work) is said by its error."""
    got = ctx.gather(
        loop=[("iterations", {}), ("iteration_stats", {})],
        gaps=("gaps", {}),
        kernels=("kernels", {"top": top}),
        ranges=("ranges", {"attribution": attribution, "families": families}),
        read=("summary_tables", {"thresholds": thresholds}),
        work=("headroom_work", {}),
    )
    for k in ("kernels", "ranges", "read"):
        if isinstance(got[k], NsysqlError):
            raise got[k]
    loop, work = got["loop"], got["work"]
    return _summary.summary(
        ctx.con,
        loop=loop if isinstance(loop, NsysqlError) else tuple(loop),
        gaps_df=got["gaps"],
        kernels_df=got["kernels"],
        ranges_df=got["ranges"],
        read=got["read"],
        top=top,
        work=None if isinstance(work, NsysqlError) else work,  # no loop: no headroom
        limits=thresholds,
    )


@analysis("findings", params=(THRESHOLDS,), keep="none", needs=("summary",))
def findings(ctx, thresholds) -> pl.DataFrame:
    """The summary's findings, the one that would give back most time per steady-state iteration first."""
    return ctx.ask("summary", thresholds=thresholds)["findings"]


@analysis(
    "iterations",
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    needs=("iteration_range",),
    tables=("gpu_busy", "gpu_ops", "nvtx_ranges", "strings"),
    sql=("iteration_windows", "iterations", "iteration_phases", "iteration_metrics"),
)
def iterations(ctx, range, skip, outlier_sigmas) -> pl.DataFrame:
    """One row per iteration of the loop (see nsysql.analyses.iterations for the rules)."""
    it = ctx.ask("iteration_range", range=range)
    return _iter.iterations(ctx.con, range=range, skip=skip, it=it, outlier_sigmas=outlier_sigmas)


@analysis("iteration_stats", params=(RANGE, SKIP, OUTLIER_SIGMAS), needs=("iteration_range", "iterations"))
def iteration_stats(ctx, range, skip, outlier_sigmas) -> pl.DataFrame:
    """Steady-state summary of iteration time, the outlier pattern, and which range was chosen and why."""
    it = ctx.ask("iteration_range", range=range)
    its = ctx.ask("iterations", range=range, skip=skip, outlier_sigmas=outlier_sigmas)  # the (stored) frame
    return _iter.stats(its, it)


@analysis(
    "iteration_spans",
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    needs=("iteration_range",),
    tables=("nvtx_ranges",),
    sql=("iteration_windows", "iteration_spans"),
)
def iteration_spans(ctx, range, skip, outlier_sigmas) -> pl.DataFrame:
    """The iteration windows with their flags, without the GPU work per iteration (iterations.spans)."""
    it = ctx.ask("iteration_range", range=range)
    return _iter.spans(ctx.con, skip=skip, it=it, outlier_sigmas=outlier_sigmas)


@analysis(
    "iteration_breakdown",
    params=(RANGE,),
    needs=("iteration_range",),
    tables=("gpu_ops", "nvtx_ranges", "strings"),
    sql=("iteration_kernels", "iteration_ranges"),
)
def iteration_breakdown(ctx, range) -> dict[str, pl.DataFrame]:
    """Per iteration: the GPU time of each op name and the CPU time of each range family (iterations.breakdown)."""
    return _iter.breakdown(ctx.con, ctx.ask("iteration_range", range=range))


@analysis(
    "headroom_work",
    params=(RANGE,),
    needs=("iteration_range",),
    tables=("gpu_ops", "kernel_classes", "kernel_tensor_use", "nvtx_ranges"),
    sql=("iteration_windows", "iteration_headroom"),
)
def headroom_work(ctx, range) -> pl.DataFrame:
    """Per iteration of the loop: the GPU work findings' headroom reads (nsysql.analyses.headroom.work)."""
    it = ctx.ask("iteration_range", range=range)
    return _headroom.work(_iter.windows(ctx.con, it), it.pid)


@analysis(
    "overlap",
    params=(Param("by", str, "device", _overlap.GROUPINGS), RANGE),
    needs=("iterations", "iteration_range"),
    tables=("gpu_busy",),
    sql=("overlap",),
)
def overlap(ctx, by, range) -> pl.DataFrame:
    """Communication hidden or exposed, per device or per iteration of the loop."""
    if by not in _overlap.GROUPINGS:
        raise NsysqlError(f"`by` must be one of {', '.join(_overlap.GROUPINGS)}, not {by!r}", option="by")
    if by == "iteration":
        its = ctx.ask("iterations", range=range)
        return _overlap.by_iteration(its, ctx.ask("iteration_range", range=range).device_id)
    return _overlap.overlap(ctx.con)


def _gap_spans(ctx, range: str | None) -> pl.DataFrame | None:
    """The iterations gaps are indexed by (and their steady-state span counted over): the spans of the
    iterations of `range`, else of the detected loop; None without a loop. Spans, not the iterations answer:
    the same iteration, start_ns, end_ns, wall_ns and warmup, without the GPU work per iteration."""
    for pattern in [range, None] if range else [None]:
        try:
            return ctx.ask("iteration_spans", range=pattern)
        except NsysqlError:
            continue
    return None


@analysis(
    "gaps",
    params=(RANGE, MIN_NS, BY_CAUSE, INCLUDE_WARMUP),
    needs=("iteration_spans", "resolve_range"),
    tables=("api_calls", "gpu_busy", "nvtx_open", "nvtx_ranges", "os_calls", "process_roles", "strings"),
    sql=("process_devices", "gaps", "range_time", "device_span"),
)
def gaps(ctx, range, min_ns, by, include_warmup) -> pl.DataFrame:
    """GPU idle gaps with their causes; `by="cause"` for idle time per cause."""
    if by not in (None, "cause"):
        raise NsysqlError(f"gaps can be grouped by 'cause' only, not {by!r}")
    # the inputs first (stored answers, or found once per Profile and its workers), then the analyses
    its = _gap_spans(ctx, range)
    if by == "cause":
        # from the gaps and iteration spans answers (stored by an earlier summary or gaps), so a warm run
        # opens no tables unless the span must be measured (no iterations, or --include-warmup)
        g = ctx.ask("gaps", range=range, min_ns=min_ns)
        con = None if _gaps.steady_only(g, include_warmup) else ctx.con
        return _gaps.by_cause(con, g, range=range, include_warmup=include_warmup, its=its)
    return _gaps.with_iterations(_gaps.find(ctx.con, range=range, min_ns=min_ns), its)  # min_ns in ns


@analysis(
    "gap_activity",
    params=(RANGE, MIN_NS, BY_CAUSE, INCLUDE_WARMUP, TOP),
    needs=("gaps",),
    tables=(
        "api_calls",
        "devices",
        "nvtx_open",
        "nvtx_ranges",
        "os_calls",
        "process_roles",
        "processes",
        "strings",
        "threads",
    ),
    sql=("gap_activity", "process_devices"),
)
def gap_activity(ctx, range, min_ns, by, include_warmup, top) -> pl.DataFrame:
    """What every other thread and process did during each gap of `gaps()`, ranked by overlap."""
    if by not in (None, "cause"):
        raise NsysqlError(f"gaps can be grouped by 'cause' only, not {by!r}")
    g = ctx.ask("gaps", range=range, min_ns=min_ns)
    if by is None:
        return _gaps.explain(ctx.con, g, top=top)
    return _gaps.explain_by_cause(ctx.con, g, include_warmup=include_warmup, top=top)


@analysis("nccl_ranges", tables=("nvtx_ranges",), sql=("nccl_ranges",))
def nccl_ranges(ctx) -> pl.DataFrame:
    """NCCL range time: instances and total time of the NCCL NVTX ranges (for nsysql.many)."""
    return _ranks.nccl(ctx.con)


@analysis("gpus", tables=("devices", "gpu_busy", "gpu_ops", "profile_facts"), sql=("gpu_utilization",))
def gpus(ctx) -> pl.DataFrame:
    """Per device: its busy time, share of its active span and of the profile span."""
    return _summary.gpus(ctx.con)


@analysis(
    "diff_side",
    keep="none",
    needs=("gpus", "iterations", "iteration_stats", "iteration_breakdown", "gaps", "gap_activity"),
)
def diff_side(ctx) -> _diff.Side:
    """What diff reads of one profile, from its (stored) answers."""
    gpus = ctx.ask("gpus")
    try:
        its, st, parts = ctx.ask("iterations"), ctx.ask("iteration_stats"), ctx.ask("iteration_breakdown")
    except NsysqlError as e:
        return _diff.Side(gpus, str(e))
    if not gpus.height:
        return _diff.side(gpus, its, st, parts["kernels"], parts["ranges"], None)
    return _diff.side(gpus, its, st, parts["kernels"], parts["ranges"], ctx.ask("gaps"), ctx.ask("gap_activity"))


@analysis("diff_totals", keep="none", needs=("kernels",), tables=("nvtx_ranges",), sql=("range_family_totals",))
def diff_totals(ctx):
    """Whole-profile kernel and range-family totals, for a diff whose sides have no common iterations."""
    return _diff.totals(ctx.ask("kernels"), _diff.family_totals(ctx.con))


@analysis(
    "diff",
    params=(Param("other", Engine, doc="the NEW profile's engine"),),
    keep="none",
    needs=("diff_side", "diff_totals"),
)
def diff(ctx, other: Engine) -> _diff.Diff:
    """This profile (BASE) against `other` (NEW): verdict, iteration time, idle by cause, ranges, kernels."""
    from dataclasses import replace

    b, n = ctx.ask("diff_side"), other.run("diff_side")
    if _diff.needs_totals(b, n):
        b, n = replace(b, totals=ctx.ask("diff_totals")), replace(n, totals=other.run("diff_totals"))
    return _diff.diff(b, n, base_label=ctx.path.name, new_label=other.path.name)


@analysis(
    "timeline",
    params=(
        Param("bins", int, _timeline.DEFAULT_BINS),
        Param("start_ns", OPT_INT, None),
        Param("end_ns", OPT_INT, None),
        Param("devices", (list, type(None)), None),
    ),
    keep="none",
    tables=("devices", "gpu_busy", "gpu_ops", "profile_facts"),
    sql=("gpu_utilization", "device_span", "timeline"),
)
def timeline(ctx, bins, start_ns, end_ns, devices) -> pl.DataFrame:
    """GPU busy time per device in `bins` equal bins of its active span (or of [start_ns, end_ns))."""
    return _timeline.timeline(ctx.con, bins=bins, start_ns=start_ns, end_ns=end_ns, devices=devices)


@analysis(
    "metrics_timeline",
    params=(Param("start_ns", int), Param("end_ns", int), Param("bins", int, _timeline.DEFAULT_BINS)),
    keep="none",
    tables=("gpu_metric_samples",),
    sql=("metrics_timeline",),
)
def metrics_timeline(ctx, start_ns, end_ns, bins) -> pl.DataFrame:
    """SMs Active and Tensor Active per device in `bins` equal bins of [start_ns, end_ns)."""
    return _metrics.timeline(ctx.con, start_ns, end_ns, bins=bins)


@analysis(
    "trace",
    params=(Param("window", OPT_STR, None), Param("iterations", OPT_STR, None), Param("lazy", bool, False)),
    keep="none",
    needs=("iterations", "gaps"),
    tables=("api_calls", "devices", "gpu_ops", "nvtx_ranges", "processes", "profile_facts", "strings", "threads"),
    sql=("trace_span", "trace_gpu_ops", "trace_api_calls", "trace_nvtx", "trace_names"),
)
def trace(ctx, window, iterations, lazy) -> dict:
    """The rows of a timeline (nsysql.analyses.trace) within `window` or iterations "A:B"; the whole profile
    by default."""
    if window and iterations:
        raise NsysqlError("give `window` or `iterations`, not both", option=("window", "iterations"))
    start, end = _trace.span(ctx.con)
    try:
        its = ctx.ask("iterations")
    except NsysqlError as e:
        if iterations:
            raise NsysqlError(f"`iterations`: {e}", option="iterations") from None
        its = None
    if iterations:
        t0, t1 = _trace.iterations_window(its, *_trace.parse_iterations(iterations))
    elif window:
        t0, t1 = _trace.parse_window(window, start, end)
    else:
        t0, t1 = start, end
    try:
        gaps = ctx.ask("gaps")
    except NsysqlError:  # no GPU work: no gaps to show
        gaps = None
    got = _trace.rows(ctx.con, t0, t1, its, gaps, lazy=lazy)
    if window:
        _trace.check_window(got, window, start, end, its)
    return got


@analysis(
    "export",
    params=(Param("to", (str, os.PathLike)), Param("format", str, "parquet", ("parquet", "csv"))),
    keep="none",
)
def export(ctx, to, format) -> pl.DataFrame:
    """Write the canonical tables (parquet or csv) and a README.md describing their columns into `to`."""
    from pathlib import Path

    from ..export import export

    return export(ctx.con, Path(to), format=format)


@analysis(
    "resolve_range",
    params=(Param("pattern", str),),
    keep="none",
    tables=("nvtx_ranges",),
    sql=("range_names", "range_family", "range_family_labels", "range_regex"),
)
def resolve_range(ctx, pattern) -> list[str]:
    """The range names `pattern` selects (exact, numbered family, prefix, else RE2)."""
    return _resolve_range(ctx.con, pattern)[0]
