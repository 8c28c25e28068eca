"""Hostile inputs and environments at the command line (issue 30, items 10, 11, 16, 17, 21-27): pipes and FIFOs
where files are expected, Ctrl-C, fake `nsys` programs that hang or flood, durations built to backtrack, SQL
results polars cannot hold, odd encodings and paths, closed standard streams.

The tests read fixtures/train_small in place (it is only read) and make everything else in tmp_path (FIFOs,
copies under odd names, a fake nsys); they assert what nsysql must say: one line naming the file and the problem,
or the known answer (rows of the export, or a fact true by construction). Several run `python -m nsysql` in a
subprocess: closed streams, signals, encodings and FIFOs are the executable's to handle, not CliRunner's.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, fixture, seeded

import nsysql
from nsysql.cli import main

SMALL = fixture("train_small")


@pytest.fixture(autouse=True, scope="module")
def _small_is_built():
    """train_small's entry in the run's cache, which the loads and the `python -m nsysql` here read: built once
    in the run (conftest.seeded), not by whichever of them comes first."""
    seeded(SMALL)


def run(args, env=None):
    return CliRunner(env=env).invoke(main, [str(a) for a in args], catch_exceptions=False)


def nsysql_process(args, **kw):
    """`python -m nsysql ARGS` in a subprocess (the executable's own entry point, as a user runs it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "nsysql", *map(str, args)], env=env, capture_output=True, **{"timeout": 60, **kw}
    )


def one_error_line(stderr: str | bytes) -> str:
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    lines = [x for x in text.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


# -- item 17: durations parse in linear time, with a length cap ----------------------------------------------------


def test_a_long_run_of_digits_fails_fast_in_one_line():
    p = nsysql.load(SMALL)
    for bad in ("1" * 20_000 + "x", "1" * 20_000, " " * 5_000 + "1" * 5_000 + "q"):
        t = time.perf_counter()
        with pytest.raises(nsysql.NsysqlError, match=r"cannot read duration .*characters"):
            p.gaps(min_ns=bad)
        assert time.perf_counter() - t < 0.5
    # the same from the command line, --min and --window alike: one line, the value not echoed whole
    r = run(["gaps", SMALL, "--min", "9" * 20_000 + "ms"])
    assert r.exit_code == 2 and "(20002 characters, at most 1000)" in one_error_line(r.stderr) and len(r.stderr) < 300
    r = run(["trace", SMALL, "--window", "1" * 20_000 + "x:", "-o", os.devnull])
    assert r.exit_code == 2 and "(20001 characters, at most 1000)" in one_error_line(r.stderr)
    # what was read before still is, to the nanosecond
    assert p.gaps(min_ns=" 1.5ms ").equals(p.gaps(min_ns=1_500_000))
    assert p.gaps(min_ns=".5s").equals(p.gaps(min_ns=500_000_000))


# -- item 27: a report is recognised by its bytes, not by a word in a text file -------------------------------------


def test_a_text_file_mentioning_nsys_is_not_called_a_report(tmp_path):
    for name in ("notes.txt", "notes.sqlite", "README"):
        text = tmp_path / name
        text.write_text("nsys profile --trace=cuda,nvtx python train.py  # how this run was made\n" * 3)
        r = run(["info", text])
        line = one_error_line(r.stderr)
        assert r.exit_code == 2 and str(text) in line
        assert "not an Nsight Systems export or report" in line and "nsys export" not in line
    # what a report is still is one: by its name, or by its first bytes
    zipped = tmp_path / "capture.bin"
    zipped.write_bytes(b"PK\x03\x04" + bytes(range(60)))
    stream = tmp_path / "capture.data"
    stream.write_bytes(b"\x00\x01QDSTRM" + bytes(200))
    named = tmp_path / "run.NSYS-REP"
    named.write_text("whatever it holds\n")
    for rep in (zipped, stream):
        r = run(["info", rep])
        assert r.exit_code == 2 and "is an Nsight Systems report" in one_error_line(r.stderr)
    r = run(["--nsys", "/nonexistent/nsys", "info", named])
    assert r.exit_code == 2 and "--nsys /nonexistent/nsys" in one_error_line(r.stderr)


# -- item 22: a malformed Dask address ----------------------------------------------------------------------------


def test_a_malformed_dask_address_is_one_line():
    pytest.importorskip("distributed")
    for address in ("::::x", "garbage", "tcp://host:notaport", "foo://x:1"):
        r = run(["ranks", SMALL, SMALL, "--dask", address])
        line = one_error_line(r.stderr)
        assert r.exit_code == 2 and f"--dask {address}: not a Dask scheduler address" in line


# -- item 10: a FIFO (or any file that is not a regular one) as FILE ----------------------------------------------


def test_a_fifo_or_device_as_file_is_refused_before_any_open(tmp_path):
    fifo = tmp_path / "live.sqlite"
    os.mkfifo(fifo)
    for target, what in ((fifo, "is a FIFO (named pipe)"), (Path(os.devnull), "is a character device")):
        r = nsysql_process(["info", target], timeout=30)  # before the fix: blocked in open() for good
        line = one_error_line(r.stderr)
        assert r.returncode == 2 and f"{target}: {what}, not an nsys SQLite export" in line
    # the only *.sqlite here when FILE is left out: refused, not opened to read its header
    r = nsysql_process(["info"], cwd=tmp_path, env={"NSYSQL_PROFILE": ""}, timeout=30)
    line = one_error_line(r.stderr)
    assert r.returncode == 2 and "live.sqlite is a FIFO (named pipe)" in line
    # nor is a FIFO in place of the cache directory's last_profile read
    state = tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "last_profile")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = nsysql_process(["--cache-dir", state, "info"], cwd=empty, env={"NSYSQL_PROFILE": ""}, timeout=30)
    assert r.returncode == 2 and "none analysed before" in one_error_line(r.stderr)
    # beside a regular export it is passed over, and the export is the one used
    (tmp_path / "run.sqlite").symlink_to(SMALL)  # a link: the name is under test, the entry is train_small's
    r = nsysql_process(["info", "-f", "csv"], cwd=tmp_path, env={"NSYSQL_PROFILE": ""}, timeout=30)
    assert r.returncode == 0 and "using run.sqlite" in r.stderr.decode()


# -- item 11: -o naming a pipe: written as a stream, never opened to be read ------------------------------------------


def _drain(path: Path, got: list) -> threading.Thread:
    def read():
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _release(fifo: Path) -> None:
    """A reader still waiting on `fifo` (nsysql never opened it to write) gets its end of file."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader left
        pass


def test_output_into_a_fifo_or_a_pipe_is_streamed(tmp_path):
    want = run(["kernels", SMALL, "-f", "csv"]).stdout.encode()
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    got: list = []
    reader = _drain(fifo, got)
    try:
        r = nsysql_process(["kernels", SMALL, "-f", "csv", "-o", fifo], timeout=30)
    finally:
        _release(fifo)
    reader.join(10)
    assert r.returncode == 0, r.stderr
    assert got == [want]
    # -o /dev/stdout with stdout a pipe (`nsysql ... -o /dev/stdout | jq`)
    r = nsysql_process(["kernels", SMALL, "-f", "csv", "-o", "/dev/stdout"], timeout=30)
    assert r.returncode == 0 and r.stdout == want
    # ... and a trace, written through its own path (store.output): /dev/stdout's link leads to a pipe
    r = nsysql_process(["trace", SMALL, "--iterations", "3:4", "-o", "/dev/stdout"], timeout=30)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["traceEvents"]) > 0 and " MiB" not in r.stderr.decode()
    # a trace into a FIFO: whole JSON, and no size claimed for a pipe
    got = []
    reader = _drain(fifo, got)
    try:
        r = nsysql_process(["trace", SMALL, "--iterations", "3:4", "-o", fifo], timeout=30)
    finally:
        _release(fifo)
    reader.join(10)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(got[0])["traceEvents"]) > 0 and " MiB" not in r.stderr.decode()
    # a device that refuses the write: one line naming it
    if Path("/dev/full").exists():
        r = run(["kernels", SMALL, "-o", "/dev/full"])
        assert r.exit_code == 2 and "/dev/full: cannot write to it (No space left" in one_error_line(r.stderr)


# -- item 21: sql results with repeated names, and types polars cannot hold -------------------------------------------


def test_sql_repeated_column_names_are_numbered():
    q = "SELECT * FROM processes p JOIN threads t ON p.pid = t.pid ORDER BY t.tid"
    raw = sqlite3.connect(SMALL).execute("SELECT count(*) FROM ThreadNames").fetchone()[0]
    for fmt in ("table", "csv", "json"):
        r = run(["sql", SMALL, q, "-f", fmt])
        assert r.exit_code == 0 and not r.stderr, r.stderr
    rows = json.loads(run(["sql", SMALL, q, "-f", "json"]).stdout)
    assert list(rows[0]) == ["pid", "name", "pid_1", "tid", "name_1"]
    assert all(r["pid"] == r["pid_1"] for r in rows) and len(rows) == raw
    # a name taken by a later column is left to it
    got = nsysql.load(SMALL).sql("SELECT 1 AS a, 2 AS a, 3 AS a_1, 4 AS a")
    assert got.columns == ["a", "a_2", "a_1", "a_3"] and got.row(0) == (1, 2, 3, 4)


def test_sql_types_polars_cannot_hold_are_text():
    big = "123456789012345678901234567890123456789012345"
    top = str(2**128 - 1)  # UHUGEINT's largest: polars' 128-bit decimal would show it as -1
    q = (
        f"SELECT {big}::BIGNUM AS v, 7::VARIANT AS w, [{big}::BIGNUM] AS l, {{'a': 2::VARIANT}} AS s, "
        f"{top}::UHUGEINT AS u, '1 day'::INTERVAL AS i, '101'::BIT AS b, 'a\\x00b'::BLOB AS bl, 42 AS n"
    )
    want = {"v": big, "w": "7", "l": f"[{big}]", "s": "{'a': 2}", "u": top, "i": "1 day", "b": "101", "n": 42}
    rows = json.loads(run(["sql", SMALL, q, "-f", "json"]).stdout)
    assert {k: rows[0][k] for k in want} == want and rows[0]["bl"] == "a\\x00b"
    r = run(["sql", SMALL, q, "-f", "csv"])
    assert r.exit_code == 0
    assert next(csv.DictReader(io.StringIO(r.stdout))) == {**{k: str(v) for k, v in want.items()}, "bl": "a\\x00b"}
    r = run(["sql", SMALL, q])
    assert r.exit_code == 0 and big in r.stdout and top in r.stdout and "b'" not in r.stdout


# -- item 23: trace --window with nothing in it -------------------------------------------------------------------


def test_trace_of_an_empty_window_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "t.json"
    p = nsysql.load(SMALL)
    its = p.iterations()
    con = sqlite3.connect(SMALL)
    # the profile's first event of any kind nsysql's span reads, and its first GPU op, CUDA API call and NVTX range
    starts = {
        t: con.execute(f"SELECT min(start) FROM {t}").fetchone()[0]
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API")
    }
    first_event = min(v for k, v in starts.items() if k != "OSRT_API")
    origin = min(starts.values())
    assert first_event - origin > 3_000_000_000  # by construction of the fixture: 3 s with OS calls only
    r = run(["trace", SMALL, "--window", "2s:3s", "-o", out])
    line = one_error_line(r.stderr)
    assert r.exit_code == 2 and not out.exists()
    assert "nothing in 2 s..3 s" in line and f"{int(its['start_ns'].min() - origin) / 1e9:.6f}".rstrip("0") in line
    # a window with CUDA API calls but no GPU op nor NVTX range in it: a valid trace of what is there
    a = (first_event - origin) / 1e6
    r = run(["trace", SMALL, "--window", f"{a:.3f}ms:{a + 0.001:.3f}ms", "-o", out])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    # a window that starts past the end says so, whether END is given or not
    for w in ("10s:", "10s:11s"):
        assert "starts after the profile ends" in one_error_line(run(["trace", SMALL, "--window", w]).stderr)


# -- item 24: paths that are not UTF-8 ----------------------------------------------------------------------------


def test_paths_that_are_not_utf8_are_one_line(tmp_path, monkeypatch):
    odd = os.fsdecode(bytes(tmp_path) + b"/caf\xe9.sqlite")  # legal on Linux: a Latin-1 name
    shutil.copy(SMALL, odd)
    r = nsysql_process(["info", odd])
    line = one_error_line(r.stderr)
    assert r.returncode == 2 and "caf\\xe9.sqlite: the path is not valid UTF-8" in line
    for args, env in (
        (["--cache-dir", os.fsdecode(bytes(tmp_path) + b"/c\xe9che"), "info", SMALL], {}),
        (["info", SMALL], {"NSYSQL_CACHE_DIR": os.fsdecode(bytes(tmp_path) + b"/c\xe9che")}),
    ):
        r = nsysql_process(args, env=env)
        assert r.returncode == 2 and "c\\xe9che: the path is not valid UTF-8" in one_error_line(r.stderr)
    # the profile analysed last, remembered by the bytes of its name; and a last_profile of garbage bytes (read
    # from a file, not from argv or the environment: in this process)
    state = tmp_path / "state"
    state.mkdir()
    (state / "last_profile").write_bytes(os.fsencode(odd))
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    unset = {"NSYSQL_PROFILE": ""}
    r = run(["--cache-dir", state, "info"], env=unset)
    assert r.exit_code == 2 and "the path is not valid UTF-8" in r.stderr and "Traceback" not in r.stderr
    (state / "last_profile").write_bytes(b"\xff\xfe\x00 not a path \x81")
    r = run(["--cache-dir", state, "info"], env=unset)
    assert r.exit_code == 2 and "none analysed before" in one_error_line(r.stderr)
    # and a profile analysed is remembered whatever its name, read back as the same name
    shutil.copy(SMALL, tmp_path / "été.sqlite")
    assert run(["--cache-dir", state, "info", tmp_path / "été.sqlite"]).exit_code == 0
    r = run(["--cache-dir", state, "info", "-f", "csv"], env=unset)
    assert r.exit_code == 0 and "été.sqlite (the profile analysed last)" in r.stderr


# -- item 25: an output encoding that cannot hold "…" ----------------------------------------------------------------


def test_output_degrades_in_an_encoding_without_the_ellipsis():
    want = run(["kernels", SMALL, "--top", "3"]).stdout
    assert "…" in want  # by construction: the table shortens the long GEMM names
    # (an encoding Python names ASCII, click replaces with UTF-8 itself: nothing there to degrade)
    for enc in ("latin-1", "iso8859-15"):
        r = nsysql_process(["kernels", SMALL, "--top", "3"], env={"PYTHONIOENCODING": enc, "LC_ALL": "C"})
        assert r.returncode == 0 and not r.stderr, r.stderr
        assert r.stdout.decode(enc) == want.replace("…", "...")
    # stderr too: a name of a file that is not UTF-8 is shown by its bytes
    r = nsysql_process(["info", "caf\udce9\u2192.sqlite"], env={"PYTHONIOENCODING": "latin-1"})
    assert r.returncode == 2 and "caf\\xe9->.sqlite" in one_error_line(r.stderr)


# -- item 26: stdout or stderr closed -----------------------------------------------------------------------------


def _closing(*fds):
    return lambda: [os.close(fd) for fd in fds]


def test_closed_standard_streams(tmp_path):
    # stdout closed, the answer meant for it: one line on stderr, exit 2
    r = nsysql_process(["summary", SMALL], preexec_fn=_closing(1))
    assert r.returncode == 2 and "standard output is closed" in one_error_line(r.stderr)
    # ... with -o the answer is not needed on stdout: written, exit 0, nothing said
    out = tmp_path / "summary.txt"
    r = nsysql_process(["summary", SMALL, "-o", out], preexec_fn=_closing(1))
    assert r.returncode == 0 and not r.stderr and out.read_text() == run(["summary", SMALL]).stdout
    # stderr closed: the answer as ever, exit 0
    r = nsysql_process(["kernels", SMALL, "-f", "csv"], preexec_fn=_closing(2))
    assert r.returncode == 0 and r.stdout.decode() == run(["kernels", SMALL, "-f", "csv"]).stdout
    # both closed: nothing can be said, the exit status says it; and a file nsysql opens never takes a closed
    # descriptor (the export is not written into)
    before = SMALL.read_bytes()
    r = nsysql_process(["--no-cache", "summary", SMALL], preexec_fn=_closing(1, 2))
    assert r.returncode == 2 and SMALL.read_bytes() == before


# -- item 16: Ctrl-C during a long sql query ----------------------------------------------------------------------

ENDLESS = "SELECT sum(hash(i)) FROM range(1000000000000) t(i)"  # about an hour of one core


def test_profile_interrupt_stops_a_running_sql_query():
    p = nsysql.load(SMALL)
    got: dict = {}

    def work():
        try:
            p.sql(ENDLESS)
        except nsysql.NsysqlError as e:
            got["error"] = str(e)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    time.sleep(0.5)
    t0 = time.perf_counter()
    while t.is_alive() and time.perf_counter() - t0 < 10:
        p.interrupt()
        t.join(0.1)
    assert not t.is_alive() and "nterrupt" in got["error"]
    assert p.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0] == p.sql("SELECT * FROM gpu_ops").height  # usable


def test_ctrl_c_during_sql_is_one_line_and_exit_130():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsysql", "sql", SMALL, ENDLESS],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell's foreground job has it
    )
    try:
        time.sleep(2.5)  # loaded and querying (a Ctrl-C still in the load says the same)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)  # before: ignored until the query ended, or a traceback
    finally:
        proc.kill()
    assert proc.returncode == 130 and err == b"nsysql: interrupted\n" and not out


# -- item 17: a fake nsys that hangs or floods its output ---------------------------------------------------------


def _fake_nsys(folder: Path) -> Path:
    exe = folder / "nsys"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "fake_nsys.py"}" "$@"\n')
    exe.chmod(0o755)
    return exe


@pytest.mark.skipif(os.name == "nt", reason="fake executables are shell scripts")
def test_an_nsys_export_that_hangs_is_stopped(tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"PK\x03\x04 a report")
    env = {"NSYS": str(_fake_nsys(tmp_path)), "FAKE_NSYS_HANG": "1", "NSYSQL_NSYS_TIMEOUT": "1.5"}
    t = time.perf_counter()
    r = nsysql_process(["--cache-dir", tmp_path / "cache", "info", rep], env=env, timeout=30)
    line = one_error_line(r.stderr)
    assert r.returncode == 2 and time.perf_counter() - t < 15
    assert f"{rep}: `" in line and "did not finish in 1.5 s and was stopped" in line and "NSYSQL_NSYS_TIMEOUT" in line
    # its process group is gone with it: no fake nsys left sleeping
    left = subprocess.run(["pgrep", "-f", str(rep)], capture_output=True, text=True).stdout.split()
    assert not left
    # a value that is no timeout is said before nsys runs: in this process (the environment is read as the
    # executable reads it), and with an nsys that does not hang, so that one wrongly accepted fails the test
    # rather than stopping it
    for bad in ("soon", "-1", "inf"):
        r = run(["info", rep], env={"NSYS": env["NSYS"], "NSYSQL_NSYS_TIMEOUT": bad})
        assert r.exit_code == 2 and f"NSYSQL_NSYS_TIMEOUT={bad!r}" in one_error_line(r.stderr)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory read from /proc (Linux)")
def test_an_nsys_export_that_floods_is_held_to_its_last_lines(tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"PK\x03\x04 a report")
    env = {"NSYS": str(_fake_nsys(tmp_path)), "FAKE_NSYS_FLOOD": "300", "NSYSQL_NO_TUNING": "1"}
    rss = tmp_path / "peak"
    # nsysql's own peak memory, written as it leaves: VmHWM (KiB), of this process image only (ru_maxrss would
    # count the test process it was forked from)
    code = (
        "import re, runpy, sys\n"
        f"sys.argv = ['nsysql', '--cache-dir', {str(tmp_path / 'cache')!r}, 'info', {str(rep)!r}]\n"
        "try:\n    runpy.run_module('nsysql', run_name='__main__')\n"
        f"finally:\n    open({str(rss)!r}, 'w').write("
        "re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        timeout=60,
    )
    line = one_error_line(r.stderr)
    assert r.returncode == 2 and "failed (exit status 1: ERROR: out of patience (fake))" in line
    assert int(rss.read_text()) < 120 * 1024  # before: 922 MiB, the 300 MiB held whole twice (bytes, then text)
