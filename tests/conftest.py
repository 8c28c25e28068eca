"""Shared test data: the project's own fixtures, and the real exports in $NSYSQL_TEST_EXPORTS, else
../shared/nsys-exports (a folder with h200/ and public/; the tests over them are skipped, or not collected, when
it is absent, and the run's last line says how many there were)."""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import pytest

# every test run gets its own cache directory, never the user's, and one for the entries built_cache copies: made
# by the process that starts the run (the xdist workers inherit them) and removed as that process ends
# (pytest_unconfigure); a cache directory given in $NSYSQL_CACHE_DIR is kept
_OWN = {}
for var, prefix in (("NSYSQL_CACHE_DIR", "nsysql-test-cache-"), ("NSYSQL_TEST_BUILT", "nsysql-test-built-")):
    if not os.environ.get(var):
        os.environ[var] = _OWN[var] = tempfile.mkdtemp(prefix=prefix)
# whether the tests marked browser run later, waiting for the Chromium CI installs beside the run (browser()):
# decided once, by the process that starts the run, so that every xdist worker collects the tests in one order
if "NSYSQL_BROWSER_LATER" not in os.environ:
    _ready = os.environ.get("NSYSQL_CHROMIUM_READY")
    os.environ["NSYSQL_BROWSER_LATER"] = "1" if _ready and not os.path.exists(_ready) else "0"
# tables fit $COLUMNS (nsysql.cli.output.terminal_width), which pytest-xdist's workers set to 80: the tests that
# want a width give it themselves, the others see every column as a pipe does
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = Path(os.environ.get("NSYSQL_TEST_EXPORTS") or ROOT.parent / "shared" / "nsys-exports").resolve()
H200 = SHARED / "h200"
PUBLIC = SHARED / "public"


def own_exports() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/*.sqlite"))


def h200_exports() -> list[Path]:
    return sorted(H200.glob("*.sqlite")) if H200.is_dir() else []


def public_exports() -> list[Path]:
    return sorted(PUBLIC.glob("*.sqlite")) if PUBLIC.is_dir() else []


def reference_csv(export: Path, report: str) -> Path:
    """nsys stats CSV made from `export`: <dir>/reference/<stem>_<report>.csv."""
    return export.parent / "reference" / f"{export.stem}_{report}.csv"


@functools.lru_cache(maxsize=None)
def loaded(path: str):
    import nsysql

    seeded(path)
    return nsysql.load(path)


_BUILT: dict[Path, Path] = {}


def built_cache(dest: Path, *exports: Path) -> Path:
    """A cache directory at `dest` holding each export's entry as a first load leaves it (its canonical tables,
    no stored answer), copied from one built once in the run (`_built`): for the tests of what a command does with
    an entry, which need not build the same entry cold again and again (the cold build is under test in
    test_cache.py, test_store.py and test_lazy_build.py). Close any Profile over `dest` before the next call."""
    dest.mkdir(parents=True, exist_ok=True)
    for export in exports:
        export = Path(export).resolve()
        if export not in _BUILT:
            _BUILT[export] = _built(export)
        entry = _BUILT[export]
        for f in (entry, entry.with_suffix(".nsysql")):
            shutil.copy2(f, dest / f.name)
    return dest


def seeded(*exports) -> None:
    """The run's cache ($NSYSQL_CACHE_DIR) given each export's entry as built_cache copies it, where it holds none
    yet: the tests that read the run's cache (loaded(), test_corpus.py) then share the one cold build per export
    of the run (`_built`) with those that copy it, rather than build it again. Each file lands by a rename, so a
    process reading the cache meanwhile sees it whole or not at all; where another process built the entry in the
    run's cache first, that one stays."""
    cache = Path(os.environ["NSYSQL_CACHE_DIR"])
    for export in exports:
        export = Path(export).resolve()
        if export not in _BUILT:
            _BUILT[export] = _built(export)
        entry = _BUILT[export]
        if (cache / entry.name).exists():
            continue
        for f in (entry.with_suffix(".nsysql"), entry):  # the marker first, as the store writes them
            tmp = cache / f".{f.name}.{os.getpid()}.seed"
            shutil.copy2(f, tmp)
            os.replace(tmp, cache / f.name)


def _built(export: Path) -> Path:
    """The entry a first load of `export` leaves, in $NSYSQL_TEST_BUILT: built by the first process of the run to
    ask (under a lock, which the others wait on), then read by every one."""
    import fcntl
    import hashlib

    import nsysql

    home = Path(os.environ["NSYSQL_TEST_BUILT"]) / hashlib.sha256(os.fsencode(export)).hexdigest()[:16]
    home.mkdir(exist_ok=True)
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = home / "entry"  # the entry's path, written once it is whole
        if not made.exists():
            # with the default settings, whatever those of the test that asks first (one that sets
            # NSYSQL_LAZY_MIN_MB=0 would leave every later test a partial entry where a first load builds it whole)
            aside = {k: os.environ.pop(k) for k in ("NSYSQL_LAZY_MIN_MB", "NSYSQL_NO_TUNING") if k in os.environ}
            try:
                prof = nsysql.load(export, cache_dir=home / "cache")
                entry = prof.cache_entry
                prof.close()
            finally:
                os.environ.update(aside)
            made.write_text(str(entry), encoding="utf-8")
        return Path(made.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _check_report():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_report", ROOT / "scripts" / "check_report.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_report"] = mod
    spec.loader.exec_module(mod)
    return mod


def browser() -> str | None:
    """Chromium for the report's browser checks (scripts/check_report.py finds it), or None. Where CI installs it
    beside the run (.ci/run), $NSYSQL_CHROMIUM_READY names the file its step writes once done: wait for that
    first, at most 10 minutes. The tests that call this are marked `browser` and run a third of the way in
    (pytest_collection_modifyitems), so the wait costs nothing unless the install outlasts that third."""
    ready = os.environ.get("NSYSQL_CHROMIUM_READY")
    end = time.monotonic() + 600
    while ready and not os.path.exists(ready) and time.monotonic() < end:
        time.sleep(0.5)
    return _check_report().chromium()


def h200(name: str) -> Path:
    p = H200 / name
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def fixture(name: str) -> Path:
    return FIXTURES / name / f"{name}.sqlite"


def raw(path, sql, *params) -> list[tuple]:
    """Rows of `sql` (with `params`) straight from the SQLite file `path`, opened read-only: the raw side that a
    test checks nsysql's answer against."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


# the table nsys writes a CUDA backtrace's frames into (`--cudabacktrace`): an export holds CUDA backtrace rows among
# its calls only beside it (nsysql.loader.raw reads eventClass only then), so a crafted one needs it too
CUDA_CALLCHAINS = (
    "CREATE TABLE CUDA_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, "
    "unresolved INTEGER, originalIP INTEGER, stackDepth INTEGER NOT NULL)"
)


def craft(path: Path, *statements, source: str | Path = "train_small") -> Path:
    """A mutated copy of the fixture `source` (a fixture's name, or an export's path) at `path`: each statement (SQL,
    or (SQL, parameters)) run on it."""
    shutil.copy(source if isinstance(source, Path) else fixture(source), path)
    con = sqlite3.connect(path)
    for st in statements:
        con.execute(*st) if isinstance(st, tuple) else con.execute(st)
    con.commit()
    con.close()
    return path


def gpu_busy_by_construction(prof) -> list[tuple[int, int, int, int, int | None]]:
    """gpu_busy's rows as they must be, made here in Python from gpu_ops: (device_id, start_ns, end_ns,
    busy_before_ns, prev_end_ns), in device and time order."""
    out = []
    for dev, start, end in union_of_gpu_ops(prof):
        same = out and out[-1][0] == dev
        out.append((dev, start, end, out[-1][3] + out[-1][2] - out[-1][1] if same else 0, out[-1][2] if same else None))
    return out


def gpu_waits_per_typical_step(prof) -> float:
    """The mean over the typical steady-state steps (not warm-up, not outliers) of the time the loop's process
    spent in CUDA calls that can wait for the GPU, clipped to each step's window, in ns, made here from the rows:
    synchronize and query calls, copies, sets and frees, and launches of 50 us or more (the busy pool's cap on
    steps timed on the CPU, nsysql/analyses/headroom.py)."""
    import polars as pl

    its = prof.iterations().filter(~pl.col("warmup") & ~pl.col("outlier"))
    # the loop's process: the one whose NVTX range opens the first iteration
    pid = prof.sql(f"SELECT pid FROM nvtx_ranges WHERE start_ns = {its['start_ns'][0]} LIMIT 1")["pid"][0]
    calls = prof.sql(
        "SELECT a.pid, a.start_ns, a.end_ns, lower(s.value) AS name FROM api_calls a JOIN strings s ON s.id = a.name_id"
    )
    waits = [
        (p, s, e)
        for p, s, e, n in calls.iter_rows()
        if any(w in n for w in ("synchronize", "query", "memcpy", "memset", "free"))
        or ("launch" in n and e - s >= 50_000)
    ]
    total = 0
    for start, end in its.select("start_ns", "end_ns").iter_rows():
        total += sum(max(0, min(e, end) - max(s, start)) for p, s, e in waits if p == pid)
    return total / its.height


def union_of_gpu_ops(prof) -> list[tuple[int, int, int]]:
    """(device_id, start_ns, end_ns) of the union of the profile's gpu_ops intervals per device, merged here in
    Python where they overlap or touch: what gpu_busy must hold, row for row."""
    ops = prof.sql("SELECT device_id, start_ns, end_ns FROM gpu_ops ORDER BY device_id NULLS FIRST, start_ns, end_ns")
    merged: list[tuple[int, int, int]] = []
    for dev, start, end in ops.iter_rows():
        if merged and merged[-1][0] == dev and start <= merged[-1][2]:
            merged[-1] = (dev, merged[-1][1], max(merged[-1][2], end))
        else:
            merged.append((dev, start, end))
    return merged


def _fingerprint(paths: list[Path]) -> dict[str, tuple[str, int, int]]:
    import hashlib

    out = {}
    for p in paths:
        st = p.stat()
        out[str(p)] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="session", autouse=True)
def exports_are_never_written():
    """Every export the suite reads in place (fixtures/, ../shared) has the same sha256, size and mtime after the
    whole run as before it, and nothing new appears beside it (no -wal, -shm or -journal)."""
    paths = own_exports() + h200_exports() + public_exports()
    dirs = {p.parent for p in paths}
    before = _fingerprint(paths)
    listing = {d: sorted(x.name for x in d.iterdir()) for d in dirs}
    yield
    assert _fingerprint(paths) == before, "an export read by the tests was modified"
    assert {d: sorted(x.name for x in d.iterdir()) for d in dirs} == listing, "a file appeared beside an export"


# -- how many tests the real exports gave (one line at the end of the run) -------------------------------------
# A test over a real export is one whose parameters hold a path under SHARED (marked at collection, in the xdist
# worker that runs it; the mark travels with its reports), or one skipped because an export under SHARED is absent.
_REAL = ("nsysql_real_export", True)
_tally: dict[str, set[str]] = {"ran": set(), "skipped": set()}


def _under_shared(value) -> bool:
    if not isinstance(value, (str, Path)):
        return False
    try:
        return Path(value).resolve().is_relative_to(SHARED)
    except (OSError, ValueError):
        return False


def _log_costly_work(log: str) -> None:
    """Where $NSYSQL_TEST_LOG names a file: one line per cold build in a test process (loader.build) and per
    `python -m nsysql` started (subprocess.Popen), each with the test that asked for it, so that a run can count
    the two costs the suite can share or avoid (`sort LOG | uniq -c`)."""
    import subprocess
    import sys

    import nsysql.loader

    def note(kind: str, what) -> None:
        with open(log, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"{kind}\t{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\t{what}\n")

    build = nsysql.loader.build

    def counted_build(src, *args, **kw):
        note("build", Path(src.path).name)
        return build(src, *args, **kw)

    nsysql.loader.build = counted_build
    popen_init = subprocess.Popen.__init__

    def counted_popen(self, args, *a, **kw):
        argv = [str(x) for x in args] if isinstance(args, (list, tuple)) else [str(args)]
        if argv[0] == sys.executable and "nsysql" in argv[1:5]:
            note("process", " ".join(argv[argv.index("nsysql") + 1 :][:2]))
        popen_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = counted_popen


def pytest_configure(config):
    """Bytecode for the tree's nsysql, once, before the workers start: where PYTHONDONTWRITEBYTECODE is set (as on
    the CI machine and in containers) a fresh clone has none, and every worker and every `python -m nsysql` the
    tests start would compile the package from source again (about 0.1 s of CPU each, hundreds of times)."""
    if os.environ.get("NSYSQL_TEST_LOG"):
        _log_costly_work(os.environ["NSYSQL_TEST_LOG"])
    if hasattr(config, "workerinput"):
        return
    import compileall

    compileall.compile_dir(ROOT / "nsysql", quiet=1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    """Before a test's fixtures go (its tmp_path removed: tmp_path_retention_policy), every entry one of its loads
    is still copying in the background (4 or more DuckDB threads: nsysql.store.tables) is in place, never copied
    into a folder that was removed, nor failing in a later test."""
    tables = sys.modules.get("nsysql.store.tables")
    for thread in list(getattr(tables, "_PENDING", {}).values()):
        thread.join()


def pytest_unconfigure(config):
    for d in _OWN.values():
        shutil.rmtree(d, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    # the tests marked long go first, in their order (a stable sort): xdist hands tests out in this order, so the
    # short ones fill in around the long ones and no worker is left running a long test while the other is idle
    items.sort(key=lambda item: not item.get_closest_marker("long"))
    # but where CI is still installing Chromium beside the run, the tests marked browser wait for it (browser()):
    # they go a third of the way into the run, once the install (a minute, begun before the venv) is done, not
    # last, where their seconds of browser runs would be the run's tail with one worker idle
    if os.environ.get("NSYSQL_BROWSER_LATER") == "1":
        browser = [item for item in items if item.get_closest_marker("browser") is not None]
        rest = [item for item in items if item.get_closest_marker("browser") is None]
        items[:] = rest[: len(rest) // 3] + browser + rest[len(rest) // 3 :]
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is not None and any(_under_shared(v) for v in spec.params.values()):
            item.user_properties.append(_REAL)


def pytest_runtest_logreport(report):
    if report.skipped and str(SHARED) in str(report.longrepr):
        _tally["skipped"].add(report.nodeid)
    elif _REAL in report.user_properties and report.when == "call":
        _tally["ran"].add(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    ran, skipped = len(_tally["ran"]), len(_tally["skipped"])
    if H200.is_dir() or PUBLIC.is_dir():
        if not ran + skipped:  # a run of other tests: nothing to say
            return
        line = f"nsysql: {ran} tests ran over the real exports in {SHARED}"
        line += f", {skipped} skipped (an export they name is not there)" if skipped else ""
    else:
        line = (
            f"nsysql: no real exports at {SHARED} (set NSYSQL_TEST_EXPORTS to the folder that holds h200/ and "
            f"public/): the tests run once per real export were not collected"
            + (f", and {skipped} test{'s' if skipped > 1 else ''} needing one skipped" if skipped else "")
        )
    terminalreporter.write_line(line)
