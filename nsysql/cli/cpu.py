"""`nsysql cpu`: where CPU time went, from CPU samples, as a table or as flame-graph folded stacks."""

from __future__ import annotations

import click

from .common import handled, load_profile
from .declared import DECLARED, declared, formats
from .options import output_options
from .output import emit, emit_text


@click.command()
@output_options(formats=formats("cpu"))
@declared("cpu")
@handled
def cpu(file, fmt, output, **params):
    """Where CPU time went, from CPU samples (nsys profile -s process-tree; per thread or process, scheduling
    events alone measure it); -f folded writes folded stacks (`frame;frame;leaf N`) that flame-graph tools read."""
    prof = load_profile(file, question=("cpu", params))
    if fmt == "folded":  # the stacks (asked as the declaration says), one `frame;frame;leaf N` line each
        stacks = prof.cpu(**{**params, **DECLARED["cpu"]["formats"]["folded"]})
        emit_text("".join(f"{s} {n}\n" for s, n in stacks.select("stack", "samples").iter_rows()), output)
        return
    emit(prof.cpu(**params), fmt, output)
    by = params.get("by")
    if by in (None, "thread", "process") and (note := prof.cpu_note(by=by)):  # measured without samples
        click.echo(f"nsysql: note: {note}", err=True)
