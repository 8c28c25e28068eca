"""What every command shares: the global options, loading FILE, the option decorators and the error wrapper.

Problems with the input end in one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from pathlib import Path

import click

from .. import store as _store
from ..errors import NsysqlError, one_line
from ..render import one_line as _line
from ..store import tables as _tables
from .output import clear_progress, progress_line, refuse_precious


def global_opts() -> dict:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return (root.obj or {}) if root else {}


def state_dir() -> Path:
    from .. import discover

    return discover.state_dir(global_opts().get("cache_dir"))


_loaded: list[str] = []  # the exports this command loaded


def load_profile(file: str | None, warm: bool = False, question: tuple[str, dict] | list | None = None):
    """The Profile of FILE (or the one picked: discover.pick_profile); `warm`: for a command that prints
    answers, a cache entry in place gives a cli.warm.Stored, which reads stored answers without the Profile.
    `question`: the (analysis, parameters) the command asks first, or a list of them (`stats`): a cold load reads
    what they read in its first pass (nsysql._load.opened)."""
    from .. import _load, discover

    path, why = discover.pick_profile(file, global_opts().get("cache_dir"))
    if why:
        click.echo(f"nsysql: using {path} ({why})", err=True)
    _loaded.append(path)  # for error messages of commands whose FILE is optional (sql)
    opts = global_opts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _store.CacheWarning)
        prof = _load.opened(
            path,
            _warm if warm else _load.facade,
            cache=not opts.get("no_cache"),
            cache_dir=opts.get("cache_dir"),
            progress=_progress(path) if sys.stderr.isatty() else None,
            nsys=opts.get("nsys"),
            cache_max=opts.get("cache_max"),
            question=question,
        )
    clear_progress()
    for w in caught:
        click.echo(f"nsysql: warning: {_line(str(w.message))}", err=True)
    discover.remember(path, opts.get("cache_dir"))
    return prof


def _warm(opened):
    """A warm entry's Stored (nsysql.cli.warm), else the Profile."""
    from .. import _load
    from .warm import Stored

    return Stored(opened, _load.facade) if opened.con is None and opened.entry is not None else _load.facade(opened)


def _progress(path):
    def show(step: str) -> None:
        progress_line(f"nsysql: loading {Path(path).name}: {step}")

    return show


def handled(fn):
    """Turn NsysqlError (and database errors) into one stderr line and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _loaded.clear()
        # a warning raised while the command runs (a cache write that fails after the load, in the background
        # copy, NSYSQL_THREADS cut down) is said in one line, as errors are, once the command is done
        with warnings.catch_warnings(record=True) as caught:
            try:
                return _run(fn, args, kwargs, getattr(wrapper, "__nsysql_declared__", ()))
            finally:
                for w in caught:
                    click.echo(f"nsysql: warning: {_line(str(w.message))}", err=True)

    return wrapper


def _cleared(fn, args, kwargs):
    """fn(*args, **kwargs), the progress line taken away as it ends, however: a message comes on a line of its own."""
    try:
        return fn(*args, **kwargs)
    finally:
        clear_progress()


def _run(fn, args, kwargs, declared=()):
    """fn(*args, **kwargs), the options of the `declared` analyses checked first; its NsysqlError (and database
    errors) said in one stderr line, exit code 2."""
    try:
        _check(declared, kwargs)
        refuse_precious(kwargs.get("output"))  # `-o run.sqlite` by mistake: said before the load, not after it
        return _cleared(fn, args, kwargs)
    except NsysqlError as e:  # its text may quote the export's names: control characters shown, one line
        click.echo(f"nsysql: error: {_line(_naming_files(with_flags(e)))}", err=True)
        sys.exit(2)
    except MemoryError:
        click.echo(
            "nsysql: error: out of memory (set NSYSQL_MEMORY_LIMIT, e.g. 4GB, or NSYSQL_THREADS lower)", err=True
        )
        sys.exit(2)
    except KeyboardInterrupt:  # Ctrl-C: said here, before click's Abort adds a blank line and "Aborted!"
        click.echo("nsysql: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:  # writing -o/--to somewhere impossible
        click.echo(f"nsysql: error: {e.filename or ''}: {e.strerror or e}", err=True)
        sys.exit(2)
    except Exception as e:
        if not type(e).__module__.startswith(("duckdb", "_duckdb")):
            raise
        files = (
            kwargs.get("file")
            or ", ".join(map(str, kwargs.get("files") or ()))
            or ", ".join(map(str, _loaded))
            or "(no file)"
        )
        click.echo(f"nsysql: error: {_line(files)}: query failed: {_line(one_line(e))}", err=True)
        sys.exit(2)
    finally:
        # the answer is out; a cold load's cache entry may still be on its way to disk: wait for it here
        # (the process would at exit anyway), so a command always leaves its entry in place
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        _tables.wait()


def _check(declared: tuple[str, ...], given: dict) -> None:
    """Each option of the analyses `declared` (nsysql.cli.declared) whose parameter has a normalize function, and
    that is given a value other than the command line's default, normalized as the declaration will: a value it
    refuses is said (NsysqlError, about that option) before any export is opened, not after a load with FILE in
    front. A default needs no check, nor the declarations' import (a warm command reads none)."""
    from .manifest import DECLARED

    todo = [
        (a, p["name"])
        for a in declared
        for p in DECLARED[a]["params"]
        if p.get("normalize") and given.get(p["name"]) not in (None, p.get("default"))
    ]
    if not todo:
        return
    from ..engine import ENTRY_POINTS, REGISTRY
    from ..profile import Profile  # noqa: F401 (its import declares every analysis)

    for a, name in todo:
        decl = REGISTRY.get(a)
        for p in decl.params if decl else ENTRY_POINTS.get(a, ()):
            if p.name == name:
                p.normalize(given[name])


def with_flags(e: NsysqlError) -> str:
    """The error's message with each argument it is about (written `` `window` `` by the library, or
    `` `by=kind` `` with its value) named by this command's flag (`--window`, `` `--by kind` ``; a declared
    parameter's option carries its name: nsysql.cli.declared). An argument this command has no flag for stays as
    the library wrote it."""
    text = str(e)
    ctx = click.get_current_context(silent=True)
    if not e.options or ctx is None:
        return text
    for option in e.options:
        flags = [o for p in ctx.command.params if p.name == option for o in p.opts if o.startswith("--")]
        if flags:
            text = text.replace(f"`{option}`", flags[0]).replace(f"`{option}=", f"`{flags[0]} ")
    return text


def _naming_files(message: str) -> str:
    """An error about the exports loaded (an analysis that does not apply, a --range that matches nothing) with
    their paths in front, unless it names them already."""
    if not _loaded or any(str(p) in message or os.path.basename(str(p)) in message for p in _loaded):
        return message
    return f"{', '.join(dict.fromkeys(map(str, _loaded)))}: {message}"


def several(files: tuple[str, ...]) -> bool:
    """Several exports: more than one FILE, or a quoted glob (`'rank*.sqlite'`) for nsysql to expand."""
    return len(files) > 1 or bool(files and _is_glob(files[0]))


def _is_glob(path: str) -> bool:
    """many.is_glob, without importing polars before the load (see _load.py): an existing path is that path,
    whatever it is called (`run[1].sqlite`, `what?.sqlite`)."""
    return any(c in path for c in "*?[") and not os.path.lexists(os.path.expanduser(path))


def ranked(files: tuple[str, ...]) -> tuple[list, list[int]]:
    """Each export of FILEs (globs expanded) loaded, and its rank (numbered as `nsysql ranks` does, said on
    stderr): what an answer across ranks (nsysql.many) is asked of."""
    from ..many import expand, number

    profs = [load_profile(p) for p in expand(list(files))]
    ranks, said = number(profs, list(files))
    click.echo(f"nsysql: {said}", err=True)
    return profs, ranks


def each_rank(files: tuple[str, ...], method: str, **kwargs):
    """Run Profile.<method> on each export, stacked with a `rank` column (numbered as `nsysql ranks` does)."""
    from ..many import stack

    return stack(*ranked(files), method, **kwargs)


def folder_progress():
    """The progress line of `profile` and `bundle` on a terminal's stderr (None for a pipe): each step replaces
    the last; a loading step stays on its line."""
    if not sys.stderr.isatty():
        return None

    def progress(text: str) -> None:
        click.echo(f"\r\033[Knsysql: {_line(text)}", err=True, nl=not text.startswith("loading: "))

    return progress


def folder_written(res, listing: str) -> None:
    """What `profile` and `bundle` print once their folder is written: the summary, the files, the notes."""
    if sys.stderr.isatty():
        click.echo("\r\033[K", err=True, nl=False)
    click.echo(res.summary, nl=False, color=True)
    click.echo("")
    click.echo(listing, nl=False)
    for note in res.notes:
        click.echo(f"nsysql: note: {_line(note)}", err=True)
