"""The commands that answer with a table: one Profile method each, rendered by the shared output switches."""

from __future__ import annotations

import click

from ..render import one_line as _line
from ..render import summary_view
from .common import each_rank, global_opts, handled, load_profile, several
from .options import attribution_option, files_options, format_option, group_ops_option, output_option, output_options
from .output import emit, emit_text, fitted, rendered


@click.command()
@output_options
@handled
def info(file, fmt, output):
    """What the export holds, what it lacks, and which analyses apply."""
    emit(load_profile(file).info(), fmt, output)


@click.command()
@files_options
@attribution_option
@click.option("--top", type=int, default=10, show_default=True, help="Rows in the kernel and range tables.")
@click.option("--expand", is_flag=True, help="One range row per name: no `Batch*` for Batch0..Batch59.")
@handled
def summary(files, fmt, output, attribution, top, expand):
    """One screen: span, GPUs, busy %, iterations, idle causes, findings, top kernels and ranges, memory.

    With several FILEs (one per rank), the cross-rank summary of `nsysql ranks`."""
    if several(files):
        emit(_ranks_result(files, None, None), fmt, output)
        return
    prof = load_profile(files[0] if files else None)
    if fmt == "markdown":  # the PR-ready snippet, as `report -f markdown`
        from ..report import snippet

        emit_text(snippet(prof), output)
        return
    s = prof.summary(attribution=attribution, top=top, families=not expand)
    emit(summary_view(s), fmt, output)


@click.command()
@output_options
@click.option("--top", type=int, default=None, help="Only the N API functions with most total time.")
@handled
def api(file, fmt, output, top):
    """CUDA API calls by function: calls and CPU time inside them (as `nsys stats -r cuda_api_sum`)."""
    emit(load_profile(file).api(top=top), fmt, output)


@click.command()
@files_options
@click.option(
    "--by",
    type=click.Choice(["launch", "kernel"]),
    default="launch",
    show_default=True,
    help="One row per process, thread, device, launching call and kernel, or one per kernel name.",
)
@handled
def launches(files, fmt, output, by):
    """Launch latency: launch call, queue and kernel times per kernel (as `nsys stats -r cuda_kern_exec_sum`)."""
    if several(files):
        emit(each_rank(files, "launches", by=by), fmt, output)
        return
    emit(load_profile(files[0] if files else None).launches(by=by), fmt, output)


@click.command()
@files_options
@click.option(
    "--name",
    "name_kind",
    type=click.Choice(["demangled", "short", "mangled"]),
    default="demangled",
    show_default=True,
    help="Which kernel name to group by (nsys's default is demangled).",
)
@click.option("--top", type=int, default=None, help="Only the N kernels with most total time.")
@click.option(
    "--by",
    type=click.Choice(["name", "category"]),
    default="name",
    show_default=True,
    help="Group by kernel name, or by category and tensor-core use (rules: queries/v1/canonical/44_kernel_rules.sql).",
)
@click.option(
    "--per",
    type=click.Choice(["iteration", "range"]),
    default=None,
    help="With --by category: per iteration of the loop (as `iterations` finds it), or per NVTX range.",
)
@handled
def kernels(files, fmt, output, name_kind, top, by, per):
    """Top kernels by total GPU time (as `nsys stats -r cuda_gpu_kern_sum`); several FILEs add a rank column."""
    if several(files):
        emit(each_rank(files, "kernels", name=name_kind, top=top, by=by, per=per), fmt, output)
        return
    emit(load_profile(files[0] if files else None).kernels(name=name_kind, top=top, by=by, per=per), fmt, output)


@click.command()
@output_options
@attribution_option
@group_ops_option
@click.option(
    "--expand", is_flag=True, help="Tables: one row per name, Batch0..Batch59 listed, not folded into `Batch*`."
)
@handled
def ranges(file, fmt, output, attribution, group_ops, expand):
    """NVTX ranges: CPU time stats, GPU-projected time (as nvtx_sum + nvtx_gpu_proj_sum) and the GPU time of the
    ops they enclose; the table shows numbered families (Batch0..Batch59) as one row, `Batch*`, unless --expand
    (CSV, JSON and Markdown list every name)."""
    folded = fmt == "table" and not expand
    emit(load_profile(file).ranges(attribution=attribution, group_ops=group_ops, families=folded), fmt, output)


@click.command()
@output_options
@click.option(
    "--by",
    type=click.Choice(["iteration", "range"]),
    default=None,
    help="Per iteration of the loop, or per NVTX range: the time-weighted mean over each instance's "
    "GPU-projected window (first to last GPU op launched inside it).",
)
@click.option(
    "--range",
    "range_",
    metavar="PATTERN",
    help="With --by iteration: the range that is one iteration (as `iterations --range`).",
)
@attribution_option
@click.option(
    "--graphics", is_flag=True, help="Also list graphics counters (pixel, vertex warps) that are 0 throughout."
)
@handled
def metrics(file, fmt, output, by, range_, attribution, graphics):
    """GPU metrics sampled by `nsys profile --gpu-metrics-devices=...`: per device and metric, samples, mean, min,
    p50, p90, max (as `nsys recipe gpu_metric_util_sum`), and a note on counters whose values do not fit their
    unit. Clocks that nsys wrote in Hz under [MHz] are shown in MHz."""
    from .metrics_view import printed

    df, left = printed(load_profile(file).gpu_metrics(by=by, range=range_, attribution=attribution), graphics)
    if left:
        click.echo(
            f"nsysql: left out {len(left)} graphics counters at 0 throughout ({_line(', '.join(left), 200)}): --graphics lists them",
            err=True,
        )
    emit(df, fmt, output)


@click.command("kernels-by-range")
@output_options
@click.option(
    "--range",
    "range_",
    metavar="PATTERN",
    help="Only ranges named PATTERN: exact name, numbered family (Batch -> Batch0..Batch59), prefix, or regex.",
)
@click.option("--innermost", is_flag=True, help="Credit each kernel only to its innermost enclosing range.")
@attribution_option
@group_ops_option
@handled
def kernels_by_range(file, fmt, output, range_, innermost, attribution, group_ops):
    """Kernels per NVTX range (as `nsys stats -r nvtx_kern_sum`)."""
    prof = load_profile(file)
    got = prof.kernels_by_range(range=range_, innermost=innermost, attribution=attribution, group_ops=group_ops)
    emit(got, fmt, output)


@click.command()
@output_options
@click.option("--shapes", is_flag=True, help="One row per operator and input sizes (record_shapes=True).")
@handled
def ops(file, fmt, output, shapes):
    """PyTorch operators (emit_nvtx ranges): calls, CPU time, forward and backward GPU time, top kernel."""
    emit(load_profile(file).ops(shapes=shapes), fmt, output)


@click.command()
@files_options
@click.option(
    "--range",
    "range_",
    metavar="PATTERN",
    help="The iteration range (exact name, numbered family, prefix or regex); detected when left out.",
)
@click.option(
    "--skip",
    type=int,
    default=None,
    help="Warm-up iterations to leave out of steady state (default: the first, extended while "
    "the next ones are still outliers).",
)
@handled
def iterations(files, fmt, output, range_, skip):
    """Per-iteration breakdown: wall time, GPU busy/idle, per child range, warm-up and outliers."""
    if several(files):
        emit(each_rank(files, "iterations", range=range_, skip=skip), fmt, output)
        return
    prof = load_profile(files[0] if files else None)
    df = prof.iterations(range=range_, skip=skip)
    st = prof.iteration_stats(range=range_, skip=skip)
    if fmt in ("json", "markdown"):
        emit({"iterations": df, "steady state": st}, fmt, output)
    elif fmt == "csv":
        emit(df, fmt, output)
    else:
        from ..analyses.iterations import steady_sentence

        s = st.row(0, named=True)
        note = f"\nrange: {_line(s['detected'])}\n{steady_sentence(s)}\n"
        if s["outlier_pattern"]:
            note += f"outliers: {_line(s['outlier_pattern'])}\n"
        emit_text(rendered(_narrow(df), "table", output=output) + fitted(note, output), output)


@click.command()
@files_options
@click.option(
    "--by",
    type=click.Choice(["device", "iteration"]),
    default="device",
    show_default=True,
    help="One row per device, or one per iteration of the loop (on the loop's device).",
)
@click.option(
    "--range", "range_", metavar="PATTERN", help="With --by iteration: the iteration range, as in iterations."
)
@handled
def overlap(files, fmt, output, by, range_):
    """Communication hidden or exposed: time in communication kernels (NCCL), overlapped by compute or not."""
    if several(files):
        emit(each_rank(files, "overlap", by=by, range=range_), fmt, output)
        return
    emit(load_profile(files[0] if files else None).overlap(by=by, range=range_), fmt, output)


def _narrow(df):
    """For the terminal: drop end_ns and the less used per-kind columns (the communication ones without any)."""
    drop = {"end_ns", "gpu_span_ns", "gpu_start_ns", "gpu_step_ns", "memset_ns", "graph_ns", "gpu_ops", "step_clock"}
    if "step_clock" in df.columns and not (df["step_clock"] == "gpu").any():  # the steps are the CPU's windows
        drop |= {"step_ns", "step_idle_ns"}
    if "comm_ns" in df.columns and not (df["comm_ns"] > 0).any():
        drop |= {"comm_ns", "overlapped_ns"}
    keep = [c for c in df.columns if c not in drop]
    return df.select(keep)


@click.command()
@files_options
@click.option("--range", "range_", metavar="PATTERN", help="Only gaps inside instances of these ranges.")
@click.option(
    "--min",
    "min_",
    default="1ms",
    show_default=True,
    help="Shortest gap to report: 500us, 2ms, 1s ... (nsys recipe gpu_gaps uses 500ms).",
)
@click.option("--by", type=click.Choice(["cause"]), help="Idle time per cause instead of one row per gap.")
@click.option(
    "--include-warmup", is_flag=True, help="With --by cause: count warm-up iterations and time outside iterations too."
)
@click.option(
    "--explain",
    is_flag=True,
    help="What the other threads and processes did during each gap (or cause group): NVTX ranges, OS runtime and "
    "CUDA calls, ranked by overlap.",
)
@click.option(
    "--top", type=click.IntRange(min=1), default=5, show_default=True, help="With --explain: activities per gap/cause."
)
@handled
def gaps(files, fmt, output, range_, min_, by, include_warmup, explain, top):
    """GPU idle gaps and what the CPU was doing meanwhile (cause: host:<range>, sync, memcpy, alloc, launch)."""
    kwargs = dict(range=range_, min_ns=min_, by=by, include_warmup=include_warmup)
    what = "gaps"
    if explain:
        what, kwargs["top"] = "gap_activity", top
    if several(files):
        emit(each_rank(files, what, **kwargs), fmt, output)
        return
    emit(getattr(load_profile(files[0] if files else None), what)(**kwargs), fmt, output)


def _ranks_rule() -> str:
    from ..analyses.ranks import RULE

    return RULE


def _ranks_result(files, dask, workers):
    from ..many import connect_dask, load_many

    opts = global_opts()
    client = connect_dask(dask) if dask else None
    try:
        r = load_many(
            list(files),
            cache_dir=opts.get("cache_dir"),
            cache=not opts.get("no_cache"),
            workers=workers,
            client=client,
            cache_max=opts.get("cache_max"),
        )
    finally:
        if client is not None:
            client.close()
    click.echo(f"nsysql: {r.files.height} ranks; {r.numbering}", err=True)
    click.echo(f"nsysql: straggler rule: {_ranks_rule()}", err=True)
    return {
        "files": r.files.select("rank", "path", "rank_source"),
        "per rank": r.per_rank(),
        "stragglers": r.findings().select("rank", "sentence"),
        "straggler evidence": r.stragglers(),
        "slowest rank per iteration": r.by_iteration(),
    }


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@format_option()
@output_option()
@click.option(
    "--dask",
    metavar="ADDRESS",
    help="Run the per-file loads on a Dask cluster (tcp://host:8786); needs pip install 'nsysql[dask]'.",
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="Local processes for the loads [default: the cores]."
)
@handled
def ranks(files, fmt, output, dask, workers):
    """Compare per-rank exports (paths or globs like 'runs/rank*.sqlite'): step time, idle, collectives, and
    the stragglers that made the others wait, with the evidence."""
    emit(_ranks_result(files, dask, workers), fmt, output)


COMMANDS = (
    info,
    summary,
    api,
    launches,
    kernels,
    ranges,
    metrics,
    kernels_by_range,
    ops,
    iterations,
    overlap,
    gaps,
    ranks,
)
