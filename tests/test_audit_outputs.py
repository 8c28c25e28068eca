"""What nsysql writes for other tools to read (trace, stats, export, sql, the Python API), checked against the
export's raw rows and `nsys stats`' own CSVs, on profiles unlike the ones nsysql was built on."""

from __future__ import annotations

import csv
import json

from click.testing import CliRunner
from conftest import craft, fixture, raw, reference_csv

from nsysql.cli import main

TRAIN = fixture("train_small")


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_trace_of_a_profile_with_nothing_it_shows_is_refused_in_one_line(tmp_path):
    """A profile of OS runtime calls only (no GPU op, CUDA API call or NVTX range: a CPU-only run, a Julia run
    without CUDA tracing) has a span, but a trace of it would be empty: said in one line, nothing written."""
    path = craft(
        tmp_path / "cpu_only.sqlite",
        *(
            f"DELETE FROM {t}"
            for t in (
                "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_RUNTIME",
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                "NVTX_EVENTS",
            )
        ),
    )
    assert raw(path, "SELECT count(*) FROM OSRT_API")[0][0] > 0  # the span stands on these
    out = tmp_path / "t.json"
    res = run(["trace", path, "-o", out])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], res.stderr
    assert "no GPU op, CUDA API call or NVTX range" in lines[0]
    assert not out.exists()


def _backward_pass(rows, name_col, value_col):
    return [int(r[value_col]) for r in rows if r[name_col].endswith("Backward Pass")]


def test_stats_asked_by_nsys_names_counts_as_nsys_does():
    """`stats -r nvtx_gpu_proj_sum` (nsys's name) gives nsys's figures: PyTorch launches the backward pass from
    a thread with no range open, so under nsys's rule `Backward Pass` projects only its own thread's ops;
    nsysql's own name `ranges` keeps its default attribution (process), which credits them."""
    want = list(csv.DictReader(open(reference_csv(TRAIN, "nvtx_gpu_proj_sum"))))
    res = run(["stats", TRAIN, "-r", "nvtx_gpu_proj_sum,nvtx_kern_sum,ranges", "-f", "json"])
    assert res.exit_code == 0, res.stderr
    got = json.loads(res.stdout)
    nsys = _backward_pass(want, "Range", "Total Proj Time (ns)")
    assert nsys and _backward_pass(got["nvtx_gpu_proj_sum"], "name", "gpu_proj_ns") == nsys
    assert _backward_pass(got["ranges"], "name", "gpu_proj_ns") != nsys  # process: the autograd thread's too
    kern = list(csv.DictReader(open(reference_csv(TRAIN, "nvtx_kern_sum"))))
    want_k = sorted(int(r["Kern Inst"]) for r in kern if r["NVTX Range"] == ":Backward Pass")
    got_k = sorted(r["count"] for r in got["nvtx_kern_sum"] if r["range"] == "Backward Pass")
    assert want_k and got_k == want_k
    # an --attribution given holds for nsys's names too
    res = run(["stats", TRAIN, "-r", "nvtx_gpu_proj_sum", "-f", "json", "--attribution", "process"])
    proc = _backward_pass(json.loads(res.stdout)["nvtx_gpu_proj_sum"], "name", "gpu_proj_ns")
    assert proc == _backward_pass(got["ranges"], "name", "gpu_proj_ns")
