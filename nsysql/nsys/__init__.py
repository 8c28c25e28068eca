"""Nsight Systems' `nsys`, in one place: where it is, the command lines nsysql gives it, and running it.

Where nsys is looked for, first found wins: `--nsys PATH`, `$NSYS`, `nsys` on PATH, then the install folders of
Nsight Systems (and of the CUDA toolkit, which ships it) and the copy inside Nsight Compute's folder, newest
version first (the version is read from the folder names, after resolving links: /usr/local/cuda/bin/nsys is
usually a link into a versioned folder).

Beside it: `export.py` exports a report (`.nsys-rep`, or `.qdrep` before 2021.4) to SQLite once, into the
report's entry of the store; `workflow.py` is `nsysql profile`. This module imports only the standard library
(the CLI imports it before every load).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass

from ..errors import NsysqlError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
EXE = "nsys.exe" if os.name == "nt" else "nsys"

# Install folders, as glob patterns under a root ("/" on Linux, the Program Files folders on Windows). Nsight
# Systems' own installs first, then the CUDA toolkit's copies, then Nsight Compute's; the version in the path
# orders them (newest first) across all of them.
LINUX_PATTERNS = (
    "opt/nvidia/nsight-systems/*/bin/nsys",
    "opt/nvidia/nsight-systems/*/target-linux-*/nsys",
    "opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "opt/nvidia/nsight-systems-cli/*/target-linux-*/nsys",
    "usr/local/cuda/bin/nsys",
    "usr/local/cuda-*/bin/nsys",
    "usr/local/cuda*/nsight-systems-*/bin/nsys",
    "usr/lib/nsight-systems/bin/nsys",
    "opt/nvidia/nsight-compute/*/host/target-linux-*/nsys",
    "usr/local/cuda*/nsight-compute-*/host/target-linux-*/nsys",
)
WINDOWS_PATTERNS = (
    "NVIDIA Corporation/Nsight Systems */target-windows-x64/nsys.exe",
    "NVIDIA GPU Computing Toolkit/CUDA/*/bin/nsys.exe",
    "NVIDIA Corporation/Nsight Compute */host/target-windows-x64/nsys.exe",
)
_VERSION = re.compile(r"(?<![\d.])(\d{4})\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_CUDA_VERSION = re.compile(r"cuda-?v?(\d+)\.(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Found:
    """An nsys executable, and how it was found: `--nsys`, `$NSYS`, `PATH` or `install folder`."""

    path: str
    how: str


def is_report(path: str | os.PathLike) -> bool:
    """Whether `path` names an Nsight Systems report that `nsys export` turns into SQLite (by its suffix)."""
    return str(path).lower().endswith(REPORT_SUFFIXES)


def _executable(p: str | os.PathLike) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)


def version_of(path: str | os.PathLike) -> tuple:
    """The Nsight version in an install path (the link resolved), e.g. (2025, 3, 1, 0); CUDA toolkit folders
    without one count by the toolkit's version as (0, major, minor); () when the path says none."""
    for text in (os.path.realpath(path), str(path)):
        m = list(_VERSION.finditer(text))
        if m:
            return tuple(int(g or 0) for g in m[-1].groups())
    for text in (os.path.realpath(path), str(path)):
        m = list(_CUDA_VERSION.finditer(text))
        if m:
            return (0, int(m[-1].group(1)), int(m[-1].group(2)))
    return ()


def install_candidates(system: str | None = None, roots: list[str | os.PathLike] | None = None) -> list[str]:
    """The nsys executables in the usual install folders, newest version first (a version-less path last, in the
    order of the patterns). `system`: `Linux` or `Windows` (default: this one); `roots`: where the patterns
    start (default `/` on Linux; %ProgramFiles% and %ProgramFiles(x86)% on Windows)."""
    import glob

    system = system or ("Windows" if os.name == "nt" else "Linux")
    if system == "Windows":
        patterns = WINDOWS_PATTERNS
        if roots is None:
            roots = [os.environ[v] for v in ("ProgramFiles", "ProgramFiles(x86)") if os.environ.get(v)]
    else:
        patterns = LINUX_PATTERNS
        roots = ["/"] if roots is None else roots
    found: dict[str, tuple] = {}
    order = 0
    for root in roots:
        for pattern in patterns:
            for p in sorted(glob.glob(os.path.join(str(root), pattern))):
                if _executable(p) and p not in found:
                    found[p] = (version_of(p), -order)
                    order += 1
    return sorted(found, key=lambda p: found[p], reverse=True)


def find(explicit: str | None = None) -> Found | None:
    """The nsys to run: `explicit` (--nsys), else $NSYS, else PATH, else the install folders; None when there is
    none. A named one (--nsys, $NSYS) that is not an executable is an NsysqlError, not a reason to look further."""
    for value, how in ((explicit, "--nsys"), (os.environ.get("NSYS"), "$NSYS")):
        if value:
            p = shutil.which(value) if os.sep not in value and "/" not in value else value
            if not p or not _executable(p):
                raise NsysqlError(f"{how} {value}: not an executable file")
            return Found(str(p), how)
    p = shutil.which("nsys")
    if p:
        return Found(p, "PATH")
    cands = install_candidates()
    return Found(cands[0], "install folder") if cands else None


WHERE_LOOKED = (
    "--nsys, $NSYS, PATH, /opt/nvidia/nsight-systems/*/bin, /usr/local/cuda*/bin and Nsight Compute's folder"
    if os.name != "nt"
    else "--nsys, %NSYS%, PATH and the Nsight Systems and Nsight Compute folders under Program Files"
)


def require(explicit: str | None = None) -> Found:
    """find(), or an NsysqlError saying where nsysql looked and how to name nsys."""
    got = find(explicit)
    if got is None:
        raise NsysqlError(f"nsys (Nsight Systems' CLI) not found (looked at {WHERE_LOOKED}); name it with --nsys PATH")
    return got


# -- nsys profile ----------------------------------------------------------------------------------------------

# What nsysql's analyses read, and no more: CUDA (kernels, copies, API calls), NVTX, OS runtime calls (the causes
# of idle gaps); no CPU sampling or context switches (nothing reads them by default; they make the export several
# times larger); OS runtime calls under 10 us and backtraces under 1 ms left out (Python's imports make tens of
# thousands of short stat/open calls; everything a gap's cause needs is longer); CUDA graphs node by node, so each
# kernel of a graph replay is a kernel. OS runtime tracing is Linux's (`trace_set`).
PROFILE_OPTIONS = (
    ("--trace", "cuda,nvtx,osrt"),
    ("--sample", "none"),
    ("--cpuctxsw", "none"),
    ("--osrt-threshold", "10000"),
    ("--osrt-backtrace-threshold", "1000000"),
    ("--cuda-graph-trace", "node"),
)
OSRT_OPTIONS = ("--osrt-threshold", "--osrt-backtrace-threshold")  # meaningless without osrt in --trace
# `nsysql profile --cpu`: CPU samples with call stacks and thread scheduling over the whole process tree, forked
# workers (DataLoader's) traced from the fork, and Python's stacks sampled (NVTX marks whose frames are payloads:
# kept by the export's --include-blobs=true). They replace the `none` of --sample and --cpuctxsw.
CPU_OPTIONS = (
    ("--sample", "process-tree"),
    ("--cpuctxsw", "process-tree"),
    ("--trace-fork-before-exec", "true"),
    ("--python-sampling", "true"),
)
GPU_METRICS = ("--gpu-metrics-devices", "all")  # nsys 2024.2 and later (before: --gpu-metrics-device)
# the short spellings of nsys profile's switches nsysql sets, so a user's `-t cuda` replaces nsysql's --trace
_SHORT = {"-t": "--trace", "-s": "--sample", "-o": "--output", "-f": "--force-overwrite"}
_OWN = ("--output", "--export", "--force-overwrite")  # nsysql names the report and exports it itself


def _switches(options: list[str]) -> set[str]:
    names = set()
    for tok in options:
        if tok.startswith("-"):
            name = tok.split("=", 1)[0]
            names.add(_SHORT.get(name, name))
    return names


def profile_help(nsys: str) -> str:
    """What `nsys profile --help` prints ("" when it cannot be asked)."""
    try:  # a help text is some 50 KB: 1 MiB of it is plenty, and the most kept of one that floods
        _, text = capture([nsys, "profile", "--help"], 120, keep=2**20)
    except OSError:
        return ""
    return text.decode("utf-8", "replace")


def switches_in(help_text: str) -> set[str]:
    """The switches a help text lists (`--trace`, `--cuda-graph-trace`, ...)."""
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", help_text))


def profile_switches(nsys: str) -> set[str]:
    """The switches `nsys profile --help` lists (empty when it says nothing usable): older versions lack some of
    nsysql's (--osrt-backtrace-threshold, --cuda-graph-trace; --gpu-metrics-device before 2024.2)."""
    return switches_in(profile_help(nsys))


def trace_set(system: str | None = None, help_text: str = "") -> str:
    """What nsysql traces (`--trace`): CUDA, NVTX and OS runtime calls, less `osrt` on Windows (nsys there
    rejects it: OS runtime tracing is Linux's) or where `nsys profile --help` is known and does not name it among
    what it traces. `system`: `Linux` or `Windows` (default: this one)."""
    system = system or ("Windows" if os.name == "nt" else "Linux")
    osrt = system != "Windows" and (not help_text or re.search(r"(?<![\w-])osrt(?![\w-])", help_text))
    return "cuda,nvtx,osrt" if osrt else "cuda,nvtx"


def nsysql_switches(
    gpu_metrics: bool = False, cpu: bool = False, system: str | None = None, help_text: str = ""
) -> list[tuple[str, str]]:
    """The switches nsysql gives `nsys profile`, before what this nsys lacks is left out (profile_command)."""
    trace = trace_set(system, help_text)
    ours = dict(PROFILE_OPTIONS, **{"--trace": trace})
    if "osrt" not in trace.split(","):
        for k in OSRT_OPTIONS:
            ours.pop(k)
    if cpu:
        ours.update(CPU_OPTIONS)
    if gpu_metrics:
        ours.update((GPU_METRICS,))
    return list(ours.items())


def profile_command(
    nsys: str,
    base: str | os.PathLike,
    command: list[str],
    gpu_metrics: bool = False,
    options: list[str] = (),
    supported: set[str] | None = None,
    cpu: bool = False,
    system: str | None = None,
    help_text: str = "",
) -> list[str]:
    """`nsys profile` for `command`: nsysql's switches (nsysql_switches: PROFILE_OPTIONS with the trace set of
    this system and nsys, CPU_OPTIONS and GPU metrics on request), then the user's `options` (a switch given there
    replaces nsysql's), writing the report `<base>.nsys-rep` over an earlier one; nsysql exports it to SQLite
    itself (export_command: payloads included). `supported` (profile_switches): nsysql's switches this nsys lacks
    are left out (all are kept when it is empty or None); `help_text`: `nsys profile --help`, which says whether
    it traces `osrt` (trace_set)."""
    options = list(options)
    theirs = _switches(options)
    taken = [s for s in _OWN if s in theirs]
    if taken:
        raise NsysqlError(f"nsys option {taken[0]} is nsysql's to set (the report goes into --out DIR); leave it out")
    ours = nsysql_switches(gpu_metrics, cpu, system, help_text)
    if supported:
        if gpu_metrics and GPU_METRICS[0] not in supported and "--gpu-metrics-device" in supported:
            ours[-1] = ("--gpu-metrics-device", "all")
        ours = [(k, v) for k, v in ours if k in supported]
    argv = [nsys, "profile"]
    argv += [f"{k}={v}" for k, v in ours if k not in theirs]
    argv += options
    argv += ["--force-overwrite=true", f"--output={base}"]
    return argv + list(command)


BLOBS = "--include-blobs=true"  # NVTX payloads (NCCL's, Python sampling's frames) reach the export only with it


def export_command(
    nsys: str, report: str | os.PathLike, output: str | os.PathLike, force: bool = True, blobs: bool = True
) -> list[str]:
    """`nsys export` of `report` to the SQLite file `output` (replacing one there when `force`), with NVTX payloads
    (`blobs`: --include-blobs=true, which an nsys older than the option refuses: see nsys.export)."""
    over = ["--force-overwrite", "true"] if force else []
    return [
        nsys,
        "export",
        "--type",
        "sqlite",
        *([BLOBS] if blobs else []),
        "--output",
        str(output),
        *over,
        str(report),
    ]


def shell(argv: list[str]) -> str:
    """A command line as a user would type it (quoted for the shell of this system)."""
    if os.name == "nt":
        import subprocess

        return subprocess.list2cmdline(argv)
    return " ".join(shlex.quote(a) for a in argv)


def run(argv: list[str], forward_interrupt: bool = True) -> int:
    """Run `argv` and return its exit status (128 + the signal's number when a signal ended it, as a shell says).

    Ctrl-C: one typed at a terminal reaches every process of the foreground process group, the child included, so
    the child gets it from the terminal and nsysql waits for it to finish (nsys then stops the collection and still
    writes its report). A SIGINT sent to nsysql alone (`kill -INT`, a job runner) is passed on to the child. To tell
    the two apart, SIGINT is blocked here and taken with sigtimedwait, whose si_code says who sent it (the kernel,
    for a terminal's Ctrl-C; a process, for kill). Where that is not available (Windows, or not on the main thread),
    the console delivers Ctrl-C to the child itself and nsysql only keeps waiting."""
    import signal
    import subprocess
    import threading

    if (
        not forward_interrupt
        or not hasattr(signal, "sigtimedwait")
        or threading.current_thread() is not threading.main_thread()
    ):
        child = subprocess.Popen(argv)
        while True:
            try:
                return _status(child.wait())
            except KeyboardInterrupt:
                continue
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        child = subprocess.Popen(argv, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old))
        while child.poll() is None:
            info = signal.sigtimedwait({signal.SIGINT}, 0.1)
            if info is not None and info.si_code <= 0:  # SI_USER, SI_QUEUE, SI_TKILL: sent by a process
                child.send_signal(signal.SIGINT)
        return _status(child.returncode)
    finally:
        while signal.sigtimedwait({signal.SIGINT}, 0) is not None:  # taken here, not raised once unblocked
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


# -- running nsys for an answer ----------------------------------------------------------------------------------

DEFAULT_TIMEOUT_S = 3600  # `nsys export` of a multi-GB report takes minutes; one that runs an hour is stuck
KEEP_OUTPUT = 64 * 1024  # of what nsys prints, the last bytes kept for the error line


def timeout_s(var: str = "NSYSQL_NSYS_TIMEOUT", default: float = DEFAULT_TIMEOUT_S) -> float | None:
    """How long nsysql waits for a program it runs before stopping it: $`var` seconds (0: no limit), else
    `default` (`nsys export`: $NSYSQL_NSYS_TIMEOUT, DEFAULT_TIMEOUT_S). An NsysqlError for a value that is not a
    number of seconds."""
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise NsysqlError(f"{var}={text[:40]!r}: give seconds (e.g. 600), or 0 for no limit")
    return value or None


def capture(argv: list[str], timeout: float | None, keep: int = KEEP_OUTPUT) -> tuple[int | None, bytes]:
    """Run `argv` (stdin from the null device, stderr into stdout) and return its exit status and the last
    `keep` bytes it printed: however much it prints, nsysql holds at most about 2 x `keep`. Status None: it ran
    past `timeout` seconds (None: no limit) and was killed, with its process group (what it started too). It
    is killed as well when nsysql is interrupted meanwhile."""
    import signal
    import subprocess
    import threading
    import time

    new_group = {"start_new_session": True} if os.name != "nt" else {}
    child = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **new_group
    )
    tail = bytearray()

    def drain():  # a thread, not select(): pipes cannot be selected on Windows
        while True:
            chunk = child.stdout.read1(65536)
            if not chunk:
                return
            tail.extend(chunk)
            if len(tail) > 2 * keep:
                del tail[:-keep]

    reader = threading.Thread(target=drain, name="nsys-output", daemon=True)
    reader.start()

    def kill():
        try:
            os.killpg(child.pid, signal.SIGKILL) if new_group else child.kill()
        except OSError:
            pass

    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            try:
                code = child.wait(timeout=1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    kill()
                    child.wait()
                    code = None
                    break
    except BaseException:  # Ctrl-C, or anything else: nsys does not outlive nsysql's wait for it
        kill()
        raise
    reader.join(5)  # a grandchild that keeps the pipe open past its parent is not waited for longer
    return code, bytes(tail[-keep:])


def last_line(output: bytes, limit: int = 200) -> str:
    """The last non-empty line of a program's output, decoded leniently and cut to `limit` characters."""
    lines = output.decode("utf-8", "replace").strip().splitlines()
    return lines[-1].strip()[:limit] if lines else ""
