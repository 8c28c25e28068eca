"""Where answers go: stdout or `-o FILE` (never over an export), in one of render's formats, and what the
executable does with its standard streams."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import NsysqlError
from ..filekind import QDSTRM_MAGIC, REPORT_SUFFIXES, SQLITE_MAGIC, ZIP_MAGIC, special_file
from ..render import render


def write_output(output: str | Path, text: str) -> None:
    """Write an output file, never over an export: `-o run.sqlite` by mistake must not destroy the profile."""
    p = Path(output)
    if stream_target(p):  # a pipe, a terminal, /dev/stdout: written in place, as a stream (no file to replace)
        try:
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        except BrokenPipeError:  # the reader went away (`-o >(head -1)`): as for stdout, nothing more to say
            raise
        except OSError as e:  # a write error has no file name of its own
            raise NsysqlError(f"cannot write to it ({e.strerror or e})", str(output)) from None
        return
    refuse_precious(output)
    from .. import store

    store.output_text(p, text)  # whole or not at all: a failed write leaves the file there as it was


def refuse_precious(output: str | Path | None) -> None:
    """NsysqlError where `-o output` names an export or a report (`precious`): said before the export is loaded,
    and again just before writing (the file may have appeared meanwhile)."""
    what = precious(Path(output)) if output else None
    if what:
        raise NsysqlError(f"{output}: is {what}; nsysql does not write its output over it (name another -o file)")


def stream_target(p: Path) -> bool:
    """Whether `-o p` names something that exists and is not a regular file: a FIFO, `/dev/stdout` or a process
    substitution (`>(gzip > x.gz)`) on a pipe, a terminal. Told by stat alone: it is never opened to be read (a
    pipe opened for reading waits for a writer, which nsysql itself would be: a deadlock), and it holds no
    export to protect."""
    return bool(special_file(p)) and not p.is_dir()


def precious(p: Path) -> str | None:
    """What `p` is when nsysql must not write over it: an Nsight Systems report, by its name in any case
    (`rep.NSYS-REP`) or by its first bytes, or a SQLite database (an export) by its header. None otherwise."""
    if p.suffix.lower() in REPORT_SUFFIXES:
        return "an Nsight Systems report"
    if stream_target(p):  # not a file that could hold one, and never opened for reading (see stream_target)
        return None
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except OSError:  # not there yet (or unreadable: the write says why)
        return None
    if head.startswith(SQLITE_MAGIC):
        return "a SQLite database"
    # a zip or a QDSTRM stream: how reports begin (no text output of nsysql does)
    if head.startswith(ZIP_MAGIC) or QDSTRM_MAGIC in head:
        return "an Nsight Systems report"
    return None


def terminal_width() -> int | None:
    """The width tables fit: $COLUMNS when set, else the terminal's when stdout is one; None (no fitting) for a
    pipe or a file, whose reader may want every column."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    try:
        if sys.stdout.isatty():
            import shutil

            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):  # a replaced or closed stdout
        pass
    return None


# what a command's answer lists, where its name does not say (an empty answer prints `no <this>`)
# and the option that bounds what it lists, where one does (formatted with the command's options as given)
_LISTS = {
    "sql": "rows",
    "kernels-by-range": "kernels in these ranges",
    "info": "rows",
    "gaps": "gaps of at least {min_ns} (--min sets the shortest)",
}


def rendered(
    result,
    fmt: str,
    title: str | None = None,
    output: str | None = None,
    fallback: int | None = None,
    what: str | None = None,
) -> str:
    """render() with the command's view switches (--wide, --unit: options.view_options), fitted to the terminal
    (`fallback` characters where there is none: a pipe) unless written to a file (-o), and the command's name for
    an empty answer's sentence (`no gaps`; `what`: what the answer lists where the command's name or _LISTS does
    not say it, formatted with the command's options as _LISTS' entries are)."""
    return render(result, **view(fmt, title, output, fallback, what))


def view(
    fmt: str,
    title: str | None = None,
    output: str | None = None,
    fallback: int | None = None,
    what: str | None = None,
) -> dict:
    """Every argument of render() but the result, as `rendered` gives them for this command (`what`: as there):
    what, with the answer, decides the text printed (nsysql.cli.warm keys a printed answer by it)."""
    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx else {}
    what = what or (_LISTS.get(ctx.info_name, ctx.info_name) if ctx and ctx.info_name and ctx.parent else None)
    return {
        "fmt": fmt,
        "title": title,
        "width": None if output else terminal_width() or fallback,
        "unit": meta.get("nsysql.unit"),
        "what": what.format_map(ctx.params if ctx else {}) if what else None,
        "wide": bool(meta.get("nsysql.wide")),
    }


def fitted(text: str, output: str | None = None) -> str:
    """Lines of prose (a note under a table) wrapped at the terminal's width, as rendered() fits tables."""
    ctx = click.get_current_context(silent=True)
    width = None if output or (ctx and ctx.meta.get("nsysql.wide")) else terminal_width()
    if not width:
        return text
    import textwrap

    return "\n".join(textwrap.fill(line, width, break_on_hyphens=False) if line else "" for line in text.split("\n"))


def emit(result, fmt: str, output: str | None, title: str | None = None) -> None:
    text = rendered(result, fmt, title, output)
    if output:
        write_output(output, text)
    else:
        answer_to_stdout()
        # color=True: as written, never with click's ANSI stripping (off a terminal it would take escape sequences
        # out of a name in CSV or JSON; table output has shown them as text already)
        click.echo(text, nl=False, color=True)


def emit_text(text: str, output: str | None) -> None:
    if output:
        write_output(output, text)
    else:
        answer_to_stdout()
        click.echo(text, nl=False, color=True)  # as written (see emit)


# What the executable does with its standard streams (run() sets it up; CliRunner and library use never see it):
# - one closed when nsysql starts (`>&-`, `2>&-`, a daemon) is opened on the null device, so that no file
#   nsysql opens later takes its descriptor and gets text meant for the terminal;
# - stdout closed: an answer meant for it (no -o) has nowhere to go: one line on stderr, exit 2 (quietly, when
#   stderr is closed too); with -o the answer is written and the exit status is 0;
# - stderr closed: its messages are dropped; the exit status is what it would be;
# - text the output's encoding cannot hold (a Latin-1 or ASCII locale, PYTHONIOENCODING) degrades: "…" as
#   "...", other characters as escapes (`\u2192`, `\xe9` for a byte of a file name that is not UTF-8).
_closed: set[str] = set()  # "stdout", "stderr": closed when the process started
_PLAIN = {"…": "...", "–": "-", "—": "-", "→": "->", "µ": "u", "Δ": "delta ", "²": "^2", "√": "sqrt", "·": "*"}


def standard_streams() -> None:
    import codecs

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        _closed.add(name)
        try:
            os.fstat(fd)  # taken meanwhile (nothing of nsysql's has run yet): left as it is
        except OSError:
            new = os.open(os.devnull, os.O_RDWR)
            if new != fd:
                os.dup2(new, fd)
                os.close(new)
        setattr(sys, name, open(os.devnull, "r" if fd == 0 else "w", encoding="utf-8"))
    codecs.register_error("nsysql-plain", _plain)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="nsysql-plain")
            except (OSError, ValueError):
                pass


def _plain(e: UnicodeError) -> tuple[str, int]:
    """The codec error handler of stdout and stderr: what an encoding cannot hold, in plain ASCII."""
    if not isinstance(e, UnicodeEncodeError):
        raise e
    out = []
    for c in e.object[e.start : e.end]:
        if c in _PLAIN:
            out.append(_PLAIN[c])
        elif 0xDC80 <= ord(c) <= 0xDCFF:  # a byte of a path that is not UTF-8, as Python decodes it
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        else:
            out.append(
                f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
            )
    return "".join(out), e.end


_PROGRESS = [False]  # a loading line is on stderr's terminal line, with no newline (nsysql.cli.common._progress)


def progress_line(text: str) -> None:
    """Show `text` as the one progress line on stderr (a terminal), in place of the one shown before."""
    click.echo(f"\r\033[K{text}", err=True, nl=False)
    _PROGRESS[0] = True


def clear_progress() -> None:
    """Take the progress line away, if one is shown: a cold load builds the tables a question reads while it is
    asked, after the load returned, so the line may still be there when the answer or a message comes."""
    if _PROGRESS[0]:
        click.echo("\r\033[K", err=True, nl=False)
        _PROGRESS[0] = False


def answer_to_stdout() -> None:
    """Refuse to compute an answer for a standard output that was closed when nsysql started (see above)."""
    clear_progress()
    if "stdout" in _closed:
        raise NsysqlError("standard output is closed: the answer has nowhere to go (name a file with -o)")
