"""The commands that answer with a table: one Profile method each, rendered by the shared output switches."""

from __future__ import annotations

import click

from ..render import one_line as _line
from ..render import render, summary_text
from . import files as _files
from .collectives import collectives
from .common import each_rank, global_opts, handled, load_profile, several
from .cpu import cpu
from .declared import DECLARED, about, answer, declared
from .kernels import kernels, kernels_by_range, noted_command
from .options import files_options, output_options, table_output
from .output import emit, emit_text, fitted, rendered
from .warm import emit_answer

info = answer("info", "info", "What the export holds, what it lacks, and which commands apply to it.")


@click.command()
@files_options
@declared("summary")
@click.option("--expand", is_flag=True, help="One range row per name: no `Batch*` for Batch0..Batch59.")
@handled
def summary(files, fmt, output, attribution, top, range, expand):
    """One screen: span, GPUs, busy %, iterations, idle causes, findings, top kernels and ranges, memory.

    With several FILEs (one per rank), the cross-rank summary of `nsysql ranks`."""
    if several(files):
        emit(_ranks_result(files, None, None, range), fmt, output)
        return
    params = {"attribution": attribution, "top": top, "families": not expand, "range": range}
    prof = load_profile(files[0] if files else None, warm=True, question=("summary", params))
    if fmt == "markdown":  # the PR-ready snippet, as `report -f markdown`
        from ..report import snippet

        emit_text(snippet(prof, range=range), output)
        return
    emit_answer(
        prof, "summary", params, fmt, output, lambda s, look: summary_text(s, fit=lambda t: fitted(t, output), **look)
    )


launches = answer(
    "launches",
    "launches",
    "Launch latency: launch call, queue and kernel times per kernel (as `nsys stats -r cuda_kern_exec_sum`).",
    files=True,
)


ops = noted_command(
    "ops", "ops", "PyTorch operators (emit_nvtx ranges): calls, CPU time, forward and backward GPU time, top kernel."
)
# the analysis' own words, as a derived command's
gpu_memory = noted_command("gpu-memory", "gpu_memory", DECLARED["gpu_memory"]["doc"])


@click.command()
@output_options
@declared("ranges", report=True)
@click.option(
    "--expand", is_flag=True, help="Tables: one row per name, Batch0..Batch59 listed, not folded into `Batch*`."
)
@handled
def ranges(file, fmt, output, expand, **params):
    """NVTX ranges: CPU time stats, GPU-projected time (as nvtx_sum + nvtx_gpu_proj_sum) and the GPU time of the
    ops they enclose; the table shows numbered families (Batch0..Batch59) as one row, `Batch*`, unless --expand
    (CSV, JSON and Markdown list every name)."""
    folded = fmt == "table" and not expand
    params = {**params, "families": folded}
    emit_answer(load_profile(file, warm=True, question=("ranges", params)), "ranges", params, fmt, output)


@click.command()
@output_options
@declared("gpu_metrics", report=True)
@click.option(
    "--graphics", is_flag=True, help="Also list graphics counters (pixel, vertex warps) that are 0 throughout."
)
@handled
def metrics(file, fmt, output, graphics, **params):
    """GPU metrics sampled by `nsys profile --gpu-metrics-devices=...`: per device and metric, samples, mean, min,
    p50, p90, max (as `nsys recipe gpu_metric_util_sum`), and a note on counters whose values do not fit their
    unit. Clocks that nsys wrote in Hz under [MHz] are shown in MHz."""
    params = {**params, "graphics": graphics}
    got = load_profile(file, warm=True, question=("gpu_metrics_shown", params)).gpu_metrics_shown(**params)
    said = got["said"]["said"][0]
    if said is not None:
        click.echo(f"nsysql: {_line(said)}: --graphics lists them", err=True)
    if "unsampled" in got and (gap := got["unsampled"]["said"][0]) is not None:
        click.echo(f"nsysql: {_line(gap)}", err=True)
    emit(got["table"], fmt, output)


@click.command()
@files_options
@declared("iterations", report=True)
@handled
def iterations(files, fmt, output, **params):
    """Per-iteration breakdown: wall time, GPU busy/idle, per child range, warm-up and outliers."""
    if several(files):
        emit(each_rank(files, "iterations", **params), fmt, output)
        return
    prof = load_profile(files[0] if files else None, warm=True, question=("iterations_shown", params))

    def text(got, look):  # each format draws its sections of what the command shows
        if fmt in ("json", "markdown"):
            return render({k: got[k] for k in ("iterations", "steady state")}, **look)
        if fmt == "csv":
            return render(got["iterations"], **look)
        note = "\n" + _said(got)
        return rendered(_narrow(got["iterations"]), "table", output=output) + fitted(note, output)

    emit_answer(prof, "iterations_shown", params, fmt, output, text)


overlap = answer(
    "overlap",
    "overlap",
    "Communication hidden or exposed: time in communication kernels (NCCL), overlapped by compute or not.",
    files=True,
)


def _said(got) -> str:
    """The lines of an answer's `said` frame, each for one line of a terminal."""
    return "".join(f"{_line(line)}\n" for line in got["said"]["said"])


def _narrow(df):
    """For the terminal: drop end_ns and the less used per-kind columns (the communication ones without any)."""
    drop = {"end_ns", "gpu_span_ns", "gpu_start_ns", "gpu_step_ns", "memset_ns", "graph_ns", "gpu_ops", "step_clock"}
    if "step_clock" in df.columns and not (df["step_clock"] == "gpu").any():  # the steps are the CPU's windows
        drop |= {"step_ns", "step_idle_ns"}
    if "comm_ns" in df.columns and not (df["comm_ns"] > 0).any():
        drop |= {"comm_ns", "overlapped_ns"}
    if "graph_ns" in df.columns and (df["graph_ns"] > 0).any():  # whole graphs: their GPU time is no kernel's
        drop.discard("graph_ns")
    keep = [c for c in df.columns if c not in drop]
    return df.select(keep)


# what `gaps --explain` lists: the activity elsewhere during the gaps, so an empty answer says that there was none
# (the gaps themselves may be there: a loop whose only thread is the one waiting has no activity elsewhere)
_EXPLAINED = "activity of other threads or processes during GPU gaps of at least {min_ns} (--min sets the shortest)"


@click.command()
@files_options
@declared("gap_activity", answers="gaps", report=True)
@click.option(
    "--explain",
    is_flag=True,
    help="What the other threads and processes did during each gap (or cause group): NVTX ranges, OS runtime and "
    "CUDA calls, ranked by overlap.",
)
@handled
def gaps(files, fmt, output, explain, top, **params):
    """GPU idle gaps and what the CPU was doing meanwhile (cause: host:<range>, sync, memcpy, alloc, load, launch)."""
    what = "gaps"  # the gaps analysis: gap_activity's options but --top, which goes with --explain
    if explain:
        what, params["top"] = "gap_activity", top
    if several(files):
        emit(each_rank(files, what, **params), fmt, output)
        return
    prof = load_profile(
        files[0] if files else None, warm=True, question=("gaps_explained" if explain else what, params)
    )
    if not explain:
        emit_answer(prof, "gaps", params, fmt, output)
        return

    def text(got, look):
        if fmt != "table":
            return render(got["activity"], **look)
        # under the table: what the CPU did during each cause's gaps (samples and scheduling), as summary says it
        return rendered(got["activity"], "table", output=output, what=_EXPLAINED) + fitted(_said(got), output)

    emit_answer(prof, "gaps_explained", params, fmt, output, text)


def _ranks_result(files, dask, workers, range=None):
    from ..many import load_many

    opts = global_opts()
    r = load_many(
        list(files),
        cache_dir=opts.get("cache_dir"),
        cache=not opts.get("no_cache"),
        workers=workers,
        dask=dask,
        cache_max=opts.get("cache_max"),
        range=range,
    )
    out = r.shown()
    # said once the answer is whole: a refusal (no rank has iterations) is the one line on stderr
    click.echo(f"nsysql: {r.said}", err=True)
    click.echo(f"nsysql: straggler rule: {r.rule}", err=True)
    return out


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@table_output()
@declared("load_many")
@handled
def ranks(files, fmt, output, dask, workers, range):
    """Compare per-rank exports (paths or globs like 'runs/rank*.sqlite'): step time, idle, collectives, and
    the stragglers that made the others wait, with the evidence."""
    emit(_ranks_result(files, dask, workers, range), fmt, output)


about(ranks, python="`nsysql.load_many(paths)`")
_WRITTEN = (
    info,
    summary,
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
    cpu,
    collectives,
    gpu_memory,
)


def derived(written) -> tuple:
    """The commands of the analyses that declare one (Analysis.command) and none of `written` is: each prints its
    Profile method's frame, its options and help derived from the declaration."""
    have = {c.name for c in written}
    return tuple(
        answer(d["command"], name, d["doc"], files=d["files"])
        for name, d in DECLARED.items()
        if d.get("command") and d["command"] not in have
    )


# (files' commands are written too: a declaration naming one of them, such as trace's, derives no other)
COMMANDS = _WRITTEN + derived(_WRITTEN + _files.COMMANDS)
