"""`nsysql cpu`: where CPU time went, from CPU samples, as a table or as flame-graph folded stacks."""

from __future__ import annotations

import click

from ..render import FORMATS
from .common import handled, load_profile
from .declared import about
from .options import format_option, output_option
from .output import emit, emit_text


@click.command()
@click.argument("file", required=False)
@format_option(choices=(*FORMATS, "folded"))
@output_option()
@click.option(
    "--during",
    metavar="WHEN",
    help="Only samples taken during: gaps (GPU idle gaps >= 1 ms), 'iterations A:B' or 'range PATTERN' "
    "[default: the whole profile].",
)
@click.option(
    "--by",
    type=click.Choice(["function", "module", "thread", "process", "python"]),
    default="function",
    show_default=True,
    help="One row per leaf function, module, thread or process; python: per place in the Python samples "
    "(nsys profile --python-sampling=true, exported with --include-blobs=true) and thread.",
)
@click.option("--top", type=click.IntRange(min=0), default=None, help="Only the first N rows.")
@handled
def cpu(file, fmt, output, during, by, top):
    """Where CPU time went, from CPU samples (nsys profile -s process-tree); -f folded writes folded stacks
    (`frame;frame;leaf N`) that flame-graph tools read."""
    prof = load_profile(file)
    if fmt == "folded":
        stacks = prof.cpu(during=during, by="stack", top=top)
        # as flame-graph tools read them: one `frame;frame;leaf N` line per stack
        emit_text("".join(f"{s} {n}\n" for s, n in stacks.select("stack", "samples").iter_rows()), output)
        return
    emit(prof.cpu(during=during, by=by, top=top), fmt, output)


about(cpu, python="`p.cpu()`")
COMMANDS = (cpu,)
