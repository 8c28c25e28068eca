"""The options every command shares, defined once: the output switches (`-f table|csv|json|markdown` and one flag
per format, `--wide`, `--unit`, `-o FILE`) and FILE or FILEs. Every other option is a declared analysis'
parameter (nsysql.cli.declared)."""

from __future__ import annotations

import click

from ..render import FORMATS, UNITS


def output_option(help: str | None = "Write to FILE instead of stdout."):
    """-o/--output FILE (a file, never a folder)."""
    return click.option("-o", "--output", type=click.Path(dir_okay=False), help=help)


def _remember(ctx, param, value):
    """Keep a view switch in the command's context, where output.rendered() reads it: the commands' own
    arguments stay what they answer, not how it is shown."""
    ctx.meta[f"nsysql.{param.name}"] = value
    return value


def view_options(fn):
    """--wide and --unit: how the table format shows an answer (output.rendered)."""
    fn = click.option(
        "--unit",
        type=click.Choice(list(UNITS)),
        default=None,
        expose_value=False,
        callback=_remember,
        help="Times (the *_ns columns) in this unit, in every format [default: tables pick a readable unit per "
        "table, CSV and JSON keep ns].",
    )(fn)
    return click.option(
        "--wide",
        is_flag=True,
        expose_value=False,
        callback=_remember,
        help="Tables: every column and whole names, whatever the terminal's width.",
    )(fn)


def format_option(default: str = "table", choices=FORMATS):
    """-f/--format, plus one switch per format (--table, --csv, --json, --markdown), as sqlite-utils has, and the
    view options (--wide, --unit)."""

    def deco(fn):
        fn = view_options(fn)
        for c in reversed(choices):
            fn = click.option(f"--{c}", "fmt", flag_value=c, help=f"Same as -f {c}.")(fn)
        return click.option(
            "-f",
            "--format",
            "fmt",
            type=click.Choice(choices),
            default=default,
            show_default=True,
            help="Output format.",
        )(fn)

    return deco


def table_output(formats=FORMATS):
    """The output switches of every command that answers with a table, as sqlite-utils has them: -f/--format
    (table, csv, json, markdown, and the formats a declaration adds: cpu's folded) with one switch per format,
    --wide, --unit, and -o/--output FILE."""

    def deco(fn):
        fn = output_option()(fn)
        return format_option(choices=tuple(formats))(fn)

    return deco


def output_options(fn=None, *, formats=FORMATS):
    """FILE (optional) and table_output."""

    def deco(fn):
        return click.argument("file", required=False)(table_output(formats)(fn))

    return deco(fn) if fn is not None else deco


def files_options(fn=None, *, formats=FORMATS):
    """Like output_options, but FILE may be given several times (one export per rank)."""

    def deco(fn):
        return click.argument("files", nargs=-1, metavar="[FILE]...")(table_output(formats)(fn))

    return deco(fn) if fn is not None else deco
