"""`nsysql bundle`: the folder `nsysql profile` writes, from an .nsys-rep or SQLite export made earlier."""

from __future__ import annotations

import click

from .common import folder_progress, folder_written, handled, load_profile
from .declared import about, declared


@click.command()
@click.argument("file", required=False)
@declared("bundle")
@handled
def bundle(file, out, chart):
    """Write what `nsysql profile` writes (summary.txt, report.html, report.md, kernels.csv, api.csv and a top-10
    kernels chart) into DIR from FILE, an .nsys-rep (from the Nsight Systems GUI or a colleague; exported once
    with nsys) or a SQLite export, without running the program again."""
    from ..nsys import workflow

    prof = load_profile(file)
    res = workflow.bundle(prof, prof.path if file is None else file, out=out, progress=folder_progress(), chart=chart)
    folder_written(res, workflow.listing(res))


about(bundle, python="`nsysql.nsys.workflow.bundle(p, FILE)`")
COMMANDS = (bundle,)
