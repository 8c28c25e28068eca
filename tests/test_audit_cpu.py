"""Audit of what `cpu`, `launches` and `api` say on profiles unlike the project's own: each claim checked against
the raw rows of the export (counted here with sqlite3) or what is true by construction of a fixture."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, raw

from nsysql.cli import main

JULIA = PUBLIC / "D-W-Chiang__JACC.jl__cg_trace.sqlite"


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_refusal(res):
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.skipif(not JULIA.exists(), reason="the public exports (../shared) are absent")
def test_python_sampling_is_not_advised_for_a_julia_program():
    # the export names every process of the machine: a python3 of another user is among them, but nsys sampled
    # and scheduled only the Julia process tree (its samples are of `julia` threads)
    assert raw(JULIA, "SELECT count(*) FROM PROCESSES WHERE name = 'python3'")[0][0] >= 1
    sampled = raw(
        JULIA,
        "SELECT DISTINCT p.name FROM COMPOSITE_EVENTS c JOIN PROCESSES p ON p.pid = (c.globalTid >> 24) & 16777215",
    )
    assert [n for (n,) in sampled if n] == ["julia"]
    line = _one_line_refusal(_cli("cpu", JULIA, "--by", "python"))
    assert "--python-sampling" not in line and "nothing in it shows a Python program" in line


def test_python_sampling_is_advised_for_a_python_program_with_its_evidence():
    path = fixture("train_small")
    (pid,) = raw(path, "SELECT pid FROM PROCESSES WHERE name = 'python3'")[0]
    line = _one_line_refusal(_cli("cpu", path, "--by", "python"))
    assert "`nsys profile --python-sampling=true`" in line and f"process `python3`, pid {pid}" in line


def test_python_sampled_but_exported_without_blobs_says_how_to_export(tmp_path):
    # the report's Python samples are NVTX payloads: an export without --include-blobs has the marks, no frames
    path = craft(tmp_path / "noblobs.sqlite", "UPDATE NVTX_EVENTS SET binaryData = NULL", source="loader_cpu_before")
    assert (
        raw(
            path,
            "SELECT count(*) FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE s.value = 'NSys PySampling'",
        )[0][0]
        == 1
    )
    line = _one_line_refusal(_cli("cpu", path, "--by", "python"))
    assert "--include-blobs=true" in line and "--python-sampling" not in line
