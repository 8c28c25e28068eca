"""`nsysql cache info|clear`: the store's own API, rendered."""

from __future__ import annotations

import click

from ..store import tables as _tables
from .common import handled, state_dir
from .options import table_output
from .output import emit


@click.group()
def cache():
    """Inspect or empty the cache of loaded profiles."""


@cache.command("info")
@table_output()
@handled
def cache_info(fmt, output):
    """Entries in the cache: the export each was loaded from, and size."""
    df, line = _tables.info(state_dir())
    click.echo(line, err=True)
    emit(df, fmt, output)


@cache.command("clear")
@handled
def cache_clear():
    """Delete every cached profile: only what nsysql stored there, whatever else the directory holds."""
    d = state_dir()
    n = _tables.clear(d)
    click.echo(f"removed {n} cache entries from {d}")


COMMANDS = (cache,)
