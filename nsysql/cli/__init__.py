"""The `nsysql` command line: one command per Profile method, the same output switches everywhere.

This module holds the click group (`main`) and the executable (`run`); the commands live by family in
`tables` (answers as tables: with `cpu` and `collectives`, written in modules of their own), `files` (reports, exports, traces, diffs, SQL, `profile`), `stats` (several
reports at once) and `admin` (`cache`), the shared options in `options`, where answers go in `output`, and
loading and errors in `common`. Each command parses its options, calls the Profile (or the store, for `cache`)
and renders. Problems with the input end in one line on stderr and exit code 2, never a traceback.

A new analysis gets its command from its declaration (nsysql.analyses.catalog): each parameter is an option
(its Flag says a spelling other than `--<name>`, its doc is the help), derived by `declared`: add one entry to a
family's COMMANDS, `answer("name", "analysis", "What it answers.")` for a command that prints the Profile
method's frame (FILEs with `files=True`; it is then also a report of `nsysql stats`), or `@declared("analysis")`
over a function of its own; then run `python scripts/readme_commands.py`, which writes the declarations the
CLI reads (cli/declared.json) and README's command table.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from .. import store as _store
from ..errors import NsysqlError, utf8_path
from . import admin, bundle, files, stats, tables
from .output import standard_streams


def run() -> None:
    """The `nsysql` executable: main(), then leave as _process says (at once, unless NSYSQL_NO_TUNING=1)."""
    from .. import _process

    standard_streams()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:  # Ctrl-C anywhere (a load, an import): one line, as a shell reports SIGINT
        click.echo("nsysql: interrupted", err=True)
        code = 130
    if isinstance(code, str):
        click.echo(code, err=True)
        code = 1
    _process.leave(code or 0)


class _Group(click.Group):
    """click's group, with a usage error (an unknown option, a bad choice, -o naming a folder) said in one line
    on stderr, as every other error is, instead of usage, hint and error on three."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # plain `nsysql`: the help, as click shows it
                e.show()
                sys.exit(e.exit_code)
            where = e.ctx.command_path if e.ctx else "nsysql"
            click.echo(f"nsysql: error: {e.format_message()} (`{where} --help` lists the options)", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort as e:
            if isinstance(e.__context__, KeyboardInterrupt):  # click's word for a Ctrl-C: said as run() says it
                click.echo("nsysql: interrupted", err=True)
                sys.exit(130)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsysql")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="NSYSQL_CACHE_DIR",
    help="Where loaded profiles are cached [default: $NSYSQL_CACHE_DIR, $XDG_CACHE_HOME/nsysql or ~/.cache/nsysql].",
)
@click.option("--no-cache", is_flag=True, help="Load the export afresh and store no cache entry or answer.")
@click.option(
    "--cache-max",
    metavar="SIZE",
    envvar="NSYSQL_CACHE_MAX",
    help="The most the cache keeps (10GB, 500MB, 2GiB, or none); least recently used profiles go first "
    "[default: $NSYSQL_CACHE_MAX or 10GB].",
)
@click.option(
    "--nsys",
    "nsys_path",
    metavar="PATH",
    help="The nsys that exports an .nsys-rep FILE [default: $NSYS, PATH, then the Nsight Systems/Compute folders].",
)
@click.pass_context
def main(ctx, cache_dir, no_cache, cache_max, nsys_path):
    """Answers about Nsight Systems SQLite exports (nsys 2020 to 2026).

    FILE is an export made with `nsys profile --export=sqlite` or `nsys export --type sqlite`, or an .nsys-rep
    report (exported once into the cache with nsys). `nsysql profile -- python3 train.py` makes one. When it is
    left out: $NSYSQL_PROFILE, else the only .sqlite file here, else the profile analysed last.
    """
    if cache_dir is not None:
        try:
            utf8_path(cache_dir)
        except NsysqlError as e:  # said as a usage error: one line, before any command runs
            raise click.BadParameter(str(e), param_hint="--cache-dir / $NSYSQL_CACHE_DIR") from None
    try:
        _store.cap(cache_max, what="")
    except NsysqlError as e:
        raise click.BadParameter(str(e), param_hint="--cache-max / $NSYSQL_CACHE_MAX") from None
    ctx.obj = {"cache_dir": cache_dir, "no_cache": no_cache, "cache_max": cache_max, "nsys": nsys_path}


for _module in (admin, tables, files, stats, bundle):
    for _command in _module.COMMANDS:
        main.add_command(_command)


if __name__ == "__main__":
    main()
