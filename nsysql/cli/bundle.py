"""`nsysql bundle`: the folder `nsysql profile` writes, from an .nsys-rep or SQLite export made earlier."""

from __future__ import annotations

import sys

import click

from ..render import one_line as _line
from .common import handled, load_profile
from .declared import about


@click.command()
@click.argument("file", required=False)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Folder for the summary, reports, CSVs and chart [default: nsysql-<FILE's name>].",
)
@click.option(
    "--chart",
    type=click.Choice(["auto", "png", "svg"]),
    default="auto",
    show_default=True,
    help="The top-10 kernels chart: png (needs kaleido and a Chrome), svg (drawn by nsysql), auto: png if it can.",
)
@handled
def bundle(file, out, chart):
    """Write what `nsysql profile` writes (summary.txt, report.html, report.md, kernels.csv, api.csv and a top-10
    kernels chart) into DIR from FILE, an .nsys-rep (from the Nsight Systems GUI or a colleague; exported once
    with nsys) or a SQLite export, without running the program again."""
    from ..nsys import workflow

    prof = load_profile(file)
    tty = sys.stderr.isatty()

    def progress(text: str) -> None:
        click.echo(f"\r\033[Knsysql: {_line(text)}", err=True, nl=not text.startswith("loading: "))

    res = workflow.bundle(
        prof, prof.path if file is None else file, out=out, progress=progress if tty else None, chart=chart
    )
    if tty:
        click.echo("\r\033[K", err=True, nl=False)
    click.echo(res.summary, nl=False, color=True)
    click.echo("")
    click.echo(workflow.listing(res), nl=False)
    for note in res.notes:
        click.echo(f"nsysql: note: {_line(note)}", err=True)


about(bundle, python="`nsysql.nsys.workflow.bundle(p, FILE)`")
COMMANDS = (bundle,)
