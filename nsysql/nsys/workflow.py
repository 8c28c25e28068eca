"""`nsysql profile`: run a program under nsys with the switches nsysql's analyses need, then write everything a
user looks at into one folder: the report and its SQLite export, summary.txt, report.html, report.md (the PR
snippet), kernels.csv, api.csv and a top-10 kernels chart. `nsysql bundle` writes the same files from a report or
export made earlier, without running the program again.

Front end: it runs nsys (nsysql.nsys) and asks the Profile's analyses; it holds no SQL.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..engine import Flag, Param, entry_point
from ..errors import NsysqlError
from . import Found, nsysql_switches, profile_command, profile_help, require, run, shell, switches_in, trace_set

DEFAULT_OUT = "nsysql-{name}"

# the parameters of profile() and bundle() that `nsysql profile` and `nsysql bundle` take as options
# (nsysql.cli.declared): declared once, as an analysis' are
_DIR = (str, os.PathLike, type(None))
CHART = Param(
    "chart",
    str,
    "auto",
    ("auto", "png", "svg"),
    doc="The top-10 kernels chart: png (needs kaleido and a Chrome), svg (drawn by nsysql), auto: png if it can.",
)


def _out(doc: str) -> Param:
    """The `out` folder a workflow writes into, with what goes there and its default name (`doc`)."""
    return Param("out", _DIR, None, doc=doc, flag=Flag(metavar="DIR", path="dir"))


entry_point(
    "profile",
    params=(
        _out("Folder for the report, its export and the analyses [default: nsysql-<program name>]."),
        Param("gpu_metrics", bool, False, doc="Also sample GPU metrics (nsys --gpu-metrics-devices=all)."),
        Param(
            "cpu",
            bool,
            False,
            doc="Also record CPU samples, thread scheduling, forked workers and Python stacks (nsys -s process-tree "
            "--cpuctxsw=process-tree --trace-fork-before-exec=true --python-sampling=true).",
        ),
        Param(
            "nsys",
            (str, type(None)),
            None,
            doc="The nsys to run [default: as for --nsys of nsysql].",
            flag=Flag(metavar="PATH"),
        ),
        CHART,
    ),
)
entry_point(
    "bundle",
    params=(
        _out("Folder for the summary, reports, CSVs and chart [default: nsysql-<FILE's name>]."),
        CHART,
    ),
)


class NoExport(NsysqlError):
    """nsys wrote no export; `status` is its exit status (the program's, when the program ran)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass
class Result:
    """What `profile` did: the program's exit status, the folder, the files written there (name -> what it is),
    the summary text, one line per output that could not be made, and notes about the profile."""

    status: int
    out: Path
    name: str
    command: list[str]
    files: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # about the profile itself (a switch this nsys lacks)
    made_by: str = "profile"  # the command: `profile`, or `bundle` (from an existing report or export)


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    """`[nsys options] -- COMMAND ARGS...` -> (nsys options, command). The options are only split off when what
    comes before a `--` looks like options (starts with `-`): a program's own `--` stays in its arguments."""
    args = list(args)
    if "--" in args:
        i = args.index("--")
        if i > 0 and args[0].startswith("-"):
            return args[:i], args[i + 1 :]
        if i == 0:
            return [], args[1:]
    return [], args


def run_name(command: list[str]) -> str:
    """A short name for the run, from the program: `train` for `python3 train.py`, the module for `python -m x`,
    else the executable's name."""
    prog = Path(command[0]).name
    name = prog
    if re.fullmatch(r"python[\d.]*(\.exe)?|pypy[\d.]*", prog, re.IGNORECASE):
        rest = command[1:]
        if "-c" in rest:  # the program is the code given
            name = prog
        elif "-m" in rest and rest.index("-m") + 1 < len(rest):
            name = rest[rest.index("-m") + 1].rsplit(".", 1)[-1]
        else:
            script = next((a for a in rest if not a.startswith("-")), None)
            name = Path(script).stem if script else prog
    name = Path(name).stem if name.lower().endswith(".exe") else name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def profile(
    command: list[str],
    out: str | os.PathLike | None = None,
    gpu_metrics: bool = False,
    nsys: str | None = None,
    nsys_options: list[str] = (),
    cache_dir: str | os.PathLike | None = None,
    progress=None,
    chart: str = "auto",
    cpu: bool = False,
) -> Result:
    """Profile `command` with nsys into `out` (default `nsysql-<name>`), then write the analyses there.

    `progress(text)` is told each step (the CLI shows it on a terminal). `chart`: the top-10 kernels chart as
    `png` (plotly through kaleido, which starts a Chrome), `svg` (drawn by nsysql) or `auto` (PNG when kaleido is
    installed and works, else SVG). `cpu`: also record CPU samples, thread scheduling, forked workers and Python's
    stacks (nsys.CPU_OPTIONS). Raises NsysqlError when nsys is not found or makes no export; a program that
    fails still gets its outputs, and its exit status is `Result.status`."""
    if not command:
        raise NsysqlError("give the program to profile after `--`, e.g. nsysql profile -- python3 train.py")
    found: Found = require(nsys)
    name = run_name(command)
    folder = Path(out if out is not None else DEFAULT_OUT.format(name=name))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NsysqlError(f"cannot create the output folder ({e.strerror})", str(folder)) from None
    _check_free(folder, name)
    say = progress or (lambda text: None)
    text = profile_help(found.path)
    supported = switches_in(text)
    argv = profile_command(
        found.path,
        folder / name,
        command,
        gpu_metrics=gpu_metrics,
        options=list(nsys_options),
        supported=supported,
        cpu=cpu,
        help_text=text,
    )
    notes = _notes(found.path, supported, nsysql_switches(gpu_metrics, cpu, help_text=text), text)
    export = folder / f"{name}.sqlite"
    rep = folder / f"{name}.nsys-rep"
    before = _stamp(rep)  # a report of an earlier run in DIR is not this run's
    say(f"profiling with {found.path} ({found.how}): {shell(argv)}")
    t = time.monotonic()
    status = run(argv)
    res = Result(status, folder, name, argv, notes=notes)
    if rep.is_file():
        res.files[rep.name] = "the Nsight Systems report (open it in nsys-ui)"
    if _stamp(rep) in (None, before):
        _remember(folder, res.files)  # the report nsys wrote is this run's, to replace next time
        raise NoExport(
            f"nsys exited with status {status} and wrote no report ({rep}) to export to SQLite; its messages above "
            "say why",
            status=status,
        )
    _export_report(found.path, rep, export, res, say)
    say(f"profiled in {time.monotonic() - t:.1f} s; analysing {export}")
    res.files[export.name] = "the SQLite export (every nsysql command reads it)"
    _remember(folder, res.files)
    write_outputs(export, folder, res, cache_dir=cache_dir, progress=say, chart=chart)
    return res


def _notes(nsys: str, supported: set[str], wanted: list[tuple[str, str]], help_text: str) -> list[str]:
    """What the profile lacks for this system or nsys: OS runtime calls (not traced on Windows, or by an nsys
    that lists no osrt), nsysql's switches this nsys does not list (an older nsys)."""
    notes = []
    if "osrt" not in trace_set(help_text=help_text).split(","):
        notes.append("OS runtime calls not traced (osrt: Linux only): idle gaps get no cause on the CPU side")
    if supported:
        keys = [k for k, _ in wanted]
        lacks = [k for k in keys if k not in supported and not (k.startswith("--gpu") and k[:-1] in supported)]
        if lacks:
            notes.append(f"{nsys} lacks {', '.join(lacks)} (an older nsys): profiled without")
    return notes


def _export_report(nsys: str, rep: Path, export: Path, res: Result, say) -> None:
    """Export this run's report to SQLite beside it (nsys.export.export_to: NVTX payloads included, which `nsys
    profile --export=sqlite` leaves out); NoExport with the program's status when that fails."""
    from .export import export_to

    say(f"exporting {rep.name} to SQLite")
    try:
        export_to(nsys, rep, export, str(rep))
    except NsysqlError as e:
        _remember(rep.parent, res.files)
        raise NoExport(str(e), status=res.status) from None


def bundle(prof, source: str | os.PathLike, out=None, progress=None, chart: str = "auto") -> Result:
    """What `profile` writes (summary.txt, report.html, report.md, kernels.csv, api.csv and the top-10 kernels
    chart) into `out` (default `nsysql-<source's name>`), from a profile already made: `prof`, loaded from
    `source` (an .nsys-rep, which nsysql exported into its cache, or a SQLite export). The program is not run
    again and nothing is written beside `source`; into an existing folder only the files an earlier `profile` or
    `bundle` wrote there are replaced, as for `profile`."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(source).stem).strip("._") or "run"
    folder = Path(out if out is not None else DEFAULT_OUT.format(name=name))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NsysqlError(f"cannot create the output folder ({e.strerror})", str(folder)) from None
    _check_free(folder, name, OUTPUTS)
    res = Result(0, folder, name, [str(source)], made_by="bundle")
    if Path(prof.path).resolve() != Path(source).resolve():  # an .nsys-rep: the export nsys made of it is nsysql's
        where = f"into nsysql's cache, {prof.path}" if Path(prof.path).is_file() else "into a temporary file, removed"
        res.notes.append(f"{source} was exported to SQLite by nsys {where}; the files above are made from it")
    write_outputs(Path(prof.path), folder, res, progress=progress, chart=chart, prof=prof)
    return res


# What `profile` may write into DIR, besides `<name>.nsys-rep` and `<name>.sqlite` (nsys writes those).
OUTPUTS = (
    "summary.txt",
    "report.html",
    "report.md",
    "kernels.csv",
    "api.csv",
    "top10_kernels.png",
    "top10_kernels.svg",
)
MANIFEST = ".nsysql-profile.json"  # the files an earlier `nsysql profile` wrote into DIR, as it left them


def _check_free(folder: Path, name: str, files: tuple[str, ...] | None = None) -> None:
    """Refuse (before the program runs) an --out DIR where a file `profile` would write (or `files`, where given)
    is a link, or a file no earlier `nsysql profile` wrote (or one changed since: not in the manifest as it was
    left). nsysql replaces its own outputs of an earlier run, and nothing else."""
    own = _manifest(folder)
    for n in (*(files if files is not None else (f"{name}.nsys-rep", f"{name}.sqlite", *OUTPUTS)), MANIFEST):
        p = folder / n
        if p.is_symlink():
            raise NsysqlError(
                f"{p}: is a symbolic link; nsysql profile writes through no link (remove it or name another --out DIR)"
            )
        if n != MANIFEST and os.path.lexists(p) and own.get(n) != _own_stamp(p):
            raise NsysqlError(
                f"{p}: is there, and no earlier `nsysql profile` wrote it; nsysql profile overwrites only its own "
                "outputs (move it, or name another --out DIR)"
            )


def _own_stamp(p: Path) -> list | None:
    """What tells the file nsysql left from one put in its place or changed since: inode, size and mtime."""
    try:
        st = p.lstat()
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _manifest(folder: Path) -> dict:
    import json

    p = folder / MANIFEST
    try:
        if p.is_symlink():
            return {}
        got = json.loads(p.read_text(encoding="utf-8")).get("files", {})
        return got if isinstance(got, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def _remember(folder: Path, files: dict) -> None:
    """Note the files `profile` wrote into `folder`, as they are now, in its manifest (see _check_free). One that
    cannot be written only means the next run into `folder` refuses those files."""
    import json

    from .. import store

    # an earlier run's files not written this time (its PNG chart, where this one drew an SVG) stay its own
    own = {n: st for n, st in _manifest(folder).items() if st == _own_stamp(folder / n)}
    own.update((n, st) for n in files if (st := _own_stamp(folder / n)) is not None and not (folder / n).is_symlink())
    text = json.dumps({"written_by": "nsysql profile", "files": own}, indent=1) + "\n"
    try:
        store.output_text(folder / MANIFEST, text, links=False)
    except NsysqlError:
        pass


def _stamp(p: Path) -> tuple | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def write_outputs(
    export: Path, folder: Path, res: Result, cache_dir=None, progress=None, chart="auto", prof=None
) -> None:
    """Load `export` (unless `prof` is it, loaded) and write summary.txt, report.html, report.md, kernels.csv,
    api.csv and the chart into `folder`, noting each file in `res.files` (or why it is missing in `res.problems`)."""
    from .._load import load
    from ..render import render, summary_text

    say = progress or (lambda text: None)
    if prof is None:
        prof = load(export, cache_dir=cache_dir, progress=(lambda step: say(f"loading: {step}")) if progress else None)

    def step(label: str, fn):
        say(f"writing {label}")
        try:
            fn()
        except NsysqlError as e:
            res.problems.append(f"{label}: {e}")
        _remember(folder, res.files)

    def summary():
        res.summary = summary_text(prof.summary(), "table")
        _text(folder / "summary.txt", res.summary)
        res.files["summary.txt"] = "the summary printed above"

    def html():
        from ..report import build

        page, figures = build(prof)
        _text(folder / "report.html", page)
        res.files["report.html"] = f"the report ({len(figures)} charts, works offline)"

    def markdown():
        from ..report import snippet

        chart = next((n for n in ("top10_kernels.png", "top10_kernels.svg") if n in res.files), None)
        _text(folder / "report.md", snippet(prof, chart=chart))
        res.files["report.md"] = "the Markdown snippet to paste into a PR"

    def csv(label, frame):
        def write():
            _text(folder / label, render(frame(), "csv"))
            res.files[label] = {"kernels.csv": "every kernel by total GPU time", "api.csv": "CUDA API calls"}[label]

        return write

    def top10():
        from ..report.charts import kernels_chart
        from ..report.svg import kernels_svg

        k = prof.kernels(top=10)
        if k.height == 0:
            raise NsysqlError("no kernels, so no chart")
        png = folder / "top10_kernels.png"
        why = _png(kernels_chart(k, top=10), png) if chart != "svg" else "--chart svg"
        if why is None:
            res.files[png.name] = "the top-10 kernels chart"
            return
        if chart == "png":
            raise NsysqlError(why)
        svg = folder / "top10_kernels.svg"
        _text(svg, kernels_svg(k))
        res.files[svg.name] = f"the top-10 kernels chart, as SVG ({why})"

    step("summary.txt", summary)
    step("report.html", html)
    step("kernels.csv", csv("kernels.csv", prof.kernels))
    step("api.csv", csv("api.csv", prof.api))
    step("the top-10 kernels chart", top10)
    step("report.md", markdown)  # after the chart, which it links


def _text(path: Path, text: str) -> None:
    from .. import store

    store.output_text(path, text, links=False)  # whole or not at all, never through a link


def _png(fig, path: Path) -> str | None:
    """Write `fig` as a PNG through kaleido; None when done, else why not (a few words)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return "no PNG: kaleido is not installed (pip install kaleido; it also needs a Chrome or Chromium)"
    from .. import store

    def fill(tmp: Path) -> None:  # the format named: the temporary file's name does not say it
        import plotly.io as pio

        from ..report.charts import themed

        pio.write_image(themed(fig), str(tmp), format="png", width=1200, height=fig.layout.height or 400, scale=1)

    try:
        store.output(path, fill, links=False)
    except Exception as e:  # noqa: BLE001 - kaleido present but no Chrome/Chromium it can start
        why = str(e).splitlines()[0][:100] if str(e) else type(e).__name__
        return f"no PNG: kaleido failed ({why}); it needs a Chrome or Chromium (`plotly_get_chrome` installs one)"
    return None


def listing(res: Result) -> str:
    """Where everything went, one line per file."""
    lines = [f"nsysql {res.made_by}: {res.out}/"]
    for name, what in res.files.items():
        size = (res.out / name).stat().st_size if (res.out / name).exists() else 0
        lines.append(f"  {name:<24} {_size(size):>9}  {what}")
    if (res.out / MANIFEST).is_file():
        n = (res.out / MANIFEST).stat().st_size
        lines.append(
            f"  {MANIFEST:<24} {_size(n):>9}  the files above, which a later {res.made_by} into this folder replaces"
        )
    for p in res.problems:
        lines.append(f"  not written: {p}")
    return "\n".join(lines) + "\n"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
