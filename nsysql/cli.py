"""The `nsysql` command line: one command per Profile method, the same output switches everywhere.

Problems with the input end in one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import warnings
from pathlib import Path

import click

from . import __version__
from . import stats as _stats
from . import store as _store
from .errors import NsysqlError, one_line, utf8_path
from .render import FORMATS, render, summary_view
from .render import one_line as _line
from .store import tables as _tables

ATTRIBUTION_HELP = (
    "How GPU work is tied to NVTX ranges: 'thread' = the launching thread's open ranges (exactly nsys); "
    "'process' (default) = also inherit the ranges open on other threads of the process when the launching "
    "thread has none (PyTorch's autograd thread)."
)


def _opts() -> dict:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return (root.obj or {}) if root else {}


def _state_dir() -> Path:
    from . import discover

    return discover.state_dir(_opts().get("cache_dir"))


_loaded: list[str] = []  # the exports this command loaded


def _load(file: str | None):
    from . import discover
    from ._load import load

    path, why = discover.pick_profile(file, _opts().get("cache_dir"))
    if why:
        click.echo(f"nsysql: using {path} ({why})", err=True)
    _loaded.append(path)  # for error messages of commands whose FILE is optional (sql)
    opts = _opts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _store.CacheWarning)
        prof = load(
            path,
            cache=not opts.get("no_cache"),
            cache_dir=opts.get("cache_dir"),
            progress=_progress(path) if sys.stderr.isatty() else None,
            nsys=opts.get("nsys"),
            cache_max=opts.get("cache_max"),
        )
    if sys.stderr.isatty():
        click.echo("\r\033[K", err=True, nl=False)
    for w in caught:
        click.echo(f"nsysql: warning: {_line(str(w.message))}", err=True)
    from . import nsys as _nsys

    # a report is remembered as itself: the export made of it may be a temporary file, gone at exit (--no-cache)
    report = _nsys.is_report(path)
    discover.remember(os.path.abspath(os.path.expanduser(path)) if report else prof.path, opts.get("cache_dir"))
    return prof


def _progress(path):
    def show(step: str) -> None:
        click.echo(f"\r\033[Knsysql: loading {Path(path).name}: {step}", err=True, nl=False)

    return show


def _write(output: str | Path, text: str) -> None:
    """Write an output file, never over an export: `-o run.sqlite` by mistake must not destroy the profile."""
    p = Path(output)
    if _stream_target(p):  # a pipe, a terminal, /dev/stdout: written in place, as a stream (no file to replace)
        try:
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        except BrokenPipeError:  # the reader went away (`-o >(head -1)`): as for stdout, nothing more to say
            raise
        except OSError as e:  # a write error has no file name of its own
            raise NsysqlError(f"cannot write to it ({e.strerror or e})", str(output)) from None
        return
    what = _precious(p)
    if what:
        raise NsysqlError(f"{output}: is {what}; nsysql does not write its output over it (name another -o file)")
    from . import store

    store.output_text(p, text)  # whole or not at all: a failed write leaves the file there as it was


def _stream_target(p: Path) -> bool:
    """Whether `-o p` names something that exists and is not a regular file: a FIFO, `/dev/stdout` or a process
    substitution (`>(gzip > x.gz)`) on a pipe, a terminal. Told by stat alone: it is never opened to be read (a
    pipe opened for reading waits for a writer, which nsysql itself would be: a deadlock), and it holds no
    export to protect."""
    from .loader.source import special_file

    return bool(special_file(p)) and not p.is_dir()


REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".qdstrm")


def _precious(p: Path) -> str | None:
    """What `p` is when nsysql must not write over it: an Nsight Systems report, by its name in any case
    (`rep.NSYS-REP`) or by its first bytes, or a SQLite database (an export) by its header. None otherwise."""
    from .loader.source import SQLITE_MAGIC

    if p.suffix.lower() in REPORT_SUFFIXES:
        return "an Nsight Systems report"
    if _stream_target(p):  # not a file that could hold one, and never opened for reading (see _stream_target)
        return None
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except OSError:  # not there yet (or unreadable: the write says why)
        return None
    if head.startswith(SQLITE_MAGIC):
        return "a SQLite database"
    # a zip or a QDSTRM stream: how reports begin (no text output of nsysql does)
    if head.startswith(b"PK\x03\x04") or b"QDSTRM" in head:
        return "an Nsight Systems report"
    return None


def _emit(result, fmt: str, output: str | None, title: str | None = None) -> None:
    text = render(result, fmt, title)
    if output:
        _write(output, text)
    else:
        _answer_to_stdout()
        # color=True: as written, never with click's ANSI stripping (off a terminal it would take escape sequences
        # out of a name in CSV or JSON; table output has shown them as text already)
        click.echo(text, nl=False, color=True)


def handled(fn):
    """Turn NsysqlError (and database errors) into one stderr line and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _loaded.clear()
        # a warning raised while the command runs (a cache write that fails after the load, in the background
        # copy, NSYSQL_THREADS cut down) is said in one line, as errors are, once the command is done
        with warnings.catch_warnings(record=True) as caught:
            try:
                return _run(fn, args, kwargs)
            finally:
                for w in caught:
                    click.echo(f"nsysql: warning: {_line(str(w.message))}", err=True)

    return wrapper


def _run(fn, args, kwargs):
    """fn(*args, **kwargs), its NsysqlError (and database errors) said in one stderr line, exit code 2."""
    try:
        return fn(*args, **kwargs)
    except NsysqlError as e:  # its text may quote the export's names: control characters shown, one line
        click.echo(f"nsysql: error: {_line(_naming_files(str(e)))}", err=True)
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


def _naming_files(message: str) -> str:
    """An error about the exports loaded (an analysis that does not apply, a --range that matches nothing) with
    their paths in front, unless it names them already."""
    if not _loaded or any(str(p) in message or os.path.basename(str(p)) in message for p in _loaded):
        return message
    return f"{', '.join(dict.fromkeys(map(str, _loaded)))}: {message}"


def format_option(default: str = "table", choices=FORMATS):
    """-f/--format, plus one switch per format (--table, --csv, --json, --markdown), as sqlite-utils has."""

    def deco(fn):
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


def output_options(fn):
    fn = click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")(fn)
    fn = format_option()(fn)
    fn = click.argument("file", required=False)(fn)
    return fn


def files_options(fn):
    """Like output_options, but FILE may be given several times (one export per rank)."""
    fn = click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")(fn)
    fn = format_option()(fn)
    fn = click.argument("files", nargs=-1, metavar="[FILE]...")(fn)
    return fn


def _several(files: tuple[str, ...]) -> bool:
    """Several exports: more than one FILE, or a quoted glob (`'rank*.sqlite'`) for nsysql to expand."""
    return len(files) > 1 or bool(files and _is_glob(files[0]))


def _is_glob(path: str) -> bool:
    """many.is_glob, without importing polars before the load (see _load.py): an existing path is that path,
    whatever it is called (`run[1].sqlite`, `what?.sqlite`)."""
    return any(c in path for c in "*?[") and not os.path.lexists(os.path.expanduser(path))


def _each_rank(files: tuple[str, ...], method: str, **kwargs):
    """Run Profile.<method> on each export, stacked with a `rank` column (numbered as `nsysql ranks` does)."""
    from .many import expand, number, stack

    paths = expand(list(files))
    profs = [_load(p) for p in paths]
    ranks, why = number(profs)
    click.echo(f"nsysql: {len(paths)} files; {why}", err=True)
    return stack(profs, ranks, method, **kwargs)


def attribution_option(fn):
    return click.option(
        "--attribution",
        type=click.Choice(["process", "thread"]),
        default="process",
        show_default=True,
        help=ATTRIBUTION_HELP,
    )(fn)


def group_ops_option(fn):
    return click.option(
        "--group-ops/--no-group-ops",
        default=None,
        help="Name PyTorch's ranges (emit_nvtx, nsys --pytorch=autograd-nvtx) without their per-call arguments "
        "(`aten::addmm, seq = 5, op_id = 9, ...` -> `aten::addmm`): one row per operator instead of one per call. "
        "Default: grouped with --attribution process, per call with thread (as nsys stats).",
    )(fn)


def run() -> None:
    """The `nsysql` executable: main(), then leave as _process says (at once, unless NSYSQL_NO_TUNING=1)."""
    from . import _process

    _standard_streams()
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


def _standard_streams() -> None:
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


def _answer_to_stdout() -> None:
    """Refuse to compute an answer for a standard output that was closed when nsysql started (see above)."""
    if "stdout" in _closed:
        raise NsysqlError("standard output is closed: the answer has nowhere to go (name a file with -o)")


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


@main.group()
def cache():
    """Inspect or empty the cache of loaded profiles."""


@cache.command("info")
@format_option()
@handled
def cache_info(fmt):
    """Entries in the cache: the export each was loaded from, and size."""
    df, line = _tables.info(_state_dir())
    click.echo(line, err=True)
    _answer_to_stdout()
    click.echo(render(df, fmt), nl=False)


@cache.command("clear")
@handled
def cache_clear():
    """Delete every cached profile: only what nsysql stored there, whatever else the directory holds."""
    d = _state_dir()
    n = _tables.clear(d)
    click.echo(f"removed {n} cache entries from {d}")


@main.command()
@output_options
@handled
def info(file, fmt, output):
    """What the export holds, what it lacks, and which analyses apply."""
    _emit(_load(file).info(), fmt, output)


@main.command()
@files_options
@attribution_option
@click.option("--top", type=int, default=10, show_default=True, help="Rows in the kernel and range tables.")
@handled
def summary(files, fmt, output, attribution, top):
    """One screen: span, GPUs, busy %, iterations, idle causes, findings, top kernels and ranges, memory.

    With several FILEs (one per rank), the cross-rank summary of `nsysql ranks`."""
    if _several(files):
        _emit(_ranks_result(files, None, None), fmt, output)
        return
    prof = _load(files[0] if files else None)
    if fmt == "markdown":  # the PR-ready snippet, as `report -f markdown`
        from .report import snippet

        _emit_text(snippet(prof), output)
        return
    s = prof.summary(attribution=attribution, top=top)
    _emit(summary_view(s), fmt, output)


@main.command()
@output_options
@click.option("--top", type=int, default=None, help="Only the N API functions with most total time.")
@handled
def api(file, fmt, output, top):
    """CUDA API calls by function: calls and CPU time inside them (as `nsys stats -r cuda_api_sum`)."""
    _emit(_load(file).api(top=top), fmt, output)


@main.command()
@files_options
@click.option(
    "--by",
    type=click.Choice(["launch", "kernel"]),
    default="launch",
    show_default=True,
    help="One row per process, thread, device, launching call and kernel, or one per kernel name.",
)
@handled
def launches(files, fmt, output, by):
    """Launch latency: launch call, queue and kernel times per kernel (as `nsys stats -r cuda_kern_exec_sum`)."""
    if _several(files):
        _emit(_each_rank(files, "launches", by=by), fmt, output)
        return
    _emit(_load(files[0] if files else None).launches(by=by), fmt, output)


@main.command()
@files_options
@click.option(
    "--name",
    "name_kind",
    type=click.Choice(["demangled", "short", "mangled"]),
    default="demangled",
    show_default=True,
    help="Which kernel name to group by (nsys's default is demangled).",
)
@click.option("--top", type=int, default=None, help="Only the N kernels with most total time.")
@click.option(
    "--by",
    type=click.Choice(["name", "category"]),
    default="name",
    show_default=True,
    help="Group by kernel name, or by category and tensor-core use (rules: queries/v1/canonical/44_kernel_rules.sql).",
)
@click.option(
    "--per",
    type=click.Choice(["iteration", "range"]),
    default=None,
    help="With --by category: per iteration of the loop (as `iterations` finds it), or per NVTX range.",
)
@handled
def kernels(files, fmt, output, name_kind, top, by, per):
    """Top kernels by total GPU time (as `nsys stats -r cuda_gpu_kern_sum`); several FILEs add a rank column."""
    if _several(files):
        _emit(_each_rank(files, "kernels", name=name_kind, top=top, by=by, per=per), fmt, output)
        return
    _emit(_load(files[0] if files else None).kernels(name=name_kind, top=top, by=by, per=per), fmt, output)


@main.command()
@output_options
@attribution_option
@group_ops_option
@handled
def ranges(file, fmt, output, attribution, group_ops):
    """NVTX ranges: CPU time stats and GPU-projected time (as nvtx_sum + nvtx_gpu_proj_sum)."""
    _emit(_load(file).ranges(attribution=attribution, group_ops=group_ops), fmt, output)


@main.command()
@output_options
@click.option(
    "--by",
    type=click.Choice(["iteration", "range"]),
    default=None,
    help="Per iteration of the loop, or per NVTX range: the time-weighted mean over each instance's "
    "GPU-projected window (first to last GPU op launched inside it).",
)
@click.option(
    "--range",
    "range_",
    metavar="PATTERN",
    help="With --by iteration: the range that is one iteration (as `iterations --range`).",
)
@attribution_option
@handled
def metrics(file, fmt, output, by, range_, attribution):
    """GPU metrics sampled by `nsys profile --gpu-metrics-devices=...`: per device and metric, samples, mean, min,
    p50, p90, max (as `nsys recipe gpu_metric_util_sum`), and a note on counters whose values do not fit their
    unit."""
    _emit(_load(file).gpu_metrics(by=by, range=range_, attribution=attribution), fmt, output)


@main.command("kernels-by-range")
@output_options
@click.option(
    "--range",
    "range_",
    metavar="PATTERN",
    help="Only ranges named PATTERN: exact name, numbered family (Batch -> Batch0..Batch59), prefix, or regex.",
)
@click.option("--innermost", is_flag=True, help="Credit each kernel only to its innermost enclosing range.")
@attribution_option
@group_ops_option
@handled
def kernels_by_range(file, fmt, output, range_, innermost, attribution, group_ops):
    """Kernels per NVTX range (as `nsys stats -r nvtx_kern_sum`)."""
    prof = _load(file)
    got = prof.kernels_by_range(range=range_, innermost=innermost, attribution=attribution, group_ops=group_ops)
    _emit(got, fmt, output)


@main.command()
@output_options
@click.option("--shapes", is_flag=True, help="One row per operator and input sizes (record_shapes=True).")
@handled
def ops(file, fmt, output, shapes):
    """PyTorch operators (emit_nvtx ranges): calls, CPU time, forward and backward GPU time, top kernel."""
    _emit(_load(file).ops(shapes=shapes), fmt, output)


@main.command()
@files_options
@click.option(
    "--range",
    "range_",
    metavar="PATTERN",
    help="The iteration range (exact name, numbered family, prefix or regex); detected when left out.",
)
@click.option(
    "--skip",
    type=int,
    default=None,
    help="Warm-up iterations to leave out of steady state (default: the first, extended while "
    "the next ones are still outliers).",
)
@handled
def iterations(files, fmt, output, range_, skip):
    """Per-iteration breakdown: wall time, GPU busy/idle, per child range, warm-up and outliers."""
    if _several(files):
        _emit(_each_rank(files, "iterations", range=range_, skip=skip), fmt, output)
        return
    prof = _load(files[0] if files else None)
    df = prof.iterations(range=range_, skip=skip)
    st = prof.iteration_stats(range=range_, skip=skip)
    if fmt in ("json", "markdown"):
        _emit({"iterations": df, "steady state": st}, fmt, output)
    elif fmt == "csv":
        _emit(df, fmt, output)
    else:
        from .analyses.iterations import steady_sentence

        s = st.row(0, named=True)
        note = f"\nrange: {_line(s['detected'])}\n{steady_sentence(s)}\n"
        if s["outlier_pattern"]:
            note += f"outliers: {_line(s['outlier_pattern'])}\n"
        _emit_text(render(_narrow(df), "table") + note, output)


@main.command()
@files_options
@click.option(
    "--by",
    type=click.Choice(["device", "iteration"]),
    default="device",
    show_default=True,
    help="One row per device, or one per iteration of the loop (on the loop's device).",
)
@click.option(
    "--range", "range_", metavar="PATTERN", help="With --by iteration: the iteration range, as in iterations."
)
@handled
def overlap(files, fmt, output, by, range_):
    """Communication hidden or exposed: time in communication kernels (NCCL), overlapped by compute or not."""
    if _several(files):
        _emit(_each_rank(files, "overlap", by=by, range=range_), fmt, output)
        return
    _emit(_load(files[0] if files else None).overlap(by=by, range=range_), fmt, output)


def _narrow(df):
    """For the terminal: drop end_ns and the less used per-kind columns (the communication ones without any)."""
    drop = {"end_ns", "gpu_span_ns", "gpu_start_ns", "gpu_step_ns", "memset_ns", "graph_ns", "gpu_ops", "step_clock"}
    if "step_clock" in df.columns and not (df["step_clock"] == "gpu").any():  # the steps are the CPU's windows
        drop |= {"step_ns", "step_idle_ns"}
    if "comm_ns" in df.columns and not (df["comm_ns"] > 0).any():
        drop |= {"comm_ns", "overlapped_ns"}
    keep = [c for c in df.columns if c not in drop]
    return df.select(keep)


def _emit_text(text: str, output: str | None) -> None:
    if output:
        _write(output, text)
    else:
        _answer_to_stdout()
        click.echo(text, nl=False, color=True)  # as written (see _emit)


@main.command()
@files_options
@click.option("--range", "range_", metavar="PATTERN", help="Only gaps inside instances of these ranges.")
@click.option(
    "--min",
    "min_",
    default="1ms",
    show_default=True,
    help="Shortest gap to report: 500us, 2ms, 1s ... (nsys recipe gpu_gaps uses 500ms).",
)
@click.option("--by", type=click.Choice(["cause"]), help="Idle time per cause instead of one row per gap.")
@click.option(
    "--include-warmup", is_flag=True, help="With --by cause: count warm-up iterations and time outside iterations too."
)
@click.option(
    "--explain",
    is_flag=True,
    help="What the other threads and processes did during each gap (or cause group): NVTX ranges, OS runtime and "
    "CUDA calls, ranked by overlap.",
)
@click.option(
    "--top", type=click.IntRange(min=1), default=5, show_default=True, help="With --explain: activities per gap/cause."
)
@handled
def gaps(files, fmt, output, range_, min_, by, include_warmup, explain, top):
    """GPU idle gaps and what the CPU was doing meanwhile (cause: host:<range>, sync, memcpy, alloc, launch)."""
    kwargs = dict(range=range_, min_ns=min_, by=by, include_warmup=include_warmup)
    what = "gaps"
    if explain:
        what, kwargs["top"] = "gap_activity", top
    if _several(files):
        _emit(_each_rank(files, what, **kwargs), fmt, output)
        return
    _emit(getattr(_load(files[0] if files else None), what)(**kwargs), fmt, output)


def _ranks_rule() -> str:
    from .analyses.ranks import RULE

    return RULE


def _ranks_result(files, dask, workers):
    from .many import connect_dask, load_many

    opts = _opts()
    client = connect_dask(dask) if dask else None
    try:
        r = load_many(
            list(files),
            cache_dir=opts.get("cache_dir"),
            cache=not opts.get("no_cache"),
            workers=workers,
            client=client,
            cache_max=opts.get("cache_max"),
        )
    finally:
        if client is not None:
            client.close()
    click.echo(f"nsysql: {r.files.height} ranks; {r.numbering}", err=True)
    click.echo(f"nsysql: straggler rule: {_ranks_rule()}", err=True)
    return {
        "files": r.files.select("rank", "path", "rank_source"),
        "per rank": r.per_rank(),
        "stragglers": r.findings().select("rank", "sentence"),
        "straggler evidence": r.stragglers(),
        "slowest rank per iteration": r.by_iteration(),
    }


@main.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@format_option()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option(
    "--dask",
    metavar="ADDRESS",
    help="Run the per-file loads on a Dask cluster (tcp://host:8786); needs pip install 'nsysql[dask]'.",
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="Local processes for the loads [default: the cores]."
)
@handled
def ranks(files, fmt, output, dask, workers):
    """Compare per-rank exports (paths or globs like 'runs/rank*.sqlite'): step time, idle, collectives, and
    the stragglers that made the others wait, with the evidence."""
    _emit(_ranks_result(files, dask, workers), fmt, output)


@main.command()
@click.argument("file", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write (HTML default: <FILE stem>.report.html, or <NEW stem>.diff.html with "
    "--baseline; Markdown default: stdout).",
)
@click.option("-f", "--format", "fmt", type=click.Choice(["html", "markdown"]), default="html", show_default=True)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    metavar="BASE",
    help="Compare FILE (NEW) against BASE and draw the comparison.",
)
@click.option(
    "--png",
    "png_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Also write each chart as DIR/<chart>.png (needs kaleido and Chrome/Chromium).",
)
@handled
def report(file, output, fmt, baseline, png_dir):
    """A self-contained HTML report (works offline), or a PR-ready Markdown snippet with -f markdown."""
    from . import report as _report

    prof = _load(file)
    base = _load(baseline) if baseline else None
    if fmt == "markdown":
        text = _report.diff_snippet(base, prof) if base else _report.snippet(prof)
        _emit_text(text, output)
        return
    page, figures = _report.build_diff(base, prof) if base else _report.build(prof)
    out = Path(output or f"{prof.path.stem}.{'diff' if base else 'report'}.html")
    _write(out, page)
    click.echo(f"nsysql: wrote {out} ({len(page) / 2**20:.1f} MiB, {len(figures)} charts)", err=True)
    if png_dir:
        got = _report.write_pngs(figures, Path(png_dir))
        if isinstance(got, str):
            click.echo(f"nsysql: {got}", err=True)
        else:
            click.echo(f"nsysql: wrote {len(got)} PNG files to {png_dir}", err=True)


@main.command()
@click.argument("file", required=False)
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Directory to write the tables and README.md into (created if missing).",
)
@click.option("-f", "--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@handled
def export(file, to, fmt):
    """Write the canonical tables as Parquet or CSV, with a README.md describing every column."""
    written = _load(file).export(to, format=fmt)
    click.echo(render(written, "table"), nl=False)
    click.echo(f"nsysql: wrote {written.height} tables and README.md to {to}", err=True)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Folder for the report, its export and the analyses [default: nsysql-<program name>].",
)
@click.option("--gpu-metrics", is_flag=True, help="Also sample GPU metrics (nsys --gpu-metrics-devices=all).")
@click.option("--nsys", "nsys_path", metavar="PATH", help="The nsys to run [default: as for --nsys of nsysql].")
@click.option(
    "--chart",
    type=click.Choice(["auto", "png", "svg"]),
    default="auto",
    show_default=True,
    help="The top-10 kernels chart: png (needs kaleido and a Chrome), svg (drawn by nsysql), auto: png if it can.",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[-- NSYS OPTIONS] -- COMMAND [ARGS]...")
@handled
def profile(out, gpu_metrics, nsys_path, chart, args):
    """Run COMMAND under nsys (CUDA, NVTX, OS runtime, CUDA graphs node by node), export it, and write the summary,
    report.html, report.md, kernels.csv, api.csv and a top-10 kernels chart into DIR.

    Exits with COMMAND's exit status. Options for nsys go between two `--`:
    nsysql profile --out run -- --duration=60 -- python3 train.py"""
    from . import workflow

    options, command = workflow.split_args(list(args))
    tty = sys.stderr.isatty()

    def progress(text: str) -> None:
        if text.startswith("loading: "):
            click.echo(f"\r\033[Knsysql: {_line(text)}", err=True, nl=False)
        else:
            click.echo(f"\r\033[Knsysql: {_line(text)}", err=True)

    opts = _opts()
    try:
        res = workflow.profile(
            command,
            out=out,
            gpu_metrics=gpu_metrics,
            nsys=nsys_path or opts.get("nsys"),
            nsys_options=options,
            cache_dir=opts.get("cache_dir"),
            progress=progress if tty else None,
            chart=chart,
        )
    except workflow.NoExport as e:  # the program's status (Ctrl-C, a crash) rather than 2, when it failed
        click.echo(f"nsysql: error: {_line(str(e))}", err=True)
        sys.exit(e.status or 2)
    if tty:
        click.echo("\r\033[K", err=True, nl=False)
    click.echo(res.summary, nl=False, color=True)
    click.echo("")
    click.echo(workflow.listing(res), nl=False)
    for note in res.notes:
        click.echo(f"nsysql: note: {_line(note)}", err=True)
    if res.status:
        click.echo(f"nsysql: the profiled program exited with status {res.status}", err=True)
    sys.exit(res.status)


@main.command()
@click.argument("file", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write the trace [default: <FILE stem>.trace.json].",
)
@click.option(
    "--iterations", metavar="A:B", help="Only iterations A to B (both included), as `nsysql iterations` numbers them."
)
@click.option(
    "--window",
    metavar="START:END",
    help="Only this stretch of time, from the profile's start: 2s:3.5s, 500ms:, :1s (events overlapping it).",
)
@handled
def trace(file, output, iterations, window):
    """A Chrome/Perfetto trace (JSON) of the profile: GPU work per device and stream, CUDA API calls and NVTX
    ranges per thread, and nsysql's iterations and idle gaps (with their cause) as tracks. Open it in
    https://ui.perfetto.dev or chrome://tracing; --iterations or --window keep a large profile's trace small."""
    from . import perfetto

    prof = _load(file)
    tables = prof.trace(window=window, iterations=iterations, lazy=True)  # streamed as written
    out = Path(output or f"{Path(prof.path).stem}.trace.json")
    if _precious(out):
        raise NsysqlError(
            f"{out}: is {_precious(out)}; nsysql does not write its output over it (name another -o file)"
        )
    from . import store

    got: dict = {}
    store.output(out, lambda tmp: got.update(perfetto.write(tables, tmp, source=str(prof.path))))
    size = "" if _stream_target(out) else f"{out.stat().st_size / 2**20:.1f} MiB, "  # a pipe has no size to tell
    click.echo(
        f"nsysql: wrote {out} ({size}{got['events']} events: {got['gpu_ops']} GPU ops, "
        f"{got['api_calls']} CUDA API calls, {got['nvtx_ranges']} NVTX ranges, {got['iterations']} iterations, "
        f"{got['gaps']} idle gaps)",
        err=True,
    )


@main.command()
@click.argument("base")
@click.argument("new")
@format_option()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option(
    "--fail-above",
    type=float,
    metavar="PCT",
    help="Exit 1 when NEW's mean steady-state iteration time is more than PCT % slower than BASE's.",
)
@handled
def diff(base, new, fmt, output, fail_above):
    """Compare two profiles (BASE, then NEW): iteration time, GPU busy, idle causes, ranges, kernels, verdict."""
    if fail_above is not None and not math.isfinite(fail_above):
        raise NsysqlError(f"--fail-above must be a finite percentage, not {fail_above}")
    b, n = _load(base), _load(new)
    res = b.diff(n)
    _emit(res.to_frames(), fmt, output)
    if fail_above is not None:
        pct = res.mean_change_pct
        if pct is None:
            raise NsysqlError("--fail-above needs iterations in both profiles (none detected)")
        if pct > fail_above:
            click.echo(
                f"nsysql: NEW's mean iteration time is {pct:+.1f}% vs BASE (above --fail-above "
                f"{fail_above:g}%, a hard limit: the verdict's noise rule does not apply to it)",
                err=True,
            )
            sys.exit(1)


@main.command()
@click.argument("file", required=False)
@click.option(
    "-r",
    "--report",
    "reports",
    default="kernels,ranges,kernels-by-range,iterations,gaps",
    show_default=True,
    help=f"Comma-separated: {', '.join(_stats.REPORTS)}.",
)
@format_option(default="csv")
@click.option(
    "-o",
    "--output",
    "prefix",
    metavar="PREFIX",
    help="Write each report to PREFIX_<report>.<ext> (as `nsys stats -o`); default stdout.",
)
@click.option(
    "--attribution",
    type=click.Choice(["process", "thread"]),
    default="process",
    show_default=True,
    help=ATTRIBUTION_HELP,
)
@handled
def stats(file, reports, fmt, prefix, attribution):
    """Several reports from one load, like `nsys stats -r ...`: one process, one read of the export."""
    names = [r.strip() for r in reports.split(",") if r.strip()]
    _stats.check(names)
    prof = _load(file)
    ext = {"table": "txt", "csv": "csv", "json": "json", "markdown": "md"}[fmt]
    got = {}
    for name, df in _stats.stats(prof, names, attribution):
        if isinstance(df, NsysqlError):
            click.echo(f"nsysql: {name}: skipped: {df}", err=True)
        elif prefix:
            out = f"{prefix}_{name.replace('-', '_')}.{ext}"
            _write(out, render(df, fmt))
            click.echo(f"nsysql: wrote {out}", err=True)
        else:
            got[name] = df
    if got:  # on stdout one document: a JSON object of the reports, or the sections one after another
        _answer_to_stdout()
        click.echo(render(got, fmt), nl=False, color=True)  # as written (see _emit)


@main.command()
@click.argument("table", required=False)
@format_option()
@handled
def schema(table, fmt):
    """The canonical tables (schema v1) and what each column means: what `nsysql sql` and `export` give you."""
    import polars as pl

    from .export import schema_docs

    docs = schema_docs()
    if table and table not in docs:
        raise NsysqlError(f"no canonical table {table!r}; tables: {', '.join(docs)}")
    rows = [(t, c, d) for t, info in docs.items() if not table or t == table for c, d in info["columns"].items()]
    if not table:
        _emit(
            pl.DataFrame(
                [(t, i["description"]) for t, i in docs.items()], schema=["table", "description"], orient="row"
            ),
            fmt,
            None,
        )
        return
    _emit(pl.DataFrame(rows, schema=["table", "column", "description"], orient="row"), fmt, None)


@main.command(name="sql")
@click.argument("args", nargs=-1, required=True, metavar="[FILE] QUERY")
@format_option()
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@handled
def sql_(args, fmt, output):
    """Run QUERY over the canonical tables (gpu_ops, api_calls, nvtx_ranges, op_ranges, ...)."""
    if len(args) > 2:
        raise NsysqlError("give FILE and one QUERY (quote the query)")
    file, query = (None, args[0]) if len(args) == 1 else args
    _emit(_interruptible(_load(file), query), fmt, output)


def _interruptible(prof, query: str):
    """prof.sql(query), run on a thread of its own while this (the main) thread waits, so that a Ctrl-C is
    delivered here at once, whatever DuckDB or polars are doing: the query is then stopped (DuckDB's interrupt,
    repeated until it takes, for at most INTERRUPT_WAIT_S) and the KeyboardInterrupt goes on to run(), which
    says `nsysql: interrupted` and exits 130."""
    import threading
    import time

    box: dict = {}

    def work():
        try:
            box["result"] = prof.sql(query)
        except BaseException as e:  # raised again on the main thread
            box["error"] = e

    t = threading.Thread(target=work, name="nsysql-sql", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
    except KeyboardInterrupt:
        deadline = time.monotonic() + INTERRUPT_WAIT_S
        while t.is_alive() and time.monotonic() < deadline:
            prof.interrupt()  # again: the first may come before the query has begun
            t.join(0.1)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


INTERRUPT_WAIT_S = 5  # after a Ctrl-C, how long a query may take to stop before nsysql leaves without it


if __name__ == "__main__":
    main()
