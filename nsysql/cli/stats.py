"""`nsysql stats`: several reports of one profile at once, as `nsys stats -r a,b,c` gives them: one load, one
process, the reports computed side by side (Profile.parallel), a report that does not apply said in one line.

The reports are derived from the commands that answer with one declared analysis' frame (see
nsysql.cli.declared): each such command is a report of its name, and each other choice of its `--by` one more
(`gaps-by-cause`, `kernels-by-category`); nsys's report names that a declaration names as its counterpart
(`Analysis.nsys`: kernels' `cuda_gpu_kern_sum`) are aliases of that report.
"""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from ..errors import NsysqlError
from . import tables
from .common import handled, load_profile
from .declared import DECLARED, about, analysis_of, option, params
from .options import format_option
from .output import answer_to_stdout, rendered, write_output

# `nsys stats`' reports (nsys 2023 to 2026); those with no counterpart here are said so in one line
NSYS_REPORTS = (
    "cuda_api_gpu_sum",
    "cuda_api_sum",
    "cuda_api_trace",
    "cuda_gpu_kern_gb_sum",
    "cuda_gpu_kern_sum",
    "cuda_gpu_mem_size_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_gpu_sum",
    "cuda_gpu_trace",
    "cuda_kern_exec_sum",
    "cuda_kern_exec_trace",
    "dx11_pix_sum",
    "dx12_gpu_marker_sum",
    "dx12_pix_sum",
    "mpi_event_sum",
    "mpi_event_trace",
    "nvtx_gpu_proj_sum",
    "nvtx_gpu_proj_trace",
    "nvtx_kern_sum",
    "nvtx_pushpop_sum",
    "nvtx_pushpop_trace",
    "nvtx_startend_sum",
    "nvtx_sum",
    "openacc_sum",
    "opengl_khr_gpu_range_sum",
    "opengl_khr_range_sum",
    "openmp_sum",
    "osrt_sum",
    "syscall_sum",
    "um_cpu_page_faults_sum",
    "um_sum",
    "um_total_sum",
    "vulkan_api_sum",
    "vulkan_api_trace",
    "vulkan_gpu_marker_sum",
    "vulkan_marker_sum",
    "wddm_queue_sum",
)


# A report whose command prints a view of its analysis (`<analysis>_shown`, taking the analysis' parameters) is
# that view's table, each line the command prints under it on stderr: the view's frames with a column `said`, in
# order (metrics: clocks nsys wrote in Hz shown in MHz, graphics counters at 0 throughout and iterations no sample
# covers left out; iterations: the loop taken, the steady state with its trend, the outliers), else its `note`
# frame's `note` (kernels, kernels-by-range, ops: the CUDA graph launches traced whole; gpu-memory: the frees of
# memory whose allocation the export does not hold). The table is the view's `table` section, else the one named
# as the analysis (iterations_shown's `iterations`)
VIEWED = {
    a: f"{a}_shown"
    for a in DECLARED
    if f"{a}_shown" in DECLARED
    and {p["name"] for p in DECLARED[a]["params"]} <= {p["name"] for p in DECLARED[f"{a}_shown"]["params"]}
}


def reports() -> dict[str, tuple[str, dict]]:
    """Report name -> (the analysis, the parameters it is asked with), in the commands' order."""
    out: dict[str, tuple[str, dict]] = {}
    for cmd in tables.COMMANDS:
        analysis = analysis_of(cmd)
        if not analysis or not getattr(cmd.callback, "__nsysql_report__", False):
            continue
        out[cmd.name] = (analysis, {})
        for p in params(analysis):
            if p["name"] == "by" and p["kind"] == "choice":
                out.update({f"{cmd.name}-by-{c}": (analysis, {"by": c}) for c in p["choices"] if c != p.get("default")})
    return out


def aliases() -> dict[str, str]:
    """nsys's report name -> the report of ours that answers the same question."""
    return {n: name for name, (a, kw) in reports().items() if not kw for n in DECLARED[a]["nsys"] if " " not in n}


def resolve(names: list[str]) -> tuple[list[tuple[str, str, dict]], list[str]]:
    """(name as given, analysis, parameters) for each report asked (one asked by nsys's name with the parameters
    that name means: the declaration's `as_nsys`), and a line for each of nsys's reports that has no counterpart
    here; NsysqlError naming the first name that is neither."""
    known, alias = reports(), aliases()
    asked, unmatched = [], []
    for n in names:
        if n in known or n in alias:
            analysis, kw = known[alias.get(n, n)]
            asked.append((n, analysis, {**kw, **(DECLARED[analysis].get("as_nsys", {}) if n in alias else {})}))
        elif n in NSYS_REPORTS:
            unmatched.append(f"{n}: nsys's report has no counterpart among nsysql's ({', '.join(known)})")
        else:
            raise NsysqlError(f"unknown report {n!r}; choose from {', '.join(known)} (or nsys's {', '.join(alias)})")
    return asked, unmatched


def _looped(analysis: str, kw: dict, loop: str | None) -> dict:
    """The parameters a report is asked with, the loop `loop` named where the report finds one (its declaration's
    `loop`: gaps' `loop`, else `range`, where the report's values find the loop: metrics-by-iteration's, not
    metrics-by-range's), so that a `range` filter is never given a loop; the report's own where `loop` is None."""
    how = DECLARED[analysis].get("loop")
    if loop is None or how is None:
        return kw
    defaults = {p["name"]: p.get("default") for p in params(analysis)}
    when = how.get("when", {})
    if when and not any(vals is not None and kw.get(k, defaults.get(k)) in vals for k, vals in when.items()):
        return kw
    return {**kw, how["param"]: loop}


# --range: iterations' own, said of every report that finds the loop
LOOP_OPTION = {
    **next(p for p in params("iterations") if p["name"] == "range"),
    "help": "The iteration range of each report that finds the loop (iterations, gaps, gaps-by-cause, the "
    "-by-iteration reports), as `iterations --range` takes it ('' for the ranges without a name); detected when "
    "left out.",
}


def _attributed(analysis: str, kw: dict, attribution: str, given: bool) -> dict:
    """The parameters a report is asked with: --attribution where given, else the report's own (resolve), else
    --attribution's default."""
    if not any(p["name"] == "attribution" for p in params(analysis)):
        return kw
    return {**kw, "attribution": attribution} if given else {"attribution": attribution, **kw}


@click.command()
@click.argument("file", required=False)
@click.option(
    "-r",
    "--report",
    "reports_",
    metavar="NAMES",
    default="kernels,ranges,kernels-by-range,iterations,gaps",
    show_default=True,
    help=f"Comma-separated: {', '.join(reports())}; or nsys's names of the same: {', '.join(aliases())}.",
)
@format_option(default="csv")
@click.option(
    "-o",
    "--output",
    "prefix",
    metavar="PREFIX",
    help="Write each report to PREFIX_<report>.<ext> (as `nsys stats -o`); default stdout.",
)
@option(next(p for p in params("ranges") if p["name"] == "attribution"))  # as every command has it
@option(LOOP_OPTION)
@handled
def stats(file, reports_, fmt, prefix, attribution, range):
    """Several reports from one load, like `nsys stats -r ...`: one process, one read of the export.

    A report asked by nsys's name (nvtx_kern_sum, nvtx_gpu_proj_sum, ...) credits a kernel to the NVTX ranges as
    nsys does (--attribution thread) unless --attribution is given."""
    asked, unmatched = resolve([r.strip() for r in reports_.split(",") if r.strip()])
    for line in unmatched:
        click.echo(f"nsysql: {line}", err=True)
    if not asked:
        raise NsysqlError("no report of nsysql's was asked")
    given = click.get_current_context().get_parameter_source("attribution") is not ParameterSource.DEFAULT
    asked = [(n, a, _looped(a, _attributed(a, kw, attribution, given), range)) for n, a, kw in asked]
    prof = load_profile(file, question=[(a, {"attribution": attribution, **kw}) for _, a, kw in asked])
    ext = {"table": "txt", "csv": "csv", "json": "json", "markdown": "md"}[fmt]
    got = {}
    if prefix:  # `-o out/run` into a folder not made yet: made, as `nsys stats -o` does
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    # in one request, each report asked of its analysis' view where it has one, and of the analysis itself: a view
    # refuses an empty table of an analysis that does not apply (its command says why), where the report is that
    # empty table, as nsys stats prints it (the view asks the analysis alike: one answer, computed once)
    shared = {"attribution": attribution} if given else {}
    viewed = [i for i, (_, a, _) in enumerate(asked) if a in VIEWED]
    got_all = prof.each(
        *((VIEWED.get(a, a), kw) for _, a, kw in asked), *((asked[i][1], asked[i][2]) for i in viewed), **shared
    )
    answers = got_all[: len(asked)]
    for i, plain in zip(viewed, got_all[len(asked) :]):
        if isinstance(answers[i], NsysqlError):
            answers[i] = plain
    for (name, analysis, _), df in zip(asked, answers):
        if isinstance(df, NsysqlError):
            click.echo(f"nsysql: {name}: skipped: {df}", err=True)
            continue
        if isinstance(df, dict):  # a view (VIEWED)
            df = _viewed(name, analysis, df)
        if prefix:
            out = f"{prefix}_{name.replace('-', '_')}.{ext}"
            write_output(out, rendered(df, fmt, output=out))
            click.echo(f"nsysql: wrote {out}", err=True)
        else:
            got[name] = df
    if got:  # on stdout one document: a JSON object of the reports, or the sections one after another
        answer_to_stdout()
        click.echo(rendered(got, fmt), nl=False, color=True)  # as written (see emit)


def _viewed(name: str, analysis: str, got: dict):
    """The report `name` as its command prints it from the answer `got` of its analysis' view (VIEWED): the table,
    each line the command says under it said on stderr."""
    lines = [f["said"] for f in got.values() if "said" in f.columns]
    if not lines and "note" in got and "note" in got["note"].columns:
        lines = [got["note"]["note"]]
    for said in (line for col in lines for line in col):
        if said is not None:
            click.echo(f"nsysql: {name}: {said}", err=True)
    return got["table"] if "table" in got else got[analysis]


about(stats, nsys="`nsys stats -r ... -o`")
COMMANDS = (stats,)
