"""Commands derived from the analyses' declarations: each parameter of a declared analysis (nsysql.engine.declare)
becomes an option of the command that asks it: `--<name with dashes>` (or its Flag's spelling), its type,
default and choices (or those its Flag says the command line offers: collectives' `--by rank`), its doc as the
help. A declaration's own output formats (cpu's `folded`) join -f (`formats`); an entry point that is not an
analysis declares its parameters the same way (load_many's `--dask`, `--workers`: nsysql.engine.entry_point).

The declarations are read from declared.json (nsysql.cli.manifest), which `python scripts/readme_commands.py`
writes from the registry (nsysql.analyses.catalog), with README's command table; `--check` and
tests/test_readme_commands.py fail when either is stale.

A new analysis gets its command from one entry in a family's COMMANDS: `answer("name", "analysis", "What it
answers.")` (FILEs with `files=True`) for a command that prints the Profile method's frame, or
`@declared("analysis")` over a function of its own, which takes the analysis' options as keyword arguments.
"""

from __future__ import annotations

import click

from ..render import FORMATS
from .common import each_rank, handled, load_profile, several
from .manifest import DECLARED
from .options import files_options, output_options
from .output import emit
from .warm import emit_answer


def params(analysis: str) -> list[dict]:
    """The command-line parameters of a declared analysis, in declared order (see scripts/readme_commands.py)."""
    return DECLARED[analysis]["params"]


def option(p: dict):
    """The click option of one declared parameter."""
    decls = [d for d in (p.get("short"), p["flag"]) if d]
    help, kind = p.get("help") or None, p["kind"]
    if kind == "flag":
        return click.option(*decls, p["name"], is_flag=True, default=False, help=help)
    if kind == "switch":  # True, False, or None: the analysis decides
        flag = p["flag"][2:]
        return click.option(f"--{flag}/--no-{flag}", p["name"], default=None, help=help)
    if kind == "choice":
        typ = click.Choice(p["choices"])
    elif kind == "path":
        typ = click.Path(file_okay=p["path"] != "dir", dir_okay=p["path"] != "file")
    elif kind in ("int", "float") and ("minimum" in p or "maximum" in p):
        bounds = {"min": p.get("minimum"), "max": p.get("maximum"), "min_open": p.get("min_open", False)}
        typ = click.IntRange(**bounds) if kind == "int" else click.FloatRange(**bounds)
    else:
        typ = {"int": click.INT, "float": click.FLOAT, "str": click.STRING}[kind]
    default = p.get("default")
    return click.option(
        *decls,
        p["name"],
        type=typ,
        default=default,
        required=p.get("required", False),
        show_default=default is not None,
        metavar=p.get("metavar"),
        help=help,
    )


def formats(analysis: str) -> tuple[str, ...]:
    """The output formats of the command of `analysis`: the tables' and those its declaration adds."""
    return (*FORMATS, *DECLARED[analysis].get("formats", {}))


def declared(analysis: str, *more: str, answers: str | None = None, report: bool = False):
    """Decorator: the options of `analysis` or of an entry point (ranks: load_many's), then of each of `more`
    (collectives takes collective_findings' --slow-ratio), and the command marked as the front end of `answers` (by default the same analysis; `gaps`
    takes gap_activity's options, a superset of gaps'); `report`: its analysis' frame is one of `nsysql stats`'
    reports (nsysql.cli.stats)."""

    def deco(fn):
        for p in reversed([p for a in (analysis, *more) for p in params(a)]):
            fn = option(p)(fn)
        fn.__nsysql_declared__ = (analysis, *more)  # whose values cli.common checks before any load
        if DECLARED[analysis].get(
            "entry"
        ):  # an entry point's parameters (load_many's): the command answers no analysis
            return fn
        fn.__nsysql_analysis__ = answers or analysis
        fn.__nsysql_report__ = report
        return fn

    return deco


def analysis_of(cmd: click.Command) -> str | None:
    """The declared analysis a command answers with, or None."""
    return getattr(cmd.callback, "__nsysql_analysis__", None) if cmd.callback else None


def about(cmd: click.Command, python: str = "", nsys: str = "") -> None:
    """What README's command table says of a command that no declared analysis answers, or whose several FILEs
    have a Python function of their own: its Python counterpart and nsys's (scripts/readme_commands.py reads
    them; a declared analysis' nsys counterpart comes first)."""
    cmd.python, cmd.nsys = python, nsys


def answer(name: str, analysis: str, doc: str, *, files: bool = False) -> click.Command:
    """The command `name` that prints Profile.<analysis>(options) for FILE (or each of FILEs, stacked with a
    `rank` column, with `files`), its options derived from the declaration, `doc` its help."""
    names = [p["name"] for p in params(analysis)]

    def run(fmt, output, **kwargs):
        chosen = {k: kwargs[k] for k in names}
        paths = kwargs.get("files") if files else (kwargs.get("file"),)
        if files and several(paths):
            emit(each_rank(paths, analysis, **chosen), fmt, output)
            return
        prof = load_profile(paths[0] if paths else None, warm=True, question=(analysis, chosen))
        emit_answer(prof, analysis, chosen, fmt, output)

    run.__doc__ = doc
    run.__name__ = name.replace("-", "_")
    fn = handled(run)
    fn = declared(analysis, report=True)(fn)
    fn = (files_options if files else output_options)(fn)
    return click.command(name, help=doc)(fn)
