"""What nsysql writes for other tools to read (trace, stats, export, sql, the Python API), checked against the
export's raw rows and `nsys stats`' own CSVs, on profiles unlike the ones nsysql was built on."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import PUBLIC, craft, fixture, loaded, raw, reference_csv

from nsysql import perfetto
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
    # and `info` says so of the command, as the command says it
    info = json.loads(run(["info", path, "-f", "json"]).stdout)
    said = [r["value"] for r in info if r["section"] == "commands" and r["item"] == "trace"]
    assert said == ["no: " + lines[0].split(f"{path}: ", 1)[1]]


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


def _trace_events(tmp_path, export, name):
    out = tmp_path / name
    res = run(["trace", export, "-o", out])
    assert res.exit_code == 0, res.output
    return out.read_bytes(), json.loads(out.read_text())["traceEvents"]


def test_trace_puts_ops_that_overlap_on_one_stream_on_tracks_where_they_nest(tmp_path, monkeypatch):
    """Kernels launched with programmatic dependent launch start before the kernel before them on their stream
    ends (cuDNN's split-K wgrad on Hopper, in jitter_before); on one track those slices would not nest, which
    trace viewers require. Every op is still there, on its stream's track or a lane of it, and the lanes come out
    the same whatever the batches the rows are read in."""
    export = fixture("jitter_before")
    overlaps = raw(
        export,
        'SELECT count(*) FROM (SELECT start, max("end") OVER (PARTITION BY deviceId, streamId ORDER BY start '
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM CUPTI_ACTIVITY_KIND_KERNEL) "
        "WHERE start < before",
    )[0][0]
    assert overlaps > 0  # the precondition, in the export's own rows
    _, events = _trace_events(tmp_path, export, "whole.json")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    tracks: dict = {}
    per_stream: Counter = Counter()
    for e in events:
        if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset"):
            # ns again (ts is ns / 1000 as the nearest float): exact integers, no float sums
            tracks.setdefault((e["pid"], e["tid"]), []).append((round(e["ts"] * 1000), round(e["dur"] * 1000)))
            per_stream[(e["pid"], names[(e["pid"], e["tid"])].split(":")[0])] += 1
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[int] = []
        for start, dur in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or start + dur <= open_ends[-1], "slices on one track do not nest"
            open_ends.append(start + dur)
    assert len(tracks) > len(per_stream)  # the overlapping ops went to lanes of their streams
    want = raw(
        export,
        "SELECT deviceId, streamId, count(*) FROM (SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY "
        "UNION ALL SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMSET) GROUP BY 1, 2",
    )
    gpu_pid = min(pid for pid, _ in per_stream) if per_stream else 0
    assert sorted(per_stream.values()) == sorted(n for _, _, n in want)
    assert {(pid - gpu_pid, s) for pid, s in per_stream} == {(0, f"stream {s}") for _, s, _ in want}
    whole = sorted(json.dumps(e, sort_keys=True) for e in events)
    for chunk in (97, 23):  # lanes carried from batch to batch, and batches of serial ops after a lane opened
        monkeypatch.setattr(perfetto, "CHUNK", chunk)
        batched = _trace_events(tmp_path, export, f"batched{chunk}.json")[1]
        # the same events (a lane's name comes with the batch that first needs it, so the order may differ)
        assert sorted(json.dumps(e, sort_keys=True) for e in batched) == whole, chunk
        named: set = set()
        for e in batched:
            if e["ph"] == "M" and e["name"] == "thread_name":
                named.add((e["pid"], e["tid"]))
            assert e["ph"] == "M" or (e["pid"], e["tid"]) in named  # every track named before its first event


def test_trace_of_iterations_a_to_b_shows_those_iterations_only(tmp_path):
    """Where an iteration ends as the next starts (poolformer's `poolformer_forward` steps, back to back), the
    neighbours of A:B touch the window's edges but share no time with it: not in the trace."""
    export = PUBLIC / "YoonKyonghwan__EfficientCenterFormer__poolformer.sqlite"
    if not export.exists():
        pytest.skip("the public exports are not here")
    its = loaded(str(export)).iterations()
    bounds = dict(zip(its["iteration"], zip(its["start_ns"], its["end_ns"])))
    assert bounds[1][1] == bounds[2][0] and bounds[3][1] == bounds[4][0]  # back to back, in the export's rows
    out = tmp_path / "its23.json"
    res = run(["trace", export, "-o", out, "--iterations", "2:3"])
    assert res.exit_code == 0, res.output
    shown = [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "iteration"]
    assert shown == ["iteration 2", "iteration 3"]
    assert "2 iterations" in res.stderr


def test_readme_stable_columns_are_the_frames_columns():
    """The README's "Stable output columns" name each frame's columns, in order, as the Python API returns them;
    counts and nanosecond totals are integers, averages floats."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^- ([\w-]+): `([^`]+)`$", readme.split("Stable output columns", 1)[1], re.M)[:3])
    prof = loaded(str(TRAIN))
    frames = {"kernels": prof.kernels(), "ranges": prof.ranges(), "kernels-by-range": prof.kernels_by_range()}
    assert set(listed) == set(frames)
    for name, df in frames.items():
        assert df.columns == [c.strip() for c in listed[name].split(",")], name
        schema = dict(df.schema)
        assert all(schema[c] == pl.Int64 for c in ("count", "total_ns", "min_ns", "max_ns")), name
        assert all(schema[c] == pl.Float64 for c in ("avg_ns", "med_ns", "stddev_ns")), name


def test_trace_names_the_shortest_gap_its_gap_tracks_show(tmp_path):
    """The idle-gap tracks hold the gaps of `nsysql gaps` (1 ms and longer), not every idle stretch the GPU
    tracks show between ops: the track's name says so, and every gap on it is that long."""
    _, events = _trace_events(tmp_path, TRAIN, "gaps.json")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    gaps = [e for e in events if e.get("cat") == "gap"]
    assert gaps and {names[(e["pid"], e["tid"])] for e in gaps} == {"idle gaps >= 1 ms, GPU 0 (cause)"}
    assert min(e["dur"] for e in gaps) >= 1000
    assert len(gaps) == loaded(str(TRAIN)).gaps().height


def test_sql_refuses_several_statements_in_one_line():
    """`SELECT a; SELECT b` would run both and answer with b's rows only: refused in one line, naming why."""
    res = run(["sql", TRAIN, "SELECT count(*) AS kernels FROM gpu_ops; SELECT 1 AS one"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "2 statements" in lines[0] and str(TRAIN) in lines[0], res.stderr
    assert res.stdout == ""
    one = run(["sql", TRAIN, "SELECT 1 AS one;", "-f", "csv"])  # a closing `;` is one statement
    assert one.exit_code == 0 and one.stdout.splitlines() == ["one", "1"], one.output


def test_schema_says_which_tables_export_does_not_write(tmp_path):
    """`schema` is "what `nsysql sql` and `export` give you": a table it lists that `export` does not write (the
    view gpu_ops_named, gpu_metric_counts) says so; every other one is written, each of its columns documented."""
    res = run(["schema", "-f", "json"])
    assert res.exit_code == 0, res.output
    listed = {r["table"]: r["description"] for r in json.loads(res.stdout)}
    out = tmp_path / "tables"
    assert run(["export", TRAIN, "--to", out, "-f", "csv"]).exit_code == 0
    written = {p.stem for p in out.glob("*.csv")}
    assert written <= set(listed)
    for table, description in listed.items():
        assert (table not in written) == description.endswith("`nsysql export` does not write it)"), table
    for table in written:
        documented = {r["column"] for r in json.loads(run(["schema", table, "-f", "json"]).stdout)}
        header = (out / f"{table}.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
        assert set(header) <= documented, (table, set(header) - documented)
