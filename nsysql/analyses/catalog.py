"""Every analysis nsysql answers, declared (nsysql.engine.declare): its parameters, what it needs, its SQL
files and the function that composes its answer from those. Profile's methods and the CLI ask them by name
through the engine (`Engine.run`); the modules beside this one hold the rules each function applies.

A declaration's function gets a Context: `ctx.con` (the calling thread's connection), `ctx.ask(name, ...)` and
`ctx.gather(...)` for the analyses it needs, and nothing else.
"""

from __future__ import annotations

import os
from dataclasses import replace

import polars as pl

from ..engine import REGISTRY, Engine, Flag, Only, Param, analysis
from ..errors import NsysqlError, one_line
from . import api as _api
from . import collectives as _coll
from . import cpu as _cpu
from . import diff as _diff
from . import gaps as _gaps
from . import gpu_memory as _gpu_memory
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
from . import report as _report
from . import summary as _summary
from . import timeline as _timeline
from . import trace as _trace
from ._sql import facts as _facts
from .findings import Thresholds
from .findings import tensor_metric_of as _tensor_metric
from .patterns import resolve_range as _resolve_range
from .ranges import ATTRIBUTIONS, DEFAULT_ATTRIBUTION

# parameters several analyses share
OPT_STR = (str, type(None))
OPT_INT = (int, type(None))
OPT_BOOL = (bool, type(None))
# (a parameter's doc is also its command line option's help: one sentence; an analysis whose options read
# differently takes the shared one with its own doc, `replace(RANGE, doc=...)`)
PATTERN = Flag(metavar="PATTERN")
RANGE = Param(
    "range",
    OPT_STR,
    None,
    doc="The iteration range (exact name, numbered family, prefix or regex; '' for the ranges without a name); "
    "detected when left out.",
    flag=PATTERN,
)
SKIP = Param(
    "skip",
    OPT_INT,
    None,
    doc="Warm-up iterations to leave out of steady state (default: the first, extended while the next ones are "
    "still outliers).",
)
ATTRIBUTION = Param(
    "attribution",
    str,
    DEFAULT_ATTRIBUTION,
    ATTRIBUTIONS,
    doc="How GPU work is tied to NVTX ranges: 'thread' = the launching thread's open ranges (exactly nsys); "
    "'process' (default) = also inherit the ranges open on other threads of the process when the launching "
    "thread has none (PyTorch's autograd thread).",
    nsys="thread",  # nsys's reports (nvtx_kern_sum, nvtx_gpu_proj_sum) credit a kernel to its thread's ranges
)
GROUP_OPS = Param(
    "group_ops",
    OPT_BOOL,
    None,
    doc="Name PyTorch's ranges (emit_nvtx, nsys --pytorch=autograd-nvtx) without their per-call arguments "
    "(`aten::addmm, seq = 5, op_id = 9, ...` -> `aten::addmm`): one row per operator instead of one per call. "
    "Default: grouped with --attribution process, per call with thread (as nsys stats).",
)
# --top N wherever an answer is ranked: validated by the analysis (_head), whatever the command line
TOP = Param("top", OPT_INT, None, doc="Only the first N rows (default: all).", flag=Flag(metavar="N"))
MIN_NS = Param(
    "min_ns",
    (int, str),
    _gaps.DEFAULT_MIN_NS,
    normalize=lambda x: _option("min_ns", _gaps.parse_duration, x),
    doc="Shortest gap to report: 500us, 2ms, 1s ... (nsys recipe gpu_gaps uses 500ms).",
    flag=Flag(name="--min", metavar="DURATION", default="1ms"),
)
BY_CAUSE = Param("by", OPT_STR, None, (None, "cause"), doc="Idle time per cause instead of one row per gap.")
GAPS_RANGE = replace(
    RANGE,
    doc="Only the idle time inside instances of the ranges named PATTERN (exact name, numbered family, prefix or "
    "regex; '' for the ranges without a name), each stretch once where instances nest or overlap.",
)
# the loop gaps are indexed by apart from their `range` filter (summary's --range names the loop, not where the
# idle time counts): not a command-line option of gaps
GAPS_LOOP = Param(
    "loop",
    OPT_STR,
    None,
    doc="The iteration range the gaps are indexed by (as `range` of iterations); default: `range`, else the "
    "detected loop.",
    flag=None,
)
LOOP = replace(
    RANGE,
    doc="The iteration range (exact name, numbered family, prefix or regex; '' for the ranges without a name), "
    "as `iterations --range` takes it; detected when left out.",
)


def _number(x, name: str, ok, says: str) -> float:
    """`x` as a float where it is a number (a bool is not) for which `ok` holds; else the error saying what the
    parameter `name` must be (`says`), about that parameter (a front end names it its own way: `--name`)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not ok(x):
        raise NsysqlError(f"`{name}` must be a number {says}, not {x!r}", option=name)
    return float(x)


def _option(name: str, normalize, x):
    """normalize(x), its error said as about the parameter `name` (a front end names it its own way)."""
    try:
        return normalize(x)
    except NsysqlError as e:
        if e.options:
            raise
        raise NsysqlError(f"`{name}`: {e}", option=name) from None


def _sigmas(k) -> float:
    """k of the outlier rule as a float: a number 0 or more."""
    return _number(k, "outlier_sigmas", lambda v: v >= 0 and v != float("inf"), "0 or more")


OUTLIER_SIGMAS = Param(
    "outlier_sigmas",
    (float, int),
    _iter.OUTLIER_SIGMAS,
    normalize=_sigmas,
    doc="k of the outlier rule: a step is an outlier above median + max(k x 1.4826 x MAD, 25% of it, 50 us).",
    flag=Flag(metavar="K"),
)
THRESHOLDS = Param(
    "thresholds",
    Thresholds,
    Thresholds(),
    doc="The findings' limits (nsysql.analyses.findings.Thresholds).",
    flag=None,
)
INCLUDE_WARMUP = Param(
    "include_warmup",
    bool,
    False,
    doc="With --by cause: count warm-up iterations and time outside iterations too.",
)


def _head(whole: pl.DataFrame, top: int) -> pl.DataFrame:
    """The first `top` rows of a whole ranked table (ordered by total time, then name; pct is of the whole), so
    the one stored answer serves summary's top 10, any `top` and everything."""
    if top < 1:  # no rows at all would read as "no kernels" where the profile has some
        raise NsysqlError(f"`top` must be 1 or more, not {top}", option="top")
    return whole.head(min(top, whole.height))  # polars takes no count beyond 64 bits: --top 10**30 is all rows


@analysis("facts", keep="none", tables=("profile_facts",), sql=("facts",))
def facts(ctx) -> dict[str, list[str]]:
    """Facts about the profile as a whole (key -> values; a key may repeat)."""
    return _facts(ctx.con)


# What says whether a command applies to an export (`info`'s commands section, `why_not`): every table an
# analysis `requires` or its refusal (Analysis.refusal) reads, api_calls, and profile_facts (whether scheduling
# events answer `cpu` without samples); and the queries that read them
APPLIES_TABLES = (
    "api_calls",
    "cpu_samples",
    "data_quality",
    "devices",
    "gpu_busy",
    "gpu_memory_events",
    "gpu_metric_counts",
    "gpu_ops",
    "kernel_classes",
    "nvtx_payloads",
    "nvtx_ranges",
    "process_roles",
    "profile_facts",
    "strings",
    "thread_states",
)
APPLIES_SQL = (
    "table_rows",
    "dropped_rows",
    "op_ranges_any",
    "comm_kernels_any",
    "collectives_missing",
    "metrics_capabilities",
    "process_devices",
    "trace_span",
)


@analysis(
    "info",
    command="info",
    # with every table an analysis `requires` or its refusal reads (which commands apply: info.commands), or the
    # one that says whether it holds rows (info.PROBES: the GPU metrics samples counted, not read), so that a
    # cold `info` builds them in its load's one pass
    tables=tuple(sorted(APPLIES_TABLES + ("graph_nodes", "nvtx_marks", "os_calls", "processes", "threads"))),
    sql=("table_counts", "data_quality", "row_checks", "devices") + APPLIES_SQL,
    needs=("iteration_range",),
    names_path=True,
)
def info(ctx) -> pl.DataFrame:
    """What the export holds and lacks, and which commands apply to it (and why not, as each says it)."""
    return _info.info(ctx.con, loop=lambda: _no_loop(ctx), path=str(ctx.path))


def _no_loop(ctx) -> str:
    """Why `iterations` finds no loop in this export, as the command says it (its detector's refusal, without
    the file's path the command puts in front), or '' where it finds one: its answer is kept for the next
    question, which reads it as `summary` and `iterations` would have."""
    try:
        ctx.ask("iteration_range")
    except NsysqlError as e:
        return one_line(NsysqlError(e.message))
    return ""


@analysis(
    "why_not",
    params=(Param("analysis", str),),
    keep="memory",
    tables=APPLIES_TABLES,  # which of them hold rows, as `info` reads them (info._cpu_scheduled: profile_facts)
    sql=APPLIES_SQL,
    needs=("iteration_range",),
)
def why_not(ctx, analysis) -> str:
    """Why the analysis `analysis` does not apply to this export, in one line (as `info` and its command say it:
    its refusal, Analysis.refusal, else the canonical tables it requires that hold no rows and what would have
    recorded them; for `iterations`, whether a loop is found), or '' where it does."""
    return _info.why_not(ctx.con, analysis, loop=lambda: _no_loop(ctx))


@analysis(
    "iteration_range",
    params=(RANGE,),
    keep="memory",
    needs=("resolve_range",),
    tables=("data_quality", "gpu_ops", "nvtx_ranges", "op_launch", "process_roles"),
    sql=(
        "iteration_candidates",
        "process_devices",
        "pytorch_ranges",
        "iteration_evidence",
        "range_count",
        "dropped_rows",
    ),
    requires=("nvtx_ranges",),
)
def iteration_range(ctx, range):
    """The iteration range for `range` (nsysql.analyses.iterations.detect), found once per Profile and its
    workers (iterations and iteration_stats both need it; finding it takes a few queries)."""
    return _iter.detect(ctx.con, range)


@analysis(
    "kernels",
    command="kernels",
    files=True,
    params=(
        Param(
            "name",
            str,
            "demangled",
            _kernels.NAME_KINDS,
            doc="Which kernel name to group by (nsys's default is demangled).",
        ),
        replace(TOP, doc="Only the N kernels with most total time."),
        Param(
            "by",
            str,
            "name",
            _kernels.GROUPINGS,
            doc="Group by kernel name, or by category and tensor-core use (rules: "
            "queries/v1/canonical/44_kernel_rules.sql).",
        ),
        Param(
            "per",
            OPT_STR,
            None,
            (None, "iteration", "range"),
            doc="With --by category: per iteration of the loop (as `iterations` finds it), or per NVTX range.",
        ),
        ATTRIBUTION,
        replace(
            LOOP,
            doc="With --per iteration: the iteration range, as `iterations --range` takes it ('' for the ranges "
            "without a name); detected when left out.",
        ),
    ),
    needs=("iteration_range",),
    tables=("gpu_ops", "kernel_classes", "kernel_tensor_use", "nvtx_ranges", "op_launch", "op_ranges", "strings"),
    sql=(
        "kernels",
        "kernels_by_category",
        "range_categories",
        "iteration_categories",
        "iteration_op_kinds",
        "range_names",
    ),
    nsys=("cuda_gpu_kern_sum",),
    requires=("gpu_ops",),
    # the NVTX nesting is read per range only, the loop found per iteration only
    only=(
        Only("per", ("range",), tables=("nvtx_ranges", "op_ranges"), sql=("range_categories", "range_names")),
        Only(
            "per",
            ("iteration",),
            needs=("iteration_range",),
            tables=("op_launch",),
            sql=("iteration_categories", "iteration_op_kinds"),
        ),
    ),
)
def kernels(ctx, name, top, by, per, attribution, range) -> pl.DataFrame:
    """Per kernel name (nsys's cuda_gpu_kern_sum, then category and tensor_cores); by category; per iteration or
    NVTX range (see Profile.kernels)."""
    if range is not None and per != "iteration":
        raise NsysqlError(
            "`range` names the loop of `per` iteration: without it there is no loop to name", option=("range", "per")
        )
    if per is not None:
        if per not in ("iteration", "range") or by != "category":
            raise NsysqlError(f"per='iteration' or 'range' goes with by='category' only, not per={per!r}, by={by!r}")
        if top is not None:  # every category of every iteration or range is the answer: no first N to keep
            raise NsysqlError(
                "`top` keeps the first kernels or categories of the whole profile, not per iteration or range",
                option=("top", "per"),
            )
        if per == "range":
            return _kernels.categories_per_range(ctx.con, attribution)
        it = ctx.ask("iteration_range", range=range)
        return _kernels.categories_per_iteration(_iter.windows(ctx.con, it), it.pid)
    if top is not None:
        return _head(ctx.ask("kernels", name=name, by=by), top)
    return _kernels.kernels(ctx.con, name=name, by=by)


@analysis(
    "gpu_metrics",
    command="metrics",
    refusal=_metrics.refusal,
    params=(
        Param(
            "by",
            OPT_STR,
            None,
            (None, *_metrics.GROUPINGS),
            doc="Per iteration of the loop, or per NVTX range: the time-weighted mean over each instance's "
            "GPU-projected window (first to last GPU op launched inside it).",
        ),
        replace(
            RANGE,
            doc="With --by iteration: the range that is one iteration (as `iterations --range`); with --by range: "
            "only ranges named PATTERN (exact name, numbered family, prefix, or regex; '' for the ranges without a name).",
        ),
        ATTRIBUTION,
    ),
    needs=("iteration_range", "resolve_range"),
    tables=(
        "gpu_metric_samples",
        "gpu_metric_names",
        "gpu_metric_values",
        "gpu_metric_periods",
        "devices",
        "gpu_ops",
        "nvtx_ranges",
        "op_launch",
        "op_ranges",
    ),
    sql=("gpu_metrics", "range_metrics", "iteration_metrics", "range_names", "metrics_capabilities"),
    nsys=("recipe gpu_metric_util_sum",),
    requires=("gpu_metric_samples",),
    # the GPU ops and the NVTX nesting are read by range only, the loop found by iteration only
    only=(
        Only(
            "by",
            ("range",),
            needs=("resolve_range",),
            tables=("gpu_metric_periods", "gpu_ops", "nvtx_ranges", "op_ranges"),
            sql=("range_metrics", "range_names"),
        ),
        Only(
            "by",
            ("iteration",),
            needs=("iteration_range",),
            tables=("gpu_metric_periods", "gpu_ops", "op_launch"),
            sql=("iteration_metrics",),
        ),
    ),
)
def gpu_metrics(ctx, by, range, attribution) -> pl.DataFrame:
    """GPU metrics per device and metric, or their time-weighted mean per iteration or range (those `range`
    selects, with by="range")."""
    if by == "iteration":
        it = ctx.ask("iteration_range", range=range)
        return _metrics.gpu_metrics(ctx.con, by=by, windows=_iter.windows(ctx.con, it), pid=it.pid)
    if range is not None and by is None:
        raise NsysqlError(
            "`range` selects the ranges of `by` range or the loop of `by` iteration: without `by` it has nothing to select",
            option=("range", "by"),
        )
    names = ctx.ask("resolve_range", pattern=range) if range is not None else None
    return _metrics.gpu_metrics(ctx.con, by=by, attribution=attribution, names=names)


@analysis(
    "gpu_metrics_shown",
    params=(
        *REGISTRY["gpu_metrics"].params,
        Param("graphics", bool, False, doc="Also list graphics counters (pixel, vertex warps) that are 0 throughout."),
    ),
    needs=("gpu_metrics",),
    view=True,
)
def gpu_metrics_shown(ctx, by, range, attribution, graphics) -> dict[str, pl.DataFrame]:
    """What `nsysql metrics` shows: gpu_metrics' frame with clocks nsys wrote in Hz under [MHz] in MHz and the
    graphics counters at 0 throughout left out unless `graphics` (`table`), those left out (`left`) and the
    sentence naming them (`said`, one row, null where none is), and per iteration the sentence naming the
    iterations no sample covers, left out of `table` (`unsampled`, one row, null where none is)
    (nsysql.analyses.metrics.shown)."""
    return _metrics.shown(ctx.ask("gpu_metrics", by=by, range=range, attribution=attribution), graphics)


@analysis(
    "api",
    params=(replace(TOP, doc="Only the N API functions with most total time."),),
    tables=("api_calls", "strings"),
    sql=("api",),
    nsys=("cuda_api_sum",),
    requires=("api_calls",),
    command="api",
)
def api(ctx, top) -> pl.DataFrame:
    """CUDA API calls by function: calls and CPU time inside them (as `nsys stats -r cuda_api_sum`)."""
    if top is not None:
        return _head(ctx.ask("api"), top)
    return _api.api(ctx.con)


@analysis(
    "launches",
    command="launches",
    files=True,
    params=(
        Param(
            "by",
            str,
            "launch",
            _launches.GROUPINGS,
            doc="One row per process, thread, device, launching call and kernel, or one per kernel name.",
        ),
    ),
    tables=("api_calls", "gpu_ops", "op_launch", "strings"),
    sql=("launches",),
    nsys=("cuda_kern_exec_sum",),
    requires=("gpu_ops", "api_calls"),
)
def launches(ctx, by) -> pl.DataFrame:
    """Launch latency (as `nsys stats -r cuda_kern_exec_sum`)."""
    return _launches.launches(ctx.con, by=by)


# not a command-line option: `ranges` and `summary` fold in their table unless --expand (nsysql.cli.tables)
FAMILIES = Param("families", bool, False, doc="numbered families (Batch0..Batch59) as one row, Batch*", flag=None)


@analysis(
    "ranges",
    command="ranges",
    params=(ATTRIBUTION, GROUP_OPS, FAMILIES),
    tables=("gpu_ops", "nvtx_ranges"),
    sql=("range_totals", "ranges"),
    nsys=("nvtx_sum", "nvtx_gpu_proj_sum"),
    requires=("nvtx_ranges",),
)
def ranges(ctx, attribution, group_ops, families) -> pl.DataFrame:
    """NVTX ranges per name (nsys's nvtx_sum and nvtx_gpu_proj_sum)."""
    return _ranges.ranges(ctx.con, attribution=attribution, group_ops=group_ops, families=families)


@analysis(
    "kernels_by_range",
    command="kernels-by-range",
    refusal=_kbr.refusal,
    params=(
        replace(
            RANGE,
            doc="Only ranges named PATTERN: exact name, numbered family (Batch -> Batch0..Batch59), prefix, or regex; "
            "'' for the ranges without a name.",
        ),
        Param("innermost", bool, False, doc="Credit each kernel only to its innermost enclosing range."),
        ATTRIBUTION,
        GROUP_OPS,
    ),
    needs=("resolve_range",),
    tables=("gpu_ops", "nvtx_ranges", "op_range_links", "range_chains", "strings"),
    sql=("kernels_by_range", "range_names"),
    nsys=("nvtx_kern_sum",),
    requires=("gpu_ops", "nvtx_ranges"),
)
def kernels_by_range(ctx, range, innermost, attribution, group_ops) -> pl.DataFrame:
    """Kernels per NVTX range (as `nsys stats -r nvtx_kern_sum`)."""
    return _kbr.kernels_by_range(
        ctx.con, range=range, innermost=innermost, attribution=attribution, group_ops=group_ops
    )


@analysis("whole_graphs", tables=("gpu_ops",), sql=("kernels_whole_graphs",), requires=("gpu_ops",))
def whole_graphs(ctx) -> pl.DataFrame:
    """CUDA graph launches traced whole, whose kernels the kernel tables leave out: how many, their GPU time and
    the kernels' (nsysql.analyses.kernels.whole_graphs)."""
    return _kernels.whole_graphs(ctx.con)


@analysis(
    "whole_graphs_by_range",
    params=(
        replace(
            RANGE, doc="Only ranges named PATTERN, as kernels-by-range --range ('' for the ranges without a name)."
        ),
        Param("innermost", bool, False, doc="Count each launch only in its innermost range, as kernels-by-range."),
        ATTRIBUTION,
        GROUP_OPS,
    ),
    needs=("resolve_range",),
    tables=("gpu_ops", "nvtx_ranges", "op_ranges"),
    sql=("kernels_whole_graphs_ranges",),
    requires=("gpu_ops", "nvtx_ranges"),
)
def whole_graphs_by_range(ctx, range, innermost, attribution, group_ops) -> pl.DataFrame:
    """CUDA graph launches traced whole per NVTX range around them (nsysql.analyses.kernels.whole_graphs_by_range)."""
    names = _resolve_range(ctx.con, range)[0] if range is not None else None
    return _kernels.whole_graphs_by_range(
        ctx.con, attribution=attribution, group_ops=group_ops, names=names, innermost=innermost
    )


def _in_ranges(ctx, range, attribution, group_ops, innermost: bool = False) -> str | None:
    """The line under a kernel table per NVTX range: the whole graphs inside its ranges, each in its innermost
    only under `innermost`, as the table counts kernels (none: no range read)."""
    if not ctx.ask("whole_graphs")["launches"][0]:
        return None
    per = ctx.ask(
        "whole_graphs_by_range", range=range, innermost=innermost, attribution=attribution, group_ops=group_ops
    )
    return _kernels.range_graph_note(per)


def _noted(ctx, shown: str, table: pl.DataFrame, note: str | None) -> dict[str, pl.DataFrame]:
    """A table of the analysis `shown` and the one line said under it (a one-row `note` frame, NULL where there
    is nothing to say). An empty table of an analysis that does not apply to this export is no answer: its
    command says why, in `info`'s words (NsysqlError: nsysql.analyses.info.why_not)."""
    if not table.height and (why := _info.why_not(ctx.con, shown)):
        raise NsysqlError(why)
    return {"table": table, "note": pl.DataFrame({"note": [note]}, schema={"note": pl.String})}


@analysis(
    "kernels_shown",
    params=REGISTRY["kernels"].params,
    needs=("kernels", "whole_graphs", "whole_graphs_by_range", "iteration_range"),
    tables=("gpu_ops", "op_launch"),
    sql=("iteration_op_kinds",),
    view=True,
    # the loop is found per iteration only; the whole graphs are read for the other tables
    only=(
        Only(
            "per",
            ("iteration",),
            needs=("iteration_range",),
            tables=("gpu_ops", "op_launch"),
            sql=("iteration_op_kinds",),
        ),
        Only("per", (None, "range"), needs=("whole_graphs",)),
        Only("per", ("range",), needs=("whole_graphs_by_range",)),
    ),
)
def kernels_shown(ctx, name, top, by, per, attribution, range) -> dict[str, pl.DataFrame]:
    """What `nsysql kernels` shows of one profile: the `table` (kernels' frame) and the `note` under it, the
    GPU time of CUDA graph launches traced whole that the table leaves out (nsysql.analyses.kernels)."""
    table = ctx.ask("kernels", name=name, top=top, by=by, per=per, attribution=attribution, range=range)
    if per == "iteration":
        it = ctx.ask("iteration_range", range=range)
        return _noted(ctx, "kernels", table, _kernels.iteration_graph_note(_iter.windows(ctx.con, it), it.pid))
    if per == "range":
        return _noted(ctx, "kernels", table, _in_ranges(ctx, None, attribution, None))
    return _noted(ctx, "kernels", table, _kernels.whole_graph_note(ctx.ask("whole_graphs")))


@analysis(
    "kernels_by_range_shown",
    params=REGISTRY["kernels_by_range"].params,
    needs=("kernels_by_range", "whole_graphs", "whole_graphs_by_range"),
    view=True,
)
def kernels_by_range_shown(ctx, range, innermost, attribution, group_ops) -> dict[str, pl.DataFrame]:
    """What `nsysql kernels-by-range` shows: the `table` (kernels_by_range's frame) and the `note` under it, the
    CUDA graph launches traced whole inside its ranges, whose kernels it leaves out (nsysql.analyses.kernels)."""
    table = ctx.ask("kernels_by_range", range=range, innermost=innermost, attribution=attribution, group_ops=group_ops)
    return _noted(ctx, "kernels_by_range", table, _in_ranges(ctx, range, attribution, group_ops, innermost))


@analysis(
    "ops",
    command="ops",
    refusal=_ops.refusal,
    params=(Param("shapes", bool, False, doc="One row per operator and input sizes (record_shapes=True)."),),
    tables=("gpu_ops", "nvtx_ranges", "op_ranges", "profile_facts", "strings"),
    sql=("op_ranges_any", "ops"),
    requires=("nvtx_ranges",),
)
def ops(ctx, shapes) -> pl.DataFrame:
    """PyTorch operators (emit_nvtx ranges)."""
    return _ops.ops(ctx.con, shapes=shapes)


@analysis("ops_shown", params=REGISTRY["ops"].params, needs=("ops", "whole_graphs"), view=True)
def ops_shown(ctx, shapes) -> dict[str, pl.DataFrame]:
    """What `nsysql ops` shows: the `table` (ops' frame) and the `note` under it, the GPU time of CUDA graph
    launches traced whole, whose kernels nsys did not record and no operator is credited with, as under the
    kernel tables (nsysql.analyses.kernels.whole_graph_note)."""
    return _noted(ctx, "ops", ctx.ask("ops", shapes=shapes), _kernels.whole_graph_note(ctx.ask("whole_graphs")))


@analysis(
    "summary_tables",
    params=(THRESHOLDS,),
    keep="none",
    tables=(
        "data_quality",
        "devices",
        "gpu_busy",
        "gpu_ops",
        "kernel_classes",
        "gpu_activity_names",
        "kernel_tensor_use",
        "nvtx_ranges",
        "op_launch",
        "profile_facts",
        "strings",
    ),
    sql=(
        "gpu_utilization",
        "memory",
        "launch_figures",
        "pageable_copies",
        "host_copies",
        "host_copies_exposed",
        "kernels_by_category",
        "advice_facts",
        "activity_names",
        "range_label_pytorch",
        "headroom_facts",
        "dropped_rows",
    ),
)
def summary_tables(ctx, thresholds) -> dict[str, pl.DataFrame]:
    """The small tables summary reads besides its main answers."""
    return _summary.tables(ctx.con, thresholds)


@analysis(
    "summary",
    command="summary",
    files=True,
    params=(
        ATTRIBUTION,
        replace(TOP, type=int, default=10, doc="Rows in the kernel and range tables."),
        THRESHOLDS,
        Param("families", bool, True, doc="the ranges table folds numbered families (Batch*)", flag=None),
        LOOP,
    ),
    needs=(
        "iterations",
        "iteration_stats",
        "gaps",
        "kernels",
        "ranges",
        "summary_tables",
        "headroom_work",
        "whole_graphs",
    ),
    # what its idle facts read besides its needs (gaps' activity, the CPU story): built with the rest in the
    # request's one pass (Engine.plan_request)
    tables=(
        "cpu_samples",
        "processes",
        "thread_roles",
        "thread_states",
        "threads",
    ),
    names_path=True,  # its `file` fact
)
def summary(ctx, attribution, top, thresholds, families, range) -> dict[str, pl.DataFrame]:
    """One screen about the profile; its pieces are asked side by side, and stored, so a report that asks them
    next reuses them. A piece that does not apply (no loop, no GPU work) is said by its error; the loop `range`
    names must be found (its error is raised, as `iterations --range` says it), since every figure per
    iteration is of that loop."""
    loop = {"range": range}
    got = ctx.gather(
        loop=[("iterations", loop), ("iteration_stats", loop)],
        gaps=("gaps", {"loop": range}),
        kernels=("kernels", {"top": top}),
        ranges=("ranges", {"attribution": attribution, "families": families}),
        read=("summary_tables", {"thresholds": thresholds}),
        work=("headroom_work", loop),
        graphs=("whole_graphs", {}),
    )
    for k in ("kernels", "ranges", "read") + (("loop",) if range is not None else ()):
        if isinstance(got[k], NsysqlError):
            raise got[k]
    loop, work, graphs = got["loop"], got["work"], got["graphs"]
    out = _summary.summary(
        ctx.con,
        loop=loop if isinstance(loop, NsysqlError) else tuple(loop),
        gaps_df=got["gaps"],
        kernels_df=got["kernels"],
        ranges_df=got["ranges"],
        read=got["read"],
        top=top,
        work=None if isinstance(work, NsysqlError) else work,  # no loop: no headroom
        limits=thresholds,
        path=str(ctx.path),
    )
    # what its kernel table leaves out (CUDA graphs traced whole), as `kernels` says it under its own
    note = None if isinstance(graphs, NsysqlError) else _kernels.whole_graph_note(graphs)
    return _summary.with_kernels_note(out, note)


def _raised(got):
    """A gathered answer, its error raised (a piece the composition cannot do without)."""
    if isinstance(got, NsysqlError):
        raise got
    return got


REPORT_TOP = replace(TOP, type=int, default=10, doc="Rows in the kernel table.", flag=None)


@analysis("snippet", params=(REPORT_TOP, LOOP), needs=("summary", "ops", "whole_graphs"))
def snippet(ctx, top, range) -> dict[str, pl.DataFrame]:
    """What the PR snippet (`nsysql report -f markdown`) shows (nsysql.analyses.report): summary's sections, the
    top 3 PyTorch operators by GPU time (`top_ops`, where the profile has operator ranges), and in `notes` the
    GPUs' busy share in one line and what the kernel table and the operators' line leave out (`kernels_note`,
    `ops_note`: CUDA graphs traced whole, as under `kernels` and `ops`)."""
    got = ctx.gather(summary=("summary", {"top": top, "range": range}), ops=("ops", {}), graphs=("whole_graphs", {}))
    summ = _raised(got["summary"])
    out = _report.summary_sections(summ)
    if not isinstance(got["ops"], NsysqlError):  # no operator ranges: no line
        out["top_ops"] = _report.top_ops(got["ops"])
    busy = _summary.all_devices_busy(summ["gpus"]) if summ["gpus"].height else None
    whole = None if isinstance(got["graphs"], NsysqlError) else got["graphs"]
    graphs = _kernels.whole_graph_note(whole) if whole is not None else None
    # the operators' GPU time is their kernels' alone, as `ops` counts it: a graph traced whole is no operator's
    ops = _kernels.whole_graph_note(whole, shown="list") if whole is not None and "top_ops" in out else None
    ops = ops if ops and out["top_ops"].height else None  # no line, no note
    return {**out, "notes": _report.notes({"gpu_busy_all": busy, "kernels_note": graphs, "ops_note": ops})}


@analysis("tensor_metric", keep="memory", tables=("gpu_activity_names",), sql=("activity_names",))
def tensor_metric(ctx) -> str:
    """What the devices' tensor counter is called (findings.tensor_metric): `Tensor Active`, or Turing's `Tensor
    Active / FP16 Active`, which counts the fp16 pipe too; `Tensor Active` without GPU metrics."""
    return _tensor_metric(ctx.con)


@analysis(
    "report",
    params=(
        REPORT_TOP,
        replace(LOOP, doc=LOOP.doc + " With --baseline: the loop of both, as `diff --range` takes it."),
    ),
    needs=(
        "tensor_metric",
        "summary",
        "facts",
        "iterations",
        "iteration_stats",
        "gaps",
        "gap_activity",
        "timeline",
        "metrics_timeline",
        "kernels",
        "ranges",
        "kernels_by_range",
        "ops",
        "whole_graphs",
        "whole_graphs_by_range",
    ),
)
def report(ctx, top, range) -> dict[str, pl.DataFrame]:
    """Everything the HTML report shows of one profile, as sections (nsysql.analyses.report): summary's, the
    fact cards, the iterations and their sentence, the GPU timeline with its gaps and metrics, kernel
    categories, the work elsewhere during idle gaps, ranges, kernels by range, PyTorch operators; a section that
    does not apply is absent and `notes` says why."""
    got = ctx.gather(
        summary=("summary", {"top": top, "range": range}),
        facts=("facts", {}),
        loop=[("iterations", {"range": range}), ("iteration_stats", {"range": range})],
        ranges=("ranges", {}),
    )
    summ, facts = _raised(got["summary"]), _raised(got["facts"])
    gpus, idle, loop = summ["gpus"], summ.get("idle by cause"), got["loop"]
    wave = {"gaps": ("gaps", {"loop": range}), "graphs": ("whole_graphs", {})} if gpus.height else {}
    if summ["kernels"].height:
        wave["categories"] = ("kernels", {"by": "category"})
    if idle is not None and idle.height:
        wave["activity"] = ("gap_activity", {"by": "cause", "top": 5, "loop": range})
    rg = got["ranges"]
    if not isinstance(rg, NsysqlError) and rg.height:
        wave.update(kernels_by_range=("kernels_by_range", {}), ops=("ops", {}))
    more = ctx.gather(**wave)
    out, said = _report.summary_sections(summ), {}
    its, stats = (None, None) if isinstance(loop, NsysqlError) else loop
    if its is None:
        said["iterations_why"] = str(loop)
    else:
        out.update(iterations=its, iteration_stats=stats)
        said["iterations_line"] = _report.iterations_line(stats)
    gaps = None if isinstance(more.get("gaps"), NsysqlError) else more.get("gaps")
    # the headline's idle in gaps >= 1 ms: from the iterations and gaps, where both are known
    seen = its if gaps is not None or not gpus.height else None
    untraced = _report.untraced_gpu_line(summ)  # summary's GPUs fact, where there is no GPU op
    out["cards"] = _report.cards(facts, gpus, stats, seen, gaps, untraced)
    drawn, notes = _report.timeline(lambda n, **p: ctx.ask(n, **p), gpus, its, gaps)
    out.update(drawn)
    said.update(notes)
    if "categories" in wave:
        out["categories"] = _raised(more["categories"])
        said["categories_caption"] = _report.categories_caption(ctx.ask("tensor_metric"))
    else:
        said["kernels_why"] = _report.NO_KERNELS
    _report_idle(out, said, gpus, idle, more.get("activity"), untraced)
    _report_ranges(out, said, _raised(rg), more)
    graphs = more.get("graphs")
    if graphs is not None and not isinstance(graphs, NsysqlError):  # what the kernel tables leave out
        said["kernels_note"] = _kernels.whole_graph_note(graphs, shown="chart")
        if "ranges" in out and graphs["launches"][0]:
            said["kernels_by_range_note"] = _in_ranges(ctx, None, DEFAULT_ATTRIBUTION, None)
        if "ops" in out:  # as `ops` says under its table (ops_shown): no operator is credited with a whole graph
            said["ops_note"] = _kernels.whole_graph_note(graphs)
    return {**out, "notes": _report.notes(said)}


def _report_idle(out: dict, said: dict, gpus, idle, activity, untraced: tuple[str, str] | None = None) -> None:
    """The report's idle time by cause and the work elsewhere meanwhile, or why there is none (`untraced`: why
    the profile has no GPU op, as the GPUs card says it)."""
    if idle is None or not idle.height:
        said["idle_why"] = _report.idle_why(gpus, untraced)
    elif isinstance(activity, NsysqlError):
        said["activity_why"] = str(activity)
    else:
        out["activity"] = activity


def _report_ranges(out: dict, said: dict, rg, more: dict) -> None:
    """The report's NVTX ranges, kernels by range and PyTorch operators, or why there are none."""
    if not rg.height:
        said["ranges_why"] = _report.NO_RANGES
        return
    out["ranges"] = rg.sort("total_ns", descending=True)
    kbr = _raised(more["kernels_by_range"])
    if kbr.height:
        out["kernels_by_range"] = kbr.sort("total_ns", descending=True)
    else:
        said["kernels_by_range_why"] = _report.NO_KERNELS_IN_RANGES
    if not isinstance(more["ops"], NsysqlError):  # no emit_nvtx ranges: no section
        out["ops"] = more["ops"]


@analysis("findings", params=(THRESHOLDS,), keep="none", needs=("summary",))
def findings(ctx, thresholds) -> pl.DataFrame:
    """The summary's findings, the one that would give back most time per steady-state iteration first."""
    return ctx.ask("summary", thresholds=thresholds)["findings"]


@analysis(
    "iterations",
    command="iterations",
    files=True,
    refusal=_iter.refusal,
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    needs=("iteration_range",),
    tables=("data_quality", "gpu_activity_periods", "gpu_busy", "gpu_ops", "nvtx_ranges", "op_launch", "strings"),
    requires=("nvtx_ranges",),
    sql=(
        "dropped_rows",
        "iteration_windows",
        "iterations",
        "range_totals",
        "iteration_phases",
        "activity_sampled",
        "iteration_activity",
    ),
)
def iterations(ctx, range, skip, outlier_sigmas) -> pl.DataFrame:
    """One row per iteration of the loop (see nsysql.analyses.iterations for the rules)."""
    it = ctx.ask("iteration_range", range=range)
    return _iter.iterations(ctx.con, range=range, skip=skip, it=it, outlier_sigmas=outlier_sigmas)


@analysis(
    "iteration_stats",
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    needs=("iteration_range", "iterations"),
    requires=("nvtx_ranges",),
)
def iteration_stats(ctx, range, skip, outlier_sigmas) -> pl.DataFrame:
    """Steady-state summary of iteration time, the outlier pattern, and which range was chosen and why."""
    it = ctx.ask("iteration_range", range=range)
    its = ctx.ask("iterations", range=range, skip=skip, outlier_sigmas=outlier_sigmas)  # the (stored) frame
    return _iter.stats(its, it)


@analysis(
    "iteration_note",
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    keep="none",
    needs=("iteration_stats",),
    requires=("nvtx_ranges",),
)
def iteration_note(ctx, range, skip, outlier_sigmas) -> dict[str, str | None]:
    """What a front end says under the iterations, as summary and the report word it: `range` (which range is
    the loop, and why), `steady` (the steady state in one sentence), `outliers` (their pattern, or None)."""
    s = ctx.ask("iteration_stats", range=range, skip=skip, outlier_sigmas=outlier_sigmas).row(0, named=True)
    return {"range": s["detected"], "steady": _iter.steady_sentence(s), "outliers": s["outlier_pattern"] or None}


@analysis(
    "iterations_shown",
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    needs=("iterations", "iteration_stats", "iteration_note"),
    view=True,
)
def iterations_shown(ctx, range, skip, outlier_sigmas) -> dict[str, pl.DataFrame]:
    """What `nsysql iterations` shows of one profile: `iterations`, their `steady state` (iteration_stats), the
    `note` (iteration_note's sentences, one row) and `said`, the lines a table prints under it, one row each
    (`range: ...`, the steady state, `outliers: ...` where there are some); each format draws the sections it
    shows."""
    kw = {"range": range, "skip": skip, "outlier_sigmas": outlier_sigmas}
    its = ctx.ask("iterations", **kw)
    stats, note = ctx.ask("iteration_stats", **kw), ctx.ask("iteration_note", **kw)
    said = pl.DataFrame({k: [v] for k, v in note.items()}, schema={k: pl.String for k in note})
    lines = [
        f"range: {note['range']}",
        note["steady"],
        *([f"outliers: {note['outliers']}"] if note["outliers"] else []),
    ]
    return {"iterations": its, "steady state": stats, "note": said, "said": _lines(lines)}


def _lines(lines: list[str]) -> pl.DataFrame:
    """Sentences a front end prints under a table, in order: one row each, column `said`."""
    return pl.DataFrame({"said": lines}, schema={"said": pl.String})


@analysis(
    "iteration_spans",
    params=(RANGE, SKIP, OUTLIER_SIGMAS),
    needs=("iteration_range",),
    tables=("nvtx_ranges",),
    sql=("iteration_windows", "iteration_spans"),
    requires=("nvtx_ranges",),
)
def iteration_spans(ctx, range, skip, outlier_sigmas) -> pl.DataFrame:
    """The iteration windows with their flags, without the GPU work per iteration (iterations.spans)."""
    it = ctx.ask("iteration_range", range=range)
    return _iter.spans(ctx.con, skip=skip, it=it, outlier_sigmas=outlier_sigmas)


@analysis(
    "iteration_breakdown",
    params=(RANGE,),
    needs=("iteration_range",),
    tables=("gpu_ops", "nvtx_ranges", "op_launch", "strings"),
    sql=("iteration_kernels", "range_totals", "iteration_ranges"),
    requires=("nvtx_ranges",),
)
def iteration_breakdown(ctx, range) -> dict[str, pl.DataFrame]:
    """Per iteration: the GPU time of each op name and the CPU time of each range family (iterations.breakdown)."""
    return _iter.breakdown(ctx.con, ctx.ask("iteration_range", range=range))


@analysis(
    "headroom_work",
    params=(RANGE,),
    needs=("iteration_range",),
    tables=("api_calls", "gpu_ops", "kernel_classes", "kernel_tensor_use", "nvtx_ranges", "op_launch", "strings"),
    sql=("iteration_windows", "iteration_headroom", "iteration_host_copies", "iteration_gpu_waits"),
    requires=("nvtx_ranges",),
)
def headroom_work(ctx, range) -> pl.DataFrame:
    """Per iteration of the loop: the GPU work findings' headroom reads (nsysql.analyses.headroom.work)."""
    it = ctx.ask("iteration_range", range=range)
    return _headroom.work(_iter.windows(ctx.con, it), it.pid, it.device_id)


@analysis(
    "overlap",
    command="overlap",
    files=True,
    refusal=_overlap.refusal,
    params=(
        Param(
            "by",
            str,
            "device",
            _overlap.GROUPINGS,
            doc=(
                "One row per device, or one per iteration of the loop (on the loop's device, in each iteration's "
                "time window, whichever iteration launched the kernels)."
            ),
        ),
        replace(
            RANGE,
            doc="With --by iteration: the iteration range, as in iterations ('' for the ranges without a name).",
        ),
    ),
    needs=("iterations", "iteration_range"),
    tables=("gpu_busy", "gpu_ops", "kernel_classes"),
    sql=("comm_kernels_any", "overlap"),
    nsys=("recipe nccl_gpu_overlap_trace",),
    requires=("gpu_busy",),
    only=(Only("by", ("iteration",), needs=("iterations", "iteration_range")),),  # the loop, by iteration only
)
def overlap(ctx, by, range) -> pl.DataFrame:
    """Communication hidden or exposed, per device or per iteration of the loop."""
    if by not in _overlap.GROUPINGS:
        raise NsysqlError(f"`by` must be one of {', '.join(_overlap.GROUPINGS)}, not {by!r}", option="by")
    if by == "iteration":
        its = ctx.ask("iterations", range=range)
        return _overlap.by_iteration(its, ctx.ask("iteration_range", range=range).device_id)
    return _overlap.overlap(ctx.con)


def _ratio(x) -> float:
    """slow_ratio as a float: a number above 0 and at most 1."""
    return _number(x, "slow_ratio", lambda v: 0 < v <= 1, "above 0 and at most 1")


SLOW_RATIO = Param(
    "slow_ratio",
    (float, int),
    _coll.SLOW_RATIO,
    normalize=_ratio,
    doc="A call is slow below this share of the median bus bandwidth of its kind and size.",
    flag=Flag(minimum=0, maximum=1, min_open=True),
)


COLLECTIVES_BY = Param(
    "by",
    str,
    "size",
    _coll.GROUPINGS[:-1],
    doc="Group by kind and message size, kind, iteration of the loop, or rank (several FILEs); or one row per call.",
    # rank: across several exports, one per rank (nsysql.many), which only the command line is given
    flag=Flag(choices=("size", "kind", "iteration", "rank", "call")),
)
COLLECTIVES_RANGE = replace(RANGE, doc="The loop's NVTX range, for --by iteration ('' for the ranges without a name).")


@analysis(
    "collective_calls",
    params=(RANGE,),
    needs=("iterations",),
    tables=(
        "gpu_ops",
        "nvtx_payload_fields",
        "nvtx_payloads",
        "nvtx_ranges",
        "op_launch",
        "profile_facts",
        "session_clock",
        "strings",
    ),
    sql=("collectives", "collectives_missing"),
)
def collective_calls(ctx, range) -> pl.DataFrame:
    """One row per NCCL call with a payload: kind, size, op or root, communicator, kernels, time, bandwidths, and
    the iteration of the loop it starts in (NULL without a loop)."""
    df = _coll.calls(ctx.con)
    try:
        its = ctx.ask("iterations", range=range)
    except NsysqlError:  # no loop: the calls still stand, their iteration is unknown
        if range is not None:  # but a loop the user named must be found
            raise
        return df.with_columns(pl.lit(None, pl.Int64).alias("iteration"))
    return _coll.by_iteration(df, its).sort("call")


@analysis(
    "collectives",
    files=True,
    refusal=_coll.refusal,
    params=(COLLECTIVES_BY, COLLECTIVES_RANGE),
    needs=("collective_calls",),
    command="collectives",
)
def collectives(ctx, by, range) -> pl.DataFrame:
    """NCCL collectives from their NVTX payloads (exported with --include-blobs=true): by="call" one row per
    call (kind, bytes, op or root, communicator and ranks, kernels, GPU time, algbw and busbw in GB/s,
    iteration), else per `size` (kind and message size), `kind` or `iteration` of the loop (`range`): calls,
    bytes, GPU time, bus bandwidth median/p10/p90. Rules: nsysql.analyses.collectives."""
    df = ctx.ask("collective_calls", range=range)
    if by == "call":
        return df
    if by == "iteration" and df["iteration"].is_null().all():
        raise NsysqlError(
            "no collective call lies in an iteration of a loop: no loop was found, or none of its iterations "
            "holds a call (`nsysql iterations` says which; `range` names the loop)",
            option="range",
        )
    return _coll.grouped(df, by)


@analysis("collective_findings", params=(SLOW_RATIO,), needs=("collective_calls",))
def collective_findings(ctx, slow_ratio) -> pl.DataFrame:
    """The slow-size finding (nsysql.analyses.collectives): one row, with the calls it flags, their GPU time
    beyond their groups' medians, the evidence (NULL when it flags none) and the rule."""
    return _coll.findings(ctx.ask("collective_calls", range=None), slow_ratio)


@analysis(
    "collective_kernels",
    tables=("gpu_ops", "nvtx_ranges", "strings"),
    sql=("collectives_kernels",),
    requires=("gpu_ops",),
)
def collective_kernels(ctx) -> pl.DataFrame:
    """NCCL collectives per kind told by their kernels' names: calls (NCCL's ranges), kernels, GPU time; for a
    profile whose NCCL calls carry no message size (nsysql.analyses.collectives.by_kernel_name)."""
    return _coll.by_kernel_name(ctx.con)


@analysis(
    "collectives_shown",
    params=(COLLECTIVES_BY, COLLECTIVES_RANGE, SLOW_RATIO),
    needs=("collectives", "collective_findings", "collective_kernels"),
    tables=("gpu_ops", "nvtx_payloads", "nvtx_ranges", "profile_facts", "strings"),
    sql=("collectives_missing",),
    view=True,
)
def collectives_shown(ctx, by, range, slow_ratio) -> dict[str, pl.DataFrame]:
    """What `nsysql collectives` shows of one profile: the `collectives` grouped `by`, and the slow-size
    `findings` (over every call, whatever `range`). Where NCCL kernels ran but their calls carry no message size
    (no NVTX payloads), by kind or size: the calls and GPU time per kind from the kernels' names
    (collective_kernels), and a `note` saying why there is no size or bandwidth and how to get them. Either way
    `said`: the lines said under the table (the note, or the findings in words), one row each."""
    why = _coll.unsized(ctx.con) if by in ("size", "kind") else None
    if why is not None:
        kern = ctx.ask("collective_kernels")
        note = _coll.unsized_note(kern, why)
        return {"collectives": kern, "note": pl.DataFrame({"note": [note]}), "said": _lines([note])}
    found = ctx.ask("collective_findings", slow_ratio=slow_ratio)
    return {
        "collectives": ctx.ask("collectives", by=by, range=range),
        "findings": found,
        "said": _lines(_coll.findings_said(found)),
    }


@analysis(
    "collectives_unsized",
    keep="memory",
    tables=("gpu_ops", "nvtx_payloads", "nvtx_ranges", "profile_facts", "strings"),
    sql=("collectives_missing",),
    view=True,
)
def collectives_unsized(ctx) -> str:
    """Why the profile's NCCL calls carry no message size where NCCL kernels ran (no NVTX payloads: then
    `collectives_shown` answers by kind from the kernels' names), '' where they carry sizes or no NCCL kernel
    ran: what nsysql.many asks of each export before it compares their calls, reading no call."""
    return _coll.unsized(ctx.con) or ""


def _gap_spans(ctx, range: str | None) -> pl.DataFrame | None:
    """The iterations gaps are indexed by (and their steady-state span counted over): the spans of the
    iterations of `range`, else of the detected loop; None without a loop. Spans, not the iterations answer:
    the same iteration, start_ns, end_ns, wall_ns and warmup, without the GPU work per iteration."""
    for pattern in [range, None] if range is not None else [None]:
        try:
            return ctx.ask("iteration_spans", range=pattern)
        except NsysqlError:
            continue
    return None


def _gap_loop(ctx, range: str | None) -> tuple[pl.DataFrame | None, int | None]:
    """_gap_spans' spans, and the process whose loop they are (None without a loop)."""
    for pattern in [range, None] if range is not None else [None]:
        try:
            return ctx.ask("iteration_spans", range=pattern), ctx.ask("iteration_range", range=pattern).pid
        except NsysqlError:
            continue
    return None, None


@analysis(
    "gaps",
    command="gaps",
    files=True,
    refusal=_gaps.refusal,
    params=(GAPS_RANGE, MIN_NS, BY_CAUSE, INCLUDE_WARMUP, GAPS_LOOP),
    needs=("iteration_spans", "iteration_range", "resolve_range"),
    tables=(
        "api_calls",
        "data_quality",
        "gpu_busy",
        "nvtx_open",
        "nvtx_ranges",
        "os_calls",
        "process_roles",
        "strings",
    ),
    sql=("process_devices", "gaps", "range_time", "device_span", "range_count", "dropped_rows"),
    nsys=("recipe gpu_gaps",),
    requires=("gpu_busy",),
)
def gaps(ctx, range, min_ns, by, include_warmup, loop) -> pl.DataFrame:
    """GPU idle gaps with their causes; `by="cause"` for idle time per cause."""
    if by not in (None, "cause"):
        raise NsysqlError(f"gaps can be grouped by 'cause' only, not {by!r}")
    indexed_by = range if loop is None else loop
    if by == "cause":
        # from the gaps and iteration spans answers (stored by an earlier summary or gaps), so a warm run
        # opens no tables unless the span must be measured (no iterations, or --include-warmup)
        its = _gap_spans(ctx, indexed_by)
        g = ctx.ask("gaps", range=range, min_ns=min_ns, loop=loop)
        con = None if _gaps.steady_only(g, include_warmup) else ctx.con
        return _gaps.by_cause(con, g, range=range, include_warmup=include_warmup, its=its)
    # the gaps before the iteration spans they are indexed by: finding them needs no loop, so their SQL runs
    # while another analysis of the same request finds the loop (iteration_range, asked once for all)
    found = _gaps.find(ctx.con, range=range, min_ns=min_ns)  # min_ns in ns
    return _gaps.with_iterations(found, *_gap_loop(ctx, indexed_by))


GAP_TOP = replace(TOP, doc="With --explain: activities per gap/cause.", flag=Flag(metavar="N", default=5, minimum=1))


@analysis(
    "gap_activity",
    params=(
        GAPS_RANGE,
        MIN_NS,
        BY_CAUSE,
        INCLUDE_WARMUP,
        GAP_TOP,
        GAPS_LOOP,
    ),
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
def gap_activity(ctx, range, min_ns, by, include_warmup, top, loop) -> pl.DataFrame:
    """What every other thread and process did during each gap of `gaps()`, ranked by overlap."""
    if by not in (None, "cause"):
        raise NsysqlError(f"gaps can be grouped by 'cause' only, not {by!r}")
    g = ctx.ask("gaps", range=range, min_ns=min_ns, loop=loop)
    if by is None:
        return _gaps.explain(ctx.con, g, top=top)
    return _gaps.explain_by_cause(ctx.con, g, include_warmup=include_warmup, top=top)


@analysis(
    "gaps_explained",
    params=(GAPS_RANGE, MIN_NS, BY_CAUSE, INCLUDE_WARMUP, GAP_TOP),
    needs=("gap_activity", "cpu"),
    view=True,
)
def gaps_explained(ctx, range, min_ns, by, include_warmup, top) -> dict[str, pl.DataFrame]:
    """What `nsysql gaps --explain` shows: the `activity` during each gap (or cause group: gap_activity) and
    `meanwhile`, what the CPU did during each idle cause's gaps as summary says it (nsysql.analyses.cpu.meanwhile),
    and `said`, those as the lines a table prints under it (`meanwhile: during <cause>: ...`, `time on a CPU: ...`),
    one row each."""
    kw = {"range": range, "min_ns": min_ns, "by": by, "include_warmup": include_warmup, "top": top}
    act = ctx.ask("gap_activity", **kw)
    meanwhile = _cpu.meanwhile(ctx.ask("cpu", during="gaps", by="cause"))
    lines = [
        f"meanwhile: during {c}: {m}" if c is not None else f"time on a CPU: {m}" for c, m in meanwhile.iter_rows()
    ]
    return {"activity": act, "meanwhile": meanwhile, "said": _lines(lines)}


@analysis(
    "cpu",
    refusal=_cpu.default_refusal,
    params=(
        Param(
            "during",
            OPT_STR,
            None,
            doc="Only samples taken during: gaps (GPU idle gaps >= 1 ms), 'iterations A:B' or 'range PATTERN' "
            "('' or \"range ''\" for the ranges without a name) [default: the whole profile].",
            flag=Flag(metavar="WHEN"),
        ),
        Param(
            "by",
            OPT_STR,
            None,
            (None, *_cpu.BYS, "stack", "cause"),
            doc="One row per leaf function, module, thread or process; python: per place in the Python samples "
            "(nsys profile --python-sampling=true, exported with --include-blobs=true) and thread [default: "
            "function; thread where the profile has scheduling events but no CPU samples].",
            # stack: the folded stacks of `-f folded`; cause: what `gaps --explain` and summary say under gaps
            flag=Flag(choices=_cpu.BYS),
        ),
        replace(TOP, doc="Only the first N rows."),
        replace(
            LOOP,
            # and, with by="cause" (not a command-line choice), the loop whose steady-state gaps are told
            doc="With --during 'iterations A:B': the iteration range, as `iterations --range` takes it ('' for the "
            "ranges without a name); detected when left out.",
        ),
    ),
    needs=("gaps", "iteration_spans", "resolve_range"),
    tables=(
        "api_calls",
        "cpu_samples",
        "cpu_stack_frames",
        "nvtx_marks",
        "nvtx_payloads",
        "nvtx_ranges",
        "os_calls",
        "process_roles",
        "processes",
        "python_frames",
        "python_samples",
        "strings",
        "thread_roles",
        "thread_states",
    ),
    sql=(
        "cpu_window_samples",
        "cpu_window_states",
        "cpu_window_python",
        "cpu_threads",
        "cpu_stacks",
        "cpu_range_windows",
        "cpu_python_evidence",
        "payloads_undecoded",
    ),
    requires=("cpu_samples",),
    command="cpu",
    formats={"folded": {"by": "stack"}},
    # the gaps, iterations or ranges are read where the samples are taken during them, or told by cause
    only=(
        Only("during", lambda v: v is not None, needs=("gaps", "iteration_spans", "resolve_range")),
        Only("during", lambda v: _cpu.parse_during(v)[0] == "range", sql=("cpu_range_windows",)),
        Only("by", ("cause",), needs=("gaps",)),
        # whether the program is Python, where it has no Python samples
        Only(
            "by",
            ("python",),
            tables=("api_calls", "nvtx_marks", "nvtx_payloads", "os_calls", "process_roles"),
            sql=("cpu_python_evidence", "payloads_undecoded"),
        ),
    ),
)
def cpu(ctx, during, by, top, range) -> pl.DataFrame:
    """Where CPU time went, from CPU samples: per function, module, thread or process (by="stack": folded
    stacks; by="cause": what the CPU did during each idle cause's gaps, as summary says it), over the whole
    profile or `during` "gaps", "iterations A:B" (of the loop `range`, else the one detected) or "range PATTERN"
    (rules: nsysql.analyses.cpu)."""
    if by is None:  # what the capture allows: per function, or per thread from scheduling events alone
        return ctx.ask("cpu", during=during, by=_cpu.default_by(ctx.con), top=top, range=range)
    if top is not None:
        return _head(ctx.ask("cpu", during=during, by=by, range=range), top)
    kind, arg = _cpu.parse_during(during)
    if range is not None and kind != "iterations" and by != "cause":  # the windows of gaps are every gap's
        raise NsysqlError(
            "`range` names the loop of `during` iterations: without them there is no loop to name",
            option=("range", "during"),
        )
    why = _cpu.no_samples(ctx.con) if by not in ("python", "cause") else None
    if why and not (by in ("thread", "process") and _cpu.sched_note(ctx.con)):
        # the samples first: without them no window has anything to read, but time on a CPU (scheduling)
        raise NsysqlError(_cpu.refusal(ctx.con, by))
    if by == "cause":
        if kind not in (None, "gaps"):
            raise NsysqlError(f"by='cause' tells what the CPU did during the idle gaps, not during {during!r}")
        return _cpu.stories(ctx.con, ctx.ask("gaps", loop=range))
    gaps_df = spans = None
    if kind == "gaps":
        gaps_df = ctx.ask("gaps")
    elif kind == "iterations":
        spans = _cpu_spans(ctx, range)
    its = _trace.parse_iterations(arg) if kind == "iterations" else None
    wins = _cpu.windows(ctx.con, kind, arg, gaps_df=gaps_df, spans=spans, its=its)
    out = _cpu.folded(ctx.con, wins) if by == "stack" else _cpu.cpu(ctx.con, wins, by=by)
    if kind is not None and not out.height:  # samples elsewhere, none in the windows: say so, not `no cpu`
        raise NsysqlError(_cpu.none_during(during, wins, sampled=not why))
    return out


def _cpu_spans(ctx, range: str | None) -> pl.DataFrame | None:
    """The iteration spans `cpu(during="iterations A:B")` reads: of the loop `range` (which must be found), else of
    the loop detected; None where none is."""
    try:
        return ctx.ask("iteration_spans", range=range)
    except NsysqlError:
        if range is not None:
            raise
        return None


@analysis(
    "cpu_note",
    keep="memory",
    params=(Param("by", OPT_STR, "thread", (None, "thread", "process"), flag=None),),
    tables=("cpu_samples", "thread_states"),
    view=True,
)
def cpu_note(ctx, by) -> str:
    """The line under `cpu --by thread` or `--by process` (`by`; None: `cpu` without --by, which answers per
    thread there) where it is measured from scheduling events alone (no CPU samples: _cpu.sched_note), ''
    where the export has CPU samples or no scheduling events."""
    return _cpu.sched_note(ctx.con, by)


@analysis("nccl_ranges", tables=("nvtx_ranges",), sql=("nccl_ranges",), requires=("nvtx_ranges",))
def nccl_ranges(ctx) -> pl.DataFrame:
    """NCCL range time: instances and total time of the NCCL NVTX ranges (for nsysql.many)."""
    return _ranks.nccl(ctx.con)


@analysis(
    "rank_tables",
    params=(RANGE,),
    keep="none",
    needs=("facts", "iterations", "iteration_stats", "iteration_range", "gaps", "nccl_ranges"),
    tables=("process_roles", "threads"),
    sql=("process_devices", "ranks_processes"),
)
def rank_tables(ctx, range) -> dict[str, pl.DataFrame]:
    """One rank's frames for the cross-rank answers of `nsysql ranks` (nsysql.analyses.ranks.rank_tables), from
    its (stored) answers: what a worker of nsysql.many sends back, and the store keeps per export. `range`: its
    loop (None: the one detected)."""
    try:
        its = ctx.ask("iterations", range=range)
    except NsysqlError as e:  # no loop: the rank is listed, with why
        return _ranks.rank_tables(str(ctx.path), _ranks.with_gpu_processes(ctx.con, ctx.ask("facts")), e)
    # every gap indexed by the loop named, as by the loop detected (`loop`, not gaps' `range`, which keeps the
    # gaps inside its instances only): naming the loop that detection finds gives the same frames
    gaps, causes = ctx.ask("gaps", loop=range), ctx.ask("gaps", by="cause", loop=range)
    return _ranks.rank_tables(
        str(ctx.path),
        _ranks.with_gpu_processes(ctx.con, ctx.ask("facts")),
        its,
        family=ctx.ask("iteration_stats", range=range)["range"][0],
        gaps=gaps,
        causes=causes,
        nccl=ctx.ask("nccl_ranges"),
        device=ctx.ask("iteration_stats", range=range)["device_id"][0],
        loop_pid=ctx.ask("iteration_range", range=range).pid,
    )


@analysis("gpus", tables=("devices", "gpu_busy", "gpu_ops", "profile_facts"), sql=("gpu_utilization",))
def gpus(ctx) -> pl.DataFrame:
    """Per device: its busy time, share of its active span and of the profile span."""
    return _summary.gpus(ctx.con)


# the loop diff compares: one name for both sides, each side's own iterations of it
DIFF_LOOP = replace(
    LOOP,
    doc="The iteration range in both BASE and NEW (exact name, numbered family, prefix or regex; '' for the "
    "ranges without a name), as `iterations --range` takes it; detected in each when left out.",
)


@analysis(
    "diff_side",
    params=(replace(DIFF_LOOP, flag=None),),
    keep="none",
    needs=("gpus", "iterations", "iteration_stats", "iteration_breakdown", "gaps", "gap_activity"),
)
def diff_side(ctx, range) -> _diff.Side:
    """What diff reads of one profile, from its (stored) answers; `range`: its loop (None: detected)."""
    gpus = ctx.ask("gpus")
    loop = {"range": range}
    try:
        its, st = ctx.ask("iterations", **loop), ctx.ask("iteration_stats", **loop)
        parts = ctx.ask("iteration_breakdown", **loop)
    except NsysqlError as e:
        return _diff.Side(gpus, str(e))
    if not gpus.height:
        return _diff.side(gpus, its, st, parts["kernels"], parts["ranges"], None)
    gaps, activity = ctx.ask("gaps", loop=range), ctx.ask("gap_activity", loop=range)
    return _diff.side(gpus, its, st, parts["kernels"], parts["ranges"], gaps, activity)


@analysis("diff_totals", keep="none", needs=("kernels",), tables=("nvtx_ranges",), sql=("range_family_totals",))
def diff_totals(ctx):
    """Whole-profile kernel and range-family totals, for a diff whose sides have no common iterations."""
    return _diff.totals(ctx.ask("kernels"), _diff.family_totals(ctx.con))


@analysis(
    "diff",
    command="diff",
    params=(
        Param("other", Engine, doc="The NEW profile's engine.", flag=None),
        Param(
            "fail_above",
            (float, int, type(None)),
            None,
            normalize=_diff.finite_pct,
            doc="Exit 1 when NEW's mean steady-state iteration time is more than PCT % slower than BASE's.",
            flag=Flag(metavar="PCT"),
        ),
        DIFF_LOOP,
    ),
    keep="none",
    needs=("diff_side", "diff_totals"),
)
def diff(ctx, other: Engine, fail_above, range) -> _diff.Diff:
    """This profile (BASE) against `other` (NEW): verdict, iteration time, idle by cause, ranges, kernels; with
    `fail_above`, whether NEW breaks that limit (Diff.over_limit, .exit_status); `range`: the loop of both (None:
    each side's detected)."""
    b, n = ctx.ask("diff_side", range=range), other.run("diff_side", range=range)
    if _diff.needs_totals(b, n):
        b, n = replace(b, totals=ctx.ask("diff_totals")), replace(n, totals=other.run("diff_totals"))
    return _diff.limited(_diff.diff(b, n, base_label=ctx.path.name, new_label=other.path.name), fail_above)


@analysis(
    "report_diff",
    params=(Param("other", Engine, doc="The NEW profile's engine.", flag=None), replace(DIFF_LOOP, flag=None)),
    keep="none",
    needs=("diff", "iterations", "report"),
)
def report_diff(ctx, other: Engine, range) -> _report.DiffReport:
    """Everything the comparison page (`nsysql report --baseline`) shows: the diff of this profile (BASE) and
    `other` (NEW), each side's steady-state step times where the diff compares iterations, NEW's report; `range`:
    the loop of both (None: each side's detected)."""
    res = ctx.ask("diff", other=other, range=range)
    sides = [None, None]
    if res.iteration_time is not None:
        sides = [
            _steady_times(lambda: ctx.ask("iterations", range=range)),
            _steady_times(lambda: other.run("iterations", range=range)),
        ]
    return _report.DiffReport(res, *sides, new=other.run("report", range=range))


def _steady_times(its):
    """The steady-state step times of `its()`, None without iterations."""
    try:
        return _report.steady(its())
    except NsysqlError:
        return None


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
    tables=("gpu_metric_activity",),
    sql=("metrics_timeline",),
)
def metrics_timeline(ctx, start_ns, end_ns, bins) -> pl.DataFrame:
    """SMs Active and Tensor Active per device in `bins` equal bins of [start_ns, end_ns)."""
    return _metrics.timeline(ctx.con, start_ns, end_ns, bins=bins)


@analysis(
    "trace",
    command="trace",
    refusal=_trace.refusal,
    params=(
        Param(
            "window",
            OPT_STR,
            None,
            doc="Only this stretch of time, from the profile's start: 2s:3.5s, 500ms:, :1s (events overlapping it).",
            flag=Flag(metavar="START:END"),
        ),
        Param(
            "iterations",
            OPT_STR,
            None,
            doc="Only iterations A to B (both included), as `nsysql iterations` numbers them.",
            flag=Flag(metavar="A:B"),
        ),
        Param("lazy", bool, False, doc="Read the large tables a batch at a time when written.", flag=None),
        replace(
            LOOP,
            doc="The iteration range of the iterations track and of --iterations, as `iterations --range` takes it "
            "('' for the ranges without a name); detected when left out.",
        ),
    ),
    keep="none",
    needs=("iterations", "gaps"),
    requires=("gpu_ops|api_calls|nvtx_ranges",),  # what a trace shows: none of them, an empty timeline
    tables=(
        "api_calls",
        "devices",
        "gpu_ops",
        "nvtx_ranges",
        "op_launch",
        "processes",
        "profile_facts",
        "strings",
        "threads",
    ),
    sql=("trace_span", "trace_gpu_ops", "trace_api_calls", "trace_nvtx", "trace_names"),
)
def trace(ctx, window, iterations, lazy, range) -> dict:
    """The rows of a timeline (nsysql.analyses.trace) within `window` or iterations "A:B" of the loop (`range`,
    else the loop detected; one named must be found); the whole profile by default."""
    if window and iterations:
        raise NsysqlError("give `window` or `iterations`, not both", option=("window", "iterations"))
    if why := _trace.refusal(ctx.con):
        raise NsysqlError(why)
    start, end = _trace.span(ctx.con)
    try:
        its = ctx.ask("iterations", range=range)
    except NsysqlError as e:
        if range is not None:  # the loop named is not found: said as `iterations --range` says it
            raise
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
        gaps = ctx.ask("gaps", loop=range)
    except NsysqlError:  # no GPU work: no gaps to show
        gaps = None
    got = _trace.rows(ctx.con, t0, t1, its, gaps, lazy=lazy)
    if not iterations:  # an iteration has its range's NVTX event at least
        _trace.check_window(got, window or None, start, end, its)
    return got


@analysis(
    "export",
    command="export",
    params=(
        Param(
            "to",
            (str, os.PathLike),
            doc="Directory to write the tables and README.md into (created if missing).",
            flag=Flag(metavar="DIR", path="dir"),
        ),
        Param("format", str, "parquet", ("parquet", "csv"), doc="Output format.", flag=Flag(short="-f")),
    ),
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
    requires=("nvtx_ranges",),
)
def resolve_range(ctx, pattern) -> list[str]:
    """The range names `pattern` selects (exact, numbered family, prefix, else RE2)."""
    return _resolve_range(ctx.con, pattern)[0]


def _no_memory(con) -> str | None:
    """Why `gpu_memory` has nothing to answer (no CUDA memory usage event), or None."""
    if con.sql("SELECT 1 FROM gpu_memory_events LIMIT 1").fetchall():
        return None
    return (
        "no GPU memory events: the export did not trace CUDA memory usage "
        "(profile with `nsys profile --cuda-memory-usage=true`)"
    )


@analysis(
    "gpu_memory",
    refusal=_no_memory,
    params=(
        Param("by", OPT_STR, None, (None, "iteration", "range"), doc="per iteration of the loop, or per NVTX range"),
        replace(
            RANGE,
            doc="With --by iteration: the range that is one iteration (as `iterations --range`); with --by range: "
            "only ranges named PATTERN (exact name, numbered family, prefix, or regex; '' for the ranges without a "
            "name).",
        ),
    ),
    needs=("iteration_range",),
    tables=("gpu_memory_events", "nvtx_ranges"),
    sql=("gpu_memory", "gpu_memory_iterations", "gpu_memory_ranges"),
    requires=("gpu_memory_events",),
    command="gpu-memory",
    only=(
        Only("by", ("iteration",), needs=("iteration_range",), sql=("gpu_memory_iterations",)),
        Only("by", ("range",), tables=("nvtx_ranges",), sql=("gpu_memory_ranges",)),
    ),
)
def gpu_memory(ctx, by, range) -> pl.DataFrame:
    """GPU memory held through CUDA's allocator (`nsys profile --cuda-memory-usage=true`): every allocation and
    free with what its process then held; per iteration or NVTX range, what it held at the start, at the peak
    and at the end, and the growth."""
    if why := _no_memory(ctx.con):
        raise NsysqlError(why)
    if by == "iteration":
        it = ctx.ask("iteration_range", range=range)
        return _iter.windows(ctx.con, it).run("gpu_memory_iterations", pid=it.pid)
    if by is None and range is not None:  # every event is listed: there is nothing for a pattern to select
        raise NsysqlError(
            "`range` selects the loop of `by` iteration or the ranges of `by` range; without `by` every event is listed",
            option=("range", "by"),
        )
    if by == "range":  # --range selects the ranges listed, as it selects the loop of --by iteration
        return _api.run(
            ctx.con, "gpu_memory_ranges", names=_resolve_range(ctx.con, range)[0] if range is not None else None
        )
    return _api.run(ctx.con, "gpu_memory")


@analysis(
    "gpu_memory_shown",
    params=REGISTRY["gpu_memory"].params,
    needs=("gpu_memory",),
    tables=("gpu_memory_events",),
    sql=("gpu_memory_before_capture",),
    view=True,
)
def gpu_memory_shown(ctx, by, range) -> dict[str, pl.DataFrame]:
    """What `nsysql gpu-memory` shows: the `table` (gpu_memory's frame) and the `note` under it, the frees of
    memory whose allocation the export does not hold, which the bytes held leave out (nsysql.analyses.gpu_memory)."""
    table = ctx.ask("gpu_memory", by=by, range=range)
    return _noted(ctx, "gpu_memory", table, _gpu_memory.before_capture_note(ctx.con))
