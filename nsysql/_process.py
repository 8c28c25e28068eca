"""How the `nsysql` executable leaves (nsysql.tuning's `fast_exit`).

How the executable leaves: once a command is done (its output flushed, a cold load's cache entry on disk,
DuckDB's spill files of this process deleted), `leave` ends the process with `os._exit`, skipping the
interpreter's teardown. That teardown frees DuckDB's and polars' objects one by one for memory the operating
system takes back anyway, and it is a large part of a command answered from the cache; nothing is lost by
skipping it, because everything a command leaves behind is written before `leave` is called, and the export is
only ever read.

NSYSQL_NO_TUNING=1 (or =fast_exit) turns it off: the process then leaves through `sys.exit`, as any Python program does (the
way to rule the shortcut out when something at exit looks wrong). Library use (`nsysql.load`, click's
CliRunner) never goes through here.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """End the `nsysql` process with exit status `code`, once its output and cache entries are complete."""
    from . import tuning
    from .store import tables

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (nsysql ... | head): what is left unwritten goes nowhere,
            try:  # not into a second error when the interpreter flushes it again on the way out
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass
    tables.wait()  # a cold load's entry still on its way to disk
    tables.remove_spill_files()
    if tuning.on("fast_exit"):
        os._exit(code)
    sys.exit(code)
