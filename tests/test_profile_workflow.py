"""`nsysql profile` and `.nsys-rep` input, without Nsight Systems: where nsys is found (fake executables in
temporary folders, PATH and $NSYS set here), the `nsys profile` command line nsysql builds, the messages when nsys
is missing, the program's exit status, and Ctrl-C. tests/fake_nsys.py stands in for nsys: it runs the program and
writes a copy of a real export (fixtures/train_small) where nsys would."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import built_cache, fixture, reference_csv

from nsysql import nsys
from nsysql.cli import main
from nsysql.errors import NsysqlError

FAKE = Path(__file__).resolve().parent / "fake_nsys.py"
TRAIN = fixture("train_small")

pytestmark = pytest.mark.skipif(os.name == "nt", reason="fake executables are shell scripts")


def executable(path: Path, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


def fake_nsys(folder: Path) -> Path:
    """An executable `nsys` in `folder` that runs tests/fake_nsys.py."""
    return executable(folder / "nsys", f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No nsys on PATH (only the folder of the Python running the tests), no $NSYS."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}{Path(sys.executable).parent}")
    monkeypatch.delenv("NSYS", raising=False)
    if shutil.which("nsys"):
        pytest.skip("an nsys is in the Python's folder")
    return empty


# -- discovery -------------------------------------------------------------------------------------------------


def test_discovery_order_explicit_then_env_then_path(tmp_path, monkeypatch, clean_env):
    a, b, c = (executable(tmp_path / d / "nsys") for d in ("a", "b", "c"))
    monkeypatch.setenv("PATH", f"{c.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NSYS", str(b))
    assert nsys.find(str(a)) == nsys.Found(str(a), "--nsys")
    assert nsys.find() == nsys.Found(str(b), "$NSYS")
    monkeypatch.delenv("NSYS")
    assert nsys.find() == nsys.Found(str(c), "PATH")


def test_named_nsys_that_is_not_executable_is_an_error(tmp_path, monkeypatch, clean_env):
    plain = tmp_path / "nsys"
    plain.write_text("not a program")
    with pytest.raises(NsysqlError, match=r"--nsys .*nsys: not an executable file"):
        nsys.find(str(plain))
    monkeypatch.setenv("NSYS", str(tmp_path / "missing"))
    with pytest.raises(NsysqlError, match=r"\$NSYS .*missing: not an executable file"):
        nsys.find()


def test_install_folders_newest_version_first(tmp_path):
    root = tmp_path / "root"
    old = executable(root / "opt/nvidia/nsight-systems/2024.5.1/bin/nsys")
    new = executable(root / "opt/nvidia/nsight-systems/2025.3.1/bin/nsys")
    compute = executable(root / "opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
    toolkit = executable(root / "usr/local/cuda-12.8/nsight-systems-2024.6.2/bin/nsys")
    (root / "usr/local/cuda/bin").mkdir(parents=True)
    (root / "usr/local/cuda/bin/nsys").symlink_to(toolkit)  # the toolkit's link, versioned through its target
    executable(root / "opt/nvidia/nsight-systems/2026.1.1/bin/nsys").chmod(0o644)  # not executable: skipped
    got = nsys.install_candidates("Linux", [root])
    assert got[:2] == [str(new), str(compute)]  # same version: Nsight Systems' own install first
    assert got[2:] == [str(root / "usr/local/cuda/bin/nsys"), str(toolkit), str(old)]


def test_install_folders_on_windows(tmp_path):
    pf = tmp_path / "Program Files"
    a = executable(pf / "NVIDIA Corporation/Nsight Systems 2024.4.1/target-windows-x64/nsys.exe")
    b = executable(pf / "NVIDIA Corporation/Nsight Systems 2025.1.1/target-windows-x64/nsys.exe")
    c = executable(pf / "NVIDIA Corporation/Nsight Compute 2025.3.0/host/target-windows-x64/nsys.exe")
    assert nsys.install_candidates("Windows", [pf]) == [str(c), str(b), str(a)]


# -- the command line ------------------------------------------------------------------------------------------


def test_profile_command_line():
    argv = nsys.profile_command("/x/nsys", "out/train", ["python3", "train.py", "--lr", "1"])
    assert argv == [
        "/x/nsys",
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--sample=none",
        "--cpuctxsw=none",
        "--osrt-threshold=10000",
        "--osrt-backtrace-threshold=1000000",
        "--cuda-graph-trace=node",
        "--force-overwrite=true",
        "--output=out/train",
        "python3",
        "train.py",
        "--lr",
        "1",
    ]
    with_metrics = nsys.profile_command("/x/nsys", "o", ["a"], gpu_metrics=True)
    assert "--gpu-metrics-devices=all" in with_metrics


@pytest.mark.long
def test_profile_cpu_records_samples_scheduling_and_forks(tmp_path, clean_env, monkeypatch):
    """`nsysql profile --cpu` replaces nsysql's `--sample=none --cpuctxsw=none` with the process tree's samples and
    scheduling, follows forked workers and samples Python's stacks; the rest stays."""
    fake = fake_nsys(tmp_path / "bin")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    program = [sys.executable, "-c", "pass"]
    args = ["profile", "--cpu", "--nsys", str(fake), "--out", str(tmp_path / "o"), "--chart", "svg", "--", *program]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    argv = [json.loads(line) for line in log.read_text().splitlines()][1]
    assert argv[1 : argv.index("--force-overwrite=true")] == [
        "--trace=cuda,nvtx,osrt",
        "--sample=process-tree",
        "--cpuctxsw=process-tree",
        "--osrt-threshold=10000",
        "--osrt-backtrace-threshold=1000000",
        "--cuda-graph-trace=node",
        "--trace-fork-before-exec=true",
        "--python-sampling=true",
    ]


def test_the_trace_set_follows_the_platform_and_what_nsys_lists():
    """Windows' nsys rejects `osrt`: there nsysql traces CUDA and NVTX, without the OS runtime switches; so it does
    where `nsys profile --help` does not name osrt among what it traces. Linux, or a help text naming it: osrt."""
    linux_help = "-t, --trace=\n   Possible values are cuda, nvtx, osrt, none\n--osrt-threshold=<nanoseconds>"
    old_help = "-t, --trace=\n   Possible values are cuda, nvtx, none\n--osrt-threshold=<nanoseconds>"
    for system, text, want in (
        ("Windows", "", "cuda,nvtx"),
        ("Windows", linux_help, "cuda,nvtx"),
        ("Linux", "", "cuda,nvtx,osrt"),
        ("Linux", linux_help, "cuda,nvtx,osrt"),
        ("Linux", old_help, "cuda,nvtx"),
    ):
        argv = nsys.profile_command("nsys", "o", ["a"], system=system, help_text=text)
        assert [a for a in argv if a.startswith("--trace=")] == [f"--trace={want}"], (system, text)
        assert any(a.startswith("--osrt-") for a in argv) == ("osrt" in want), (system, text)


@pytest.mark.long
def test_a_windows_nsys_is_run_without_osrt(tmp_path, clean_env, monkeypatch):
    """`nsysql profile` with an nsys whose help names no osrt (as Windows' lists none): the command it runs traces
    CUDA and NVTX only, and the listing says the profile has no OS runtime calls."""
    fake = fake_nsys(tmp_path / "bin")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("FAKE_NSYS_LACKS", "osrt")
    program = [sys.executable, "-c", "pass"]
    # an SVG chart, as the tests above: a PNG starts a browser (kaleido), and that is under test in test_report.py
    args = ["profile", "--nsys", str(fake), "--out", str(tmp_path / "o"), "--chart", "svg", "--", *program]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[1][:4] == ["profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none"]
    assert not [a for a in calls[1] if "osrt" in a]
    assert "OS runtime calls not traced" in r.stderr


def test_profile_command_line_user_switch_replaces_ours():
    argv = nsys.profile_command("nsys", "o", ["a"], options=["-t", "cuda,nvtx", "--cuda-graph-trace=graph"])
    assert not any(a.startswith(("--trace=", "--cuda-graph-trace=node")) for a in argv)
    assert argv[argv.index("-t") : argv.index("-t") + 3] == ["-t", "cuda,nvtx", "--cuda-graph-trace=graph"]
    with pytest.raises(NsysqlError, match="--output is nsysql's to set"):
        nsys.profile_command("nsys", "o", ["a"], options=["-o", "elsewhere"])


def test_split_nsys_options_from_command():
    from nsysql.nsys.workflow import run_name, split_args

    assert split_args(["-s", "cpu", "--", "python3", "t.py"]) == (["-s", "cpu"], ["python3", "t.py"])
    assert split_args(["python3", "t.py", "--", "-x"]) == ([], ["python3", "t.py", "--", "-x"])
    assert run_name(["python3", "fixtures/workloads/train_steps.py"]) == "train_steps"
    assert run_name(["python", "-m", "pkg.train"]) == "train"
    assert run_name(["/usr/bin/my app"]) == "my_app"
    assert run_name(["python3", "-c", "print(1)"]) == "python3"


# -- nsysql profile --------------------------------------------------------------------------------------------


def test_profile_switches_this_nsys_lacks_are_left_out(tmp_path, monkeypatch):
    fake = fake_nsys(tmp_path / "bin")
    monkeypatch.setenv("FAKE_NSYS_LACKS", "--cuda-graph-trace,--gpu-metrics-devices")
    got = nsys.profile_switches(str(fake))
    assert "--osrt-backtrace-threshold" in got and "--cuda-graph-trace" not in got
    argv = nsys.profile_command(str(fake), "o", ["a"], gpu_metrics=True, supported=got)
    assert not [a for a in argv if a.startswith(("--cuda-graph-trace", "--gpu-metrics"))]
    old = nsys.profile_command(str(fake), "o", ["a"], gpu_metrics=True, supported=got | {"--gpu-metrics-device"})
    assert "--gpu-metrics-device=all" in old


def test_profile_writes_everything_and_exits_with_the_programs_status(tmp_path, clean_env, monkeypatch):
    fake = fake_nsys(tmp_path / "bin")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("FAKE_NSYS_LACKS", "--osrt-backtrace-threshold")
    out = tmp_path / "run"
    program = [sys.executable, "-c", "import sys; print('training'); sys.exit(3)"]
    args = ["profile", "--nsys", str(fake), "--out", str(out), "--chart", "svg", "--", *program]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 3, r.output
    assert "exited with status 3" in r.stderr
    assert "lacks --osrt-backtrace-threshold (an older nsys): profiled without" in r.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[0] == ["profile", "--help"]
    assert calls[1] == [
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--sample=none",
        "--cpuctxsw=none",
        "--osrt-threshold=10000",
        "--cuda-graph-trace=node",
        "--force-overwrite=true",
        f"--output={out / nsys_name(program)}",
        *program,
    ]
    name = nsys_name(program)
    # nsysql exports the report itself, with the NVTX payloads `nsys profile --export=sqlite` leaves out
    assert calls[2] == [
        "export",
        "--type",
        "sqlite",
        "--include-blobs=true",
        "--output",
        str(out / f"{name}.sqlite"),
        "--force-overwrite",
        "true",
        str((out / f"{name}.nsys-rep").resolve()),
    ]
    assert len(calls) == 3
    expected = {f"{name}.nsys-rep", f"{name}.sqlite", "summary.txt", "report.html", "report.md", "kernels.csv"}
    expected |= {"api.csv"}
    files = {p.name for p in out.iterdir()}
    assert expected <= files
    assert {"top10_kernels.png", "top10_kernels.svg"} & files, files
    # every file is named in the listing, and the summary is printed
    for f in files:
        assert f in r.stdout
    assert (out / "summary.txt").read_text() in r.stdout
    # kernels.csv: the kernels of nsys stats -r cuda_gpu_kern_sum on the same export
    with open(reference_csv(TRAIN, "cuda_gpu_kern_sum")) as f:
        ref = {(row["Name"], int(row["Instances"]), int(row["Total Time (ns)"])) for row in csv.DictReader(f)}
    with open(out / "kernels.csv") as f:
        got = {(row["name"], int(row["count"]), int(row["total_ns"])) for row in csv.DictReader(f)}
    assert got == ref
    assert "#### nsysql:" in (out / "report.md").read_text()


def nsys_name(program):
    from nsysql.nsys.workflow import run_name

    return run_name(program)


def test_profile_without_nsys_says_where_it_looked(tmp_path, clean_env):
    if nsys.install_candidates():
        pytest.skip("Nsight Systems is installed here")
    r = CliRunner().invoke(main, ["profile", "--out", str(tmp_path / "o"), "--", "true"])
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and "nsys (Nsight Systems' CLI) not found" in r.stderr
    assert "--nsys PATH" in r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.long
def test_ctrl_c_sent_to_nsysql_reaches_the_program(tmp_path):
    """SIGINT to nsysql alone (as `kill -INT` sends it) is passed to nsys, which passes it to the program: the
    program's own exit status for it comes back from nsysql."""
    fake = fake_nsys(tmp_path / "bin")
    ready = tmp_path / "ready"
    script = (
        "import pathlib, sys, time\n"
        "try:\n"
        f"    pathlib.Path({str(ready)!r}).write_text('x')\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(42)\n"
    )
    # an earlier run's export in DIR (by an earlier `nsysql profile`, so this one may replace it): not this run's
    earlier = ["profile", "--nsys", str(fake), "--out", str(tmp_path / "o"), "--chart", "svg", "--"]
    assert CliRunner().invoke(main, [*earlier, sys.executable, "-c", "pass"]).exit_code == 0
    assert (tmp_path / "o" / f"{nsys_name([sys.executable, '-c', script])}.sqlite").is_file()
    env = {**os.environ, "FAKE_NSYS_NO_EXPORT": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "nsysql", "profile", "--nsys", str(fake), "--out", str(tmp_path / "o"), "--"]
        + [sys.executable, "-c", script],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 42, err
    assert "nsys exited with status 42 and wrote no report" in err


# -- .nsys-rep input -------------------------------------------------------------------------------------------


@pytest.fixture
def report(tmp_path) -> Path:
    rep = tmp_path / "in" / "run.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"PK\x03\x04 a report nsys would write")
    return rep


def test_nsys_rep_without_nsys_names_the_export_command(tmp_path, report, clean_env):
    if nsys.install_candidates():
        pytest.skip("Nsight Systems is installed here")
    before = report.read_bytes()
    r = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "summary", str(report)])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"nsysql: error: {report}: is an Nsight Systems report and nsys was not found")
    want = f"`nsys export --type sqlite --include-blobs=true --output {report.with_suffix('.sqlite')} {report}`"
    assert want in lines[0]
    assert report.read_bytes() == before and sorted(report.parent.iterdir()) == [report]


def test_nsys_rep_is_exported_once_into_the_cache(tmp_path, report, clean_env, monkeypatch):
    fake = fake_nsys(tmp_path / "bin")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    cache = built_cache(tmp_path / "cache", TRAIN)  # the export the fake nsys writes is a copy of it
    ref = CliRunner().invoke(main, ["--cache-dir", str(cache), "kernels", "--csv", str(TRAIN)])
    for args in (["--nsys", str(fake)], []):  # the second time: from the cache, no nsys needed
        r = CliRunner().invoke(main, ["--cache-dir", str(cache), *args, "kernels", "--csv", str(report)])
        assert r.exit_code == 0, r.output
        assert r.stdout == ref.stdout
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 1 and calls[0][:7] == [
        "export",
        "--type",
        "sqlite",
        "--include-blobs=true",
        "--output",
        calls[0][5],
        "--force-overwrite",
    ]
    assert calls[0][-1] == str(report.resolve())
    exported = list(cache.glob("run-*.export/run.sqlite"))
    assert len(exported) == 1 and Path(calls[0][5]).name == "run.sqlite"
    r = CliRunner().invoke(main, ["--cache-dir", str(cache), "cache", "clear"])
    assert r.exit_code == 0 and not list(cache.glob("run-*"))
    assert sorted(report.parent.iterdir()) == [report]  # nothing beside the input


def test_nsys_rep_export_failure_is_one_line(tmp_path, report, clean_env, monkeypatch):
    fake = fake_nsys(tmp_path / "bin")
    monkeypatch.setenv("FAKE_NSYS_FAIL", "1")
    monkeypatch.setenv("NSYS", str(fake))
    r = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "cache"), "info", str(report)])
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1
    assert "failed (exit status 1: ERROR: cannot import the report (fake))" in r.stderr
    assert not list((tmp_path / "cache").glob("*"))


def test_an_nsys_without_include_blobs_exports_without_payloads(tmp_path, report, clean_env, monkeypatch):
    """An nsys older than `--include-blobs` refuses it by name: the report is exported without it, the answer is
    the export's, and one warning says the NVTX payloads are missing."""
    fake = fake_nsys(tmp_path / "bin")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("FAKE_NSYS_LACKS", "--include-blobs")
    r = CliRunner().invoke(main, ["--cache-dir", str(tmp_path / "c"), "--nsys", str(fake), "kernels", str(report)])
    assert r.exit_code == 0, r.output
    ref = CliRunner().invoke(main, ["--cache-dir", str(built_cache(tmp_path / "ref", TRAIN)), "kernels", str(TRAIN)])
    assert r.stdout == ref.stdout
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert ["--include-blobs=true" in c for c in calls] == [True, False]
    assert r.stderr.count("\n") == 1 and "refuses --include-blobs=true (an older nsys)" in r.stderr
