"""The commands that write files or compare profiles: report, export, trace, diff, schema, sql, profile."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import NsysqlError
from ..render import one_line as _line
from .common import folder_progress, folder_written, global_opts, handled, load_profile, with_flags
from .declared import about, declared, option, params
from .options import table_output
from .output import emit, emit_text, precious, rendered, stream_target, write_output


@click.command()
@click.argument("file", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write (HTML default: <FILE stem>.report.html, or <NEW stem>.diff.html with "
    "--baseline; Markdown default: stdout).",
)
@click.option("-f", "--format", "fmt", type=click.Choice(["html", "markdown"]), default="html", show_default=True)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    metavar="BASE",
    help="Compare FILE (NEW) against BASE and draw the comparison.",
)
@click.option(
    "--png",
    "png_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Also write each chart as DIR/<chart>.png (needs kaleido and Chrome/Chromium).",
)
# the report's options from its declaration (--range), without marking the command as the one that answers the
# analysis `report`, which declares no command: the report is drawn from it, never printed as its frames
@option(next(p for p in params("report") if p["name"] == "range"))
@handled
def report(file, output, fmt, baseline, png_dir, range):
    """A self-contained HTML report (works offline), or a PR-ready Markdown snippet with -f markdown."""
    from .. import report as _report

    # one profile's report is one stored answer (Profile.report, .snippet): a warm entry reads it without DuckDB
    prof = load_profile(file, warm=not baseline, question=None if baseline else ("report", {"range": range}))
    base = load_profile(baseline) if baseline else None
    if fmt == "markdown":
        text = _report.diff_snippet(base, prof, range=range) if base else _report.snippet(prof, range=range)
        emit_text(text, output)
        return
    page, figures = _report.build_diff(base, prof, range=range) if base else _report.build(prof, range=range)
    out = Path(output or f"{prof.path.stem}.{'diff' if base else 'report'}.html")
    write_output(out, page)
    click.echo(f"nsysql: wrote {out} ({len(page) / 2**20:.1f} MiB, {len(figures)} charts)", err=True)
    if png_dir:
        try:
            got = _report.write_pngs(figures, Path(png_dir))
        except NsysqlError as e:  # about the chart it was writing, which it names, not about the export
            click.echo(f"nsysql: error: {_line(str(e))}", err=True)
            sys.exit(2)
        if isinstance(got, str):
            click.echo(f"nsysql: {got}", err=True)
        else:
            click.echo(f"nsysql: wrote {len(got)} PNG files to {png_dir}", err=True)


@click.command()
@click.argument("file", required=False)
@declared("export")
@handled
def export(file, to, format):
    """Write the canonical tables as Parquet or CSV, with a README.md describing every column."""
    written = load_profile(file).export(to, format=format)
    click.echo(rendered(written, "table"), nl=False)
    click.echo(f"nsysql: wrote {written.height} tables and README.md to {to}", err=True)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@declared("profile")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[-- NSYS OPTIONS] -- COMMAND [ARGS]...")
@handled
def profile(out, gpu_metrics, cpu, nsys, chart, args):
    """Run COMMAND under nsys (CUDA, NVTX, OS runtime, CUDA graphs node by node), export it, and write the summary,
    report.html, report.md, kernels.csv, api.csv and a top-10 kernels chart into DIR.

    Exits with COMMAND's exit status. Options for nsys go between two `--`:
    nsysql profile --out run -- --duration=60 -- python3 train.py"""
    from ..nsys import workflow

    options, command = workflow.split_args(list(args))
    opts = global_opts()
    try:
        res = workflow.profile(
            command,
            out=out,
            gpu_metrics=gpu_metrics,
            nsys=nsys or opts.get("nsys"),
            nsys_options=options,
            cache_dir=opts.get("cache_dir"),
            progress=folder_progress(),
            chart=chart,
            cpu=cpu,
        )
    except workflow.NoExport as e:  # the program's status (Ctrl-C, a crash) rather than 2, when it failed
        click.echo(f"nsysql: error: {_line(str(e))}", err=True)
        sys.exit(e.status or 2)
    folder_written(res, workflow.listing(res))
    if res.status:
        click.echo(f"nsysql: the profiled program exited with status {res.status}", err=True)
    sys.exit(res.status)


@click.command()
@click.argument("file", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write the trace [default: <FILE stem>.trace.json].",
)
@declared("trace")
@handled
def trace(file, output, window, iterations, range):
    """A Chrome/Perfetto trace (JSON) of the profile: GPU work per device and stream, CUDA API calls and NVTX
    ranges per thread, and nsysql's iterations and idle gaps (with their cause) as tracks. Open it in
    https://ui.perfetto.dev or chrome://tracing; --iterations or --window keep a large profile's trace small."""
    from .. import perfetto

    prof = load_profile(file)
    tables = prof.trace(window=window, iterations=iterations, lazy=True, range=range)  # streamed as written
    out = Path(output or f"{Path(prof.path).stem}.trace.json")
    if precious(out):
        raise NsysqlError(f"{out}: is {precious(out)}; nsysql does not write its output over it (name another -o file)")
    from .. import store

    got: dict = {}
    store.output(out, lambda tmp: got.update(perfetto.write(tables, tmp, source=str(prof.path))))
    size = "" if stream_target(out) else f"{out.stat().st_size / 2**20:.1f} MiB, "  # a pipe has no size to tell
    click.echo(f"nsysql: wrote {out} ({size}{got['said']})", err=True)


@click.command()
@click.argument("base")
@click.argument("new")
@table_output()
@declared("diff")
@handled
def diff(base, new, fmt, output, fail_above, range):
    """Compare two profiles (BASE, then NEW): iteration time, GPU busy, idle causes, ranges, kernels, verdict."""
    res = load_profile(base).diff(load_profile(new), fail_above=fail_above, range=range)
    emit(res.to_frames(), fmt, output)
    if res.over_limit:
        click.echo(f"nsysql: {with_flags(NsysqlError(res.over_limit, option='fail_above'))}", err=True)
        sys.exit(res.exit_status)


@click.command()
@click.argument("table", required=False)
@table_output()
@handled
def schema(table, fmt, output):
    """The canonical tables (schema v1) and what each column means: what `nsysql sql` and `export` give you."""
    from ..export import schema_table

    # descriptions run to 1,400 characters: wrapped, at the terminal's width or SCHEMA_WIDTH in a pipe
    emit_text(rendered(schema_table(table), fmt, output=output, fallback=SCHEMA_WIDTH), output)


SCHEMA_WIDTH = 120


@click.command(name="sql")
@click.argument("args", nargs=-1, required=True, metavar="[FILE] QUERY")
@table_output()
@handled
def sql_(args, fmt, output):
    """Run QUERY over the canonical tables (gpu_ops, api_calls, nvtx_ranges, op_ranges, ...)."""
    if len(args) > 2:
        raise NsysqlError("give FILE and one QUERY (quote the query)")
    file, query = (None, args[0]) if len(args) == 1 else args
    emit(_interruptible(load_profile(file), query), fmt, output)


def _interruptible(prof, query: str):
    """prof.sql(query), run on a thread of its own while this (the main) thread waits, so that a Ctrl-C is
    delivered here at once, whatever DuckDB or polars are doing: the query is then stopped (DuckDB's interrupt,
    repeated until it takes, for at most INTERRUPT_WAIT_S) and the KeyboardInterrupt goes on to run(), which
    says `nsysql: interrupted` and exits 130."""
    import threading
    import time

    box: dict = {}

    def work():
        try:
            box["result"] = prof.sql(query)
        except BaseException as e:  # raised again on the main thread
            box["error"] = e

    t = threading.Thread(target=work, name="nsysql-sql", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
    except KeyboardInterrupt:
        deadline = time.monotonic() + INTERRUPT_WAIT_S
        while t.is_alive() and time.monotonic() < deadline:
            prof.interrupt()  # again: the first may come before the query has begun
            t.join(0.1)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


INTERRUPT_WAIT_S = 5  # after a Ctrl-C, how long a query may take to stop before nsysql leaves without it


about(report, python="`p.report()`")
about(diff, python="`p.diff(q)`")
about(sql_, python="`p.sql(q)`")
about(schema, python="`nsysql.export.schema_table()`")
about(profile, python="`nsysql.nsys.workflow.profile(cmd)`", nsys="`nsys profile`")
COMMANDS = (report, export, profile, trace, diff, schema, sql_)
